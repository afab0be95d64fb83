"""Markdown tables for the site's pages: the glossary, the story's mapping and the kept benchmark
run (with its ladder).

Like the plot functions, each takes its data and a language and returns what the page shows
(here a Markdown table); ``mha.site.plots.TABLES`` lists every table a page may ask for.
"""

from __future__ import annotations

from ..terms import Term

GLOSSARY_HEADERS = {
    "zh": ("中文", "English", "符号", "说明"),
    "en": ("English", "中文", "Symbol", "Meaning"),
}


def glossary_table(terms: dict[str, Term], lang: str) -> str:
    """Every term in ``lang`` first, the other language, its symbol and its note in ``lang``."""
    other = "en" if lang == "zh" else "zh"
    rows = ["| " + " | ".join(GLOSSARY_HEADERS[lang]) + " |", "|---|---|---|---|"]
    for entry in terms.values():
        symbol = f"${entry.symbol}$" if entry.symbol else ""  # typeset like the pages
        rows.append(f"| **{getattr(entry, lang)}** | {getattr(entry, other)} | {symbol} | "
                    f"{getattr(entry, lang + '_note')} |")
    return "\n".join(rows)


STORY_HEADERS = {
    "zh": ("故事里", "模型里", "符号"),
    "en": ("In the story", "In the model", "Symbol"),
}


def story_table(terms: dict[str, Term], story: dict, lang: str) -> str:
    """The home page's mapping: each prop of ``story`` (keys of ``terms``), in ``lang``, with
    what it stands for (its note) and its symbol; the same rows end the glossary."""
    rows = ["| " + " | ".join(STORY_HEADERS[lang]) + " |", "|---|---|---|"]
    for key in story:
        entry = terms[key]
        symbol = f"${entry.symbol}$" if entry.symbol else ""
        rows.append(f"| **{getattr(entry, lang)}** | {getattr(entry, lang + '_note')} | {symbol} |")
    return "\n".join(rows)


BENCH_HEADERS = {
    "zh": ("n", "实现", "时间（毫秒，最快一次）", "内存峰值（MiB）", "GFLOP/s", "占 GEMM 峰值"),
    "en": ("n", "implementation", "time (ms, fastest call)", "peak memory (MiB)", "GFLOP/s",
           "of GEMM peak"),
}
BENCH_LONG = {
    "zh": "n = {n}（{h} 个注意力头，d_k = {d_k}）时，`chunked_attention` 除输出外的内存峰值为 "
          "{extra:.1f} MiB；同样的 {h} 张 n × n 分数矩阵光存下来就要 {dense:.0f} GiB。",
    "en": "At n = {n} ({h} heads, d_k = {d_k}), `chunked_attention` peaked at {extra:.1f} MiB "
          "beyond its output; the {h} dense n × n score matrices alone would take {dense:.0f} GiB.",
}
BENCH_RATIOS = {
    "zh": {"source_over_fast": "原讲稿的类 / mha", "fast_over_torch": "mha / PyTorch",
           "chunked_over_fast": "分块 / 快速"},
    "en": {"source_over_fast": "source class / mha", "fast_over_torch": "mha / PyTorch",
           "chunked_over_fast": "chunked / fast"},
}


#: The ladder's steps (``mha.site.bench.LADDER_STEPS``), each named by the change it makes.
LADDER_CHANGES = {
    "zh": {
        "as-written": "原讲稿的类，照原样",
        "einsum-optimize": "`einsum` 加上 `optimize=True`",
        "python-float-scale": "除以 Python 浮点数 `math.sqrt(d_k)`",
        "heads-first-matmul": "注意力头放在最前，用 `@` 代替 `einsum`",
        "scaled-queries": "缩放因子乘在查询上，不乘在分数上",
        "fused-projection": "一次矩阵乘法算出 Q、K、V",
        "softmax-in-place": "原地 softmax",
        "mha": "`mha`：多线程 softmax，外加输入检查",
    },
    "en": {
        "as-written": "the source class, as written",
        "einsum-optimize": "`einsum` with `optimize=True`",
        "python-float-scale": "divide by `math.sqrt(d_k)`, a Python float",
        "heads-first-matmul": "heads first, `@` instead of `einsum`",
        "scaled-queries": "scale the queries, not the scores",
        "fused-projection": "one product for Q, K and V",
        "softmax-in-place": "softmax in place",
        "mha": "`mha`: softmax on threads, input checks",
    },
}
LADDER_HEADERS = {
    "zh": ("改动（在上一行基础上）", "计算类型", "时间（毫秒）", "提速", "内存峰值（MiB）"),
    "en": ("change (on top of the row above)", "computes in", "time (ms)", "speed-up",
           "peak memory (MiB)"),
}
LADDER_NOTE = {
    "zh": "n = {n}，每一行都是上一行再改一处。“提速”是上一行的时间除以本行的时间。各行在同一"
          "进程里轮流计时，每行取 {repeats} 次里最快的一次。从第一行到最后一行，一共快了 "
          "{total:.1f} 倍。运行时的 NumPy 版本是 {numpy}。",
    "en": "n = {n}; each row is the row above with one more change. Speed-up is the time of the "
          "row above divided by this row's time. The rows were timed in turn in one process, "
          "the fastest of {repeats} calls each. From the first row to the last: {total:.1f} "
          "times as fast. NumPy {numpy}.",
}


def ladder_table(run: dict, lang: str) -> str:
    """The ladder of a saved benchmark run (``run["ladder"]``) as a Markdown table, then a note
    with the length, the repeats, the first-to-last speed-up and the NumPy it ran on."""
    ladder = run["ladder"]
    rows = ["| " + " | ".join(LADDER_HEADERS[lang]) + " |", "|---|---|---:|---:|---:|"]
    before = None
    for i, step in enumerate(ladder["steps"]):
        gain = "" if before is None else f"× {before / step['seconds']:.2f}"
        rows.append(f"| {i}. {LADDER_CHANGES[lang][step['step']]} | {step['dtype']} | "
                    f"{step['seconds'] * 1e3:.0f} | {gain} | {step['peak_bytes'] / 2**20:.0f} |")
        before = step["seconds"]
    steps = ladder["steps"]
    note = LADDER_NOTE[lang].format(n=ladder["n"], repeats=ladder["repeats"],
                                    total=steps[0]["seconds"] / steps[-1]["seconds"],
                                    numpy=run["versions"]["numpy"])
    return "\n".join(rows) + "\n\n" + note


def benchmark_table(run: dict, lang: str) -> str:
    """A saved benchmark run (``python -m mha.site.bench --save``) as a Markdown table,
    followed by its ratios, its long-sequence memory and the machine it ran on. Its ladder is
    a table of its own (`ladder_table`)."""
    rows = ["| " + " | ".join(BENCH_HEADERS[lang]) + " |", "|---:|---|---:|---:|---:|---:|"]
    for r in run["results"]:
        peak = "–" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.1f}"
        rows.append(f"| {r['n']} | `{r['impl']}` | {r['seconds'] * 1e3:.1f} | {peak} | "
                    f"{r['gflops']:.1f} | {r['fraction_of_gemm_peak']:.0%} |")
    ratios = []
    for line in run["ratios"]:
        parts = [f"{BENCH_RATIOS[lang][k]} = {v:.2f}" for k, v in line.items() if k != "n"]
        colon, comma = ("：", "，") if lang == "zh" else (": ", ", ")
        if parts:
            ratios.append(f"- n = {line['n']}{colon}" + comma.join(parts))
    long = run.get("long_sequence")
    if long:
        ratios.append("\n" + BENCH_LONG[lang].format(
            n=long["n"], h=long["h"], d_k=long["d_k"],
            extra=long["chunked_peak_extra_bytes"] / 2**20,
            dense=long["dense_scores_bytes"] / 2**30))
    v = run["versions"]
    machine = (f"{run['date'][:10]} · {run['machine']['platform']} · "
               f"{run['machine']['cpu_count']} CPU · Python {v['python']} · NumPy {v['numpy']}"
               + (f" · PyTorch {v['torch']}" if "torch" in v else "")
               + f" · GEMM {run['gemm_gflops']:.0f} GFLOP/s")
    return "\n".join(rows) + "\n\n" + "\n".join(ratios) + f"\n\n`{machine}`"
