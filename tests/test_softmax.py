"""mha.softmax: stable, exact zeros for -inf, zeros (not NaN) for a fully masked slice."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from helpers import DTYPES, assert_close, bad_arrays, no_warnings
from mha import softmax

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


@given(finite_rows)
def test_matches_the_definition(x):
    expected = np.apply_along_axis(softmax_by_definition, -1, x)
    assert_close(softmax(x), expected)


@given(finite_rows, st.floats(-1e3, 1e3))
def test_rows_sum_to_one_and_adding_a_constant_changes_nothing(x, shift):
    y = softmax(x)
    assert (y >= 0).all()
    assert_close(y.sum(axis=-1), np.ones(x.shape[:-1]))
    np.testing.assert_allclose(softmax(x + shift), y, rtol=1e-9, atol=1e-12)


@given(DTYPES)
def test_logits_of_plus_minus_1e4_do_not_overflow(dtype):
    x = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]], dtype=dtype)
    with no_warnings():
        y = softmax(x)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y[0], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(y[1], [0.5, 0.5, 0.0])
    assert_close(y[2], np.full(3, 1 / 3))


def test_minus_inf_gives_exactly_zero():
    x = np.array([2.0, -np.inf, 0.5, -np.inf])
    y = softmax(x)
    assert y[1] == 0.0 and y[3] == 0.0
    assert_close(y[[0, 2]], softmax_by_definition([2.0, 0.5]))


@given(DTYPES)
def test_fully_masked_slice_gives_zeros_without_warning(dtype):
    x = np.array([[0.3, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]], dtype=dtype)
    with no_warnings():
        y = softmax(x)
    np.testing.assert_array_equal(y[1], np.zeros(3))
    assert not np.isnan(y).any()
    assert_close(y[0].sum(), 1.0)


def test_naive_softmax_really_gives_nan_on_a_fully_masked_row():
    # The failure mha.softmax exists to avoid: exp(-inf - (-inf)) = exp(nan).
    row = np.full(4, -np.inf)
    with np.errstate(invalid="ignore"):
        naive = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    assert np.isnan(naive).all()
    np.testing.assert_array_equal(softmax(row), np.zeros(4))


def test_axis_argument():
    x = np.random.default_rng(0).normal(size=(3, 5))
    np.testing.assert_allclose(softmax(x, axis=0), softmax(x.T).T)
    assert_close(softmax(x, axis=0).sum(axis=0), np.ones(5))


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
