"""The case board's data (`mha.site.caseboard`): what the page's scripts draw must be what `mha`
computes. The lab's setting by default is the walkthrough; its inputs are the layers' own
weights; each mask is `mha.masks`'; the real heads' files (kept: tests/test_model_runs.py holds
them against the models) decode to attention weights; each sentence fits the size budget. The browser side (the page recomputing
the lab, the real heads drawn) is tested in tests/test_caseboard_lab.py and
tests/test_caseboard_real.py."""

from __future__ import annotations

import base64
import gzip
import json
import math

import numpy as np
import pytest

from helpers import weights_sum_error
from mha import MultiHeadAttention, causal_mask, sliding_window_mask
from mha.site import caseboard as cb
from mha.site.experiments import walkthrough
from mha.site.plots.case import CASE_ORDER, CASE_SENTENCE, case_tokens
from tolerance import assert_within

pytestmark = pytest.mark.site  # the site's data (mha.site), not the core


# --- The lab -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_lab_by_default_is_the_walkthrough(lang):
    lab, walk = cb.lab_trace(lang), walkthrough(CASE_ORDER[lang])
    assert len(lab) == len(walk) == 2
    for ours, theirs in zip(lab, walk):
        for stage in ("x", "q", "k", "v", "scores", "weights", "heads", "concat", "output"):
            np.testing.assert_array_equal(ours[stage], theirs[stage], err_msg=stage)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_exported_inputs_are_the_layers_weights_for_every_number_of_heads(lang):
    data = json.loads(cb.lab_files()[f"lab-{lang}.json"])
    assert data["tokens"] == case_tokens(lang) and data["heads"] == [1, 2, 4]
    np.testing.assert_array_equal(np.array(data["x"]), cb.lab_trace(lang)[0]["x"])
    for h in cb.LAB_HEADS:
        d_k = cb.LAB_D_MODEL // h
        for layer, exported in zip(cb.lab_layers(h), data["layers"]):
            # Head j of h is columns j d_k .. (j + 1) d_k of the one exported matrix.
            for name in ("W_Q", "W_K", "W_V"):
                matrix = np.array(exported[name])                       # (d_model, d_model)
                np.testing.assert_array_equal(
                    getattr(layer, name), matrix.reshape(cb.LAB_D_MODEL, h, d_k), err_msg=name)
            np.testing.assert_array_equal(layer.W_O, np.array(exported["W_O"]))


def test_the_temperature_sets_the_scale():
    for h in cb.LAB_HEADS:
        for t in (0.125, 1.0, 8.0):
            assert all(layer.scale == pytest.approx(1 / (t * math.sqrt(16 / h)), rel=1e-15)
                       for layer in cb.lab_layers(h, t))
    # τ = 1 is mha's default scale, 1/sqrt(d_k).
    x = np.random.default_rng(3).normal(size=(5, 16))
    plain = MultiHeadAttention(16, 2, seed=1).forward(x)
    # The two scales may differ in their last bit (1 / (1 * sqrt(8)) against 1 / sqrt(8)): an
    # ulp of every score, which reaches the outputs (of size ~1) as a few ulp (rule 1 of
    # tests/tolerance.py); 1e-14 is ~45 ulp of 1.
    np.testing.assert_allclose(cb.lab_layers(2)[0].forward(x), plain, rtol=0, atol=1e-14)
    assert cb.TEMPERATURES[6] == 1.0 and len(cb.TEMPERATURES) == 13
    assert list(cb.TEMPERATURES) == sorted(cb.TEMPERATURES)


def test_a_low_temperature_sharpens_and_a_high_one_flattens():
    sharp = cb.lab_trace("en", 4, temperature=cb.TEMPERATURES[0])[0]["weights"]
    usual = cb.lab_trace("en", 4)[0]["weights"]
    flat = cb.lab_trace("en", 4, temperature=cb.TEMPERATURES[-1])[0]["weights"]
    top = [w.max(axis=-1).mean() for w in (sharp, usual, flat)]
    assert top[0] > top[1] > top[2] > 1 / 8
    # Flattest: every weight within a factor of 2 of uniform (1/8) on this case.
    assert flat.min() > 1 / 16 and flat.max() < 1 / 4


@pytest.mark.parametrize("kind, value, expected", [
    ("none", None, np.ones((8, 8), bool)),
    ("causal", None, causal_mask(8)),
    ("window", 2, sliding_window_mask(8, 2)),
    ("padding", 5, np.broadcast_to(np.arange(8) < 5, (8, 8))),
])
def test_each_mask_hides_exactly_its_keys(kind, value, expected):
    for h in cb.LAB_HEADS:
        for trace in cb.lab_trace("zh", h, kind, value):
            weights = trace["weights"]                                  # (h, n, n)
            np.testing.assert_array_equal(weights[:, ~expected], 0.0)
            assert (weights[:, expected] > 0).all()
            assert_within(weights.sum(axis=-1), 1.0, weights_sum_error(weights.shape[-1]))


def test_the_lab_refuses_settings_it_does_not_offer():
    with pytest.raises(ValueError, match="heads"):
        cb.lab_layers(3)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="temperature"):
            cb.lab_layers(4, bad)
    with pytest.raises(ValueError, match="mask must be one of"):
        cb.lab_mask("diagonal", 8)
    with pytest.raises(ValueError, match="width"):
        cb.lab_mask("window", 8)
    with pytest.raises(ValueError, match="length"):
        cb.lab_mask("padding", 8)


# --- Quantisation ------------------------------------------------------------------------------

def test_quantise_is_within_half_a_step_and_refuses_what_is_not_a_weight():
    w = np.random.default_rng(0).dirichlet(np.ones(9), size=(4, 9))    # rows sum to 1
    q = cb.quantise(w)
    assert q.dtype == np.uint8 and q.shape == w.shape
    assert np.abs(cb.dequantise(q) - w).max() <= 0.5 / 255 + 1e-12
    assert cb.quantise(np.array([0.0, 1.0])).tolist() == [0, 255]
    for bad in ([0.5, np.nan], [1.01], [-0.01]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            cb.quantise(np.array(bad))


# --- The real heads ----------------------------------------------------------------------------

def test_the_sentences_are_curated_as_the_issue_asks():
    by_lang = {lang: [s for s in cb.SENTENCES if s.lang == lang] for lang in ("zh", "en")}
    assert len(by_lang["zh"]) >= 6 and len(by_lang["en"]) >= 6
    assert len({s.id for s in cb.SENTENCES}) == len(cb.SENTENCES)
    assert by_lang["zh"][0].text == CASE_SENTENCE["zh"]
    assert by_lang["en"][0].text == CASE_SENTENCE["en"] + "."
    assert all(s.models == ("e5",) for s in by_lang["zh"])              # MiniLM reads English
    assert all(set(s.models) == {"e5", "minilm"} for s in by_lang["en"])


@pytest.fixture(scope="module")
def files():
    """Every data file, made once (the real heads' files from their kept run: no model)."""
    return cb.files()


def test_every_real_heads_file_decodes_to_attention_weights(files):
    """Each kept file decodes to every head's weights for its sentence's tokens; that they are
    the models' weights today is tests/test_model_runs.py's check (the model suite)."""
    for sentence in cb.SENTENCES:
        for key in sentence.models:
            data = json.loads(files[f"real/{key}-{sentence.id}.json"])
            layers, heads = cb.MODELS[key][1:]
            n = len(data["tokens"])
            assert (data["layers"], data["heads"], data["n"]) == (layers, heads, n)
            assert data["text"] == sentence.text and data["model"] == key
            weights = np.frombuffer(base64.b64decode(data["weights"]), np.uint8)
            weights = cb.dequantise(weights.reshape(layers, heads, n, n))
            # Each row still sums to 1, within n half-steps.
            assert np.abs(weights.sum(axis=-1) - 1).max() <= n * 0.5 / 255


def test_each_sentence_fits_the_budget_and_the_index_names_every_file(files):
    per_sentence: dict[str, int] = {}
    for name, data in files.items():
        if name.startswith("real/"):
            sentence = name.split("-", 1)[1].removesuffix(".json")
            per_sentence[sentence] = per_sentence.get(sentence, 0) + len(gzip.compress(data, 9))
    assert set(per_sentence) == {s.id for s in cb.SENTENCES}
    assert max(per_sentence.values()) <= cb.BUDGET, per_sentence
    for lang in ("zh", "en"):
        index = json.loads(files[f"real-{lang}.json"])
        listed = {path for s in index["sentences"] for path in s["files"].values()}
        assert listed == {name for name in files if name.startswith("real/")}
        assert index["words"]["terms"]["head"] == ("注意力头" if lang == "zh" else "head")
        assert set(index["words"]) == set(json.loads(files[f"lab-{lang}.json"])["words"])


@pytest.mark.parametrize("table", ["WORDS", "REAL_WORDS", "LAB_WORDS"])
def test_the_words_of_both_languages_have_the_same_keys_and_shapes(table):
    zh, en = getattr(cb, table)["zh"], getattr(cb, table)["en"]
    assert zh.keys() == en.keys()
    for key in zh:
        assert type(zh[key]) is type(en[key]), key
        if isinstance(zh[key], list):
            assert len(zh[key]) == len(en[key]), key
        elif isinstance(zh[key], str):  # the same placeholders
            assert sorted(_fields(zh[key])) == sorted(_fields(en[key])), key


def test_the_words_of_the_parts_do_not_shadow_each_other():
    for lang in ("zh", "en"):
        tables = [cb.WORDS[lang], cb.REAL_WORDS[lang], cb.LAB_WORDS[lang]]
        keys = [key for table in tables for key in table]
        assert len(keys) == len(set(keys)), lang
        assert "stage_notes" not in keys and "terms" not in keys


def _fields(text: str) -> list[str]:
    import string

    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


# --- The real heads' patterns (issue #29: the labels under the board's maps) ---------------------

def test_each_heads_label_is_head_roles_rule_on_the_weights_the_page_has(files):
    """``roles`` of each built sentence file: the role `mha.site.head_roles.role_scores` finds on
    the file's own (dequantised) weights, by `THRESHOLDS`: a share role reached (the largest
    share of those), else ``broad`` reached, else None."""
    from mha.site.head_roles import ROLES, THRESHOLDS, role_scores

    seen = set()
    for sentence in cb.SENTENCES:
        for key in sentence.models:
            data = json.loads(files[f"real/{key}-{sentence.id}.json"])
            layers, heads, n = data["layers"], data["heads"], data["n"]
            raw = np.frombuffer(base64.b64decode(data["weights"]), np.uint8)
            w = cb.dequantise(raw.reshape(layers, heads, n, n))
            scores = role_scores(w / w.sum(axis=-1, keepdims=True), data["tokens"])
            roles = np.array(data["roles"], dtype=object)
            assert roles.shape == (layers, heads)
            for layer in range(layers):
                for head in range(heads):
                    label = roles[layer, head]
                    seen.add(label)
                    reached = {r for r in ROLES if scores[r][layer, head] >= THRESHOLDS[r]}
                    shares = reached - {"broad"}
                    if shares:
                        assert label == max(shares, key=lambda r: scores[r][layer, head])
                    else:
                        assert label == ("broad" if "broad" in reached else None)
    # Layer 1 head 3 reads the previous token on the case (both languages, e5), and the board's
    # words name every label the data holds, in both languages.
    for lang in ("zh", "en"):
        case = json.loads(files[f"real/e5-{lang}-case.json"])
        assert case["roles"][0][2] == "previous"
        words = json.loads(files[f"real-{lang}.json"])["words"]["roles"]
        assert {"none" if r is None else r for r in seen} <= set(words)
        assert set(words) == {*ROLES, "none"}


def test_the_role_words_have_a_long_and_a_short_form_with_the_same_placeholders():
    zh, en = cb.REAL_WORDS["zh"]["roles"], cb.REAL_WORDS["en"]["roles"]
    assert zh.keys() == en.keys()
    for key in zh:
        assert len(zh[key]) == len(en[key]) == 2
        for a, b in zip(zh[key], en[key]):
            assert sorted(_fields(a)) == sorted(_fields(b)), key


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_difference_scale_holds_a_typical_change_at_full_colour(lang):
    # "Compare with the default": at least half the settings' largest change lies within the
    # scale (its end is their median, rounded up), and the scale is finer than the values'.
    end = cb.lab_scales(lang)["difference"]["range"]
    assert end[0] == -end[1] and end[1] > 0
    changes = []
    for h in cb.LAB_HEADS:
        base = cb.lab_trace(lang, h)[0]["output"]
        for tau in (cb.TEMPERATURES[0], cb.TEMPERATURES[-1]):
            for mask, value in [("none", None), ("causal", None), ("window", 1), ("padding", 3)]:
                out = cb.lab_trace(lang, h, mask, value, tau)[0]["output"]
                changes.append(np.abs(out - base).max())
    assert 0 < end[1] < cb.lab_scales(lang)["signed"]["range"][1]
    assert 0.2 < np.mean(np.array(changes) <= end[1]) < 1.0
