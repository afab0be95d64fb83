"""mha.scaled_dot_product_attention against the slow reference, its properties, and bad input."""

import ast
import importlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import (BAD_MASKS, BAD_QKV, BAD_SCALES, DTYPES, K, Q, V,
                     attention_error, attention_inputs, no_warnings, weights_sum_error)
from mha import attention_scores, causal_mask, scaled_dot_product_attention, softmax
from mha.reference import attention_reference
from tolerance import assert_within, gamma


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
    out_error, w_error = attention_error(q, k, v, ref_w)  # the reference's: float64, or the same
    assert_within(np.broadcast_to(w, ref_w.shape), ref_w, 2 * w_error)
    assert_within(out, ref_out, 2 * out_error)


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
    assert_within(sums[any_visible], 1.0, weights_sum_error(w.shape[-1], w.dtype))
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
    out_error, w_error = attention_error(q, k, v, w)  # the sums run in another order
    assert_within(out_p, out[perm], 2 * out_error[perm])
    assert_within(w_p, w[perm][:, perm], 2 * w_error[perm][:, perm])


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
    out_error, w_error = attention_error(q, k, v, expected_w)  # two float64 evaluations
    assert_within(w, expected_w, 2 * w_error)
    assert_within(out, expected_w @ v, 2 * out_error)
    _, w_scaled = scaled_dot_product_attention(q, k, v, scale=1.0)
    assert not np.allclose(w_scaled, w)
    ref_w = attention_reference(q, k, v, scale=1.0)[1]
    assert_within(w_scaled, ref_w, 2 * attention_error(q, k, v, ref_w, scale=1.0)[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_in_is_dtype_out(dtype):
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(3, 2, 6, 8)).astype(dtype)
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(6), scale=0.5)
    assert out.dtype == dtype and w.dtype == dtype
    out, w = scaled_dot_product_attention(q, k, v, np.where(causal_mask(6), 0.0, -np.inf))
    assert out.dtype == dtype and w.dtype == dtype


# ---- bad input: the type, and a message naming the argument and the shapes -------------------

@pytest.mark.parametrize("args, kwargs, error, message", [
    (args, {}, error, message) for args, error, message in BAD_QKV
] + [
    ((Q, K, V), {"mask": np.ones((4, 5), bool)}, ValueError,
     r"shapes do not broadcast for the mask: mask \(4, 5\), scores \(..., n_q, n_k\) \(2, 4, 6\)"),
    ((Q, K, V), {"mask": np.ones((3, 2, 4, 6), bool)}, ValueError,
     r"mask of shape \(3, 2, 4, 6\) must broadcast to scores .* \(2, 4, 6\) without enlarging"),
] + [
    ((Q, K, V), {"mask": mask[:4]}, error, message) for mask, error, message in BAD_MASKS
] + [
    ((Q, K, V), {"scale": scale}, error, message) for scale, error, message in BAD_SCALES
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
    dot_sizes = np.abs(qb.astype(float) * kb).sum(axis=-1) / np.sqrt(d_k)
    assert_within(scores, by_definition, 2 * gamma(d_k + 2, scores.dtype) * dot_sizes)  # scaled
    # The very scores scaled_dot_product_attention uses: its weights, bit for bit.
    np.testing.assert_array_equal(softmax(scores), scaled_dot_product_attention(q, k, v)[1])
    # Both sum d_k products (gamma(d_k) of |q| |k|^T), one scaled and multiplied back (2 more)
    assert_within(attention_scores(q, k, scale=1.0), scores * np.sqrt(d_k),
                  2 * gamma(d_k + 3, scores.dtype) * dot_sizes * np.sqrt(d_k))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("d_k, scale", [(3, None), (5, None), (7, 0.3), (6, 1 / 3)])
def test_attention_scores_equal_the_scores_of_attention_bit_for_bit(dtype, d_k, scale):
    # Scales that are not powers of 2, so (q k^T) * scale and (q * scale) k^T round differently:
    # the two functions must do the one computation, as attention_scores' docstring says.
    rng = np.random.default_rng(d_k)
    q, k = rng.normal(size=(2, 3, 40, d_k)).astype(dtype)
    v = rng.normal(size=(3, 40, 2)).astype(dtype)
    mask = rng.random((40, 40)) < 0.7
    scores = attention_scores(q, k, scale=scale)
    _, w = scaled_dot_product_attention(q, k, v, scale=scale)
    np.testing.assert_array_equal(softmax(scores), w)
    _, w = scaled_dot_product_attention(q, k, v, mask, scale=scale)
    np.testing.assert_array_equal(softmax(np.where(mask, scores, -np.inf)), w)


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((args[0], args[1]), {}, error, message) for args, error, message in BAD_QKV
    if "v" not in message.split(" must")[0] and "k and v" not in message
] + [
    ((np.zeros((2, 3, 4)), np.zeros((3, 3, 4))), {}, ValueError,
     r"leading \(batch, head\) dimensions of q and k: q \(2,\), k \(3,\)"),
] + [
    ((Q, K), {"scale": scale}, error, message) for scale, error, message in BAD_SCALES
])
def test_attention_scores_refuses_bad_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        attention_scores(*args, **kwargs)


# ---- where the code lives ------------------------------------------------------------------------

CORE = Path(importlib.import_module("mha").__file__).parent


def top_level_functions(module: str) -> list[str]:
    tree = ast.parse((CORE / f"{module}.py").read_text(encoding="utf-8"))
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]


def test_the_input_checks_live_in_one_module():
    for module in ("attention", "chunked", "masks", "multihead"):
        own = [name for name in top_level_functions(module)
               if name.lstrip("_").startswith(("check", "as_"))]
        assert own == [], f"mha/{module}.py defines its own checks: {own}"
    # One lengths check, for padding_mask and chunked_attention alike.
    checks = importlib.import_module("mha._checks")
    for module in ("masks", "chunked"):
        assert importlib.import_module(f"mha.{module}").check_lengths is checks.check_lengths


def test_attention_py_reads_from_the_maths_down_to_the_thread_pool():
    names = top_level_functions("attention")
    assert names[:3] == ["softmax", "attention_scores", "scaled_dot_product_attention"]
    assert names.index("_scores") < names.index("_attend") < names.index("_softmax_inplace")
    source = (CORE / "attention.py").read_text(encoding="utf-8")
    assert source.index("map_rows(") > source.index("def _softmax_inplace")  # the kernel's only
