"""Figures of the chapter on long-range dependencies (长距离依赖优势)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..experiments import AttentionCost
from ...masks import causal_mask, sliding_window_mask
from ._draw import heatmap
from ._style import COLORS, style

WORDS = {
    "zh": {"flops": "浮点运算次数（一层、一条序列）", "proj": "投影：8·n·d²",
           "attn": "注意力：4·n²·d", "even": "n = 2d：两者持平", "n": "序列长度 n",
           "memory": "分数矩阵占用（h = {h}，float32）", "bytes": "字节",
           "full": "双向\n（全部可见）", "causal": "因果掩码\n", "window": "滑动窗口\n（window = {w}）",
           "reach": "窗口为 {w}：最后一个词元到第 L 层能“听到”哪些位置",
           "layer": "第 {l} 层", "position": "位置", "reads": "查询", "keys": "键"},
    "en": {"flops": "floating-point operations (one layer, one sequence)",
           "full": "bidirectional\n(all visible)", "causal": "causal mask\n",
           "window": "sliding window\n(window = {w})",
           "proj": "projections: 8·n·d²", "attn": "attention: 4·n²·d",
           "even": "n = 2d: break-even", "n": "sequence length n",
           "memory": "memory of the score matrices (h = {h}, float32)", "bytes": "bytes",
           "reach": "Window {w}: what the last token has heard by layer L",
           "layer": "layer {l}", "position": "position", "reads": "query", "keys": "key"},
}

_UNITS = [(2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")]


def _human(nbytes: float) -> str:
    for size, unit in _UNITS:
        if nbytes >= size:
            return f"{nbytes / size:.0f} {unit}"
    return f"{nbytes:.0f} B"


def plot_cost(cost: AttentionCost, lang: str) -> Figure:
    """FLOPs of projections vs attention, and bytes of the scores, against ``n`` (log-log)."""
    words = WORDS[lang]
    n = cost.n
    with style():
        fig = Figure(figsize=(5.6, 6.6), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        top.loglog(n, cost.projection_flops, "s-", color=COLORS["scaled"], label=words["proj"],
                   base=2)
        top.loglog(n, cost.attention_flops, "o-", color=COLORS["raw"], label=words["attn"],
                   base=2)
        top.axvline(2 * cost.d_model, color=COLORS["neutral"], linestyle=":",
                    label=words["even"])
        top.set_title(words["flops"] + f" (d = {cost.d_model})")
        top.legend(frameon=False)
        bottom.loglog(n, cost.score_bytes, "o-", color=COLORS["raw"], base=2)
        for x, y in zip(n[2::2], cost.score_bytes[2::2]):
            bottom.annotate(_human(float(y)), (x, y), textcoords="offset points", xytext=(-4, 8),
                            ha="right", fontsize=9)
        bottom.set_title(words["memory"].format(h=cost.h))
        bottom.set_ylabel(words["bytes"])
        bottom.set_xlabel(words["n"])
        bottom.set_xticks(n, [str(int(v)) for v in n], rotation=45)
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
    return fig


def plot_window(n: int, window: int, reach: np.ndarray, lang: str) -> Figure:
    """Three masks side by side, and how far the last token hears layer after layer."""
    words = WORDS[lang]
    masks = [(words["full"], np.ones((n, n), bool)), (words["causal"], causal_mask(n)),
             (words["window"].format(w=window), sliding_window_mask(n, window))]
    with style():
        fig = Figure(figsize=(5.6, 6.4), layout="constrained")
        grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.1])
        for column, (title, mask) in enumerate(masks):
            ax = fig.add_subplot(grid[0, column])
            heatmap(ax, mask.astype(float), diverging=False, vmax=1.6, title=title)
            ax.set_title(title, fontsize=10)
        ax = fig.add_subplot(grid[1, :])
        last = reach[:, -1, :].astype(float)  # (layers, n): row l = heard by layer l + 1
        heatmap(ax, last, rows=[words["layer"].format(l=l + 1) for l in range(len(last))],
                cols=[str(j) for j in range(n)], diverging=False, vmax=1.6,
                title=words["reach"].format(w=window))
        ax.set_xlabel(words["position"])
    return fig
