"""The edges of the API: overflow, no keys, huge and odd arguments, float16, odd layouts.

Each test names what used to go wrong: a silently wrong answer (zeros where the scores had
overflowed), a crash with NumPy's message instead of one naming the argument, or a refusal of a
valid input.
"""

import numpy as np
import pytest

from helpers import TOLERANCE, attention_error, chunked_error, layer_error, no_warnings
from mha import (MultiHeadAttention, attention_scores, causal_mask, padding_mask,
                 scaled_dot_product_attention, sliding_window_mask, softmax)
from mha.chunked import chunked_attention
from mha.reference import attention_reference
from tolerance import assert_within, ulps


def identity_layer(d_model):
    """One head whose queries and values are the tokens themselves, and keys their negatives."""
    layer = MultiHeadAttention(d_model, 1, seed=0)
    eye = np.eye(d_model)[:, None, :]  # (d_model, h=1, d_k=d_model)
    layer.W_Q, layer.W_K, layer.W_V = eye, -eye, eye
    layer.W_O = np.eye(d_model)
    return layer


# ---- scores that overflow: an error naming dtype and shapes, in every path, never zeros ----------

# float16: q . k / sqrt(4) = 100 * (-200) * 4 = -80000, beyond float16's -65504: every score of
# every query is -inf, which looked like "this query may see nothing" and gave zeros.
Q16 = np.full((3, 4), 200, np.float16)
K16 = np.full((5, 4), -200, np.float16)
V16 = np.ones((5, 2), np.float16)
# float32: 5e19 * (-1e20) * 4 = -2e40, beyond float32's -3.4e38.
Q32 = np.full((3, 4), 1e20, np.float32)
K32 = np.full((5, 4), -1e20, np.float32)
V32 = np.ones((5, 2), np.float32)
OVERFLOW = r"the attention scores overflowed {} \(q \({}\), k \({}\)\): .*scale them down"


@pytest.mark.parametrize("call, message", [
    (lambda: scaled_dot_product_attention(Q16, K16, V16),
     OVERFLOW.format("float16", "3, 4", "5, 4")),
    (lambda: scaled_dot_product_attention(Q32, K32, V32),
     OVERFLOW.format("float32", "3, 4", "5, 4")),
    (lambda: scaled_dot_product_attention(Q32, K32, V32, causal_mask(5)[:3]),
     OVERFLOW.format("float32", "3, 4", "5, 4")),
    (lambda: chunked_attention(Q32, K32, V32), OVERFLOW.format("float32", "3, 4", "5, 4")),
    (lambda: chunked_attention(Q32, K32, V32, block_size=2), OVERFLOW.format("float32", "3, 4",
                                                                             "5, 4")),
    (lambda: chunked_attention(Q32[:3], K32[:3], V32[:3], window=1, lengths=np.array(3)),
     OVERFLOW.format("float32", "3, 4", "3, 4")),
    (lambda: attention_scores(Q16, K16), OVERFLOW.format("float16", "3, 4", "5, 4")),
    (lambda: attention_scores(-Q32, K32), OVERFLOW.format("float32", "3, 4", "5, 4")),  # +inf
    (lambda: identity_layer(4)(Q16), OVERFLOW.format("float16", "1, 3, 4", "1, 3, 4")),
    (lambda: identity_layer(4).trace(Q16), OVERFLOW.format("float16", "1, 3, 4", "1, 3, 4")),
    (lambda: identity_layer(4)(Q16[:2], context=Q16), OVERFLOW.format("float16", "1, 2, 4",
                                                                       "1, 3, 4")),
])
def test_scores_that_overflow_are_refused_in_every_path(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_advice_fits_the_dtype():
    with pytest.raises(ValueError, match=r"scale them down, or compute in float64$"):
        scaled_dot_product_attention(Q16, K16, V16)
    big = np.full((3, 4), 1e200)
    with pytest.raises(ValueError, match=r"overflowed float64 .*scale them down$"):
        scaled_dot_product_attention(big, -big, big)


def test_a_query_that_sees_nothing_is_not_an_overflow():
    # Query 0's scores overflow, but the mask hides every key from it: zeros, as for any query
    # that may see nothing. Query 1's scores are ordinary.
    q = np.array([[200] * 4, [0.1] * 4], np.float16)
    mask = np.array([[False] * 5, [True] * 5])
    with no_warnings():
        out, w = scaled_dot_product_attention(q, K16, V16, mask)
    np.testing.assert_array_equal(w[0], np.zeros(5))
    np.testing.assert_array_equal(out[0], np.zeros(2))
    # five equal scores (the keys are equal): exp(0) = 1 each, 1 / 5 rounded once: exact
    np.testing.assert_array_equal(w[1], np.full(5, 0.2, np.float16))
    out = chunked_attention(q[:, None], K16, V16, lengths=np.array([0, 5]))
    np.testing.assert_array_equal(out[0], np.zeros((1, 2)))


def test_chunked_computes_float16_in_float32_so_these_scores_do_not_overflow():
    out = chunked_attention(Q16, K16, np.arange(10, dtype=np.float16).reshape(5, 2))
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, np.full((3, 2), [4, 5], np.float16))  # the mean of v


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_scale_is_checked_in_the_inputs_dtype(dtype):
    # Finite as a Python float, infinite once cast to the dtype the scores are computed in.
    scale = {np.float16: 1e5, np.float32: 1e39}[dtype]
    q = np.ones((2, 4), dtype)
    message = rf"scale must be a finite number in {np.dtype(dtype)} \(the inputs' dtype\)"
    for call in (lambda: scaled_dot_product_attention(q, q, q, scale=scale),
                 lambda: chunked_attention(q, q, q, scale=scale),
                 lambda: attention_scores(q, q, scale=scale)):
        with pytest.raises(ValueError, match=message):
            call()


def test_the_output_of_the_layer_may_not_overflow_either():
    # q k^T = 0, but v = x W_V = 300 * 100 * 4 = 120000 > 65504: the heads are inf.
    layer = identity_layer(4)
    layer.W_Q[:] = 0
    layer.W_V = np.full((4, 1, 4), 100.0)
    x = np.full((3, 4), 300, np.float16)
    with pytest.raises(ValueError,
                       match=r"the attention output overflowed float16 \(v \(1, 3, 4\)"):
        layer(x)


def test_the_layer_refuses_an_output_projection_that_overflows():
    layer = identity_layer(4)
    layer.W_O = np.full((4, 4), 1000.0)  # heads of 100: 100 * 1000 * 4 = 400000 > 65504
    x = np.full((3, 4), 100, np.float16)
    assert np.isfinite(layer.trace(x.astype(np.float32))["heads"]).all()
    with pytest.raises(ValueError, match=r"the layer's output overflowed float16 \(x \(3, 4\), "
                                         r"context \(3, 4\)\)"):
        layer(x)


def test_chunked_running_sums_that_overflow_are_refused():
    # Four equal scores: o sums four values of 3e38 before dividing by 4, beyond float32.
    v = np.full((4, 1), 3e38, np.float32)
    q = np.zeros((1, 2), np.float32)
    assert scaled_dot_product_attention(q, q.repeat(4, 0), v)[0] == np.float32(3e38)
    with pytest.raises(ValueError, match=r"the attention output overflowed float32 \(v \(4, 1\)\)"):
        chunked_attention(q, q.repeat(4, 0), v)


# ---- a hidden key's score never matters, however the mask is written -----------------------------

# Query 0 against key 2 is 1e200 * 1e200 = inf; causally hidden. Every other score is finite.
Q_HIDDEN = np.array([[1e200] * 2, [1.0] * 2, [1.0] * 2])
K_HIDDEN = np.array([[1.0] * 2, [1.0] * 2, [1e200] * 2])
V_HIDDEN = np.arange(6.0).reshape(3, 2)


@pytest.mark.parametrize("mask", [causal_mask(3), np.where(causal_mask(3), 0.0, -np.inf),
                                  causal_mask(3).tolist()])
def test_boolean_and_additive_masks_agree_on_an_overflowing_hidden_score(mask):
    out, w = scaled_dot_product_attention(Q_HIDDEN, K_HIDDEN, V_HIDDEN, mask)
    np.testing.assert_array_equal(w[0], [1, 0, 0])
    np.testing.assert_array_equal(out[0], V_HIDDEN[0])
    np.testing.assert_array_equal(w[1], [0.5, 0.5, 0])
    # Query 2 sees key 2 with score 1e200 / sqrt(2): all its weight.
    np.testing.assert_array_equal(w[2], [0, 0, 1])
    np.testing.assert_array_equal(chunked_attention(Q_HIDDEN, K_HIDDEN, V_HIDDEN, causal=True),
                                  out)
    reference, _ = attention_reference(Q_HIDDEN, K_HIDDEN, V_HIDDEN, np.asarray(mask))
    np.testing.assert_array_equal(reference, out)


def test_the_layer_agrees_too():
    layer = identity_layer(4)
    layer.W_K = -layer.W_K  # k = x
    x = np.array([[200] * 4, [0.01] * 4], np.float16)  # only query 0 against key 0 overflows
    hidden_first = np.array([[False, True], [False, True]])
    boolean = layer(x, hidden_first, return_weights=True)
    additive = layer(x, np.where(hidden_first, 0.0, -np.inf), return_weights=True)
    for a, b in zip(boolean, additive):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(boolean[1][0], [[0, 1], [0, 1]])


# ---- no keys, no queries -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_no_keys_gives_zero_outputs_and_empty_weights(dtype, lead):
    q = np.ones(lead + (4, 3), dtype)
    k, v = np.ones(lead + (0, 3), dtype), np.ones(lead + (0, 5), dtype)
    with no_warnings():
        out, w = scaled_dot_product_attention(q, k, v)
        masked_out, masked_w = scaled_dot_product_attention(q, k, v, np.ones((4, 0), bool))
        chunked = chunked_attention(q, k, v)
    for array, shape in ((out, (4, 5)), (w, (4, 0)), (masked_out, (4, 5)), (masked_w, (4, 0)),
                         (chunked, (4, 5))):
        assert array.shape == lead + shape and array.dtype == dtype
    for array in (out, masked_out, chunked):
        np.testing.assert_array_equal(array, np.zeros(lead + (4, 5)))


@pytest.mark.parametrize("x_shape, context_shape", [((3, 8), (0, 8)), ((2, 3, 8), (2, 0, 8))])
def test_a_layer_with_no_keys_gives_zeros(x_shape, context_shape):
    layer = MultiHeadAttention(8, 2, seed=0)
    x = np.random.default_rng(0).normal(size=x_shape)
    with no_warnings():
        out, w = layer(x, context=np.zeros(context_shape), return_weights=True)
        stages = layer.trace(x, context=np.zeros(context_shape))
    np.testing.assert_array_equal(out, np.zeros(x_shape))
    assert w.shape == x_shape[:-2] + (2, x_shape[-2], 0)
    assert stages["scores"].shape == w.shape
    np.testing.assert_array_equal(stages["output"], out)


def test_no_queries_gives_empty_results():
    k = np.ones((4, 3))
    out, w = scaled_dot_product_attention(np.ones((0, 3)), k, np.ones((4, 2)))
    assert out.shape == (0, 2) and w.shape == (0, 4)
    assert chunked_attention(np.ones((0, 3)), k, np.ones((4, 2))).shape == (0, 2)
    assert MultiHeadAttention(8, 2, seed=0)(np.ones((0, 8))).shape == (0, 8)
    assert softmax(np.ones((0, 3))).shape == (0, 3)


# ---- huge, odd and empty arguments ---------------------------------------------------------------

@pytest.mark.parametrize("window", [4, 5, 10**30, 2**63, np.uint64(2**64 - 1)])
def test_a_window_of_any_size_beyond_n_is_causal(window):
    np.testing.assert_array_equal(sliding_window_mask(5, window), causal_mask(5))
    q, k, v = np.random.default_rng(1).normal(size=(3, 2, 5, 4))
    np.testing.assert_array_equal(chunked_attention(q, k, v, window=window, block_size=2),
                                  chunked_attention(q, k, v, causal=True, block_size=2))


def test_an_empty_list_of_lengths_is_no_sequences():
    for empty in ([], (), np.array([], int), np.array([], np.uint8)):
        mask = padding_mask(empty, 3)
        assert mask.shape == (0, 1, 3) and mask.dtype == np.bool_
    q = np.ones((0, 2, 4))
    assert chunked_attention(q, q, q, lengths=[]).shape == (0, 2, 4)


@pytest.mark.parametrize("seed", [0, 5, np.int64(5), np.uint8(5), 2**70])
def test_valid_seeds_give_the_weights_default_rng_draws(seed):
    layer = MultiHeadAttention(8, 2, seed=seed)
    rng = np.random.default_rng(int(seed))
    np.testing.assert_array_equal(layer.W_Q, rng.normal(0, np.sqrt(2 / 16), size=(8, 2, 4)))
    for same_seed in (np.random.default_rng(int(seed)), np.random.PCG64(int(seed)),
                      np.random.SeedSequence(int(seed))):
        same = MultiHeadAttention(8, 2, seed=same_seed)
        np.testing.assert_array_equal(same.W_O, layer.W_O)


def test_scale_may_be_a_0d_array_or_a_numpy_scalar():
    q, k, v = np.random.default_rng(2).normal(size=(3, 4, 6))
    expected = scaled_dot_product_attention(q, k, v, scale=0.3)
    for scale in (np.array(0.3), np.float64(0.3), np.array([[0.3]])[0, 0]):
        for a, b in zip(scaled_dot_product_attention(q, k, v, scale=scale), expected):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(chunked_attention(q, k, v, scale=np.array(0.3)),
                                  chunked_attention(q, k, v, scale=0.3))


# ---- float16 -------------------------------------------------------------------------------------

def test_softmax_of_a_float16_row_longer_than_65504():
    # exp(0) = 1 summed 70000 times is beyond float16: the sum is taken in float32.
    with no_warnings():
        y = softmax(np.zeros((2, 70000), np.float16))
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, np.float16(1 / 70000))
    with no_warnings():
        _, w = scaled_dot_product_attention(np.ones((1, 2), np.float16),
                                            np.ones((70000, 2), np.float16),
                                            np.ones((70000, 1), np.float16))
    np.testing.assert_array_equal(w, np.float16(1 / 70000))


def test_scores_further_apart_than_the_dtype_reaches_need_no_warning():
    # x - max(x) below -65504 is -inf in float16, and exp(-inf) = 0: the exact answer, so no
    # "overflow encountered in subtract" on the way.
    with no_warnings():
        np.testing.assert_array_equal(softmax(np.array([60000, -60000], np.float16)), [1, 0])
        np.testing.assert_array_equal(softmax(np.array([1e308, -1e308])), [1, 0])
        _, w = scaled_dot_product_attention(np.full((1, 2), 200, np.float16),
                                            np.array([[150] * 2, [-150] * 2], np.float16),
                                            np.ones((2, 1), np.float16))
        # Scores +-30000 (float16): 1.3e19^2 * sqrt(2) = +-2.4e38 (float32, in chunked_attention).
        q = np.full((1, 2), 1.3e19, np.float32)
        k = np.array([[-1.3e19] * 2, [1.3e19] * 2], np.float32)
        out = chunked_attention(q, k, np.array([[0.0], [1.0]], np.float32), block_size=1)
    np.testing.assert_array_equal(w, [[1, 0]])
    np.testing.assert_array_equal(out, [[1.0]])


def test_chunked_float16_running_sums_do_not_overflow():
    # p @ v over 600 keys of value 1000 is 600000 before the division: beyond float16.
    q = np.zeros((600, 4), np.float16)
    v = np.full((600, 4), 1000, np.float16)
    with no_warnings():
        out = chunked_attention(q, q, v)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, v)


@pytest.mark.parametrize("causal", [False, True])
def test_float16_paths_agree_with_the_reference(causal):
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 2, 37, 8)).astype(np.float16)
    mask = causal_mask(37) if causal else None
    reference, ref_w = attention_reference(q.astype(float), k.astype(float), v.astype(float),
                                           mask)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert out.dtype == w.dtype == np.float16
    # float16 (u = 4.9e-4), not a sum-of-k bound: NumPy's float16 products and mha's float16
    # sums accumulate in float32 and round once, so each stage is off by ~u of its result; the
    # 8-term scores (up to ~4) by ~2e-3, which exp makes a relative error of the weights (twice:
    # the row's largest), a few u more, and the 37-term weighted sum (of N(0, 1) values) one u
    # more: ~6e-3 relative, so TOLERANCE's 2e-2 relative and 2e-3 absolute leave ~3x
    np.testing.assert_allclose(out, reference, **TOLERANCE[np.dtype(np.float16)])
    np.testing.assert_allclose(w, ref_w, **TOLERANCE[np.dtype(np.float16)])
    chunked = chunked_attention(q, k, v, causal=causal, block_size=8)  # float32, then rounded
    np.testing.assert_allclose(chunked, reference, **TOLERANCE[np.dtype(np.float16)])


# ---- layouts: any strides, read-only and broadcast views -----------------------------------------

def layouts(a):
    """``a`` as other memory layouts holding the same values."""
    reversed_twice = np.ascontiguousarray(a[..., ::-1, :])[..., ::-1, :]  # negative strides
    read_only = a.copy()
    read_only.setflags(write=False)
    return {"fortran": np.asfortranarray(a), "reversed": reversed_twice, "read_only": read_only,
            "strided": np.repeat(a, 2, axis=-1)[..., ::2],
            "broadcast": np.broadcast_to(a, (2,) + a.shape)[1]}


def test_every_layout_gives_the_same_result():
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(3, 2, 9, 4))
    mask = causal_mask(9)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    chunked = chunked_attention(q, k, v, causal=True, block_size=4)
    layer = MultiHeadAttention(4, 2, seed=0)
    y, y_w = layer(q[0], mask, return_weights=True)
    out_error, w_error = attention_error(q, k, v, w)
    for name, (lq, lk, lv) in {name: (layouts(q)[name], layouts(k)[name], layouts(v)[name])
                               for name in layouts(q)}.items():
        l_out, l_w = scaled_dot_product_attention(lq, lk, lv, layouts(mask)[name])
        # Another layout may take another BLAS kernel and sum order (rule 2): each side errs
        # by at most one evaluation's bound
        assert_within(l_out, out, 2 * out_error, err_msg=name)
        assert_within(l_w, w, 2 * w_error, err_msg=name)
        assert_within(chunked_attention(lq, lk, lv, causal=True, block_size=4), chunked,
                      2 * chunked_error(q, k, v, w, 4), err_msg=name)
        assert_within(layer(lq[0], mask), y, 2 * layer_error(layer, q[0], y_w), err_msg=name)
        # a strided layout may take NumPy's scalar exp and another order of the 9-term sum:
        # up to 4 ulp (exp) + 9 (sum) + 1 (division) of each weight, on each side (rule 1)
        assert_within(softmax(lq, axis=1), softmax(q, axis=1),
                      ulps(softmax(q, axis=1), n=2 * (4 + 9 + 1)), err_msg=name)
    assert not layouts(q)["read_only"].flags.writeable  # inputs are read, never written


def test_the_inputs_are_left_as_they_were():
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(3, 2, 6, 4))
    mask = np.where(causal_mask(6), 0.0, -np.inf)
    copies = [a.copy() for a in (q, k, v, mask)]
    scaled_dot_product_attention(q, k, v, mask)
    chunked_attention(q, k, v, causal=True, block_size=4)
    softmax(q)
    attention_scores(q, k)
    for before, after in zip(copies, (q, k, v, mask)):
        np.testing.assert_array_equal(before, after)
