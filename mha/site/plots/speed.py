"""Figures of the speed-and-memory page: the benchmark's measurements and the chunked blocks."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ._draw import heatmap
from ._style import style

#: How each implementation of the benchmark is named and drawn.
IMPLS = {
    "source": ({"zh": "原讲稿的类", "en": "source document's class"}, "#D55E00", "o"),
    "fast": ({"zh": "mha 快速路径", "en": "mha fast path"}, "#0072B2", "s"),
    "chunked": ({"zh": "mha 分块路径", "en": "mha chunked path"}, "#009E73", "D"),
    "torch": ({"zh": "PyTorch SDPA", "en": "PyTorch SDPA"}, "#555555", "^"),
}
WORDS = {
    "zh": {"time": "一次前向计算的时间（最快一次）", "memory": "调用期间的额外内存峰值（tracemalloc）",
           "n": "序列长度 n", "seconds": "秒", "bytes": "MiB",
           "blocks": "分块计算在因果掩码下访问的块", "qb": "查询块", "kb": "键块",
           "note": "{date} · {cpus} 核 · d_model = {d}, h = {h}, {dtype}"},
    "en": {"time": "time of one forward pass (fastest call)",
           "memory": "peak extra memory during the call (tracemalloc)",
           "n": "sequence length n", "seconds": "seconds", "bytes": "MiB",
           "blocks": "Blocks the chunked path visits under a causal mask",
           "qb": "query block", "kb": "key block",
           "note": "{date} · {cpus} cores · d_model = {d}, h = {h}, {dtype}"},
}


def plot_measured(results: dict, lang: str) -> Figure:
    """Time and memory against ``n`` for each implementation, from a saved benchmark run."""
    words = WORDS[lang]
    rows = results["results"]
    with style():
        fig = Figure(figsize=(5.6, 6.8), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        for impl, (names, color, marker) in IMPLS.items():
            mine = sorted((r for r in rows if r["impl"] == impl), key=lambda r: r["n"])
            if not mine:
                continue
            n = [r["n"] for r in mine]
            top.loglog(n, [r["seconds"] for r in mine], marker=marker, color=color,
                       label=names[lang], base=2)
            peaks = [(r["n"], r["peak_bytes"] / 2**20) for r in mine if r["peak_bytes"]]
            if peaks:
                bottom.loglog(*zip(*peaks), marker=marker, color=color, label=names[lang],
                              base=2)
        top.set_title(words["time"])
        top.set_ylabel(words["seconds"])
        top.legend(frameon=False, fontsize=9)
        bottom.set_title(words["memory"])
        bottom.set_ylabel(words["bytes"])
        bottom.set_xlabel(words["n"])
        sizes = sorted({r["n"] for r in rows})
        bottom.set_xticks(sizes, [str(s) for s in sizes])
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
        fig.suptitle(words["note"].format(date=results["date"][:10],
                                          cpus=results["machine"]["cpu_count"],
                                          d=results["d_model"], h=results["h"],
                                          dtype=results["dtype"]), fontsize=9)
    return fig


def plot_blocks(visited: np.ndarray, lang: str) -> Figure:
    """Which (query block, key block) pairs the chunked path computed: the rest were skipped."""
    words = WORDS[lang]
    nq, nk = visited.shape
    with style():
        fig = Figure(figsize=(4.6, 4.4), layout="constrained")
        ax = fig.subplots()
        heatmap(ax, visited.astype(float), rows=[str(i) for i in range(nq)],
                cols=[str(j) for j in range(nk)], diverging=False, vmax=1.4,
                title=words["blocks"])
        ax.set_ylabel(words["qb"])
        ax.set_xlabel(words["kb"])
    return fig


def block_map(n: int, block_size: int, window: int | None = None) -> np.ndarray:
    """Which (query block, key block) tiles a causal (or sliding-window) mask leaves visible.

    Tile (i, j) is needed when some query of block i may see some key of block j: the causal
    diagonal passes through or below it, and (with a window) it is not entirely left of it. The
    tests check that its count equals what ``mha.chunked_attention`` reports it computed.
    """
    blocks = -(-n // block_size)
    first = np.arange(blocks)[:, None] * block_size              # first query of block i
    last = np.minimum(first + block_size, n) - 1                 # last query of block i
    key_first = np.arange(blocks)[None, :] * block_size          # first key of block j
    key_last = np.minimum(key_first + block_size, n) - 1
    visible = key_first <= last                                  # causal: some key j <= i
    if window is not None:
        visible &= key_last >= first - window                    # window: some key >= i - w
    return visible
