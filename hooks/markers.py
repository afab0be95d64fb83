"""MkDocs hook: page markers and the Chinese search dictionary, both from the terms file.

- ``<!-- mha:glossary -->`` becomes the glossary table, in the page's language, from
  ``mha/site/terms.py``.
- ``<!-- mha:benchmark-table -->`` becomes the table of the benchmark run the repository keeps
  (``mha/site/data/benchmark.json``, written by ``python -m mha.site.bench --save``).
- ``<!-- mha:table NAME -->`` becomes the table ``NAME`` of ``mha.site.plots.TABLES`` in the page's
  language, computed from ``mha`` by ``hooks/draw_figures.py`` (with the figures, in a
  subprocess, cached on its sources) into ``.cache/tables/<lang>/NAME.md``.
- Any other ``<!-- mha:… -->`` marker fails the build.
- Every Chinese term of that file is added to jieba's dictionary, so search indexes 注意力头 as
  one word instead of 注意力 + 头.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*mha:([\w-]+)(?:\s+([\w-]+))?\s*-->")
TABLES = ROOT / ".cache" / "tables"
HEADERS = {
    "zh": ("中文", "English", "符号", "说明"),
    "en": ("English", "中文", "Symbol", "Meaning"),
}


def load_terms() -> dict:
    """The TERMS table, read from disk on every build (so ``mkdocs serve`` sees edits)."""
    return runpy.run_path(str(ROOT / "mha" / "site" / "terms.py"))["TERMS"]


def glossary_table(lang: str) -> str:
    other = "en" if lang == "zh" else "zh"
    rows = ["| " + " | ".join(HEADERS[lang]) + " |", "|---|---|---|---|"]
    for entry in load_terms().values():
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


def benchmark_table(lang: str) -> str:
    """The saved benchmark run as a Markdown table, followed by its ratios and machine."""
    import json

    path = ROOT / "mha" / "site" / "data" / "benchmark.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = ["| " + " | ".join(BENCH_HEADERS[lang]) + " |", "|---:|---|---:|---:|---:|---:|"]
    for r in data["results"]:
        peak = "–" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.1f}"
        rows.append(f"| {r['n']} | `{r['impl']}` | {r['seconds'] * 1e3:.1f} | {peak} | "
                    f"{r['gflops']:.1f} | {r['fraction_of_gemm_peak']:.0%} |")
    ratios = []
    for line in data["ratios"]:
        parts = [f"{BENCH_RATIOS[lang][k]} = {v:.2f}" for k, v in line.items() if k != "n"]
        if parts:
            ratios.append(f"- n = {line['n']}: " + ", ".join(parts))
    long = data.get("long_sequence")
    if long:
        ratios.append("\n" + BENCH_LONG[lang].format(
            n=long["n"], h=long["h"], d_k=long["d_k"],
            extra=long["chunked_peak_extra_bytes"] / 2**20,
            dense=long["dense_scores_bytes"] / 2**30))
    v = data["versions"]
    machine = (f"{data['date'][:10]} · {data['machine']['platform']} · "
               f"{data['machine']['cpu_count']} CPU · Python {v['python']} · NumPy {v['numpy']}"
               + (f" · PyTorch {v['torch']}" if "torch" in v else "")
               + f" · GEMM {data['gemm_gflops']:.0f} GFLOP/s")
    return "\n".join(rows) + "\n\n" + "\n".join(ratios) + f"\n\n`{machine}`"


def page_language(page, config) -> str:
    lang = getattr(page.file, "locale", None) or config["theme"]["language"]
    if lang not in HEADERS:
        raise PluginError(f"{page.file.src_uri}: no language known for locale {lang!r}")
    return lang


_jieba_words: set[str] = set()  # added in this process (mkdocs serve keeps the module)


def on_config(config):
    import jieba

    # Each word once per process: jieba adds a word's frequency to its total every time, which
    # would shift every later cut a little on each rebuild under mkdocs serve.
    for entry in load_terms().values():
        if entry.zh not in _jieba_words:
            jieba.add_word(entry.zh)
            _jieba_words.add(entry.zh)
    return config


def on_page_markdown(markdown, page, config, files):
    def replace(match):
        name, argument = match.groups()
        if argument is not None and name != "table":
            raise PluginError(f"{page.file.src_uri}: marker <!-- mha:{name} --> takes no "
                              f"argument, got {argument!r}")
        if name == "table":
            path = TABLES / page_language(page, config) / f"{argument}.md"
            if argument is None or not path.is_file():
                raise PluginError(f"{page.file.src_uri}: no table {argument!r} "
                                  f"(mha.site.plots.TABLES, drawn into {path.parent})")
            return path.read_text(encoding="utf-8")
        if name == "glossary":
            return glossary_table(page_language(page, config))
        if name == "benchmark-table":
            return benchmark_table(page_language(page, config))
        raise PluginError(f"{page.file.src_uri}: unknown marker <!-- mha:{name} -->")

    return MARKER.sub(replace, markdown)
