"""The overview's "why a weighted average": Nadaraya-Watson regression through mha's attention.

`mha.site.plots.intuition.nadaraya_watson` computes Gaussian-kernel regression as dot-product
attention (query ``(x, -1/2)``, keys ``(x_i, x_i**2)``, scale ``1/width**2``); these tests hold
it against the kernel formula computed directly, check the two limits of the width (the
temperature ``width**2``), and check that the overview's figure draws what it computes.
"""

import numpy as np
import pytest

from mha import scaled_dot_product_attention
from helpers import attention_error
from mha.site.plots.intuition import (QUERY, WIDTHS, nadaraya_watson, plot_pooling,
                                      pooling_data)
from tolerance import eps, gamma, ulps, assert_within

pytestmark = pytest.mark.site


def direct(x_query, x_train, y_train, width):
    """The kernel formula as written: softmax of -(x - x_i)^2 / (2 width^2), then the average,
    and the bound on its relative weight error (rule 2 of tests/tolerance.py)."""
    s = -(x_query[:, None] - x_train[None, :]) ** 2 / (2 * width ** 2)   # (m, n)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    # x - x_i, its square and the division: a few ulp of |s|; softmax doubles a score's absolute
    # error into a relative one, adds exp's 4 ulp, the division's and its sum's gamma(n).
    score_error = ulps(s, n=4).max(axis=1, keepdims=True)
    w_rel = 2 * score_error + 5 * eps() + gamma(x_train.size)
    return w @ y_train, w, w_rel


@pytest.mark.parametrize("width", [*WIDTHS, 0.3, 3.0])
def test_nadaraya_watson_through_attention_is_the_kernel_formula(width):
    data = pooling_data()
    estimate, weights = nadaraya_watson(data.x_query, data.x_train, data.y_train, width)
    expected, w_direct, w_rel_direct = direct(data.x_query, data.x_train, data.y_train, width)
    q = np.stack([data.x_query, np.full_like(data.x_query, -0.5)], axis=1)
    k = np.stack([data.x_train, data.x_train ** 2], axis=1)
    v = data.y_train[:, None]
    # The keys' x_i**2 carries an ulp of its own, passed on to the scores.
    out_error, w_error = attention_error(q, k, v, weights, scale=1 / width ** 2,
                                         input_errors=(0.0, ulps(k, n=1), 0.0))
    assert weights.shape == (data.x_query.size, data.x_train.size)
    assert_within(weights, w_direct, w_error + w_rel_direct * w_direct, "weights")
    assert_within(estimate, expected,
                  out_error[:, 0] + (w_rel_direct + gamma(data.x_train.size)).ravel()
                  * (w_direct @ np.abs(data.y_train)), "estimates")


def test_the_keys_must_carry_the_squares():
    # -(x - x_i)^2 / 2 = x x_i - x_i^2 / 2 - x^2 / 2: the dot product of (x, -1/2) with
    # (x_i, x_i^2) leaves out only -x^2 / 2, the same for every key of a query, which softmax
    # ignores. Keys without the squares (x_i, 0) give other weights: the test above can fail.
    data = pooling_data()
    _, weights = nadaraya_watson(data.x_query, data.x_train, data.y_train, 1.0)
    q = np.stack([data.x_query, np.full_like(data.x_query, -0.5)], axis=1)
    k = np.stack([data.x_train, np.zeros_like(data.x_train)], axis=1)
    _, wrong = scaled_dot_product_attention(q, k, data.y_train[:, None], scale=1.0)
    assert np.abs(wrong - weights).max() > 0.1


def test_a_narrow_kernel_is_the_nearest_point():
    data = pooling_data()
    width = 1e-3
    estimate, weights = nadaraya_watson(data.x_query, data.x_train, data.y_train, width)
    d = np.sort(np.abs(data.x_query[:, None] - data.x_train[None, :]), axis=1)
    nearest = np.abs(data.x_query[:, None] - data.x_train[None, :]).argmin(axis=1)
    # Every other point's weight is at most exp(-(d2^2 - d1^2) / 2 width^2) of the nearest one's,
    # so together they move the estimate by at most (n - 1) times that times the largest |y|.
    # Only queries whose gap makes that negligible are asked (rule 3: no near-ties).
    leak = (data.x_train.size - 1) * np.exp(-(d[:, 1] ** 2 - d[:, 0] ** 2) / (2 * width ** 2))
    clear = leak < 1e-9
    assert clear.mean() > 0.9, clear.mean()
    bound = leak[clear] * np.abs(data.y_train).max() + 1e-12
    assert_within(estimate[clear], data.y_train[nearest[clear]], bound)
    assert_within(weights[clear].max(axis=1), 1.0, leak[clear] + 1e-12)


def test_a_wide_kernel_is_the_query_blind_mean():
    data = pooling_data()
    width = 1e4
    estimate, weights = nadaraya_watson(data.x_query, data.x_train, data.y_train, width)
    # Scores lie in [-delta, 0] with delta = 5^2 / 2 width^2, so every weight is within a factor
    # e^delta of 1/n and the estimate within (e^delta - 1) max|y| of the mean.
    delta = 5.0 ** 2 / (2 * width ** 2)
    n = data.x_train.size
    assert_within(weights, 1 / n, np.expm1(2 * delta) / n + gamma(n) / n)
    assert_within(estimate, data.y_train.mean(),
                  (np.expm1(2 * delta) + gamma(n)) * np.abs(data.y_train).max())


def test_the_figure_draws_what_nadaraya_watson_computes():
    data = pooling_data()
    for lang in ("zh", "en"):
        fig = plot_pooling(data, lang)
        top, bottom = fig.axes[:2]
        curves = [line.get_ydata() for line in top.get_lines() if len(line.get_ydata()) > 2]
        rows = [line.get_ydata() for line in bottom.get_lines() if len(line.get_ydata()) > 2]
        np.testing.assert_array_equal(curves[0], data.y_true)   # the dashed true function
        for width, curve, row in zip(WIDTHS, curves[1:], rows, strict=True):
            estimate, _ = nadaraya_watson(data.x_query, data.x_train, data.y_train, width)
            _, weights = nadaraya_watson([QUERY], data.x_train, data.y_train, width)
            np.testing.assert_array_equal(curve, estimate)     # the same code on the same arrays
            np.testing.assert_array_equal(row, weights[0])
        assert len(curves) == 1 + len(WIDTHS)
    # The narrow kernel's row is concentrated, the wide one's spread: what the page says.
    rows = [nadaraya_watson([QUERY], data.x_train, data.y_train, w)[1][0] for w in WIDTHS]
    assert rows[0].max() > 0.5 > 0.05 > rows[1].max()


def test_pooling_data_is_seeded_and_sorted():
    a, b = pooling_data(), pooling_data()
    np.testing.assert_array_equal(a.y_train, b.y_train)
    assert (np.diff(a.x_train) > 0).all() and a.x_train.min() >= 0 and a.x_train.max() <= 5
