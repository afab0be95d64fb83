"""mha.softmax: stable, exact zeros for -inf, zeros (not NaN) for a fully masked slice."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from helpers import DTYPES, bad_arrays, no_warnings, weights_sum_error
from mha import softmax
from tolerance import assert_within, gamma, ulps

finite_rows = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
    elements=st.floats(-50, 50, allow_nan=False),
)


def softmax_by_definition(row):
    """exp(x_i) / sum_j exp(x_j), in Python floats, straight from the definition."""
    exps = [math.exp(float(value)) for value in row]
    total = sum(exps)
    return [e / total for e in exps]


def softmax_rounding(x, input_error=0.0, dtype=np.float64):
    """Rule 1 and 2 for a softmax of ``x`` over its last axis (k terms) in ``dtype``, its inputs
    off by an absolute ``input_error``: the bound on each weight's error. Each ``x_i - max``
    rounds by u of itself, and exp turns an absolute error in its argument into a relative one
    (the term's and, in the sum, the row's largest); exp adds 4 ulp, the sum gamma(k), the
    division half an ulp, relative to the weight."""
    x = np.asarray(x, np.float64)
    k = x.shape[-1]
    u = np.finfo(dtype).eps / 2
    y = np.exp(x - x.max(axis=-1, keepdims=True))
    y /= y.sum(axis=-1, keepdims=True)
    spread = np.where(np.isfinite(x), np.abs(x - x.max(axis=-1, keepdims=True)), 0.0)
    argument = u * spread + np.asarray(input_error)  # each exp's argument is off by this much
    relative = (argument + argument.max(axis=-1, keepdims=True) + ulps(1, 4 + 1, dtype)
                + gamma(k, dtype))
    return y * relative


@given(finite_rows)
def test_matches_the_definition(x):
    expected = np.apply_along_axis(softmax_by_definition, -1, x)
    assert_within(softmax(x), expected, 2 * softmax_rounding(x))


@given(finite_rows, st.floats(-1e3, 1e3))
def test_rows_sum_to_one_and_adding_a_constant_changes_nothing(x, shift):
    y = softmax(x)
    assert (y >= 0).all()
    assert_within(y.sum(axis=-1), 1.0, weights_sum_error(x.shape[-1]))
    # x + shift rounds by u * (|x| + |shift|) per element (largest included), in both rows;
    # a softmax that did not cancel the constant would be off by far more (or overflow)
    rounded = ulps(np.abs(x).max(initial=0.0) + abs(shift), n=1)
    assert_within(softmax(x + shift), y, softmax_rounding(x, rounded) + softmax_rounding(x))


@given(DTYPES)
def test_logits_of_plus_minus_1e4_do_not_overflow(dtype):
    x = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]], dtype=dtype)
    with no_warnings():
        y = softmax(x)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y[0], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(y[1], [0.5, 0.5, 0.0])
    assert_within(y[2], 1 / 3, softmax_rounding(x[2], dtype=dtype) + ulps(1 / 3, 1, dtype))


def test_minus_inf_gives_exactly_zero():
    x = np.array([2.0, -np.inf, 0.5, -np.inf])
    y = softmax(x)
    assert y[1] == 0.0 and y[3] == 0.0
    expected = softmax_by_definition([2.0, 0.5])  # exp(-inf) = 0 adds nothing to the sum
    assert_within(y[[0, 2]], expected, 2 * softmax_rounding(x)[[0, 2]])


@given(DTYPES)
def test_fully_masked_slice_gives_zeros_without_warning(dtype):
    x = np.array([[0.3, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]], dtype=dtype)
    with no_warnings():
        y = softmax(x)
    np.testing.assert_array_equal(y[1], np.zeros(3))
    assert not np.isnan(y).any()
    assert_within(y[0].sum(), 1.0, weights_sum_error(3, dtype))


def test_naive_softmax_really_gives_nan_on_a_fully_masked_row():
    # The failure mha.softmax exists to avoid: exp(-inf - (-inf)) = exp(nan).
    row = np.full(4, -np.inf)
    with np.errstate(invalid="ignore"):
        naive = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    assert np.isnan(naive).all()
    np.testing.assert_array_equal(softmax(row), np.zeros(4))


def test_axis_argument():
    x = np.random.default_rng(0).normal(size=(3, 5))
    y = softmax(x.T).T  # the same code on another layout: NumPy may take another exp path
    assert_within(softmax(x, axis=0), y, 2 * softmax_rounding(x.T).T)
    assert_within(softmax(x, axis=0).sum(axis=0), 1.0, weights_sum_error(3))


def test_dtype_is_kept():
    for dtype in (np.float32, np.float64):
        assert softmax(np.zeros((2, 3), dtype=dtype)).dtype == dtype
    assert softmax(np.zeros((2, 3), dtype=np.float32)[:, :0]).shape == (2, 0)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_plus_inf_are_refused(bad):
    with pytest.raises(ValueError, match=r"NaN or \+inf.*shape \(3,\)"):
        softmax(np.array([0.0, bad, 1.0]))


@pytest.mark.parametrize("x, error, message", [
    row for row in bad_arrays("x", (2, 3)) if row[1] is TypeError  # NaN and inf: see above
] + [(np.array([1.0, "a"], dtype=object), TypeError, "x must be a real floating-point array")])
def test_non_float_input_is_refused(x, error, message):
    with pytest.raises(error, match=message):
        softmax(x)


@pytest.mark.parametrize("x, axis, error, message", [
    (np.zeros((2, 3)), 2, ValueError, r"axis 2 is out of range for x of shape \(2, 3\)"),
    (np.zeros((2, 3)), -3, ValueError, r"axis -3 is out of range for x of shape \(2, 3\)"),
    (np.array(1.0), 0, ValueError,
     r"axis 0 is out of range for x of shape \(\) \(a 0-d array has no axis\)"),
    (np.array(1.0), -1, ValueError, r"axis -1 is out of range for x of shape \(\)"),
    (np.zeros((2, 3)), 1.0, TypeError, "axis must be an integer, got 1.0"),
    (np.zeros((2, 3)), True, TypeError, "axis must be an integer, got True"),
    (np.zeros((2, 3)), None, TypeError, "axis must be an integer, got None"),
])
def test_bad_axis(x, axis, error, message):
    with pytest.raises(error, match=message):
        softmax(x, axis=axis)


def test_axis_may_be_a_numpy_integer():
    x = np.random.default_rng(1).normal(size=(3, 4))
    np.testing.assert_array_equal(softmax(x, axis=np.int64(0)), softmax(x, axis=0))
