"""Prose checks for the misconceptions and interview pages: numbers typed in the text that code
does not print are checked here against the code or against each other, and the kinds of
sentence the truth pass (#14) removed stay removed.

What a block prints is checked by the output blocks (root ``conftest.py``); this file covers the
rest: arithmetic stated in words, cited figures that both languages must give alike, and phrases
that retype printed numbers or make claims without a source.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from page_outputs import without_fences

pytestmark = pytest.mark.site

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = ("misconceptions.md", "interview.md")
LANGS = ("en", "zh")


def prose(lang: str, page: str) -> str:
    """The page without its fenced blocks (code and output), so only the reader's text is left."""
    text = (DOCS / lang / page).read_text(encoding="utf-8")
    return without_fences(text)


@pytest.mark.parametrize("lang", LANGS)
def test_the_overflow_threshold_is_the_log_of_float64s_largest_number(lang):
    text = prose(lang, "interview.md")
    largest = np.finfo(np.float64).max
    assert "709.8" in text and f"{math.log(largest):.1f}" == "709.8"
    assert r"1.8 \times 10^{308}" in text and f"{largest:.1e}" == "1.8e+308"


@pytest.mark.parametrize("lang", LANGS)
def test_the_wrong_divisor_arithmetic(lang):
    # "divide by about 22.6 instead of 8": sqrt(d_model) against sqrt(d_k), d_model 512, 8 heads
    text = prose(lang, "misconceptions.md")
    assert "22.6" in text and f"{math.sqrt(512):.1f}" == "22.6" and math.sqrt(512 // 8) == 8
    assert r"1/64 \approx 0.016" in text and f"{1 / 64:.3f}" == "0.016"


@pytest.mark.parametrize("page", PAGES)
def test_cited_figures_are_the_same_in_both_languages(page):
    """Numbers quoted from papers (BLEU, percentages, head counts) appear alike in en and zh."""
    def cited(text):
        return sorted(re.findall(r"\b\d+\.\d+%?|\b\d+%", text))

    en, zh = cited(prose("en", page)), cited(prose("zh", page))
    assert en == zh, f"{page}: en cites {en}, zh cites {zh}"


def test_clark_et_al_figures_come_with_their_baselines():
    for lang in LANGS:
        text = prose(lang, "misconceptions.md")
        for figure in ("94.3%", "51.7%", "65%", "69%", "27%"):
            assert figure in text, f"{lang}: {figure} missing"


RETYPED = {
    "en": re.compile(r"\bIt prints\b|\bprints `"),
    "zh": re.compile(r"(?:^|[。：；\s])打印\s*[`\[\(\{0-9]"),
}
NOISE = re.compile(r"\d\.\d{6,}e-\d+|\d+(?:\.\d+)?e-(?:0?9|1[0-9])\b")
UNSOURCED = ("国内大厂", "真有人", "老实说", "说实话", "people really", "in China and elsewhere")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("page", PAGES)
def test_prose_points_at_output_blocks_instead_of_retyping_them(lang, page):
    text = prose(lang, page)
    assert not RETYPED[lang].search(text), RETYPED[lang].search(text).group(0)
    assert not NOISE.search(text), f"rounding noise in the prose: {NOISE.search(text).group(0)}"
    for phrase in UNSOURCED:
        assert phrase not in text, f"{lang}/{page}: {phrase!r}"


@pytest.mark.parametrize("lang", LANGS)
def test_flashattention_is_credited_and_its_flops_told_one_way(lang):
    for page in PAGES:
        text = prose(lang, page)
        for name in ("Dao", "Milakov", "Rabe"):
            assert name in text, f"{lang}/{page}: {name} not cited"
        assert "slightly higher" not in text and "略多" not in text


def test_the_source_document_is_named_before_zh_says_yuanjianggao():
    """The zh pages call the lecture notes 原讲稿, never 原文 (which a reader takes for the
    paper, 原论文), and name them before using the short name."""
    text = prose("zh", "misconceptions.md")
    first = text.find("原讲稿")
    assert first != -1 and text.find("（下称“原讲稿”）") == first - len("（下称“")
    for page in PAGES:
        assert "原文" not in prose("zh", page), page


@pytest.mark.parametrize("lang", LANGS)
def test_the_layernorm_answer_links_a_page_that_has_layernorm(lang):
    text = prose(lang, "interview.md")
    answer = text[text.index("LayerNorm"):]
    link = re.search(r"\]\((api/encoder\.md)#([\w.]+)\)", answer)
    assert link and link.group(2) == "mha.models.encoder.bert_layer"
    from mha.models import encoder

    assert "LayerNorm" in encoder.bert_layer.__doc__


def test_the_counts_in_the_prose_are_the_counts_on_the_page():
    for lang, questions, coding, beliefs in (("en", "Twenty-nine", None, "Seventeen"),
                                             ("zh", "29 道", "6 道手撕代码", "17 个")):
        interview = (DOCS / lang / "interview.md").read_text(encoding="utf-8")
        asked = interview.count("??? question")
        in_coding = interview.split("{ #coding }")[1].split("{ #sources }")[0].count("??? question")
        assert asked == 29 and questions in interview and in_coding == 6
        if coding:
            assert coding in interview
        page = (DOCS / lang / "misconceptions.md").read_text(encoding="utf-8")
        sections = re.findall(r"^## .*\{ #(?!sources)", page, flags=re.M)
        experiments = re.findall(r"^```(?:python|\{\.python)", page, flags=re.M)
        assert len(sections) == 17 and beliefs in page
        assert len(experiments) == len(sections) - 1    # "for all but one, a small experiment"
