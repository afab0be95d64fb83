"""Boolean masks: True = the query may attend to the key."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import BAD_INTEGERS, BAD_LENGTHS
from mha import causal_mask, padding_mask, scaled_dot_product_attention, sliding_window_mask


@given(st.integers(0, 12))
def test_causal_mask_is_its_definition(n):
    mask = causal_mask(n)
    assert mask.shape == (n, n) and mask.dtype == np.bool_
    for i in range(n):
        for j in range(n):
            assert mask[i, j] == (j <= i)


def test_sliding_window_mask_written_out():
    expected = np.array([
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1],
    ], dtype=bool)
    np.testing.assert_array_equal(sliding_window_mask(5, 2), expected)


@given(st.integers(1, 12), st.integers(0, 14))
def test_sliding_window_mask_properties(n, window):
    mask = sliding_window_mask(n, window)
    assert mask.shape == (n, n) and mask.dtype == np.bool_
    # Each query sees itself and min(i, window) earlier keys, never a later one.
    np.testing.assert_array_equal(mask.sum(axis=1), np.minimum(np.arange(n), window) + 1)
    assert not (mask & ~causal_mask(n)).any()
    if window >= n - 1:
        np.testing.assert_array_equal(mask, causal_mask(n))
    if window == 0:
        np.testing.assert_array_equal(mask, np.eye(n, dtype=bool))


def test_padding_mask_shape_and_values():
    mask = padding_mask([3, 0, 5], 5)
    assert mask.shape == (3, 1, 5) and mask.dtype == np.bool_
    np.testing.assert_array_equal(mask[:, 0], [[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])


def test_masks_combine_with_and():
    both = causal_mask(4) & padding_mask([2, 4], 4)
    assert both.shape == (2, 4, 4)
    # Sequence 0 has 2 real tokens: no query sees keys 2 or 3, and query 0 sees only key 0.
    assert not both[0, :, 2:].any()
    np.testing.assert_array_equal(both[0, 0], [1, 0, 0, 0])
    np.testing.assert_array_equal(both[1], causal_mask(4))


def test_padding_mask_hides_padding_keys_in_attention():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 2, 5, 4))  # batch of 2, 5 positions, d = 4
    out, w = scaled_dot_product_attention(q, k, v, mask=padding_mask([3, 5], 5))
    assert (w[0, :, 3:] == 0).all()
    # Padding keys are invisible: changing them does not change sequence 0's output.
    k2, v2 = k.copy(), v.copy()
    k2[0, 3:], v2[0, 3:] = 100.0, -100.0
    out2, _ = scaled_dot_product_attention(q, k2, v2, mask=padding_mask([3, 5], 5))
    # Exact: the same code on arrays of the same shapes; every visible score, weight and
    # product is computed from the same numbers, and the hidden keys add exact zeros (0 * v).
    np.testing.assert_array_equal(out2[0], out[0])


@pytest.mark.parametrize("call, error, message", [
    (lambda: padding_mask([1, 6], 5), ValueError,
     r"lengths must lie between 0 and n=5, got values from 1 to 6"),
    (lambda: padding_mask(list(range(100)), 5), ValueError,  # not a hundred numbers
     r"lengths must lie between 0 and n=5, got values from 0 to 99$"),
    (lambda: padding_mask([[1, 2]], 5), ValueError,
     r"lengths must have shape \(b,\), got shape \(1, 2\)"),
    (lambda: padding_mask(3, 5), ValueError, r"lengths must have shape \(b,\), got shape \(\)"),
    (lambda: causal_mask(10**30), ValueError, r"n=10{30} is too large: an \(n, n\) mask would"),
    (lambda: sliding_window_mask(2**40, 3), ValueError, r"n=1099511627776 is too large"),
] + [
    (lambda bad=bad: causal_mask(bad), error, "n " + message)
    for bad, error, message in BAD_INTEGERS
] + [
    (lambda bad=bad: sliding_window_mask(bad, 2), error, "n " + message)
    for bad, error, message in BAD_INTEGERS
] + [
    (lambda bad=bad: sliding_window_mask(4, bad), error, "window " + message)
    for bad, error, message in BAD_INTEGERS
] + [
    (lambda bad=bad: padding_mask([1], bad), error, "n " + message)
    for bad, error, message in BAD_INTEGERS
] + [
    (lambda bad=bad: padding_mask(bad, 6), error, message) for bad, error, message in BAD_LENGTHS
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()
