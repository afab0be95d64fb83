"""The inference chapter's figures and table draw the kept benchmark run's decoding section, in
both languages, and show the numbers it holds."""

import re

import numpy as np
import pytest

from mha.site.bench import STEP_PARTS, kept_run
from mha.site.plots import DEPENDS, FIGURES, LANGUAGES, TABLES, term
from mha.site.plots.inference import STEP_ROWS, WAYS


CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def decode():
    return kept_run()["decode"]


def _texts(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


def test_the_chapter_names_are_registered_with_their_sources():
    """The chapter asks for figures/inference-decode.svg, figures/inference-cache.svg and the
    decode-step table by these names; each is redrawn when the kept run or its module changes."""
    for name in ("inference-decode", "inference-cache"):
        assert name in FIGURES and name not in TABLES
        assert {"site/plots/inference.py", "site/data/benchmark.json"} <= set(DEPENDS[name])
    assert "decode-step" in TABLES and "decode-step" not in FIGURES
    assert {"site/plots/inference.py", "site/data/benchmark.json",
            "site/bench.py"} <= set(DEPENDS["decode-step"])


@pytest.mark.parametrize("lang", LANGUAGES)
def test_decode_figure_plots_the_kept_times_per_token_and_the_ratio(decode, lang):
    fig = FIGURES["inference-decode"](lang)
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert len(lines) == len(WAYS)
    per_token = decode["per_token"]
    for line, way in zip(lines, WAYS):                      # in milliseconds
        np.testing.assert_array_equal(line.get_xdata(), per_token["prefix"])
        np.testing.assert_allclose(line.get_ydata(), np.array(per_token[way]) * 1e3)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    title = ax.get_title()
    assert f"{decode['recomputed_over_cached']:.0f}" in title
    assert f"{decode['seconds']['cached']:.2f}" in title
    assert f"{decode['seconds']['recomputed']:.1f}" in title
    text = _texts(fig)
    assert term("kv_cache", lang) in text and term("token", lang) in text
    assert bool(CJK.search(text)) == (lang == "zh")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_cache_figure_draws_the_measured_bytes_beside_the_formula(decode, lang):
    fig = FIGURES["inference-cache"](lang)
    (ax,) = fig.axes
    bars = [p.get_height() for p in ax.patches]
    assert bars == [c["nbytes"] / 2**20 for c in decode["cache"]] == [4.0, 1.0, 0.5]
    (formula,) = ax.collections
    np.testing.assert_array_equal(formula.get_offsets()[:, 1],
                                  [c["formula_bytes"] / 2**20 for c in decode["cache"]])
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert [t.split("\n")[0] for t in ticks] == ["8", "2", "1"]
    assert [t.split("\n")[1] for t in ticks][1:] == ["GQA", "MQA"]
    text = _texts(fig)
    assert term("kv_heads", lang) in text and "4 MiB" in text and "0.5 MiB" in text
    assert bool(CJK.search(text)) == (lang == "zh")


def test_decode_step_table_shows_the_kept_milliseconds_in_both_languages(decode):
    """Each part, the sum of the parts and the whole step, mha then PyTorch, in ms as kept;
    the same numbers in both languages."""
    step = decode["step"]
    numbers = {}
    for lang in LANGUAGES:
        lines = TABLES["decode-step"](lang).split("\n")
        assert lines[1] == "|---|---:|---:|"
        rows = [[c.strip() for c in line.strip().strip("|").split("|")]
                for line in lines[2:2 + len(STEP_PARTS) + 2]]
        for row, part in zip(rows, STEP_PARTS):
            assert row[0] == STEP_ROWS[lang][part].format(n="1,024", token=term("token", lang))
            assert row[1:] == [f"{step[lib]['parts'][part] * 1e3:.3f}" for lib in ("mha",
                                                                                    "torch")]
        assert rows[-2][1:] == [f"{step[lib]['sum_of_parts'] * 1e3:.3f}"
                                for lib in ("mha", "torch")]
        assert rows[-1][1:] == [f"**{step[lib]['seconds'] * 1e3:.3f}**"
                                for lib in ("mha", "torch")]
        note = lines[-1]
        assert f"{step['mha_over_torch']:.2f}" in note and str(step["step_repeats"]) in note
        assert bool(CJK.search("\n".join(lines))) == (lang == "zh")
        numbers[lang] = [row[1:] for row in rows]
    assert numbers["zh"] == numbers["en"]
