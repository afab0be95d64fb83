"""mha.chunked.chunked_attention: the plain path's output, less work under a mask, little memory."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import (BAD_FLAGS, BAD_INTEGERS, BAD_LENGTHS, BAD_QKV, BAD_SCALES, DTYPES, K, Q, V,
                     attention_error, chunked_error, chunked_inputs, no_warnings)
from mha import causal_mask, padding_mask, scaled_dot_product_attention, sliding_window_mask
from mha.chunked import chunked_attention
from mha.reference import attention_reference
from tolerance import assert_within


def dense_mask(n_q, n_k, causal=False, window=None, lengths=None):
    """The boolean mask that chunked_attention's arguments stand for, built with mha.masks.

    Shape ``(n_q, n_k)``, or ``lengths.shape + (n_q, n_k)`` with ``lengths``.
    """
    mask = np.ones((n_q, n_k), bool)
    if window is not None:
        mask = sliding_window_mask(n_k, window)
    elif causal:
        mask = causal_mask(n_k)
    if lengths is not None:  # padding_mask takes a flat (b,) array: give it back its shape
        lengths = np.asarray(lengths)
        mask = mask & padding_mask(lengths.ravel(), n_k).reshape(lengths.shape + (1, n_k))
    return mask


def assert_as_plain(out, q, k, v, mask, block_size, expected=None):
    """chunked_attention's ``out`` against the plain path (or ``expected``, another evaluation:
    the reference) on ``mask``: within its `chunked_error` and one evaluation's bound more."""
    plain, w = scaled_dot_product_attention(q, k, v, mask)
    bound = chunked_error(q, k, v, w, block_size) + attention_error(q, k, v, w)[0]
    assert_within(out, plain if expected is None else expected, bound)


def blocks_with_a_visible_pair(mask, block_size):
    """Count the (query block, key block) tiles in which some batch element sees some key."""
    n_q, n_k = mask.shape[-2:]
    seen = mask.reshape(-1, n_q, n_k).any(axis=0)  # (n_q, n_k): visible for some batch element
    return sum(seen[a:a + block_size, b:b + block_size].any()
               for a in range(0, n_q, block_size) for b in range(0, n_k, block_size))


@given(chunked_inputs())
def test_equals_the_plain_path_and_the_reference(inputs):
    q, k, v, kwargs = inputs
    with no_warnings():
        out, stats = chunked_attention(q, k, v, **kwargs, return_stats=True)
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = dense_mask(n_q, n_k, kwargs["causal"], kwargs["window"], kwargs["lengths"])
    reference, _ = attention_reference(q, k, v, mask)
    assert out.shape == reference.shape and out.dtype == q.dtype
    assert_as_plain(out, q, k, v, mask, kwargs["block_size"])
    assert_as_plain(out, q, k, v, mask, kwargs["block_size"], reference)
    # A tile is computed exactly when the mask lets some query of it see some key of it.
    block_size = kwargs["block_size"]
    assert stats["blocks_total"] == -(-n_q // block_size) * -(-n_k // block_size)
    assert stats["blocks_visited"] == blocks_with_a_visible_pair(np.asarray(mask), block_size)


@pytest.mark.parametrize("structure", [
    {}, {"causal": True}, {"window": 0}, {"window": 3}, {"causal": True, "lengths": [10, 0, 4]},
    {"window": 2, "lengths": [1, 7, 10]}, {"lengths": [0, 10, 5]},
])
@pytest.mark.parametrize("block_size", range(1, 13))  # every size from 1 to larger than n = 10
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_block_size_gives_the_plain_result(structure, block_size, dtype):
    rng = np.random.default_rng(block_size)
    q, k = rng.normal(size=(2, 3, 2, 10, 8)).astype(dtype)  # (b, h, n, d_k): b = 3, h = 2
    v = rng.normal(size=(3, 2, 10, 5)).astype(dtype)
    lengths = structure.get("lengths")
    kwargs = dict(structure, lengths=None if lengths is None else np.array(lengths)[:, None])
    mask = dense_mask(10, 10, kwargs.get("causal", False), kwargs.get("window"),
                      kwargs["lengths"])
    with no_warnings():
        out = chunked_attention(q, k, v, **kwargs, block_size=block_size)
    assert out.dtype == dtype
    assert_as_plain(out, q, k, v, mask, block_size)


@pytest.mark.parametrize("block_size", [1, 2, 3, 7, 11, 512])
def test_more_queries_than_keys_and_fewer(block_size):
    rng = np.random.default_rng(5)
    for n_q, n_k in [(7, 11), (11, 7), (1, 9), (9, 1)]:
        q = rng.normal(size=(2, n_q, 4))
        k, v = rng.normal(size=(2, 2, n_k, 4))
        lengths = np.array([n_k, n_k // 2])
        out = chunked_attention(q, k, v, lengths=lengths, block_size=block_size)
        mask = dense_mask(n_q, n_k, lengths=lengths)
        assert_as_plain(out, q, k, v, mask, block_size, attention_reference(q, k, v, mask)[0])


def test_heads_split_from_d_model_as_strided_views():
    # The way a multi-head layer hands them over: (n, d_model) -> (h, n, d_k) views, not copies.
    rng = np.random.default_rng(6)
    x = rng.normal(size=(3, 40, 32)).astype(np.float32)  # (b, n, d_model)
    heads = x.reshape(3, 40, 4, 8).transpose(0, 2, 1, 3)  # (b, h, n, d_k), strided
    assert not heads.flags.c_contiguous
    out = chunked_attention(heads, heads[:, ::-1], heads, causal=True, block_size=16)
    assert_as_plain(out, heads, heads[:, ::-1], heads, causal_mask(40), 16)


# ---- the online softmax of the Notes, step by step -----------------------------------------------

def test_the_notes_formulas_are_what_the_code_computes():
    rng = np.random.default_rng(7)
    q, k = rng.normal(size=(2, 6, 4))
    v = rng.normal(size=(6, 3))
    s = q @ k.T / 2.0  # s_ij = scale q_i . k_j, scale = 1/sqrt(4)
    m, l_sum, o = np.full((6, 1), -np.inf), np.zeros((6, 1)), np.zeros((6, 3))
    for block in (slice(0, 2), slice(2, 4), slice(4, 6)):  # B_1, B_2, B_3
        m_new = np.maximum(m, s[:, block].max(axis=1, keepdims=True))
        p = np.exp(s[:, block] - m_new)
        l_sum = np.exp(m - m_new) * l_sum + p.sum(axis=1, keepdims=True)
        o = np.exp(m - m_new) * o + p @ v[block]
        m = m_new
    notes_error = chunked_error(q, k, v, np.exp(s) / np.exp(s).sum(axis=1, keepdims=True), 2)
    assert_within(chunked_attention(q, k, v, block_size=2), o / l_sum, 2 * notes_error)
    reference, w = attention_reference(q, k, v)
    assert_within(o / l_sum, reference, notes_error + attention_error(q, k, v, w)[0])


# ---- zeros for queries that see nothing, dtypes, stability ---------------------------------------

@given(DTYPES, st.integers(1, 6))
def test_a_query_that_sees_no_key_gets_zeros_without_warning(dtype, block_size):
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(3, 3, 6, 4)).astype(dtype)  # (b, n, d) with b = 3
    lengths = np.array([0, 3, 6])  # sequence 0 is all padding: none of its queries sees a key
    with no_warnings():
        out = chunked_attention(q, k, v, causal=True, lengths=lengths, block_size=block_size)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out[0], np.zeros((6, 4), dtype))
    assert np.isfinite(out).all()
    assert_as_plain(out, q, k, v, dense_mask(6, 6, True, lengths=lengths), block_size)


def test_no_keys_at_all_and_no_queries_at_all():
    out = chunked_attention(np.ones((2, 3, 4)), np.ones((2, 0, 4)), np.ones((2, 0, 5)))
    np.testing.assert_array_equal(out, np.zeros((2, 3, 5)))
    out, stats = chunked_attention(np.ones((0, 4)), np.ones((0, 4)), np.ones((0, 5)),
                                   causal=True, return_stats=True)
    assert out.shape == (0, 5) and stats["blocks_total"] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scale", [None, 0.5, np.float64(0.5)])
def test_dtype_in_is_dtype_out(dtype, scale):
    rng = np.random.default_rng(9)
    q, k, v = rng.normal(size=(3, 2, 9, 8)).astype(dtype)
    out = chunked_attention(q, k, v, causal=True, lengths=np.array([9, 4]), block_size=4,
                            scale=scale)
    assert out.dtype == dtype


def test_float32_is_computed_in_float32_throughout(monkeypatch):
    # Not only the output: every array that reaches NumPy's kernels stays float32 (a float64
    # scalar slipped into the scale would silently turn the tiles into float64).
    seen = set()
    for name in ("matmul", "exp", "subtract", "divide", "max", "sum", "copyto"):
        def spy(*args, _original=getattr(np, name), **kwargs):
            arrays = [a for a in (*args, kwargs.get("out")) if isinstance(a, np.ndarray)]
            seen.update(a.dtype for a in arrays if a.dtype.kind == "f")
            return _original(*args, **kwargs)
        monkeypatch.setattr(np, name, spy)
    rng = np.random.default_rng(14)
    q, k, v = rng.normal(size=(3, 2, 20, 8)).astype(np.float32)
    out = chunked_attention(q, k, v, window=6, lengths=np.array([20, 9]), block_size=8,
                            scale=0.3)
    monkeypatch.undo()
    assert out.dtype == np.float32
    assert seen == {np.dtype(np.float32)}


def test_mixed_dtypes_follow_numpy_promotion():
    rng = np.random.default_rng(10)
    q, k = rng.normal(size=(2, 5, 4)).astype(np.float32)
    v = rng.normal(size=(5, 3))
    assert chunked_attention(q, k, v, block_size=2).dtype == np.float64


@given(DTYPES, st.integers(1, 8))
def test_large_scores_stay_finite_and_exact(dtype, block_size):
    # Scores in the hundreds: exp() of them would overflow, exp(s - m) never does.
    rng = np.random.default_rng(11)
    q, k, v = (rng.normal(size=(3, 8, 16)) * np.array([10.0, 10.0, 1.0])[:, None, None])
    q, k, v = q.astype(dtype), k.astype(dtype), v.astype(dtype)
    assert np.abs(q @ k.T / 4).max() > 100
    with no_warnings():
        out = chunked_attention(q, k, v, block_size=block_size)
    assert_as_plain(out, q, k, v, None, block_size, attention_reference(q, k, v)[0])


def test_scores_that_overflow_are_refused():
    big = np.full((4, 8), 1e20, np.float32)  # q . k / sqrt(8) ~ 3e40 > float32's 3.4e38
    with pytest.raises(ValueError, match=r"the attention scores overflowed float32 \(q \(4, 8\), "
                                         r"k \(4, 8\)\).*or compute in float64"):
        chunked_attention(big, big, big)


# ---- the work shrinks with the mask ------------------------------------------------------------

N_BLOCKS = 8
BLOCK = 4
N = N_BLOCKS * BLOCK  # 32 tokens in 8 blocks of 4: 64 (query block, key block) tiles


@pytest.mark.parametrize("kwargs, visited, masked", [
    # No mask: every tile, none masked.
    ({}, 64, 0),
    # Causal: the tiles on and below the diagonal, 8 + 7 + ... + 1 = 8 * 9 / 2 = 36; only the 8
    # diagonal tiles hold keys after some of their queries.
    ({"causal": True}, 36, 8),
    # window = 0: each query sees only itself, so only the 8 diagonal tiles, all masked.
    ({"window": 0}, 8, 8),
    # window = block size 4: query block t (queries 4t .. 4t+3) sees keys 4t-4 .. 4t+3, i.e. key
    # blocks t-1 and t: 2 tiles per query block, 1 for the first: 1 + 7 * 2 = 15, all masked.
    ({"window": BLOCK}, 15, 15),
    # window = 5: query 4t+3 still reaches no further back than 4t-2, query 4t to 4t-5, the last
    # key of block t-2: 3 tiles per query block from t = 2 on: 1 + 2 + 6 * 3 = 21, all masked.
    ({"window": BLOCK + 1}, 21, 21),
    # Lengths 8 and 16: key blocks 4 to 7 (keys 16 .. 31) are padding in both sequences and
    # skipped: 8 * 4 = 32 tiles; key blocks 2 and 3 (keys 8 .. 15) are padding in the first
    # sequence only, so they are masked: 8 * 2 = 16.
    ({"lengths": [8, 16]}, 32, 16),
    # Causal and lengths 8 and 16: the causal tiles with key block <= 3: 1 + 2 + 3 + 4 * 5 = 26;
    # masked: the diagonal tiles of query blocks 0 .. 3 (4) plus the tiles of key blocks 2 and 3
    # below the diagonal (query blocks 3 .. 7 for key block 2 and 4 .. 7 for key block 3: 9).
    ({"causal": True, "lengths": [8, 16]}, 26, 13),
])
def test_masks_skip_the_tiles_they_hide(kwargs, visited, masked):
    rng = np.random.default_rng(12)
    q, k, v = rng.normal(size=(3, 2, N, 4))  # (b, n, d), b = 2
    out, stats = chunked_attention(q, k, v, **kwargs, block_size=BLOCK, return_stats=True)
    assert stats == {"blocks_total": 64, "blocks_visited": visited, "blocks_masked": masked}
    mask = dense_mask(N, N, kwargs.get("causal", False), kwargs.get("window"),
                      kwargs.get("lengths"))
    assert blocks_with_a_visible_pair(mask, BLOCK) == visited  # the same count from the mask
    assert_as_plain(out, q, k, v, mask, BLOCK)


# ---- memory ------------------------------------------------------------------------------------

def test_peak_memory_is_far_below_the_score_matrix():
    n, d, block_size = 4096, 64, 512
    rng = np.random.default_rng(13)
    q, k, v = rng.normal(size=(3, n, d)).astype(np.float32)  # made before tracing: not counted
    tracemalloc.start()
    try:
        out = chunked_attention(q, k, v, block_size=block_size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    extra = peak - out.nbytes  # everything but the output
    scores = n * n * 4  # the n x n float32 score matrix of the plain path: 64 MiB
    assert scores == 64 * 2**20
    assert extra < 16 * 2**20, f"{extra / 2**20:.1f} MiB beyond the output"
    assert out.dtype == np.float32


# ---- bad input: the type, and a message naming the argument and the shapes -------------------

SQUARE = np.zeros((2, 6, 8))


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((Q, K, V), {"block_size": 0}, ValueError, r"block_size must be >= 1, got 0"),
    ((SQUARE, K, V), {"window": -1}, ValueError, r"window must be >= 0, got -1"),
    ((Q, K, V), {"causal": True}, ValueError,
     r"causal=True needs queries and keys at the same positions \(n_q == n_k\), "
     r"got q \(2, 4, 8\) and k \(2, 6, 8\)"),
    ((Q, K, V), {"window": 2}, ValueError,
     r"window=2 needs queries and keys at the same positions \(n_q == n_k\), got q \(2, 4, 8\)"),
    ((Q, K, V), {"window": 10**30}, ValueError, r"window=10{30} needs queries and keys"),
    ((Q, K, V), {"lengths": [1, 2, 3]}, ValueError,
     r"shapes do not broadcast for the lengths: lengths \(3,\), "
     r"the batch shape \(...\) of q, k and v \(2,\)"),
    ((Q, K, V), {"lengths": np.ones((3, 2), int)}, ValueError,
     r"lengths of shape \(3, 2\) must broadcast to the batch shape \(...\) of q, k and v \(2,\) "
     r"without enlarging it"),
] + [
    ((Q, K, V), {"block_size": bad}, error, "block_size " + message)
    for bad, error, message in BAD_INTEGERS
] + [
    ((SQUARE, K, V), {"window": bad}, error, "window " + message)
    for bad, error, message in BAD_INTEGERS if bad is not None  # window=None: no window
] + [
    ((Q, K, V), {flag: bad}, TypeError, f"{flag} " + message)
    for flag in ("causal", "return_stats") for bad, message in BAD_FLAGS
] + [
    ((Q, K, V), {"lengths": bad}, error, message) for bad, error, message in BAD_LENGTHS
] + [
    ((Q, K, V), {"scale": bad}, error, message) for bad, error, message in BAD_SCALES
] + [
    # The checks shared with scaled_dot_product_attention, with the same messages.
    (args, {}, error, message) for args, error, message in BAD_QKV
])
def test_bad_input_is_refused_with_a_clear_message(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        chunked_attention(*args, **kwargs)
