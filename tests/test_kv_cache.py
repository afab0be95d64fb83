"""Grouped-query and multi-query attention (``MultiHeadAttention(..., kv_heads=)``) and the
key/value cache (``mha.KVCache``, ``forward(..., cache=)``): against the loop-over-heads
reference, a full-``h`` layer with repeated key/value weights, PyTorch golden values (made by
tests/golden/make_gqa_golden.py), finite differences, one causal forward over the whole sequence,
and bad input.

Tolerances (rule 2 of tests/tolerance.py): a layer's output against PyTorch's or against the
same layer run another way (cached decoding, one full forward, the loop-over-heads reference)
within twice one evaluation's bound, `helpers.layer_error`, since only the order of the
products changes (attention weights likewise); gradients against PyTorch within GOLDEN_TOL.
Finite differences as in tests/test_backward.py (central, step 1e-6, agreeing to ~1e-9).
"""

import copy
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import in_threads, layer_error, no_warnings, numeric_gradient, weights_sum_error
from mha import KVCache, MultiHeadAttention
from mha.reference import multi_head_attention_reference, rope_reference
from tolerance import assert_within, gamma, matmul_bound

GOLDEN = np.load(Path(__file__).parent / "golden" / "gqa.npz")
TORCH_MHA = np.load(Path(__file__).parent / "golden" / "torch_mha.npz")
# Rule 2 for the golden cases' gradients (float64 only), backward chains a few products deep
# over k <= 24 terms (d_model 16, h * d_v <= 24, n <= 10, batches <= 3): inputs <= 3.6 times
# weights <= 1.2, or gradients <= 53, give sums of sizes up to ~300, gamma(24) * 300 = 8e-13
# per product: 1e-12 absolute and relative.
GOLDEN_TOL = {np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12}}
FD_TOL = {"rtol": 1e-6, "atol": 1e-7}  # finite differences' ~1e-9 (step 1e-6), 100x
WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")


def causal(n: int) -> np.ndarray:
    """The causal rule written out here (not with mha.masks): token i sees keys 0..i."""
    return np.arange(n)[None, :] <= np.arange(n)[:, None]


def copy_of(layer: MultiHeadAttention, **kwargs) -> MultiHeadAttention:
    """A new layer of ``layer``'s sizes (``kwargs`` may change them) with copies of its weights."""
    sizes = dict(d_model=layer.d_model, h=layer.h, d_k=layer.d_k, d_v=layer.d_v,
                 rope=layer.rope, kv_heads=layer.kv_heads) | kwargs
    fresh = MultiHeadAttention(**sizes, seed=12345)
    for name in WEIGHTS:
        setattr(fresh, name, getattr(layer, name).copy())
    return fresh


def repeated(layer: MultiHeadAttention) -> MultiHeadAttention:
    """The same layer with one key/value head per query head: W_K and W_V repeated, each
    key/value head once for every query head of its group (np.repeat along the head axis)."""
    group = layer.h // layer.kv_heads
    full = copy_of(layer, kv_heads=layer.h)
    full.W_K = np.repeat(layer.W_K, group, axis=1)  # (d_model, h, d_k): heads 0,0,1,1,... for g=2
    full.W_V = np.repeat(layer.W_V, group, axis=1)
    return full


def run_in_chunks(layer, x, sizes, mask=None, cache=None):
    """``x`` fed through ``layer`` with a cache, ``sizes[i]`` tokens at a time; ``mask``, if
    given, is the ``(..., n, n)`` mask of the whole sequence, of which each call gets its rows
    and the columns up to its last token. Returns the outputs joined along the tokens."""
    cache = KVCache() if cache is None else cache
    outputs, start = [], 0
    for size in sizes:
        end = start + size
        part = None if mask is None else mask[..., start:end, :end]
        outputs.append(layer(x[..., start:end, :], part, cache=cache))
        start = end
    return np.concatenate(outputs, axis=-2), cache


def assert_as_one_forward(out, layer, x, mask, rows=slice(None), context=None):
    """``out`` (``layer`` run another way: with a cache, in pieces) against ``layer(x, mask)``
    rows ``rows``: within twice one evaluation's `layer_error` (rule 2)."""
    whole, w = layer(x, mask, context=context, return_weights=True)
    bound = 2 * layer_error(layer, x, w, context)
    assert_within(out, whole[..., rows, :], bound[..., rows, :])


# ---- kv_heads: construction, shapes, grouping ---------------------------------------------------

@pytest.mark.parametrize("h, d_model, d_k, d_v",
                         [(4, 16, None, None), (3, 9, 5, 2), (1, 4, None, None)])
def test_default_kv_heads_draws_exactly_the_weights_of_before(h, d_model, d_k, d_v):
    plain = MultiHeadAttention(d_model, h, d_k, d_v, seed=7)
    explicit = MultiHeadAttention(d_model, h, d_k, d_v, seed=7, kv_heads=h)
    none = MultiHeadAttention(d_model, h, d_k, d_v, seed=7, kv_heads=None)
    for name in WEIGHTS:
        np.testing.assert_array_equal(getattr(explicit, name), getattr(plain, name))
        np.testing.assert_array_equal(getattr(none, name), getattr(plain, name))
    assert explicit.kv_heads == none.kv_heads == plain.kv_heads == h
    assert repr(explicit) == repr(plain)  # kv_heads only shows when it differs from h


@pytest.mark.parametrize("name", ["causal", "cross", "padding"])
def test_kv_heads_equal_to_h_matches_the_existing_torch_golden(name):
    g = lambda key: TORCH_MHA[f"{name}/{key}"]  # noqa: E731
    x = g("x")
    h = g("W_Q").shape[1]
    layer = MultiHeadAttention(x.shape[-1], h, g("W_Q").shape[2], g("W_V").shape[2], kv_heads=h)
    layer.W_Q, layer.W_K, layer.W_V, layer.W_O = g("W_Q"), g("W_K"), g("W_V"), g("W_O")
    context = g("context") if f"{name}/context" in TORCH_MHA.files else None
    m = x.shape[1] if context is None else context.shape[1]
    mask = causal(x.shape[1]) if bool(g("causal")) else None
    if f"{name}/lengths" in TORCH_MHA.files:
        mask = (np.arange(m) < g("lengths")[:, None])[:, None, :]  # (b, 1, m)
    out, w = layer(x, mask, context=context, return_weights=True)
    out_error, w_error = layer_error(layer, x, w, context, return_weights=True)
    assert_within(out, g("output"), 2 * out_error)  # ours and torch's: one evaluation each
    assert_within(w, g("weights"), 2 * w_error)


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
@pytest.mark.parametrize("lead", [(), (3,)])
def test_shapes_of_weights_attention_weights_and_trace(kv_heads, lead):
    layer = MultiHeadAttention(12, 4, d_k=5, d_v=3, kv_heads=kv_heads, seed=0)
    assert layer.kv_heads == kv_heads
    assert layer.W_Q.shape == (12, 4, 5) and layer.W_O.shape == (4 * 3, 12)
    assert layer.W_K.shape == (12, kv_heads, 5) and layer.W_V.shape == (12, kv_heads, 3)
    rng = np.random.default_rng(0)
    x, context = rng.normal(size=lead + (6, 12)), rng.normal(size=lead + (7, 12))
    out, w = layer(x, context=context, return_weights=True)
    assert out.shape == lead + (6, 12) and w.shape == lead + (4, 6, 7)
    assert_within(w.sum(axis=-1), 1.0, weights_sum_error(7))
    stages = layer.trace(x, context=context)
    assert stages["q"].shape == lead + (4, 6, 5)
    assert stages["k"].shape == lead + (kv_heads, 7, 5)
    assert stages["v"].shape == lead + (kv_heads, 7, 3)
    assert stages["weights"].shape == stages["scores"].shape == lead + (4, 6, 7)
    assert stages["heads"].shape == lead + (4, 6, 3) and stages["concat"].shape == lead + (6, 12)
    np.testing.assert_array_equal(stages["output"], out)
    np.testing.assert_array_equal(stages["weights"], w)
    if kv_heads != 4:
        assert f"kv_heads={kv_heads}" in repr(layer)


@st.composite
def gqa_layers(draw, rope=None):
    """A layer with kv_heads < h or = h, d_k != d_v, rope or not, an input (batch or not), maybe
    a context, a mask (none, causal, random boolean of (n, m) or (b, n, m))."""
    h = draw(st.sampled_from([1, 2, 4, 6]))
    kv_heads = draw(st.sampled_from([d for d in range(1, h + 1) if h % d == 0]))
    rope = draw(st.booleans()) if rope is None else rope
    d_k = 2 * draw(st.integers(1, 3)) if rope else draw(st.integers(1, 5))
    d_v = draw(st.integers(1, 5))
    d_model = draw(st.integers(1, 10))
    seed = draw(st.integers(0, 2**32 - 1))
    layer = MultiHeadAttention(d_model, h, d_k, d_v, seed=seed, rope=rope, kv_heads=kv_heads)
    rng = np.random.default_rng(seed)
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    lead = (draw(st.integers(1, 3)),) if draw(st.booleans()) else ()
    n = draw(st.integers(1, 6))
    cross = not rope and draw(st.booleans())
    m = draw(st.integers(1, 6)) if cross else n
    x = rng.normal(size=lead + (n, d_model)).astype(dtype)
    context = rng.normal(size=lead + (m, d_model)).astype(dtype) if cross else None
    kind = draw(st.sampled_from(["none", "causal", "random"]))
    mask = {"none": None, "causal": np.arange(m)[None, :] <= np.arange(n)[:, None],
            "random": rng.random(lead + (n, m)) < 0.6}[kind]
    return layer, x, context, mask


@settings(max_examples=40)
@given(gqa_layers())
def test_grouping_equals_repeated_key_value_weights_and_the_reference(case):
    """Query head i uses key/value head i // (h // kv_heads): the same as a layer with h
    key/value heads whose W_K and W_V repeat each shared head over its group, and as the loop."""
    layer, x, context, mask = case
    out, w = layer(x, mask, context=context, return_weights=True)
    full_out, full_w = repeated(layer)(x, mask, context=context, return_weights=True)
    assert out.dtype == x.dtype and w.shape == full_w.shape
    out_error, w_error = layer_error(layer, x, w, context, return_weights=True)
    assert_within(out, full_out, 2 * out_error)  # two evaluations of one layer (rule 2)
    assert_within(w, full_w, 2 * w_error)
    ref_out, ref_w = multi_head_attention_reference(
        x, layer.W_Q, layer.W_K, layer.W_V, layer.W_O, mask, context, layer.rope,
        kv_heads=layer.kv_heads)
    assert_within(out, ref_out, 2 * out_error)  # the reference: float64, or the same dtype
    assert_within(w, ref_w, 2 * w_error)


def test_query_heads_of_one_group_differ_only_through_their_queries():
    """With W_Q equal for the query heads of one group, their weights are equal; heads of
    different groups (different keys) are not. Catches a grouping of i % kv_heads too."""
    layer = MultiHeadAttention(16, 8, kv_heads=2, seed=1)
    layer.W_Q[:, :4] = layer.W_Q[:, :1]  # heads 0..3 (group 0) ask the same questions
    layer.W_Q[:, 4:] = layer.W_Q[:, :1]  # and heads 4..7 (group 1) too
    x = np.random.default_rng(0).normal(size=(6, 16))
    _, w = layer(x, return_weights=True)
    for i in range(1, 4):
        np.testing.assert_array_equal(w[i], w[0])
        np.testing.assert_array_equal(w[4 + i], w[4])
    assert not np.allclose(w[0], w[4])


def test_multi_query_attention_has_one_key_and_value_head_for_every_query_head():
    layer = MultiHeadAttention(8, 4, kv_heads=1, seed=2)
    x = np.random.default_rng(1).normal(size=(2, 5, 8))
    stages = layer.trace(x)
    assert stages["k"].shape == (2, 1, 5, 2)
    k = x @ layer.W_K[:, 0, :]  # (2, 5, 2): the one key head, by hand
    for i in range(4):
        scores = stages["q"][:, i] @ k.swapaxes(-1, -2) / np.sqrt(2)
        # the one key head by two products over d_model = 8 (gamma(8) of |x| |W_K| each), then
        # the same 2-term scores, scaled: gamma(8 + 2 + 2) of |q| (|x| |W_K|)^T, on each side
        k_sizes = np.abs(x) @ np.abs(layer.W_K[:, 0, :])
        sizes = np.abs(stages["q"][:, i]) @ k_sizes.swapaxes(-1, -2)
        assert_within(stages["scores"][:, i], scores, 2 * gamma(12) * sizes / np.sqrt(2))


@pytest.mark.parametrize("value, error, message", [
    (0, ValueError, r"kv_heads must be >= 1, got 0"),
    (-1, ValueError, r"kv_heads must be >= 1, got -1"),
    (3, ValueError, r"kv_heads=3 must divide h=4 .*divisors of 4: \[1, 2, 4\]"),
    (8, ValueError, r"kv_heads=8 must divide h=4"),
    (2.0, TypeError, r"kv_heads must be an integer, got 2.0 of type float"),
    (True, TypeError, r"kv_heads must be an integer, got True of type bool"),
    ("2", TypeError, r"kv_heads must be an integer, got '2' of type str"),
])
def test_bad_kv_heads_is_refused_by_name(value, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(16, 4, kv_heads=value, seed=0)


# ---- PyTorch golden values ----------------------------------------------------------------------

def golden_cases(prefix: str = "") -> list[str]:
    return sorted({key.split("/")[0] for key in GOLDEN.files
                   if "/" in key and key.startswith(prefix)})


def golden_layer(name: str) -> tuple[MultiHeadAttention, callable]:
    g = lambda key: GOLDEN[f"{name}/{key}"]  # noqa: E731
    W_Q, W_V = g("W_Q"), g("W_V")
    layer = MultiHeadAttention(W_Q.shape[0], W_Q.shape[1], W_Q.shape[2], W_V.shape[2],
                               rope=bool(g("rope")), kv_heads=int(g("kv_heads")))
    layer.W_Q, layer.W_K, layer.W_V, layer.W_O = W_Q, g("W_K"), W_V, g("W_O")
    return layer, lambda key: g(key) if f"{name}/{key}" in GOLDEN.files else None


def test_golden_file_holds_the_expected_cases():
    assert golden_cases() == ["decode_gqa", "decode_gqa_float32", "decode_gqa_padding",
                              "decode_gqa_rope", "decode_mqa_batch", "gqa_cross", "gqa_float32",
                              "gqa_padding", "gqa_self", "mqa_causal", "mqa_rope"]
    assert str(GOLDEN["torch_version"]).startswith("2.")
    kv = {name: int(GOLDEN[f"{name}/kv_heads"]) for name in golden_cases()}
    h = {name: GOLDEN[f"{name}/W_Q"].shape[1] for name in golden_cases()}
    assert all(kv[name] < h[name] for name in kv)  # every case shares keys and values
    assert {kv[name] for name in kv} == {1, 2}     # both MQA and GQA


@pytest.mark.parametrize("name", golden_cases())
def test_layer_matches_torch_sdpa_with_enable_gqa_and_with_repeated_heads(name):
    layer, get = golden_layer(name)
    x = get("x")
    out, w = layer(x, get("mask"), context=get("context"), return_weights=True)
    assert out.dtype == x.dtype
    out_error, w_error = layer_error(layer, x, w, get("context"), return_weights=True)
    assert_within(out, get("output"), 2 * out_error)          # SDPA, enable_gqa=True
    assert_within(out, get("output_repeat"), 2 * out_error)   # repeat_interleave by hand
    assert_within(w, get("weights"), 2 * w_error)


@pytest.mark.parametrize("name", [c for c in golden_cases() if "float32" not in c])
def test_layer_backward_matches_torch_autograd(name):
    layer, get = golden_layer(name)
    grads = layer.backward(get("x"), get("d_out"), get("mask"), context=get("context"))
    for key in ("x", "context", "W_Q", "W_K", "W_V", "W_O"):
        expected = get(f"d{key}")
        if expected is None:
            assert grads[key] is None
        else:
            assert grads[key].shape == expected.shape, key
            np.testing.assert_allclose(grads[key], expected, err_msg=key,
                                       **GOLDEN_TOL[expected.dtype])


@pytest.mark.parametrize("name", golden_cases("decode_"))
@pytest.mark.parametrize("chunks", ["one token at a time", "3, 1, rest", "all at once"])
def test_cached_decoding_matches_torch_full_causal_forward(name, chunks):
    """torch ran one causal forward over the whole sequence; mha feeds it through a KVCache,
    which adds the causal rule itself: the stored mask is passed only where it hides more."""
    layer, get = golden_layer(name)
    x, mask = get("x"), get("mask")
    n = x.shape[-2]
    if np.array_equal(mask, causal(n)):
        mask = None
    sizes = {"one token at a time": [1] * n, "3, 1, rest": [3, 1, n - 4], "all at once": [n]}
    out, cache = run_in_chunks(layer, x, sizes[chunks], mask=mask)
    assert len(cache) == n and out.dtype == x.dtype
    _, w = layer(x, get("mask"), return_weights=True)  # the weights of torch's forward
    assert_within(out, get("output"), 2 * layer_error(layer, x, w))


# ---- the cache: pieces equal the whole ----------------------------------------------------------

@st.composite
def chunkings(draw, n):
    """Sizes >= 0 summing to n (empty calls included now and then)."""
    sizes, left = [], n
    while left:
        size = draw(st.integers(0 if sizes else 1, left))
        sizes.append(size)
        left -= size
    return sizes


@st.composite
def decoding_cases(draw):
    h = draw(st.sampled_from([1, 2, 4]))
    kv_heads = draw(st.sampled_from([d for d in range(1, h + 1) if h % d == 0]))
    d_model = draw(st.sampled_from([8, 24, 64]))  # 64: a few tokens take the unjoined weights
    rope = draw(st.booleans())
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    lead = (draw(st.integers(1, 2)),) if draw(st.booleans()) else ()
    n = draw(st.integers(1, 10))
    seed = draw(st.integers(0, 2**32 - 1))
    layer = MultiHeadAttention(d_model, h, seed=seed, rope=rope, kv_heads=kv_heads)
    x = np.random.default_rng(seed).normal(size=lead + (n, d_model)).astype(dtype)
    return layer, x, draw(chunkings(n))


@settings(max_examples=50)
@given(decoding_cases())
def test_feeding_any_chunking_equals_one_causal_forward(case):
    layer, x, sizes = case
    n = x.shape[-2]
    with no_warnings():
        out, cache = run_in_chunks(layer, x, sizes)
    whole = layer(x, causal(n))
    assert out.shape == whole.shape and out.dtype == x.dtype
    assert_as_one_forward(out, layer, x, causal(n))
    assert len(cache) == n
    k, v = layer.trace(x, causal(n))["k"], layer.trace(x, causal(n))["v"]  # rotated with rope
    assert cache.keys.shape == k.shape and cache.values.shape == v.shape
    # one product over d_model (another shape: another kernel), with RoPE rotated as in
    # helpers.layer_error: twice gamma(d_model + 2 (+ 12 + 3n)) of |x| |W|, twice with RoPE
    k_in = layer.d_model + 2 + (12 + 3 * n if layer.rope else 0)
    k_sizes, v_sizes = (np.abs(x.astype(float)) @ np.abs(W).reshape(layer.d_model, -1)
                        for W in (layer.W_K, layer.W_V))
    k_sizes = k_sizes.reshape(x.shape[:-1] + layer.W_K.shape[1:]).swapaxes(-2, -3)
    v_sizes = v_sizes.reshape(x.shape[:-1] + layer.W_V.shape[1:]).swapaxes(-2, -3)
    if layer.rope:
        k_sizes = 2 * k_sizes.max(axis=-1, keepdims=True)
    assert_within(cache.keys, k, 2 * gamma(k_in, x.dtype) * k_sizes)
    assert_within(cache.values, v, 2 * gamma(layer.d_model + 2, x.dtype) * v_sizes)


@settings(max_examples=30)
@given(decoding_cases(), st.integers(0, 2**32 - 1), st.booleans())
def test_a_mask_given_with_the_cache_is_combined_with_the_causal_rule(case, seed, additive):
    """Each call gets its rows of a random (b, n, n) key mask (padding-like holes, some queries
    seeing nothing at all; boolean or additive 0 / -inf), never the causal rule: the layer adds
    it."""
    layer, x, sizes = case
    n = x.shape[-2]
    rng = np.random.default_rng(seed)
    holes = rng.random(x.shape[:-2] + (n, n)) < 0.7  # True = may attend, future keys included
    given_mask = np.where(holes, 0.0, -np.inf) if additive else holes
    out, _ = run_in_chunks(layer, x, sizes, mask=given_mask)
    assert_as_one_forward(out, layer, x, holes & causal(n))


def test_padding_mask_with_the_cache_hides_the_padded_keys():
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=3)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 7, 16))
    lengths = np.array([7, 3])
    visible = np.arange(7) < lengths[:, None, None]  # (2, 1, 7): keys past each length hidden
    out, cache = run_in_chunks(layer, x, [2, 1, 4], mask=np.broadcast_to(visible, (2, 7, 7)))
    assert_as_one_forward(out, layer, x, visible & causal(7))
    # Sequence 1 ignores its padding: the same as the sequence cut to its 3 real tokens...
    assert_as_one_forward(out[1, :3], layer, x[1, :3], causal(3))
    # ...and the padded tokens' keys, though cached, change nothing for it.
    x2 = x.copy()
    x2[1, 3:] = rng.normal(size=(4, 16))
    out2, _ = run_in_chunks(layer, x2, [7], mask=np.broadcast_to(visible, (2, 7, 7)))
    assert_as_one_forward(out2[1, :3], layer, x[1, :3], causal(3))  # as out[1, :3] above
    assert_as_one_forward(out2[0], layer, x[0], causal(7))  # the other sequence
    np.testing.assert_array_equal(out2[0], run_in_chunks(layer, x, [7], mask=np.broadcast_to(
        visible, (2, 7, 7)))[0][0])  # the same call on x: sequence 1's new tokens change nothing


def test_weights_returned_with_the_cache_cover_every_cached_key():
    layer = MultiHeadAttention(16, 4, kv_heads=1, seed=4)
    x = np.random.default_rng(4).normal(size=(6, 16))
    cache = KVCache()
    layer(x[:4], cache=cache)
    out, w = layer(x[4:], cache=cache, return_weights=True)
    assert w.shape == (4, 2, 6)
    _, full_w = layer(x, causal(6), return_weights=True)
    w_error = layer_error(layer, x, full_w, return_weights=True)[1]
    assert_within(w, full_w[:, 4:], 2 * w_error[:, 4:])
    assert (w[:, 0, 5] == 0).all() and (w[:, 1, 5] > 0).all()  # token 4 does not see token 5


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_rope_positions_continue_from_the_length_of_the_cache(kv_heads):
    layer = MultiHeadAttention(8, 4, rope=True, kv_heads=kv_heads, seed=5)
    x = np.random.default_rng(5).normal(size=(6, 8))
    cache = KVCache()
    for t in range(6):
        layer(x[t:t + 1], cache=cache)
    # The cached keys: x W_K of each key head rotated at positions 0..5, by the slow reference.
    for j in range(kv_heads):
        # x W_K sums d_model = 8 terms (gamma(8) of |x| |W_K|); a rotated value is at most twice
        # its row's largest and errs by its 2-term sum, cos and sin (4 ulp each) and its angle
        # p * freq (~3u of p <= 5): gamma(8 + 12 + 3 * 6) of that, on each side (rule 2)
        sizes = np.abs(x) @ np.abs(layer.W_K[:, j, :])
        assert_within(cache.keys[j], rope_reference(x @ layer.W_K[:, j, :]),
                      2 * gamma(8 + 12 + 3 * 6) * 2 * sizes.max(axis=-1, keepdims=True))
        assert_within(cache.values[j], x @ layer.W_V[:, j, :],
                      2 * matmul_bound(x, layer.W_V[:, j, :]))  # one product, another kernel
    # A token fed after 6 cached ones sits at position 6: the same as in a full forward.
    y = np.random.default_rng(6).normal(size=(1, 8))
    out = layer(y, cache=cache)
    assert_as_one_forward(out, layer, np.concatenate([x, y]), causal(7), slice(6, None))
    # ...and not at position 0, where a fresh cache would put it.
    assert not np.allclose(out, layer(y, cache=KVCache()))


@pytest.mark.parametrize("lead", [(), (3,)])
@pytest.mark.parametrize("kv_heads, dtype", [(8, np.float64), (2, np.float32), (1, np.float64)])
def test_len_and_nbytes(lead, kv_heads, dtype):
    layer = MultiHeadAttention(32, 8, kv_heads=kv_heads, seed=0)  # d_k = d_v = 4
    cache = KVCache()
    assert len(cache) == 0 and cache.nbytes == 0
    x = np.random.default_rng(0).normal(size=lead + (20, 32)).astype(dtype)
    batch = int(np.prod(lead))
    for end in (1, 2, 17, 20):  # the 17th token outgrows the first 16 places
        layer(x[..., len(cache):end, :], cache=cache)
        assert len(cache) == end
        assert cache.nbytes == 2 * end * kv_heads * 4 * np.dtype(dtype).itemsize * batch
        assert cache.keys.shape == cache.values.shape == lead + (kv_heads, end, 4)
        assert cache.keys.dtype == dtype
        assert cache.nbytes == cache.keys.nbytes + cache.values.nbytes


def test_kv_heads_shrink_the_cache_by_h_over_kv_heads():
    x = np.random.default_rng(0).normal(size=(10, 64))
    sizes = {}
    for kv_heads in (8, 2, 1):
        cache = KVCache()
        MultiHeadAttention(64, 8, kv_heads=kv_heads, seed=0)(x, cache=cache)
        sizes[kv_heads] = cache.nbytes
    assert sizes == {8: 2 * 10 * 8 * 8 * 8, 2: 2 * 10 * 2 * 8 * 8, 1: 2 * 10 * 1 * 8 * 8}


def test_keys_and_values_are_read_only_views_that_later_calls_leave_alone():
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    x = np.random.default_rng(0).normal(size=(40, 16))
    cache = KVCache()
    layer(x[:3], cache=cache)
    keys, values = cache.keys, cache.values
    for view in (keys, values):
        assert not view.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            view[..., 0, 0] = 1.0
    before = keys.copy()
    for t in range(3, 40):  # grows past its capacity more than once
        layer(x[t:t + 1], cache=cache)
    np.testing.assert_array_equal(keys, before)
    np.testing.assert_array_equal(cache.keys[:, :3], before)


def test_an_empty_call_changes_nothing():
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    x = np.random.default_rng(0).normal(size=(2, 5, 16))
    cache = KVCache()
    layer(x[:, :3], cache=cache)
    keys = cache.keys.copy()
    out, w = layer(x[:, 3:3], cache=cache, return_weights=True)
    assert out.shape == (2, 0, 16) and w.shape == (2, 4, 0, 3)
    assert len(cache) == 3
    np.testing.assert_array_equal(cache.keys, keys)
    rest = layer(x[:, 3:], cache=cache)
    assert_as_one_forward(rest, layer, x, causal(5), slice(3, None))


def test_caches_of_two_threads_give_the_results_of_one():
    layer = MultiHeadAttention(32, 8, kv_heads=2, seed=0, rope=True)
    rng = np.random.default_rng(8)
    xs = [rng.normal(size=(2, 30, 32)) for _ in range(2)]
    expected = [layer(x, causal(30)) for x in xs]
    results = [[], []]

    def work(i):
        for _ in range(3):
            results[i].append(run_in_chunks(layer, xs[i], [1] * 30)[0])

    in_threads(work, 2)
    for i in range(2):
        assert len(results[i]) == 3
        _, w = layer(xs[i], causal(30), return_weights=True)
        bound = 2 * layer_error(layer, xs[i], w)  # one token at a time against one forward
        np.testing.assert_array_equal(results[i][0], run_in_chunks(layer, xs[i], [1] * 30)[0])
        for out in results[i]:
            assert_within(out, expected[i], bound)


# ---- the cache: refused input, and failures that leave it as it was -----------------------------

def test_context_with_a_cache_is_refused():
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    x = np.ones((2, 16))
    cache = KVCache()
    with pytest.raises(ValueError, match=r"context= \(cross-attention\) cannot be combined with "
                                         r"cache="):
        layer(x, context=x, cache=cache)
    assert len(cache) == 0


@pytest.mark.parametrize("cache", [{}, [], "cache", np.zeros((2, 2, 4)), object()])
def test_a_cache_that_is_not_a_kv_cache_is_a_type_error(cache):
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    name = type(cache).__name__
    with pytest.raises(TypeError, match=rf"cache must be a mha.KVCache, got {name}"):
        layer(np.ones((1, 16)), cache=cache)


@pytest.mark.parametrize("other, x_of, message", [
    (dict(kv_heads=1), None, r"kv_heads 2 \(cached\) vs 1 \(now\)"),
    (dict(d_k=8), None, r"d_k 4 \(cached\) vs 8 \(now\), d_v 4 \(cached\) vs 8 \(now\)"),
    (dict(d_v=2), None, r"d_v 4 \(cached\) vs 2 \(now\)"),
    ({}, lambda x: x.astype(np.float32), r"dtype float64 \(cached\) vs float32 \(now\)"),
    ({}, lambda x: x[None], r"batch shape \(\) \(cached\) vs \(1,\) \(now\)"),
    ({}, lambda x: np.stack([x, x]), r"batch shape \(\) \(cached\) vs \(2,\) \(now\)"),
])
def test_a_cache_reused_with_another_layout_is_refused_by_name(other, x_of, message):
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    rng = np.random.default_rng(0)
    cache = KVCache()
    layer(rng.normal(size=(3, 16)), cache=cache)
    keys = cache.keys.copy()
    second = MultiHeadAttention(16, 4, **({"kv_heads": 2} | other), seed=1)
    x = rng.normal(size=(1, 16))
    with pytest.raises(ValueError, match=rf"this KVCache holds 3 tokens .*{message}"):
        second(x if x_of is None else x_of(x), cache=cache)
    assert len(cache) == 3
    np.testing.assert_array_equal(cache.keys, keys)


def check_failed_call_left_cache_alone(layer, history, call, x_next):
    """A cache fed ``history``; ``call(cache)`` must raise ValueError; the cache must then hold
    what it held, and the next token ``x_next`` must give what it gives without the failed call.
    Returns the error."""
    cache, twin = KVCache(), KVCache()  # twin: the same history, without the failed call
    layer(history, cache=cache)
    layer(history, cache=twin)
    length, keys, values = len(cache), cache.keys.copy(), cache.values.copy()
    with pytest.raises(ValueError) as error:
        call(cache)
    assert len(cache) == length and cache.nbytes == twin.nbytes
    np.testing.assert_array_equal(cache.keys, keys)
    np.testing.assert_array_equal(cache.values, values)
    np.testing.assert_array_equal(layer(x_next, cache=cache), layer(x_next, cache=twin))
    return error


@pytest.mark.parametrize("n_cached", [1, 15, 16])  # 16: the failing call would have grown it
def test_an_overflow_in_float16_leaves_the_cache_as_it_was(n_cached):
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    x = np.random.default_rng(0).normal(size=(n_cached, 16)).astype(np.float16)
    huge = np.full((2, 16), 6e4, np.float16)
    error = check_failed_call_left_cache_alone(
        layer, x, lambda cache: layer(huge, cache=cache), x[:1])
    assert "overflowed float16" in str(error.value)


@pytest.mark.parametrize("mask, message", [
    (np.ones((1, 3), bool), r"mask \(1, 3\), the weights of one head \(\.\.\., n, m\) \(1, 4\)"),
    (np.ones((2, 4), bool), r"mask of shape \(2, 4\)"),   # two rows for one new token
    (np.zeros((1, 4)) + [0, np.nan, 0, 0], r"mask"),
])
def test_a_bad_mask_with_a_cache_leaves_the_cache_as_it_was(mask, message):
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    x = np.random.default_rng(0).normal(size=(4, 16))
    error = check_failed_call_left_cache_alone(
        layer, x[:3], lambda cache: layer(x[3:], mask, cache=cache), x[3:])
    assert error.match(message)


def test_a_failed_first_call_does_not_tie_an_empty_cache_to_its_layout():
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    cache = KVCache()
    x32 = np.ones((2, 16), np.float32)
    with pytest.raises(ValueError, match="mask"):
        layer(x32, np.ones((3, 3), bool), cache=cache)
    assert len(cache) == 0
    layer(np.ones((2, 16)), cache=cache)  # float64: a cache that holds nothing takes any layout
    assert len(cache) == 2


# ---- weight edits take effect at once -----------------------------------------------------------

@pytest.mark.parametrize("kv_heads", [1, 2, 4])
@pytest.mark.parametrize("n", [1, 2, 40])  # 1, 2: few tokens, the weights read unjoined
@pytest.mark.parametrize("in_place", [True, False])
def test_weight_edits_take_effect_at_the_next_call(kv_heads, n, in_place):
    layer = MultiHeadAttention(64, 4, kv_heads=kv_heads, seed=0)
    x = np.random.default_rng(1).normal(size=(n, 64))
    for dtype in (np.float64, np.float32):
        layer(x.astype(dtype))  # whatever a call could keep, it has kept it now
    rng = np.random.default_rng(2)
    for name in WEIGHTS:
        before = layer(x)
        new = getattr(layer, name) + rng.normal(0, 0.2, size=getattr(layer, name).shape)
        if in_place:
            getattr(layer, name)[...] = new
        else:
            setattr(layer, name, new)
        after = layer(x)
        if n == 1 and name in ("W_Q", "W_K"):  # one token attends to itself alone: weight 1
            np.testing.assert_array_equal(after, before)  # exactly 1 (exp(0) / exp(0)): exact
        else:
            assert not np.allclose(after, before), name
        np.testing.assert_array_equal(after, copy_of(layer)(x))
        np.testing.assert_array_equal(layer(x.astype(np.float32)),  # the same computation
                                      copy_of(layer)(x.astype(np.float32)))


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_weight_edits_take_effect_while_decoding(kv_heads):
    """Between two one-token steps: the new token uses the new weights; the tokens already cached
    keep the keys and values the old weights gave them (as KVCache's docstring says)."""
    layer = MultiHeadAttention(64, 4, kv_heads=kv_heads, seed=0)
    x = np.random.default_rng(3).normal(size=(6, 64))
    cache = KVCache()
    for t in range(5):
        layer(x[t:t + 1], cache=cache)
    old_keys, old_values = cache.keys.copy(), cache.values.copy()
    rng = np.random.default_rng(4)
    for name in WEIGHTS:
        getattr(layer, name)[...] += rng.normal(0, 0.2, size=getattr(layer, name).shape)
    out = layer(x[5:6], cache=cache)
    # By hand: the new token's query, key and value from the new weights, the old cache.
    new_k = np.einsum("d,dhk->hk", x[5], layer.W_K)[:, None, :]            # (kv, 1, d_k)
    new_v = np.einsum("d,dhv->hv", x[5], layer.W_V)[:, None, :]            # (kv, 1, d_v)
    k = np.concatenate([old_keys, new_k], axis=1)                          # (kv, 6, d_k)
    v = np.concatenate([old_values, new_v], axis=1)                        # (kv, 6, d_v)
    group = 4 // kv_heads
    heads = []
    for i in range(4):
        q = x[5] @ layer.W_Q[:, i, :]                                          # (d_k,)
        scores = k[i // group] @ q / np.sqrt(layer.d_k)                        # (6,)
        p = np.exp(scores - scores.max())
        heads.append(p / p.sum() @ v[i // group])
    # float64 chain: products over d_model = 64 of N(0, 1) inputs and weights ~0.25 (sums of
    # sizes ~15), 6 keys, h * d_v = 64 terms of heads ~1 times W_O ~0.25: gamma(64) * 15 =
    # 1e-13 per product, a few deep, so rtol 1e-12 and atol 1e-12
    np.testing.assert_allclose(out[0], np.concatenate(heads) @ layer.W_O, rtol=1e-12, atol=1e-12)
    # A fresh cache recomputes every key with the new weights: a full forward of the new layer.
    fresh, _ = run_in_chunks(layer, x, [1] * 6)
    assert_as_one_forward(fresh, copy_of(layer), x, causal(6))


# ---- backward with kv_heads ---------------------------------------------------------------------

@settings(max_examples=20)
@given(gqa_layers(), st.integers(0, 2**32 - 1))
def test_backward_with_kv_heads_matches_finite_differences(case, seed):
    layer, x, context, mask = case
    x = x.astype(np.float64)
    context = None if context is None else context.astype(np.float64)
    d_out = np.random.default_rng(seed).normal(size=x.shape[:-1] + (layer.d_model,))
    loss = lambda: float((layer(x, mask, context=context) * d_out).sum())  # noqa: E731
    with no_warnings():
        grads = layer.backward(x, d_out, mask, context=context)
    expected = {"x": numeric_gradient(loss, x),
                "context": None if context is None else numeric_gradient(loss, context),
                **{name: numeric_gradient(loss, getattr(layer, name)) for name in WEIGHTS}}
    for name, value in expected.items():
        if value is None:
            assert grads[name] is None
        else:
            assert grads[name].shape == value.shape, name
            np.testing.assert_allclose(grads[name], value, err_msg=name, **FD_TOL)


def test_backward_with_kv_heads_equals_the_repeated_layer_summed_over_each_group():
    """A shared key/value head gets the sum of what its query heads would send their own copies."""
    layer = MultiHeadAttention(12, 6, kv_heads=2, d_v=5, seed=9)
    rng = np.random.default_rng(9)
    x, d_out = rng.normal(size=(2, 2, 5, 12))
    mask = causal(5)
    grads = layer.backward(x, d_out, mask)
    full = repeated(layer).backward(x, d_out, mask)
    # float64 backward chains over k <= 30 (d_model 12, n 5, h * d_v 30) of N(0, 1) values and
    # weights ~0.4, sizes of terms <= ~5: gamma(30) * 5 = 2e-14 per product, a few deep (and a
    # 3-term sum over each group): 1e-13 absolute, 1e-12 relative
    for name in ("x", "W_Q", "W_O"):
        np.testing.assert_allclose(grads[name], full[name], rtol=1e-12, atol=1e-13)
    for name in ("W_K", "W_V"):
        summed = full[name].reshape(12, 2, 3, -1).sum(axis=2)  # (d_model, kv, group, d) -> kv
        np.testing.assert_allclose(grads[name], summed, rtol=1e-12, atol=1e-13)


# ---- copies, pickles and threads ----------------------------------------------------------------

def pickled(cache: KVCache) -> KVCache:
    return pickle.loads(pickle.dumps(cache))


@pytest.mark.parametrize("fork", [copy.copy, copy.deepcopy, pickled])
def test_a_copy_is_an_independent_fork(fork):
    """Two continuations of one prompt: each copy goes on as a cache of its own would, and
    neither touches the other's keys and values (copy.copy shared the arrays once, so that the
    second continuation overwrote the first's)."""
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    rng = np.random.default_rng(0)
    prompt, a, b = rng.normal(size=(3, 16)), rng.normal(size=(2, 16)), rng.normal(size=(2, 16))
    cache = KVCache()
    layer(prompt, cache=cache)  # 3 tokens in an array with room for 16
    copied = fork(cache)
    assert type(copied) is KVCache and repr(copied) == repr(cache)
    np.testing.assert_array_equal(copied.keys, cache.keys)
    np.testing.assert_array_equal(copied.values, cache.values)
    out_b = layer(b, cache=copied)      # the copy goes on with b ...
    out_a = layer(a, cache=cache)       # ... the original with a, into the same slots
    for x, out, c in ((a, out_a, cache), (b, out_b, copied)):
        full = np.concatenate([prompt, x])
        np.testing.assert_array_equal(out, layer(x, cache=run_in_chunks(layer, prompt, [3])[1]))
        assert_as_one_forward(out, layer, full, causal(5), slice(3, None))
        fresh = run_in_chunks(layer, full, [3, 2])[1]
        np.testing.assert_array_equal(c.keys, fresh.keys)
        np.testing.assert_array_equal(c.values, fresh.values)


def test_a_pickled_cache_holds_its_tokens_and_nothing_else():
    """Not the spare capacity, uninitialised memory that may hold anything the process had."""
    layer = MultiHeadAttention(64, 8, kv_heads=8, seed=0)
    x = np.random.default_rng(0).normal(size=(2, 64))
    cache = KVCache()
    layer(x[:1], cache=cache)       # one token, in arrays with room for 16
    assert cache.nbytes == 2 * 8 * 8 * 8
    size = len(pickle.dumps(cache))
    assert cache.nbytes < size < cache.nbytes + 1000    # the 16 tokens' room would be 16 KiB
    restored = pickled(cache)
    assert len(restored) == 1 and restored.nbytes == cache.nbytes
    np.testing.assert_array_equal(restored.keys, cache.keys)
    np.testing.assert_array_equal(layer(x[1:], cache=restored), layer(x[1:], cache=cache))
    assert len(restored) == 2
    np.testing.assert_array_equal(restored.keys, cache.keys)
    empty = pickled(KVCache())
    assert len(empty) == 0 and empty.nbytes == 0 and repr(empty) == "KVCache(empty)"
    np.testing.assert_array_equal(layer(x, cache=empty), layer(x, causal(2)))


def test_a_failed_call_in_one_thread_never_undoes_another_threads_token():
    """One cache, two threads: a call that overflows while another thread's call appends its
    token must take back only its own token. Before the cache was locked for the length of a
    call, the failed call truncated the cache to its own start, the other thread's token too."""
    layer = MultiHeadAttention(16, 4, kv_heads=2, seed=0)
    x = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float16)
    huge = np.full((2, 16), 6e4, np.float16)   # overflows float16 after its append
    appended, other_done = threading.Event(), threading.Event()

    class PausingCache(KVCache):
        """Holds the failing call between its append and its failure for up to 0.5 s: time
        for the other thread's whole call, unless the cache makes it wait."""

        def _append(self, k, v):
            out = super()._append(k, v)
            if threading.current_thread().name == "failing":
                appended.set()
                other_done.wait(timeout=0.5)
            return out

    cache, twin = PausingCache(), KVCache()
    layer(x[:3], cache=cache)
    layer(x[:3], cache=twin)
    expected = layer(x[3:], cache=twin)  # the good token, on a cache without the failed call
    errors, outputs = [], []

    def failing():
        try:
            layer(huge, cache=cache)
        except ValueError as error:
            errors.append(error)

    def good():
        appended.wait(timeout=5)
        try:
            outputs.append(layer(x[3:], cache=cache))
        except ValueError as error:  # it saw the failing call's token (an unlocked cache)
            outputs.append(error)
        finally:
            other_done.set()

    threads = [threading.Thread(target=failing, name="failing"), threading.Thread(target=good)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(errors) == 1 and "overflowed float16" in str(errors[0])
    assert len(cache) == 4 and len(outputs) == 1
    np.testing.assert_array_equal(outputs[0], expected)
    np.testing.assert_array_equal(cache.keys, twin.keys)
    np.testing.assert_array_equal(cache.values, twin.values)
