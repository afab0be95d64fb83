"""The positions chapter's experiments and figures: the numbers they draw have the properties the
pages claim (the table depends on distance only, RoPE's scores on m - n only, a swap without
positions only moves the weights), and every label is in its language."""

import re

import numpy as np
import pytest
from matplotlib.patches import Rectangle

import mha
from mha.site.experiments import (position_table_experiment, relative_scores_experiment,
                                  walkthrough, word_order_experiment)
from mha.site.plots import FIGURES, LANGUAGES, term
from mha.site.plots.case import CASE_ORDER, CASE_TOKENS, CAST, EMBEDDING_ROWS
from mha.site.plots.positions import SWAP
from helpers import weights_sum_error
from test_positions import pair_sums, rope_error, score_error, sinusoid_error_scale
from tolerance import assert_within, gamma, matmul_bound, ulps

pytestmark = pytest.mark.site  # the site's experiments and plots (matplotlib), not the core

NAMES = ("positions-table", "positions-rope", "positions-shuffle")


def figure_texts(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


def test_the_figures_are_registered_with_their_sources():
    from mha.site.plots import DEPENDS

    for name in NAMES:
        assert name in FIGURES and "site/plots/positions.py" in DEPENDS[name]
        assert "site/experiments.py" in DEPENDS[name]


# ---- positions-table ------------------------------------------------------------------------

def test_the_table_is_mha_s_and_the_dot_product_depends_on_distance_only():
    r = position_table_experiment()
    np.testing.assert_array_equal(r.table, mha.sinusoidal_positions(64, 64))
    assert r.dots.shape == (len(r.starts), len(r.distances)) and len(r.starts) >= 3
    # rule 2: each table entry within its angle's error, a dot product of 64 terms
    pe = mha.sinusoidal_positions(int(r.starts.max()) + len(r.distances), 64)
    pe_error = ulps(sinusoid_error_scale(len(pe), 64, 1e4), n=1)
    error = np.stack([score_error(pe[p + r.distances], pe[p][None], pe_error[p + r.distances],
                                  pe_error[p][None])[:, 0] for p in r.starts])
    assert_within(r.dots, r.dots[0], error + error[0])          # the same curve for every p
    zero = int(np.flatnonzero(r.distances == 0)[0])
    assert (r.dots.argmax(axis=1) == zero).all()                             # peak at k = 0 ...
    assert_within(r.dots[:, zero], 64 / 2, error[:, zero])                   # ... of d_model / 2
    assert np.delete(r.dots[0], zero).max() < 32 - 1                         # a clear peak
    assert_within(r.dots[0], r.dots[0][::-1], error[0] + error[0][::-1])     # even in k
    # The formula of the Notes: sum over pairs of cos(k / 10000^(2i/d)), 32 cosines each
    # within its angle's error.
    omega = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    cos_error = (ulps(sinusoid_error_scale(1, 64, 1e4, r.distances)[:, ::2], n=1).sum(axis=1)
                 + gamma(32) * 32)
    assert_within(r.dots[0], np.cos(np.outer(r.distances, omega)).sum(axis=1),
                  error[0] + cos_error)


def test_the_table_experiment_refuses_a_start_too_close_to_zero():
    with pytest.raises(ValueError, match="max_distance=64"):
        position_table_experiment(starts=(10, 200))


# ---- positions-rope -------------------------------------------------------------------------

def relative_scores_error(r, seed=0):
    """Rule 2 for `relative_scores_experiment`'s RoPE scores, ``(s, K)``: the same q and k
    (computed again here as the experiment does) rotated to their positions, each rotation
    within `rope_error`, a product over d_k terms and a scaling."""
    e_q, e_k = np.random.default_rng(seed).normal(size=(2, r.d_k))
    layer = mha.MultiHeadAttention(r.d_k, 1, seed=seed + 1)
    q, k = e_q @ layer.W_Q[:, 0, :], e_k @ layer.W_K[:, 0, :]
    q_m = np.tile(q, (len(r.distances), 1))
    return np.stack([score_error(mha.rope(q_m, n + r.distances), mha.rope(k[None], [n]),
                                 rope_error(q_m, n + r.distances), rope_error(k[None], [n]))[:, 0]
                     for n in r.starts]) / np.sqrt(r.d_k)


def test_rope_scores_depend_on_the_distance_only_and_added_positions_do_not():
    r = relative_scores_experiment()
    assert r.rope.shape == r.absolute.shape == (3, 65) and r.d_k == 64
    assert r.starts.tolist() == [0, 100, 1000]
    assert_within(r.rope, r.rope[0], relative_scores_error(r) + relative_scores_error(r)[0])
    spread = np.abs(r.rope[0]).max()
    for row in r.absolute[1:]:
        assert np.abs(row - r.absolute[0]).max() > 0.5 * spread   # visibly other curves
    assert not np.allclose(r.rope[0], r.rope[0][0])                # not a flat line either


def test_rope_scores_are_those_of_a_rope_layer():
    """The figure's RoPE curve is what `MultiHeadAttention(rope=True)` computes: a sequence with
    the key token at position 0 and the query token at position m gives the score at m."""
    r = relative_scores_experiment(max_distance=8)
    e_q, e_k = np.random.default_rng(0).normal(size=(2, 64))
    layer = mha.MultiHeadAttention(64, 1, seed=1, rope=True)
    x = np.vstack([e_k, np.tile(e_q, (8, 1))])                      # (9, 64): key, then queries
    stages = layer.trace(x)
    # rule 2: the layer projects a matrix, the experiment a vector (each within matmul_bound
    # of the exact q and k, so twice it apart), both rotate and score (twice the error each)
    q_error = pair_sums(2 * matmul_bound(x, layer.W_Q[:, 0, :])) + 2 * rope_error(stages["q"][0])
    k_error = pair_sums(2 * matmul_bound(x, layer.W_K[:, 0, :])) + 2 * rope_error(stages["k"][0])
    error = 2 * score_error(stages["q"][0], stages["k"][0], q_error, k_error) / np.sqrt(64)
    assert_within(stages["scores"][0][1:, 0], r.rope[0, 1:], error[1:, 0])


# ---- positions-shuffle ----------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGUAGES)
def test_without_positions_the_swap_only_moves_the_weights(lang):
    r = word_order_experiment(CASE_ORDER[lang], swap=SWAP)
    original, swapped = r.orders
    assert list(original) == CASE_ORDER[lang]
    key, desk = (EMBEDDING_ROWS[row][0 if lang == "zh" else 1] for row in SWAP)
    words = [EMBEDDING_ROWS[row][0 if lang == "zh" else 1] for row in swapped]
    expected = [desk if t == key else key if t == desk else t for t in CASE_TOKENS[lang]]
    assert words == expected                               # the desk under the key
    assert [original[i] for i in r.perm] == list(swapped)
    assert [original[r.query[0]], swapped[r.query[1]]] == [SWAP[0], SWAP[0]]   # "key" asks
    # Without positions: the same numbers, moved with the words (up to the rounding of the
    # softmax's sum, which adds the same n numbers in another order: rule 2, on each side).
    n = r.plain.shape[-1]
    assert_within(r.plain[1], r.plain[0][r.perm], 2 * gamma(n + 1) * r.plain[0][r.perm])
    assert np.abs(r.plain[1] - r.plain[0]).max() > 0.05    # and they did move
    # With positions: not the same numbers in any order.
    assert np.abs(np.sort(r.positioned[1]) - np.sort(r.positioned[0])).max() > 0.02
    assert np.abs(r.positioned[1] - r.positioned[0][r.perm]).max() > 0.05
    for weights in (r.plain, r.positioned):
        assert_within(weights.sum(axis=1), 1, weights_sum_error(n))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_shuffle_uses_the_walkthrough_s_layer(lang):
    r = word_order_experiment(CASE_ORDER[lang], swap=SWAP)
    weights = walkthrough(CASE_ORDER[lang], n_layers=1)[0]["weights"]   # (h, n, n)
    np.testing.assert_array_equal(r.plain[0], weights[r.head, r.query[0]])
    x = walkthrough(CASE_ORDER[lang], n_layers=1)[0]["x"]
    layer = mha.MultiHeadAttention(16, 4, seed=1)
    _, w = layer(x + mha.sinusoidal_positions(8, 16), return_weights=True)
    np.testing.assert_array_equal(r.positioned[0], w[r.head, r.query[0]])


def test_the_swap_must_name_two_words_that_occur_once():
    with pytest.raises(ValueError, match="occurs 3 times"):
        word_order_experiment(CASE_ORDER["en"], swap=(0, 7))      # "the" is there three times


# ---- the figures ----------------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGUAGES)
def test_figures_use_the_glossary_s_words(lang):
    table = figure_texts(FIGURES["positions-table"](lang))
    rope = figure_texts(FIGURES["positions-rope"](lang))
    shuffle = figure_texts(FIGURES["positions-shuffle"](lang))
    lower = {key: term(key, lang).lower() for key in ("sinusoidal_encoding", "rope",
                                                     "dot_product", "attention_score")}
    assert lower["sinusoidal_encoding"] in table.lower() and lower["dot_product"] in table.lower()
    assert lower["rope"] in rope.lower() and lower["attention_score"] in rope.lower()
    assert term("relative_position", lang).lower() in rope.lower()
    assert term("positional_encoding", lang).lower() in shuffle.lower()
    assert getattr(CAST[2], lang).lower() in shuffle.lower()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_shuffle_figure_shows_both_sentences_and_every_weight(lang):
    fig = FIGURES["positions-shuffle"](lang)
    r = word_order_experiment(CASE_ORDER[lang], swap=SWAP)
    text = figure_texts(fig)
    for weights in (r.plain, r.positioned):
        for value in weights.ravel():
            assert f"{value:.3f}" in text
    top, bottom = fig.axes[:2]
    for ax in (top, bottom):
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == CASE_TOKENS[lang]                       # the case's own tokens
        boxes = [p for p in ax.patches if type(p) is Rectangle]
        assert sorted(int(b.get_y() + 0.5) for b in boxes) == sorted(r.query)
    if lang == "zh":
        assert re.search("钥匙", text) and "key" not in text
