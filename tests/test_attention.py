"""mha.scaled_dot_product_attention against the slow reference, its properties, and bad input."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import DTYPES, assert_close, attention_inputs, no_warnings
from mha import attention_scores, causal_mask, scaled_dot_product_attention, softmax
from mha.reference import attention_reference


@given(attention_inputs())
def test_fast_path_equals_reference(inputs):
    q, k, v, mask, kind = inputs
    out, w = scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_w = attention_reference(q, k, v, mask)
    assert out.shape == ref_out.shape
    # The weights broadcast over q, k and the mask only; the reference also spreads them over v.
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2],
                               () if mask is None else mask.shape[:-2])
    assert w.shape == lead + ref_w.shape[-2:]
    assert out.dtype == q.dtype and w.dtype == q.dtype
    assert_close(np.broadcast_to(w, ref_w.shape), ref_w)
    assert_close(out, ref_out)


@given(attention_inputs())
def test_rows_sum_to_one_and_hidden_keys_get_exactly_zero(inputs):
    q, k, v, mask, kind = inputs
    with no_warnings():
        _, w = scaled_dot_product_attention(q, k, v, mask)
    visible = np.ones(w.shape, bool) if mask is None else np.broadcast_to(
        mask if mask.dtype == np.bool_ else mask == 0, w.shape)
    assert (w[~visible] == 0).all()
    assert (w >= 0).all()
    sums = w.sum(axis=-1)
    any_visible = visible.any(axis=-1)
    assert_close(sums[any_visible], np.ones(any_visible.sum()))
    assert (sums[~any_visible] == 0).all()  # a query that sees nothing gets no weight at all


@given(DTYPES)
def test_fully_masked_query_gives_zero_output_without_warning(dtype):
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(3, 4, 5)).astype(dtype)
    mask = causal_mask(4)
    mask[2] = False  # query 2 may look at nothing
    with no_warnings():
        out, w = scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_array_equal(out[2], np.zeros(5))
    np.testing.assert_array_equal(w[2], np.zeros(4))
    assert np.isfinite(out).all()


@given(st.integers(2, 7), st.integers(0, 2**32 - 1))
def test_permutation_equivariance(n, seed):
    # Reordering the keys with their values changes nothing; reordering queries reorders rows.
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(3, n, 4))
    perm = rng.permutation(n)
    out, w = scaled_dot_product_attention(q, k, v)
    out_p, w_p = scaled_dot_product_attention(q[perm], k[perm], v[perm])
    np.testing.assert_allclose(out_p, out[perm], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w_p, w[perm][:, perm], rtol=1e-10, atol=1e-12)


def test_boolean_and_additive_masks_agree():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 2, 5, 4))
    boolean = causal_mask(5)
    additive = np.where(boolean, 0.0, -np.inf)
    out_b, w_b = scaled_dot_product_attention(q, k, v, boolean)
    out_a, w_a = scaled_dot_product_attention(q, k, v, additive)
    np.testing.assert_array_equal(w_b, w_a)
    np.testing.assert_array_equal(out_b, out_a)


def test_default_scale_is_one_over_sqrt_d_k():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 4, 16))
    out, w = scaled_dot_product_attention(q, k, v)
    expected_w = np.exp(q @ k.T / 4.0)  # sqrt(16) = 4
    expected_w /= expected_w.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(w, expected_w, rtol=1e-12)
    np.testing.assert_allclose(out, expected_w @ v, rtol=1e-12)
    _, w_scaled = scaled_dot_product_attention(q, k, v, scale=1.0)
    assert not np.allclose(w_scaled, w)
    assert_close(w_scaled, attention_reference(q, k, v, scale=1.0)[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_in_is_dtype_out(dtype):
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(3, 2, 6, 8)).astype(dtype)
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(6), scale=0.5)
    assert out.dtype == dtype and w.dtype == dtype
    out, w = scaled_dot_product_attention(q, k, v, np.where(causal_mask(6), 0.0, -np.inf))
    assert out.dtype == dtype and w.dtype == dtype


# ---- bad input: the type, and a message naming the argument and the shapes -------------------

Q = np.zeros((2, 4, 8))
K = np.zeros((2, 6, 8))
V = np.zeros((2, 6, 5))


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((Q, np.zeros((2, 6, 7)), V), {}, ValueError,
     r"q and k must share their last dimension d_k, got q \(2, 4, 8\) and k \(2, 6, 7\)"),
    ((Q, K, np.zeros((2, 5, 5))), {}, ValueError,
     r"k and v must have the same number of keys n_k .*got k \(2, 6, 8\) and v \(2, 5, 5\)"),
    ((np.zeros((3, 4, 8)), K, V), {}, ValueError,
     r"leading \(batch, head\) dimensions of q, k and v: q \(3,\), k \(2,\), v \(2,\)"),
    ((np.zeros(8), K, V), {}, ValueError, r"q must have shape \(..., n_q, d_k\) .*got shape \(8,\)"),
    ((Q, K, V), {"mask": np.ones((4, 5), bool)}, ValueError,
     r"shapes do not broadcast for the mask: mask \(4, 5\), scores \(..., n_q, n_k\) \(2, 4, 6\)"),
    ((Q, K, V), {"mask": np.ones((3, 2, 4, 6), bool)}, ValueError,
     r"mask of shape \(3, 2, 4, 6\) must broadcast to scores .* \(2, 4, 6\) without enlarging"),
    ((Q, K, V), {"mask": np.tril(np.ones((4, 6)))}, ValueError,
     r"float mask must hold only 0 \(attend\) and -inf \(hide\); got other values such as \[1.0\]"),
    ((Q, K, V), {"mask": np.ones((4, 6), int)}, TypeError,
     r"mask must be boolean \(True = attend\) or float \(0 / -inf\), got dtype int64"),
    ((Q.astype(int), K, V), {}, TypeError,
     r"q must be a real floating-point array .*got dtype int64 with shape \(2, 4, 8\)"),
    ((Q, K.astype(complex), V), {}, TypeError, r"k must be a real floating-point .*complex128"),
    ((Q, K, V.astype(object)), {}, TypeError, r"v must be a real floating-point .*object"),
    ((np.full((2, 4, 8), np.nan), K, V), {}, ValueError,
     r"q must contain only finite values, got NaN or inf in an array of shape \(2, 4, 8\)"),
    ((Q, np.full((2, 6, 8), np.inf), V), {}, ValueError, r"k must contain only finite values"),
    ((Q, K, V), {"scale": float("nan")}, TypeError, "scale must be a finite real number, got nan"),
    ((Q, K, V), {"scale": "big"}, TypeError, "scale must be a finite real number, got 'big'"),
])
def test_bad_input_is_refused_with_a_clear_message(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        scaled_dot_product_attention(*args, **kwargs)


@given(attention_inputs())
def test_attention_scores_are_what_softmax_turns_into_the_weights(inputs):
    q, k, v, mask, kind = inputs
    scores = attention_scores(q, k)
    d_k = q.shape[-1]
    qb, kb = np.broadcast_arrays(q[..., :, None, :], k[..., None, :, :])
    by_definition = (qb.astype(float) * kb).sum(axis=-1) / np.sqrt(d_k)  # sum_t q_it k_jt
    assert scores.dtype == np.result_type(q, k)
    assert_close(scores, by_definition)
    assert_close(softmax(scores), scaled_dot_product_attention(q, k, v)[1])
    np.testing.assert_allclose(attention_scores(q, k, scale=1.0), scores * np.sqrt(d_k),
                               **{"rtol": 1e-4, "atol": 1e-4} if q.dtype == np.float32 else {})


def test_attention_scores_refuses_bad_input():
    with pytest.raises(ValueError, match=r"q and k must share their last dimension d_k"):
        attention_scores(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"leading \(batch, head\) dimensions of q and k"):
        attention_scores(np.zeros((2, 3, 4)), np.zeros((3, 3, 4)))
    with pytest.raises(TypeError, match="scale must be a finite real number"):
        attention_scores(np.zeros((2, 3)), np.zeros((2, 3)), scale=np.inf)
