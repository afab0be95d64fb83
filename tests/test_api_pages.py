"""The API reference: an index of every public name, and one page per part (issue #31).

As NumPy, pydantic and FastAPI lay out theirs: ``docs/<lang>/api/index.md`` lists every public
name of mha with the first paragraph of its docstring and a link to its entry
(``hooks/api_index.py`` writes the list at build time from the part pages and the source), and
each part (``docs/<lang>/api/core.md``, ...) documents its names with mkdocstrings, under the
anchors mkdocstrings gives them (``#mha.softmax``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from mkdocs.exceptions import PluginError

from helpers import load_file

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LANGS = {"zh": "", "en": "en/"}
api_index = load_file(ROOT / "hooks" / "api_index.py", "api_index_hook")

#: What the one-page reference documented when it was split into parts (its ``:::`` lines):
#: each must stay documented, on exactly one part page.
ONE_PAGE_ENTRIES = """
    mha.softmax mha.attention_scores mha.scaled_dot_product_attention mha.chunked_attention
    mha.causal_mask mha.sliding_window_mask mha.padding_mask mha.sinusoidal_positions mha.rope
    mha.positions.halves_order mha.softmax_backward mha.attention_backward
    mha.MultiHeadAttention mha.MultiHeadAttention.forward mha.MultiHeadAttention.trace
    mha.MultiHeadAttention.backward mha.KVCache mha.multihead.split_heads
    mha.multihead.merge_heads mha.reference.attention_reference
    mha.reference.multi_head_attention_reference mha.reference.sinusoidal_reference
    mha.reference.rope_reference mha.models.minilm.load_minilm mha.models.minilm.MiniLM
    mha.models.e5.load_e5 mha.models.e5.E5 mha.models.encoder.EncoderOutput
    mha.models.encoder.SpecialTokens mha.models.encoder.Encoder mha.models.encoder.bert_layer
    mha.models.wordpiece.WordPieceTokenizer mha.models.sentencepiece.SentencePieceTokenizer
    mha.models.safetensors.read_safetensors mha.models.e5.load_e5_weights mha.models.e5.E5Weights
    mha.models.e5bin.read_e5_file mha.models.e5bin.E5File mha.models.e5bin.dequantize_q4_0
    mha.site.head_roles.role_scores mha.site.head_roles.study mha.site.head_roles.HeadRoleStudy
    mha.site.experiments.scaling_experiment mha.site.experiments.row_entropy
""".split()
#: An mkdocstrings entry's heading, and its anchor.
ENTRY = re.compile(r'<h[1-6] id="(mha\.[\w.]+)" class="doc doc-heading"')
ID = re.compile(r'\bid="([^"]+)"')


def public_modules() -> list[str]:
    """The modules whose ``__all__`` is mha's public API: ``mha`` and every module under it but
    the private ones (``mha._checks``) and the site's own code (``mha.site``), of which the
    reference documents ``mha.site.experiments`` whole (and a few names of ``head_roles``)."""
    import mha

    names = ["mha", "mha.site.experiments"]
    for module in pkgutil.walk_packages(mha.__path__, "mha."):
        parts = module.name.split(".")
        if parts[1] != "site" and not any(part.startswith("_") for part in parts):
            names.append(module.name)
    return names


def resolve(identifier: str):
    """The object a dotted name stands for: the longest importable module, then attributes."""
    parts = identifier.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise LookupError(identifier)


def docstring_of(identifier: str) -> str:
    """The docstring of a function, class or module; for a constant, the string right after its
    assignment in the source (an attribute docstring), read with ``ast``."""
    obj = resolve(identifier)
    module, name = identifier.rsplit(".", 1)
    if ((inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj))
            and obj.__name__.rsplit(".", 1)[-1] == name):  # not another name for it
        return inspect.getdoc(obj) or ""
    tree = ast.parse(Path(resolve(module).__file__).read_text(encoding="utf-8"))
    for statement, following in zip(tree.body, tree.body[1:]):
        if (isinstance(statement, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)):
            return inspect.cleandoc(following.value.value)
    return ""


def first_paragraph(docstring: str) -> str:
    return " ".join(docstring.strip().split("\n\n")[0].split())


def part_stems(lang: str) -> list[str]:
    return sorted(p.stem for p in (DOCS / lang / "api").glob("*.md") if p.stem != "index")


class IndexRows(HTMLParser):
    """The rows of the index's tables: the row's ids, its link, its name and its summary as
    text (a formula as its TeX between dollars, as the docstring writes it)."""

    def __init__(self, page_html: str):
        super().__init__(convert_charrefs=True)
        self.rows: list[dict] = []
        self.cell = -1
        self.katex = 0      # depth inside a typeset formula (its HTML is not the text)
        self.tex = False
        self.feed(page_html.split("<article", 1)[1].split("</article>", 1)[0])

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self.rows.append({"ids": [], "href": None, "cells": ["", ""]})
            self.cell = -1
        elif tag == "td":
            self.cell += 1
        elif self.rows and 0 <= self.cell <= 1:
            if "id" in attrs:
                self.rows[-1]["ids"].append(attrs["id"])
            if tag == "a" and self.cell == 0 and self.rows[-1]["href"] is None:
                self.rows[-1]["href"] = attrs.get("href")
            if tag == "span" and ("katex" in (attrs.get("class") or "").split() or self.katex):
                self.katex += 1
            if tag == "annotation":
                self.tex = True

    def handle_endtag(self, tag):
        if tag == "tr":
            self.cell = 2  # after the row: nothing more of it
        elif tag == "span" and self.katex:
            self.katex -= 1
        elif tag == "annotation":
            self.tex = False

    def handle_data(self, data):
        if not self.rows or not 0 <= self.cell <= 1:
            return
        if self.tex:
            self.rows[-1]["cells"][self.cell] += f"${data}$"
        elif not self.katex:
            self.rows[-1]["cells"][self.cell] += data


@pytest.fixture(scope="module")
def reference(built_site):
    """Per language: the index's rows, and {part: the part page's HTML}."""
    out = {}
    for lang, prefix in LANGS.items():
        folder = built_site.dir / prefix / "api"
        rows = [row for row in IndexRows((folder / "index.html").read_text(encoding="utf-8")).rows
                if row["href"]]
        parts = {stem: (folder / stem / "index.html").read_text(encoding="utf-8")
                 for stem in part_stems(lang)}
        out[lang] = {"rows": rows, "parts": parts}
    return out


# ---- the sources ------------------------------------------------------------------------------

def test_both_languages_have_the_same_part_pages_and_entries():
    assert part_stems("zh") == part_stems("en") and len(part_stems("en")) >= 7
    for stem in part_stems("en"):
        zh, en = ((DOCS / lang / "api" / f"{stem}.md").read_text(encoding="utf-8")
                  for lang in LANGS)
        assert api_index.ENTRY.findall(zh) == api_index.ENTRY.findall(en), stem
        assert api_index.ENTRY.findall(en), stem


def test_the_index_marker_names_every_part_page_once():
    for lang in LANGS:
        text = (DOCS / lang / "api" / "index.md").read_text(encoding="utf-8")
        parts = api_index.MARKER.search(text).group(1).split()
        assert sorted(parts) == part_stems(lang) and len(set(parts)) == len(parts), lang


def test_no_two_pages_share_an_english_navigation_label():
    """The nav's Chinese labels are translated by label (mkdocs.yml), and hooks/reading.py maps
    an English label back to its Chinese one: the API's "位置编码" and the chapter "词序与位置编码"
    must not both become "Positions"."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    (i18n,) = [p["i18n"] for p in config["plugins"] if isinstance(p, dict) and "i18n" in p]
    (english,) = [lang for lang in i18n["languages"] if lang["locale"] == "en"]
    labels = list(english["nav_translations"].values())
    assert len(labels) == len(set(labels)), sorted(label for label in labels
                                                   if labels.count(label) > 1)


def test_a_summary_keeps_its_code_and_escapes_only_the_tables_pipes():
    assert api_index.table_cell("a | b ``x | y`` `|`") == r"a \| b ``x | y`` `|`"


def test_a_part_page_without_an_entry_or_a_title_stops_the_build(tmp_path):
    package = api_index.load_package()
    (tmp_path / "empty.md").write_text("# Empty { #empty }\n\nNo entry.\n", encoding="utf-8")
    (tmp_path / "untitled.md").write_text("::: mha.softmax\n", encoding="utf-8")
    (tmp_path / "unknown.md").write_text("# U { #u }\n\n::: mha.no_such_name\n",
                                         encoding="utf-8")
    for part, message in [("empty", "no ::: entry"), ("untitled", "no H1"),
                          ("unknown", "no 'mha.no_such_name'"), ("missing", "no part page")]:
        with pytest.raises(PluginError, match=message):
            api_index.part_section(tmp_path, part, "en", package)


# ---- the built pages --------------------------------------------------------------------------

def test_every_entry_of_the_one_page_reference_is_on_exactly_one_part_page(reference):
    for lang, built in reference.items():
        where: dict[str, list[str]] = {}
        for stem, page_html in built["parts"].items():
            for identifier in ENTRY.findall(page_html):
                where.setdefault(identifier, []).append(stem)
        assert not {i: s for i, s in where.items() if len(s) > 1}, lang
        assert [i for i in ONE_PAGE_ENTRIES if i not in where] == [], lang


def test_the_index_lists_every_public_name_with_a_link_to_its_entry(reference):
    """Each row links to an entry heading of the part page it names, carries the entry's
    identifier as its id (the one-page reference's links, ``api/#mha.softmax``, land on it), and
    every name in a public module's ``__all__`` is one of the rows' objects."""
    for lang, built in reference.items():
        listed = {}
        for row in built["rows"]:
            part, _, anchor = row["href"].partition("/#")
            assert part in built["parts"], (lang, row["href"])
            assert anchor in ENTRY.findall(built["parts"][part]), (lang, row["href"])
            assert ID.findall(built["parts"][part]).count(anchor) == 1, (lang, anchor)
            assert row["ids"] == [anchor] and row["cells"][0].strip() == anchor, (lang, row)
            listed[anchor] = resolve(anchor)
        assert len(listed) == len(built["rows"]), lang  # no name twice
        missing = []
        for module_name in public_modules():
            module = importlib.import_module(module_name)
            for name in module.__all__:
                obj = getattr(module, name)
                if not any(o is obj and (callable(o) or i.endswith("." + name))
                           for i, o in listed.items()):
                    missing.append(f"{module_name}.{name}")
        assert missing == [], lang


def test_each_summary_is_the_first_paragraph_of_the_docstring(reference):
    for lang, built in reference.items():
        assert len(built["rows"]) >= 80, lang
        for row in built["rows"]:
            anchor = row["href"].partition("/#")[2]
            expected = first_paragraph(docstring_of(anchor)).replace("`", "")
            assert expected, anchor
            assert " ".join(unescape(row["cells"][1]).split()) == expected, (lang, anchor)


def test_the_index_is_light_and_its_parts_split_the_weight(reference, built_site):
    """The point of the split: no page carries the whole reference. The index has no entry
    tables, and no part page holds more than half of the reference's parameter tables."""
    for lang, built in reference.items():
        index = (built_site.dir / LANGS[lang] / "api" / "index.html").read_text(encoding="utf-8")
        assert not ENTRY.search(index), lang
        tables = {stem: page.count('<table') for stem, page in built["parts"].items()}
        assert max(tables.values()) <= sum(tables.values()) / 2, (lang, tables)


def test_a_part_page_named_like_a_chapter_is_not_that_chapter(reference):
    """hooks/reading.py names a chapter's d2l sections by its file name: api/positions.md is
    not the positions chapter (and its links lead up to the teaching page, or the strict
    build would have stopped)."""
    for lang, built in reference.items():
        assert "d2l-map" not in built["parts"]["positions"], lang
        assert 'href="../../teaching/#levels"' in built["parts"]["positions"], lang


def test_the_part_pages_typeset_the_docstrings_maths(reference):
    for lang, built in reference.items():
        pages = "".join(built["parts"].values())
        assert 'class="katex' in pages, lang
        assert ".. math::" not in pages and ":func:" not in pages, lang


def test_api_reference_titles_are_in_the_pages_language(reference):
    """hooks/api_language.py: mkdocstrings' section titles follow each page's language (it
    reads the locale once, so the English page used to show 参数：, 返回：), on every
    part page."""
    titles = {"zh": ("参数：", "返回：", "示例："), "en": ("Parameters:", "Returns:", "Examples:")}
    for lang, built in reference.items():
        other = titles["en" if lang == "zh" else "zh"]
        for stem, page_html in built["parts"].items():
            assert titles[lang][0] in page_html, (lang, stem)
            for foreign in other:
                assert foreign not in page_html, (lang, stem, foreign)
        pages = "".join(built["parts"].values())
        for own in titles[lang]:
            assert pages.count(own) >= 20, (lang, own)


def test_search_finds_the_entries(built_site):
    """Each language's search index holds every entry of its part pages, at its anchor."""
    import json

    for lang, prefix in LANGS.items():
        index = json.loads((built_site.dir / prefix / "search" / "search_index.json")
                           .read_text(encoding="utf-8"))
        locations = {doc["location"] for doc in index["docs"]}
        for stem in part_stems(lang):
            page_html = (built_site.dir / prefix / "api" / stem / "index.html").read_text(
                encoding="utf-8")
            for identifier in ENTRY.findall(page_html):
                assert f"api/{stem}/#{identifier}" in locations, (lang, identifier)
