"""mha.MultiHeadAttention against the loop-over-heads reference, its properties, and bad input."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import (BAD_FLAGS, BAD_INTEGERS, BAD_MASKS, BAD_SEEDS, DTYPES, MASK_KINDS,
                     bad_arrays, layer_error, make_mask)
from mha import (MultiHeadAttention, causal_mask, padding_mask, scaled_dot_product_attention,
                 softmax)
from mha.reference import multi_head_attention_reference
from tolerance import assert_within, gamma, matmul_bound


@st.composite
def layers_and_inputs(draw):
    """A layer (d_k != d_v allowed), x of shape (n, d) or (b, n, d), maybe a context, a mask."""
    h = draw(st.integers(1, 4))
    d_model = draw(st.integers(1, 12))
    d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    layer = MultiHeadAttention(d_model, h, d_k, d_v, seed=seed)
    rng = np.random.default_rng(seed + 1)
    dtype = draw(DTYPES)
    lead = (draw(st.integers(1, 3)),) if draw(st.booleans()) else ()
    n = draw(st.integers(1, 6))
    x = rng.normal(size=lead + (n, d_model)).astype(dtype)
    context = None
    m = n
    if draw(st.booleans()):  # cross-attention: keys and values from another sequence
        m = draw(st.integers(1, 6))
        context = rng.normal(size=lead + (m, d_model)).astype(dtype)
    kind = draw(st.sampled_from(MASK_KINDS))
    mask = make_mask(kind, rng, lead, n, m)
    return layer, x, context, mask


@given(layers_and_inputs())
def test_fast_path_equals_reference(case):
    layer, x, context, mask = case
    out, w = layer(x, mask, context=context, return_weights=True)
    ref_out, ref_w = multi_head_attention_reference(x, layer.W_Q, layer.W_K, layer.W_V,
                                                    layer.W_O, mask, context)
    m = x.shape[-2] if context is None else context.shape[-2]
    assert out.shape == x.shape
    assert w.shape == x.shape[:-2] + (layer.h, x.shape[-2], m)
    assert out.dtype == x.dtype and w.dtype == x.dtype
    out_error, w_error = layer_error(layer, x, ref_w, context, return_weights=True)
    assert_within(w, ref_w, 2 * w_error)  # the reference's (float64, or the same) and ours
    assert_within(out, ref_out, 2 * out_error)


def test_output_alone_unless_weights_asked_for():
    layer = MultiHeadAttention(8, 2, seed=0)
    x = np.random.default_rng(0).normal(size=(3, 8))
    out = layer(x)
    assert isinstance(out, np.ndarray) and out.shape == (3, 8)
    np.testing.assert_array_equal(layer.forward(x, return_weights=True)[0], out)


@given(st.integers(2, 7), st.integers(0, 2**32 - 1))
def test_permutation_equivariance_without_mask(n, seed):
    layer = MultiHeadAttention(12, 3, seed=seed)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 12))
    perm = rng.permutation(n)
    out, w = layer(x, return_weights=True)
    assert_within(layer(x[perm]), out[perm], 2 * layer_error(layer, x, w)[perm])


def test_causal_mask_breaks_permutation_equivariance():
    layer = MultiHeadAttention(12, 3, seed=0)
    x = np.random.default_rng(0).normal(size=(6, 12))
    perm = np.array([5, 4, 3, 2, 1, 0])
    mask = causal_mask(6)
    assert not np.allclose(layer(x[perm], mask), layer(x, mask)[perm])


@given(st.integers(1, 7), st.integers(0, 2**32 - 1))
def test_causal_outputs_ignore_later_tokens(n, seed):
    layer = MultiHeadAttention(8, 2, seed=seed)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, n + 3, 8))
    i = n - 1
    changed = x.copy()
    changed[:, i + 1:] = rng.normal(size=changed[:, i + 1:].shape) * 10
    mask = causal_mask(n + 3)
    before, after = layer(x, mask), layer(changed, mask)
    # Exact: the same code on arrays of the same shapes; the earlier rows' projections, scores
    # and weights come from the same numbers, and the hidden later tokens add exact zeros.
    np.testing.assert_array_equal(after[:, : i + 1], before[:, : i + 1])
    assert not np.allclose(after[:, i + 1:], before[:, i + 1:])


def test_separate_per_head_projections_equal_the_fused_projection_split_into_heads():
    rng = np.random.default_rng(5)
    layer = MultiHeadAttention(12, 3, d_k=5, d_v=2, seed=5)
    x = rng.normal(size=(4, 12))
    heads = []
    for i in range(layer.h):
        # Head i on its own, with its own W_i^Q, W_i^K, W_i^V.
        q_i, k_i, v_i = x @ layer.W_Q[:, i, :], x @ layer.W_K[:, i, :], x @ layer.W_V[:, i, :]
        fused = (x @ layer.W_Q.reshape(12, 3 * 5)).reshape(4, 3, 5)  # one product, then split
        # the same 12-term sums, by another kernel (the wider product): rule 2, on each side
        assert_within(fused[:, i, :], q_i, 2 * matmul_bound(x, layer.W_Q[:, i, :]))
        heads.append(scaled_dot_product_attention(q_i, k_i, v_i)[0])
    out, w = layer(x, return_weights=True)
    assert_within(np.concatenate(heads, axis=-1) @ layer.W_O, out, 2 * layer_error(layer, x, w))


def test_concat_then_W_O_equals_sum_over_heads_of_each_heads_block():
    rng = np.random.default_rng(6)
    h, d_v, d_model = 4, 3, 10
    layer = MultiHeadAttention(d_model, h, d_k=2, d_v=d_v, seed=6)
    x = rng.normal(size=(5, d_model))
    _, w = layer(x, return_weights=True)
    v = np.einsum("nd,dhv->hnv", x, layer.W_V)
    heads = w @ v  # (h, n, d_v)
    concat = np.concatenate(list(heads), axis=-1)
    summed = sum(heads[i] @ layer.W_O[i * d_v:(i + 1) * d_v] for i in range(h))
    # the same h * d_v = 12 products of each output, summed in another order (rule 2)
    assert_within(concat @ layer.W_O, summed, 2 * matmul_bound(concat, layer.W_O))
    assert_within(layer(x), summed, 2 * layer_error(layer, x, w))


def test_cross_attention_shapes():
    layer = MultiHeadAttention(8, 2, seed=0)
    rng = np.random.default_rng(0)
    decoder, encoder = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 7, 8))
    out, w = layer(decoder, context=encoder, return_weights=True)
    assert out.shape == (2, 3, 8) and w.shape == (2, 2, 3, 7)
    out, w = layer(decoder, padding_mask([7, 4], 7), context=encoder, return_weights=True)
    assert (w[1, :, :, 4:] == 0).all()


def test_overwritten_weights_are_used_at_once():
    layer = MultiHeadAttention(8, 2, seed=0)
    x = np.random.default_rng(0).normal(size=(5, 8))
    first = layer(x.astype(np.float32))  # a float32 call must not leave a cached cast behind
    layer.W_Q = layer.W_Q * 3.0                     # replaced
    layer.W_V[:, 1, :] = 0.0                        # edited in place
    layer.W_O[:] = np.eye(8)                        # edited in place
    ref, _ = multi_head_attention_reference(x, layer.W_Q, layer.W_K, layer.W_V, layer.W_O)
    out, w = layer(x, return_weights=True)
    assert_within(out, ref, 2 * layer_error(layer, x, w))
    x32 = x.astype(np.float32)  # one float32 evaluation (casts included) and one float64
    assert_within(layer(x32), ref, layer_error(layer, x32, w) + layer_error(layer, x, w))
    assert not np.allclose(layer(x.astype(np.float32)), first)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_in_is_dtype_out(dtype):
    layer = MultiHeadAttention(8, 2, seed=0)
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(dtype)
    out, w = layer(x, causal_mask(5), return_weights=True)
    assert out.dtype == dtype and w.dtype == dtype
    assert layer.W_Q.dtype == np.float64  # the stored weights are untouched


def test_seeded_initialisation_is_reproducible_and_uses_no_global_state():
    np.random.seed(0)
    a = MultiHeadAttention(16, 4, seed=7)
    state = np.random.get_state()[1].copy()
    np.random.seed(1)
    b = MultiHeadAttention(16, 4, seed=7)
    np.random.seed(0)
    MultiHeadAttention(16, 4, seed=8)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # global state untouched
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.allclose(a.W_Q, MultiHeadAttention(16, 4, seed=8).W_Q)
    assert not np.allclose(a.W_Q, a.W_K)


def test_glorot_initialisation_scale():
    d_model, h, d_k, d_v = 256, 8, 16, 24
    layer = MultiHeadAttention(d_model, h, d_k, d_v, seed=0)
    expected = {
        "W_Q": np.sqrt(2 / (d_model + h * d_k)),
        "W_K": np.sqrt(2 / (d_model + h * d_k)),
        "W_V": np.sqrt(2 / (d_model + h * d_v)),
        "W_O": np.sqrt(2 / (h * d_v + d_model)),
    }
    for name, std in expected.items():
        w = getattr(layer, name)
        assert abs(w.mean()) < 0.05 * std
        assert abs(w.std() / std - 1) < 0.02, name  # ~65k draws: the sample std is within 1 %
    assert layer.W_V.shape == (d_model, h, d_v) and layer.W_O.shape == (h * d_v, d_model)


def test_defaults_and_repr():
    layer = MultiHeadAttention(12, 3)
    assert (layer.d_k, layer.d_v) == (4, 4)
    assert MultiHeadAttention(12, 5, d_k=2).d_v == 2
    assert repr(layer) == "MultiHeadAttention(d_model=12, h=3, d_k=4, d_v=4)"


# ---- bad input: the type, and a message naming the argument and the shapes -------------------

@pytest.mark.parametrize("kwargs, error, message", [
    ({"d_model": 10, "h": 3}, ValueError,
     "d_model=10 is not divisible by h=3; pass d_k"),
    ({"d_model": 8, "h": 0}, ValueError, "h must be >= 1, got 0"),
    ({"d_model": 8, "h": -2}, ValueError, "h must be >= 1, got -2"),
    ({"d_model": 8, "h": 2, "d_k": 0}, ValueError, "d_k must be >= 1, got 0"),
] + [
    ({"d_model": 8, "h": 2, name: bad}, error, f"{name} " + message)
    for name in ("d_model", "h", "d_k", "d_v") for bad, error, message in BAD_INTEGERS
    if bad is not None or name in ("d_model", "h")  # d_k=None, d_v=None: the defaults
] + [
    ({"d_model": 8, "h": 2, "seed": bad}, error, message) for bad, error, message in BAD_SEEDS
])
def test_bad_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(**kwargs)


LAYER = MultiHeadAttention(8, 2, seed=0)
X = np.zeros((6, 8))


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((np.zeros((5, 6)),), {}, ValueError,
     r"x must have last dimension d_model=8, got shape \(5, 6\)"),
    ((np.zeros(8),), {}, ValueError,
     r"x must have shape \(n, d_model\) or \(b, n, d_model\), got a 1-D array of shape \(8,\)"),
    ((np.zeros((1, 2, 5, 8)),), {}, ValueError, r"got a 4-D array of shape \(1, 2, 5, 8\)"),
    ((X, np.ones((4, 4), bool)), {}, ValueError,
     r"shapes do not broadcast for the mask: mask \(4, 4\), the weights of one head"
     r" \(..., n, m\) \(6, 6\)"),
    ((X, np.ones((2, 6, 6), bool)), {}, ValueError,
     r"mask of shape \(2, 6, 6\) must broadcast to the weights of one head \(..., n, m\) \(6, 6\)"),
    ((np.zeros((2, 5, 8)),), {"context": np.zeros((3, 7, 8))}, ValueError,
     r"context must have the same number of dimensions and batch size as x: x \(2, 5, 8\) "
     r"needs context of shape \(2, 'm', 'd_model'\), got \(3, 7, 8\)"),
    ((X,), {"context": np.zeros((7, 4))}, ValueError,
     r"context must have last dimension d_model=8, got shape \(7, 4\)"),
] + [
    ((bad,), {}, error, message) for bad, error, message in bad_arrays("x", X.shape)
] + [
    ((X,), {"context": bad}, error, message)
    for bad, error, message in bad_arrays("context", (7, 8))
] + [
    ((X, bad), {}, error, message) for bad, error, message in BAD_MASKS
] + [
    ((X,), {"return_weights": bad}, TypeError, "return_weights " + message)
    for bad, message in BAD_FLAGS
])
def test_bad_forward_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        LAYER(*args, **kwargs)


def test_overwritten_weight_of_the_wrong_shape_is_named():
    layer = MultiHeadAttention(8, 2, seed=0)
    layer.W_K = np.zeros((8, 4))
    with pytest.raises(ValueError, match=r"self.W_K must have shape \(8, 2, 4\), got \(8, 4\)"):
        layer(X)
    layer = MultiHeadAttention(8, 2, seed=0)
    layer.W_O[0, 0] = np.nan
    with pytest.raises(ValueError, match="self.W_O must contain only finite values"):
        layer(X)
    layer = MultiHeadAttention(8, 2, seed=0)
    layer.W_V = layer.W_V.astype(int)
    with pytest.raises(TypeError, match="self.W_V must be a real floating-point array"):
        layer(X)


def test_compatible_with_the_source_documents_class():
    # The source document's forward pass (einsum over its (d_model, h, d_k) weight layout), fed
    # our weights, gives our output: same layout, same maths, drop-in attribute names.
    layer = MultiHeadAttention(16, 4, seed=0)
    x = np.random.default_rng(0).normal(size=(6, 16))
    Q = np.einsum("nd, dhk -> nhk", x, layer.W_Q)
    K = np.einsum("nd, dhk -> nhk", x, layer.W_K)
    V = np.einsum("nd, dhv -> nhv", x, layer.W_V)
    scores = np.einsum("nhk, mhk -> nhm", Q, K) / np.sqrt(layer.d_k)
    attn = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn /= attn.sum(axis=-1, keepdims=True)
    ctx = np.einsum("nhm, mhv -> nhv", attn, V)
    out = ctx.reshape(6, -1) @ layer.W_O
    assert_within(layer.forward(x), out, 2 * layer_error(layer, x, attn.transpose(1, 0, 2)))


@given(layers_and_inputs())
def test_trace_shows_the_stages_of_the_same_computation(case):
    layer, x, context, mask = case
    stages = layer.trace(x, mask, context=context)
    out, w = layer(x, mask, context=context, return_weights=True)
    np.testing.assert_array_equal(stages["output"], out)
    np.testing.assert_array_equal(stages["weights"], w)
    ctx = x if context is None else context
    for i in range(layer.h):  # head i's projections are the columns of its own W_i
        # each stage one product, by another kernel or order: twice its rule-2 bound
        for stage, a, W in (("q", x, layer.W_Q), ("k", ctx, layer.W_K), ("v", ctx, layer.W_V)):
            W_i = W[:, i, :].astype(x.dtype)
            assert_within(stages[stage][..., i, :, :], a @ W_i, 2 * matmul_bound(a, W_i))
    # The scores are the very ones the weights came from: softmax gives the weights bit for bit.
    visible = True if mask is None else (mask if mask.dtype == np.bool_ else mask == 0)
    if np.ndim(visible) == 3:
        visible = visible[:, None]  # (b, n, m) -> (b, 1, n, m): the same for every head
    np.testing.assert_array_equal(softmax(np.where(visible, stages["scores"], -np.inf)),
                                  stages["weights"])
    k_t = np.swapaxes(stages["k"], -1, -2)  # d_k products and a scaling: gamma(d_k + 2)
    sizes = np.abs(stages["q"].astype(float)) @ np.abs(k_t) / np.sqrt(layer.d_k)
    assert_within(stages["scores"], stages["q"] @ k_t / np.sqrt(layer.d_k),
                  2 * gamma(layer.d_k + 2, x.dtype) * sizes)
    assert_within(stages["heads"], stages["weights"] @ stages["v"],
                  2 * matmul_bound(stages["weights"], stages["v"]))
    heads_side_by_side = np.concatenate(
        [stages["heads"][..., i, :, :] for i in range(layer.h)], axis=-1)
    np.testing.assert_array_equal(stages["concat"], heads_side_by_side)
    W_O = layer.W_O.astype(x.dtype)
    assert_within(stages["output"], stages["concat"] @ W_O, 2 * matmul_bound(stages["concat"], W_O))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("d_k", [3, 5, 6])
def test_trace_scores_are_the_ones_the_weights_came_from(dtype, d_k):
    # With 1/sqrt(d_k) not a power of 2, (q k^T) * scale and (q * scale) k^T round apart: the
    # trace must show the scores that were used, not a second computation of them.
    layer = MultiHeadAttention(12, 4, d_k=d_k, seed=d_k)
    x = np.random.default_rng(d_k).normal(size=(2, 30, 12)).astype(dtype)
    mask = causal_mask(30)
    stages = layer.trace(x, mask)
    assert stages["scores"].dtype == dtype
    np.testing.assert_array_equal(softmax(np.where(mask, stages["scores"], -np.inf)),
                                  stages["weights"])
    np.testing.assert_array_equal(stages["weights"], layer(x, mask, return_weights=True)[1])
    unmasked = layer.trace(x)
    np.testing.assert_array_equal(unmasked["scores"], stages["scores"])  # before the mask
    np.testing.assert_array_equal(softmax(unmasked["scores"]), unmasked["weights"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cross", [False, True])
def test_every_stage_stays_in_the_input_dtype(dtype, cross):
    layer = MultiHeadAttention(16, 4, seed=0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 16)).astype(dtype)
    context = rng.normal(size=(2, 7, 16)).astype(dtype) if cross else None
    for name, array in layer.trace(x, causal_mask(5) if not cross else None,
                                   context=context).items():
        assert array.dtype == dtype, name


# ---- the decoding step: weights read as they are now, checked through only on a bad result ----

def _filled_caches(layer, x, count):
    """``count`` caches, each holding the rows of ``x`` fed to ``layer`` one at a time."""
    from mha import KVCache

    caches = [KVCache() for _ in range(count)]
    for cache in caches:
        for t in range(len(x)):
            layer(x[t:t + 1], cache=cache)
    return caches


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("name", ["W_Q", "W_K", "W_V", "W_O"])
def test_a_decoding_step_uses_a_weight_edit_at_once(name, in_place):
    """A float32 step after the cache is filled (the benchmark's case): editing a weight in
    place (``layer.W_Q[...] = ...``) or assigning a new array changes the very next step's
    output, to what a layer that always had the new weights computes from the same cache."""
    layer = MultiHeadAttention(64, 4, seed=0)
    x = np.random.default_rng(10).normal(size=(7, 64)).astype(np.float32)
    caches = _filled_caches(layer, x[:6], 3)    # the layer has run 18 steps: it is warm
    before = layer(x[6:], cache=caches[0])
    new = getattr(layer, name) + np.random.default_rng(11).normal(
        0, 0.2, size=getattr(layer, name).shape)
    if in_place:
        getattr(layer, name)[...] = new
    else:
        setattr(layer, name, new)
    after = layer(x[6:], cache=caches[1])
    assert after.dtype == np.float32
    # float32 rounding of these 64-term products of N(0, 1) inputs moves outputs of ~1 by
    # ~1e-6 (gamma(64) = 3.8e-6 of the sizes, probabilistically far less); an edit of N(0, 0.2)
    # moves them by ~0.1: a difference above 1e-3 / 1e-4 is the edit's, not rounding's
    assert not np.allclose(after, before, rtol=1e-3, atol=1e-4)
    twin = MultiHeadAttention(64, 4)                 # never saw the old weights
    twin.W_Q, twin.W_K, twin.W_V, twin.W_O = (getattr(layer, w).copy()
                                              for w in ("W_Q", "W_K", "W_V", "W_O"))
    np.testing.assert_array_equal(after, twin(x[6:], cache=caches[2]))  # the same computation


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, bad", [("W_Q", np.nan), ("W_K", np.inf), ("W_V", -np.inf),
                                       ("W_O", np.nan), ("W_O", np.inf)])
def test_a_decoding_step_names_a_nonfinite_weight_and_keeps_the_cache(name, bad, dtype):
    """A NaN or inf written into a weight between two steps: the next step raises the error
    that names the weight (not an overflow) and leaves the cache as it was."""
    layer = MultiHeadAttention(16, 2, seed=0)
    x = np.random.default_rng(12).normal(size=(4, 16)).astype(dtype)
    (cache,) = _filled_caches(layer, x[:3], 1)
    keys = cache.keys.copy()
    getattr(layer, name).flat[37] = bad                  # in place, between two steps
    with pytest.raises(ValueError, match=rf"self.{name} must contain only finite values, got "
                                         rf"NaN or inf in an array of shape"):
        layer(x[3:], cache=cache)
    assert len(cache) == 3
    np.testing.assert_array_equal(cache.keys, keys)


def test_an_infinite_key_weight_is_named_even_when_the_output_stays_finite():
    """An inf in W_K can give the new key a score of -inf, hence a softmax weight of 0 and a
    finite output; the step must still refuse it (it checks the new queries, keys and values,
    not only the output), or the cache would keep an infinite key."""
    layer = MultiHeadAttention(8, 2, seed=0)
    x = np.random.default_rng(13).normal(size=(4, 8))
    (cache,) = _filled_caches(layer, x[:3], 1)
    q = x[3] @ layer.W_Q[:, 0, :]                         # head 0's query, (d_k,)
    j = int(np.argmin(q))                                 # q[j] < 0 ...
    i = int(np.argmax(x[3]))                              # ... and x[3, i] > 0
    assert q[j] < 0 < x[3, i]
    edited = layer.W_K.copy()
    edited[i, 0, j] = np.inf                              # key[0, j] = +inf: score q . k = -inf
    with np.errstate(invalid="ignore"):
        new_k = x[3] @ edited[:, 0, :]                    # (d_k,)
        assert np.isinf(new_k).any() and (new_k @ q) == -np.inf  # softmax weight: exactly 0
    layer.W_K = edited
    with pytest.raises(ValueError, match="self.W_K must contain only finite values"):
        layer(x[3:], cache=cache)
    assert len(cache) == 3 and np.isfinite(cache.keys).all()
