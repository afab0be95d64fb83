"""Markdown tables for the site's pages: the glossary and the kept benchmark run.

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
        symbol = f"`{entry.symbol}`" if entry.symbol else ""
        rows.append(f"| **{getattr(entry, lang)}** | {getattr(entry, other)} | {symbol} | "
                    f"{getattr(entry, lang + '_note')} |")
    return "\n".join(rows)


BENCH_HEADERS = {
    "zh": ("n", "实现", "时间（毫秒，中位数）", "内存峰值（MiB）", "GFLOP/s", "占 GEMM 峰值"),
    "en": ("n", "implementation", "time (ms, median)", "peak memory (MiB)", "GFLOP/s",
           "of GEMM peak"),
}
BENCH_LONG = {
    "zh": "n = {n}（{h} 个注意力头，d_k = {d_k}）时，`chunked_attention` 除输出外的内存峰值为 "
          "{extra:.1f} MiB；同样的 {h} 张 n × n 分数矩阵光存下来就要 {dense:.0f} GiB。",
    "en": "At n = {n} ({h} heads, d_k = {d_k}), `chunked_attention` peaked at {extra:.1f} MiB "
          "beyond its output; the {h} dense n × n score matrices alone would take {dense:.0f} GiB.",
}
BENCH_RATIOS = {
    "zh": {"source_over_fast": "原文的类 / mha", "fast_over_torch": "mha / PyTorch",
           "chunked_over_fast": "分块 / 快速"},
    "en": {"source_over_fast": "source class / mha", "fast_over_torch": "mha / PyTorch",
           "chunked_over_fast": "chunked / fast"},
}


def benchmark_table(run: dict, lang: str) -> str:
    """A saved benchmark run (``python -m mha.site.bench --save``) as a Markdown table,
    followed by its ratios, its long-sequence memory and the machine it ran on."""
    rows = ["| " + " | ".join(BENCH_HEADERS[lang]) + " |", "|---:|---|---:|---:|---:|---:|"]
    for r in run["results"]:
        peak = "–" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.1f}"
        rows.append(f"| {r['n']} | `{r['impl']}` | {r['seconds'] * 1e3:.1f} | {peak} | "
                    f"{r['gflops']:.1f} | {r['fraction_of_gemm_peak']:.0%} |")
    ratios = []
    for line in run["ratios"]:
        parts = [f"{BENCH_RATIOS[lang][k]} = {v:.2f}" for k, v in line.items() if k != "n"]
        if parts:
            ratios.append(f"- n = {line['n']}: " + ", ".join(parts))
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
