"""The real models' kept runs (`mha.site.model_runs`, ``mha/site/data/``) hold what the models
compute today: each model runs afresh here, with today's code, sentences and weights, and every
kept number must match, within the error of the computation (``tests/tolerance.py``), so that a
kept run never goes stale unseen. The build draws the real heads from the kept runs only.

Each model's float32 forward pass is within its ``ATTENTION_TOL`` of the float64 reference
(``tests/test_minilm.py``, ``tests/test_e5.py``), so two runs on different BLAS kernels agree
within twice that, `DELTA`, on every attention weight. A score that sums ``m`` weights per query
is then within ``m * DELTA``; a normalised entropy over ``n`` keys within
``n * DELTA * ln(1 / DELTA) / ln(n)`` (``-x ln x`` moves by at most ``d ln(1/d)`` when ``x``
moves by ``d <= 1/e``). What thresholds decide (a head's role, the sentences it plays it in) is
compared wherever the fresh value is farther than its bound from the threshold (rule 3).

Remake the kept runs with ``python -m mha.site.model_runs --save`` when this fails.
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest
from test_e5 import ATTENTION_TOL as E5_ATTENTION_TOL
from test_minilm import ATTENTION_TOL as MINILM_ATTENTION_TOL
from tolerance import assert_within, eps

from mha.site import caseboard as cb
from mha.site import model_runs
from mha.site.head_roles import (ROLES, THRESHOLDS, HeadRoleStudy, WordLinks,
                                 is_punctuation_token)

pytestmark = pytest.mark.model

#: Two runs of a model agree within this on every attention weight (the module docstring).
DELTA = {"minilm": 2 * MINILM_ATTENTION_TOL, "e5": 2 * E5_ATTENTION_TOL}
#: What keeping a value as float32 adds (half an ulp of a value up to 1).
STORED = eps(np.float32) / 2
#: The fixture that loads each model (skipped without its package, failed under CI).
FIXTURE = {"minilm": "model", "e5": "e5"}


_FRESH: dict[str, dict] = {}


@pytest.fixture(scope="module", params=sorted(model_runs.MODELS))
def runs(request):
    """``(key, kept, fresh)``: a model's kept run and the same run made now."""
    key = request.param
    return key, *kept_and_fresh(key, request)


def kept_and_fresh(key: str, request) -> tuple[dict, dict]:
    """Model ``key``'s kept run and the same run made now (once per session)."""
    request.getfixturevalue(FIXTURE[key])
    if key not in _FRESH:
        _FRESH[key] = model_runs.compute(key)
    return model_runs.kept_run(key), _FRESH[key]


def score_bounds(tokens: list[list[str]], delta: float, special) -> np.ndarray:
    """The error bound of every score of `mha.site.head_roles.role_scores`, ``(s, roles, 1,
    1)``, for sentences of these tokens when every weight is within ``delta``."""
    bounds = []
    for t in tokens:
        n = len(t)
        shares = {"previous": 1, "next": 1, "self": 1, "cls": t.count(special.start),
                  "sep": t.count(special.end),
                  "punctuation": sum(map(is_punctuation_token, t))}
        broad = n * delta * math.log(1 / delta) / math.log(n)
        bounds.append([shares[r] * delta for r in ROLES[:-1]] + [broad])
    return np.array(bounds)[:, :, None, None] + STORED


def decided(values: np.ndarray, threshold, bound) -> np.ndarray:
    """Where ``values >= threshold`` cannot be flipped by an error of ``bound`` (rule 3)."""
    return np.abs(values - threshold) > bound


def test_every_model_is_kept_and_checked():
    assert set(model_runs.KEPT_RUNS) == set(model_runs.MODELS) == set(FIXTURE) == set(cb.MODELS)


def test_the_kept_run_is_of_these_sentences_tokens_and_weights(runs):
    key, kept, fresh = runs
    for field in ("version", "model", "weights_sha256", "special_tokens"):
        assert kept[field] == fresh[field], field
    for field in ("sentences", "tokens"):
        assert kept["study"][field] == fresh["study"][field], field
    assert kept["example"]["text"] == fresh["example"]["text"] == model_runs.EXAMPLES[key]
    assert kept["example"]["tokens"] == fresh["example"]["tokens"]
    assert ("word_links" in kept) == ("word_links" in fresh) == (key == "e5")


def test_the_kept_scores_are_todays_study(runs):
    key, kept, fresh = runs
    ours, theirs = (model_runs.decode_array(run["study"]["scores"]) for run in (kept, fresh))
    special = model_runs.kept_study(key).special_tokens
    bound = score_bounds(fresh["study"]["tokens"], DELTA[key], special)   # (s, roles, 1, 1)
    assert ours.shape == theirs.shape
    assert_within(ours, theirs, bound, f"{key}: kept study scores")
    # What the thresholds decide, wherever today's scores decide it.
    kept_study = model_runs.kept_study(key)
    study = HeadRoleStudy.from_scores(fresh["study"]["sentences"], fresh["study"]["tokens"],
                                      theirs, special)
    threshold = np.array([THRESHOLDS[r] for r in ROLES])[:, None, None]
    sure = decided(theirs, threshold, bound)                             # (s, roles, layers, h)
    np.testing.assert_array_equal(kept_study.plays[sure], study.plays[sure])
    mean_bound = bound.max(axis=0)                                       # (roles, 1, 1)
    role_sure = decided(study.mean, threshold, mean_bound).all(axis=0)   # (layers, h)
    np.testing.assert_array_equal(kept_study.role[role_sure], study.role[role_sure])
    own = np.maximum(study.role, 0)[None, None]                          # (1, 1, layers, h)
    stable_sure = role_sure & np.take_along_axis(sure, own, axis=1)[:, 0].all(axis=0)
    np.testing.assert_array_equal(kept_study.stable[stable_sure], study.stable[stable_sure])
    np.testing.assert_array_equal(kept_study.clear[stable_sure], study.clear[stable_sure])
    assert stable_sure.mean() > 0.9      # the comparison leaves out only a few near-ties


def test_the_kept_example_is_todays_forward_pass(runs):
    key, kept, fresh = runs
    ours, theirs = (model_runs.decode_array(run["example"]["attentions"])
                    for run in (kept, fresh))
    assert_within(ours, theirs, DELTA[key] + STORED, f"{key}: kept example attentions")


def test_the_kept_word_links_are_todays(request):
    key = "e5"                                      # the model that reads Chinese words
    kept, fresh = kept_and_fresh(key, request)
    ours, theirs = kept["word_links"], fresh["word_links"]
    for field in ("words", "pairs", "control"):
        assert ours[field] == theirs[field], field
    bound = DELTA[key] + STORED                     # a mean of single weights
    for field in ("within", "across"):
        assert_within(model_runs.decode_array(ours[field]),
                      model_runs.decode_array(theirs[field]), bound, field)
    # Which heads link the pieces of words, wherever today's numbers decide it.
    links = model_runs.kept_word_links()
    today = WordLinks(links.words, tuple(map(tuple, fresh["study"]["tokens"])),
                      tuple(map(tuple, theirs["pairs"])), tuple(map(tuple, theirs["control"])),
                      model_runs.decode_array(theirs["within"]),
                      model_runs.decode_array(theirs["across"]))
    threshold = THRESHOLDS["previous"]
    sure = (decided(today.mean_within, threshold, bound)
            & decided(today.mean_across, threshold, bound)
            & decided(today.within[today.split], threshold, bound).all(axis=0))
    np.testing.assert_array_equal(links.clear[sure], today.clear[sure])
    assert sure.mean() > 0.9


def test_the_kept_case_board_files_are_todays_attention(runs, request):
    key, _, _ = runs
    model = request.getfixturevalue(FIXTURE[key])
    kept = cb.real_files()
    sentences = [s for s in cb.SENTENCES if key in s.models]
    assert {f"real/{key}-{s.id}.json" for s in sentences} == {
        name for name in kept if name.startswith(f"real/{key}-")}
    for sentence in sentences:
        data = json.loads(kept[f"real/{key}-{sentence.id}.json"])
        out = model.forward(sentence.text)                     # attentions (layers, h, n, n)
        assert data["tokens"] == out.tokens and data["text"] == sentence.text
        assert (data["layers"], data["heads"], data["n"]) == (*out.attentions.shape[:2],
                                                               len(out.tokens))
        weights = np.frombuffer(base64.b64decode(data["weights"]), np.uint8)
        weights = cb.dequantise(weights.reshape(out.attentions.shape))
        # Within half a quantisation step of today's weights, give or take two runs' error.
        assert_within(weights, out.attentions, 0.5 / 255 + DELTA[key], sentence.id)
