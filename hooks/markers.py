"""MkDocs hook: page markers and the Chinese search dictionary, both from the terms file.

- ``<!-- mha:glossary -->`` becomes the glossary table, in the page's language, from
  ``mha/plots/terms.py``. Any other ``<!-- mha:… -->`` marker fails the build.
- Every Chinese term of that file is added to jieba's dictionary, so search indexes 注意力头 as
  one word instead of 注意力 + 头.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*mha:([\w-]+)\s*-->")
HEADERS = {
    "zh": ("中文", "English", "符号", "说明"),
    "en": ("English", "中文", "Symbol", "Meaning"),
}


def load_terms() -> dict:
    """The TERMS table, read from disk on every build (so ``mkdocs serve`` sees edits)."""
    return runpy.run_path(str(ROOT / "mha" / "plots" / "terms.py"))["TERMS"]


def glossary_table(lang: str) -> str:
    other = "en" if lang == "zh" else "zh"
    rows = ["| " + " | ".join(HEADERS[lang]) + " |", "|---|---|---|---|"]
    for entry in load_terms().values():
        symbol = f"`{entry.symbol}`" if entry.symbol else ""
        rows.append(f"| **{getattr(entry, lang)}** | {getattr(entry, other)} | {symbol} | "
                    f"{getattr(entry, lang + '_note')} |")
    return "\n".join(rows)


def page_language(page, config) -> str:
    lang = getattr(page.file, "locale", None) or config["theme"]["language"]
    if lang not in HEADERS:
        raise PluginError(f"{page.file.src_uri}: no language known for locale {lang!r}")
    return lang


def on_config(config):
    import jieba

    for entry in load_terms().values():
        jieba.add_word(entry.zh)
    return config


def on_page_markdown(markdown, page, config, files):
    def replace(match):
        name = match.group(1)
        if name == "glossary":
            return glossary_table(page_language(page, config))
        raise PluginError(f"{page.file.src_uri}: unknown marker <!-- mha:{name} -->")

    return MARKER.sub(replace, markdown)
