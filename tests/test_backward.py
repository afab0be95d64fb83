"""The backward pass (mha.backward, MultiHeadAttention.backward) against finite differences and
PyTorch autograd's golden gradients (made by tests/golden/make_backward_golden.py), its
properties, and bad input.

Finite differences: central differences of ``L = sum(output * d_out)`` in float64, one entry at
a time, step 1e-6. Their error is about step^2 (truncation) plus 1e-16 / step (rounding), so
they agree with the exact gradient to ~1e-9; the tolerance below (1e-7) leaves room for that.
Golden float64 gradients agree to 1e-12 (both sides compute the same sums in another order);
float32 ones to 1e-5 relative, as in tests/test_golden.py.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import (BAD_QKV, K, Q, V, attention_inputs, bad_arrays, in_threads, layer_error,
                     make_mask, no_warnings, numeric_gradient)
from mha import (MultiHeadAttention, attention_backward, scaled_dot_product_attention, softmax,
                 softmax_backward)
from tolerance import assert_within, gamma

GOLDEN = np.load(Path(__file__).parent / "golden" / "backward.npz")
# Rule 2 of tests/tolerance.py for the golden cases' backward chains (a few products deep, over
# k <= 24 terms: d_model 16, h * d_v <= 24, n <= 7, batches <= 3). float64: terms of |x| <= 3.6
# times |W| <= 1.2 or gradients <= 21 give sums of sizes up to ~200, gamma(24) * 200 = 5e-13 per
# product: 1e-12 absolute and relative. float32 (sdpa/float32: d_k 16, n 6, values <= 3.3):
# ~sqrt(16) u = 2.4e-7 of sizes ~20 per product (probabilistic rule), ~5e-6 on gradients of ~1:
# 1e-5 relative, 1e-6 absolute for the small ones.
GOLDEN_TOL = {np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12},
              np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-6}}
FD_TOL = {"rtol": 1e-6, "atol": 1e-7}  # finite differences' ~1e-9 (module docstring), 100x
GRADIENTS = ("x", "context", "W_Q", "W_K", "W_V", "W_O")


def layer_loss(layer, x, d_out, mask, context):
    """``sum(layer(x) * d_out)``: its gradient with respect to the output is ``d_out``."""
    return lambda: float((layer(x, mask, context=context) * d_out).sum())


def layer_numeric_gradients(layer, x, d_out, mask=None, context=None) -> dict:
    """The six gradients of `MultiHeadAttention.backward`, by finite differences."""
    loss = layer_loss(layer, x, d_out, mask, context)
    grads = {"x": numeric_gradient(loss, x),
             "context": None if context is None else numeric_gradient(loss, context)}
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        grads[name] = numeric_gradient(loss, getattr(layer, name))
    return grads


def assert_gradients_close(actual: dict, expected: dict, **tol):
    assert set(actual) == set(GRADIENTS)
    for name in GRADIENTS:
        if expected[name] is None:
            assert actual[name] is None, name
        else:
            assert actual[name].shape == expected[name].shape, name
            np.testing.assert_allclose(actual[name], expected[name], err_msg=name, **tol)


# ---- finite differences ---------------------------------------------------------------------------

@st.composite
def softmax_inputs(draw):
    """float64 logits with some -inf entries (hidden) and possibly a fully hidden slice, an axis."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.normal(size=shape) * draw(st.sampled_from([0.1, 1.0, 5.0]))
    if draw(st.booleans()):
        x[rng.random(shape) < 0.3] = -np.inf
    if draw(st.booleans()):  # one slice along the axis fully hidden
        index = [slice(None)] * len(shape)
        for dim in range(len(shape)):
            if dim != axis % len(shape):
                index[dim] = 0
        x[tuple(index)] = -np.inf
    return x, rng.normal(size=shape), axis


@settings(max_examples=40)
@given(softmax_inputs())
def test_softmax_backward_matches_finite_differences(inputs):
    x, dp, axis = inputs
    with no_warnings():
        dx = softmax_backward(softmax(x, axis=axis), dp, axis=axis)
    expected = numeric_gradient(lambda: float((softmax(x, axis=axis) * dp).sum()), x)
    assert dx.shape == x.shape and dx.dtype == np.float64
    np.testing.assert_allclose(dx, expected, **FD_TOL)
    assert (dx[np.isneginf(x)] == 0).all()  # a hidden entry (p = 0) gets exactly nothing


@settings(max_examples=40)
@given(attention_inputs(), st.sampled_from([None, 1.0, 0.37]))
def test_attention_backward_matches_finite_differences(inputs, scale):
    """Every mask kind (none, causal, window, padding, random boolean, additive 0 / -inf, every
    query hidden), broadcast leading dimensions, n_q != n_k, d_k != d_v, custom scales."""
    q, k, v, mask, kind = (a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype != bool
                           else a for a in inputs)
    out, _ = scaled_dot_product_attention(q, k, v, mask, scale=scale)
    d_out = np.random.default_rng(q.size).normal(size=out.shape)
    with no_warnings():
        grads = attention_backward(q, k, v, d_out, mask, scale=scale)

    def loss():
        return float((scaled_dot_product_attention(q, k, v, mask, scale=scale)[0] * d_out).sum())

    for name, z, grad in zip("qkv", (q, k, v), grads):
        assert grad.shape == z.shape and grad.dtype == np.float64, name
        np.testing.assert_allclose(grad, numeric_gradient(loss, z), err_msg=f"d{name} ({kind})",
                                   **FD_TOL)


def test_attention_backward_with_one_fully_masked_query_matches_finite_differences():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 2, 5, 4))
    mask = np.tril(np.ones((5, 5), bool))
    mask[3] = False  # query 3 sees nothing
    d_out = rng.normal(size=(2, 5, 4))
    with no_warnings():
        dq, dk, dv = attention_backward(q, k, v, d_out, mask)
    loss = lambda: float((scaled_dot_product_attention(q, k, v, mask)[0] * d_out).sum())  # noqa: E731
    for z, grad in ((q, dq), (k, dk), (v, dv)):
        np.testing.assert_allclose(grad, numeric_gradient(loss, z), **FD_TOL)
    np.testing.assert_array_equal(dq[:, 3], 0.0)


@st.composite
def layer_inputs(draw):
    """A small layer (self- or cross-attention, rope or not, scale or not), its inputs, a mask of
    ``(n, m)`` or ``(b, n, m)`` of any kind, and ``d_out``."""
    h = draw(st.integers(1, 2))
    rope = draw(st.booleans())
    d_k = 2 * draw(st.integers(1, 2)) if rope else draw(st.integers(1, 3))
    d_v = draw(st.integers(1, 3))
    d_model = draw(st.integers(2, 5))
    scale = draw(st.sampled_from([None, 1.0, 0.6]))
    layer = MultiHeadAttention(d_model, h, d_k, d_v, seed=draw(st.integers(0, 99)), rope=rope,
                               scale=scale)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lead = (draw(st.integers(1, 2)),) if draw(st.booleans()) else ()
    n = draw(st.integers(1, 4))
    cross = not rope and draw(st.booleans())
    m = draw(st.integers(1, 4)) if cross else n
    x = rng.normal(size=lead + (n, d_model))
    context = rng.normal(size=lead + (m, d_model)) if cross else None
    kind = draw(st.sampled_from(["none", "causal", "padding", "random_bool", "additive",
                                 "none_visible", "one_row_hidden"]))
    if kind == "one_row_hidden":
        mask = np.ones(lead + (n, m), bool)
        mask[..., draw(st.integers(0, n - 1)), :] = False
    else:
        mask = make_mask(kind, rng, lead, n, m)
        if mask is not None and mask.ndim > 2:  # (b, 1, m) from padding: the layer's (b, n, m)
            mask = np.broadcast_to(mask, lead + (n, m))
    return layer, x, context, mask, rng.normal(size=lead + (n, d_model))


@settings(max_examples=30)
@given(layer_inputs())
def test_layer_backward_matches_finite_differences(inputs):
    """All six gradients, over batch or none, self- and cross-attention (n != m), rope=True,
    custom scales, every mask kind as (n, m) or (b, n, m)."""
    layer, x, context, mask, d_out = inputs
    with no_warnings():
        grads = layer.backward(x, d_out, mask, context=context)
    assert_gradients_close(grads, layer_numeric_gradients(layer, x, d_out, mask, context),
                           **FD_TOL)


def test_self_attention_gradient_of_x_is_the_sum_of_its_three_roles():
    """In self-attention x is queries, keys and values at once: its gradient is the sum of the
    query path (x) and the key/value path (context) of the same layer run as cross-attention."""
    rng = np.random.default_rng(1)
    layer = MultiHeadAttention(8, 2, seed=3)
    x, d_out = rng.normal(size=(2, 2, 5, 8))
    mask = np.tril(np.ones((5, 5), bool))
    own = layer.backward(x, d_out, mask)
    assert own["context"] is None
    cross = layer.backward(x, d_out, mask, context=x.copy())
    # float64 chain of products over k <= 8 (d_model, n = 5, h * d_v) of N(0, 1) inputs and
    # weights ~0.5, sizes of terms <= ~10: gamma(8) * 10 = 9e-15 each, a few deep, per side
    np.testing.assert_allclose(own["x"], cross["x"] + cross["context"], rtol=1e-12, atol=1e-14)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        np.testing.assert_allclose(own[name], cross[name], rtol=1e-12, atol=1e-14)


# ---- PyTorch autograd ---------------------------------------------------------------------------

def golden_cases(prefix: str) -> list[str]:
    return sorted({key.split("/")[1] for key in GOLDEN.files if key.startswith(prefix + "/")})


def test_golden_file_holds_the_expected_cases():
    assert golden_cases("sdpa") == ["broadcast", "causal", "float32", "fully_masked", "padding",
                                    "plain", "scale"]
    assert golden_cases("mha") == ["causal", "cross", "padding", "rope", "self"]
    assert str(GOLDEN["torch_version"]).startswith("2.")


@pytest.mark.parametrize("name", golden_cases("sdpa"))
def test_attention_backward_matches_torch_autograd(name):
    g = lambda key: GOLDEN[f"sdpa/{name}/{key}"]  # noqa: E731
    get = lambda key: g(key) if f"sdpa/{name}/{key}" in GOLDEN.files else None  # noqa: E731
    scale = get("scale")
    grads = attention_backward(g("q"), g("k"), g("v"), g("d_out"), get("mask"),
                               scale=None if scale is None else float(scale))
    for key, grad in zip(("dq", "dk", "dv"), grads):
        assert grad.shape == g(key).shape and grad.dtype == g(key).dtype, key
        np.testing.assert_allclose(grad, g(key), err_msg=key, **GOLDEN_TOL[grad.dtype])
    if name == "fully_masked":  # torch, too, gives the query that sees nothing zero gradient
        np.testing.assert_array_equal(grads[0][2], 0.0)
        np.testing.assert_array_equal(g("dq")[2], 0.0)


@pytest.mark.parametrize("name", golden_cases("mha"))
def test_layer_backward_matches_torch_autograd(name):
    g = lambda key: GOLDEN[f"mha/{name}/{key}"]  # noqa: E731
    get = lambda key: g(key) if f"mha/{name}/{key}" in GOLDEN.files else None  # noqa: E731
    W_Q, W_V = g("W_Q"), g("W_V")
    layer = MultiHeadAttention(W_Q.shape[0], W_Q.shape[1], W_Q.shape[2], W_V.shape[2],
                               rope=bool(g("rope")))
    layer.W_Q, layer.W_K, layer.W_V, layer.W_O = W_Q, g("W_K"), W_V, g("W_O")
    x, context, mask = g("x"), get("context"), get("mask")
    out, w = layer(x, mask, context=context, return_weights=True)
    assert_within(out, g("output"), 2 * layer_error(layer, x, w, context))  # the same as torch's
    grads = layer.backward(x, g("d_out"), mask, context=context)
    expected = {name: get(f"d{name}") for name in GRADIENTS}
    assert_gradients_close(grads, expected, **GOLDEN_TOL[np.dtype(np.float64)])


# ---- properties ---------------------------------------------------------------------------------

def test_hidden_keys_get_exactly_zero_gradient_from_the_queries_that_cannot_see_them():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 2, 6, 4))
    mask = rng.random((6, 6)) < 0.5
    mask[:, 5] = False  # key 5 is hidden from everyone
    for i in range(6):  # a loss that reads query i's output only
        d_out = np.zeros((2, 6, 4))
        d_out[:, i] = rng.normal(size=(2, 4))
        dq, dk, dv = attention_backward(q, k, v, d_out, mask)
        hidden = ~mask[i]
        assert (dk[:, hidden] == 0).all() and (dv[:, hidden] == 0).all(), i
        assert (dq[:, np.arange(6) != i] == 0).all()  # other queries did not reach the loss
    _, dk, dv = attention_backward(q, k, v, rng.normal(size=(2, 6, 4)), mask)
    assert (dk[:, 5] == 0).all() and (dv[:, 5] == 0).all()
    assert (np.abs(dv[:, mask.any(axis=0)]).sum(axis=-1) > 0).all()  # the visible keys do


def test_additive_and_boolean_masks_give_the_same_gradients():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 5, 4))
    d_out = rng.normal(size=(5, 4))
    mask = np.tril(np.ones((5, 5), bool))
    additive = np.where(mask, 0.0, -np.inf)
    for a, b in zip(attention_backward(q, k, v, d_out, mask),
                    attention_backward(q, k, v, d_out, additive)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fully_masked_query_gets_zero_gradient_and_no_nan(dtype):
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(3, 4, 6)).astype(dtype)
    mask = np.ones((4, 4), bool)
    mask[1] = False
    with no_warnings():
        dq, dk, dv = attention_backward(q, k, v, rng.normal(size=(4, 6)).astype(dtype), mask)
        everything_hidden = attention_backward(q, k, v, np.ones((4, 6), dtype),
                                               np.zeros((4, 4), bool))
        layer_grads = MultiHeadAttention(6, 2, seed=0).backward(q, np.ones((4, 6), dtype),
                                                                np.zeros((4, 4), bool))
    assert (dq[1] == 0).all() and not np.isnan(dq).any()
    assert np.isfinite(dk).all() and np.isfinite(dv).all()
    for grad in everything_hidden:  # no weights at all: no gradient anywhere
        np.testing.assert_array_equal(grad, 0.0)
    # the layer's output is 0 whatever x, W_Q, W_K, W_V are; only W_O's gradient (H = 0) is 0
    for name in ("x", "W_Q", "W_K", "W_V", "W_O"):
        np.testing.assert_array_equal(layer_grads[name], 0.0)


def test_softmax_backward_of_a_zero_row_is_zero_and_ignores_a_shift_of_dp():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 6))
    x[2] = -np.inf  # fully masked row: p = 0 there
    p, dp = softmax(x), rng.normal(size=(4, 6))
    with no_warnings():
        dx = softmax_backward(p, dp)
    np.testing.assert_array_equal(dx[2], 0.0)
    shift = rng.normal(size=(4, 1)) * 10  # one constant per row
    # dx = p * (dp - sum(p * dp)) errs by gamma(6 + 2) * p * (|dp| + sum |p * dp|) (rule 2;
    # one more term where dp + shift rounds); with the shift, p * shift * (1 - sum p) remains,
    # and the computed p sum to 1 within 2u of the rows' spread (x_i - max rounds), exp's 4 ulp,
    # the division's and the 6-term sum's gamma(6), relative
    spread = np.ptp(x[np.isfinite(x).all(axis=-1)], axis=-1).max()
    sum_p_error = np.finfo(float).eps * spread + 5 * np.finfo(float).eps + gamma(6)
    sizes = np.abs(dp) + np.abs(shift)
    rounding = gamma(6 + 2 + 1) * p * (sizes + (p * sizes).sum(-1, keepdims=True))
    assert_within(softmax_backward(p, dp + shift), dx,
                  2 * rounding + p * np.abs(shift) * sum_p_error)
    # sum dx = sum(p * dp) * (1 - sum p): each term's error, gamma(6) of the sum, and 1 - sum p
    terms = p * (np.abs(dp) + (p * np.abs(dp)).sum(-1, keepdims=True))
    assert_within(dx.sum(axis=-1), 0.0, gamma(8 + 6) * terms.sum(-1)
                  + (p * np.abs(dp)).sum(-1) * sum_p_error)  # no net change
    dx0 = softmax_backward(p.T, dp.T, axis=0)  # the axis is honoured
    # the same sums along another axis, maybe in another order: dx = p * (dp - sum(p * dp)),
    # so each side errs by ~gamma(6 + 2) * p * (|dp| + sum |p * dp|) (tests/tolerance.py)
    assert_within(dx0, dx.T, 2 * gamma(6 + 2) * p.T * (np.abs(dp.T) + (p * np.abs(dp)).sum(-1)))


def test_backward_of_the_output_itself_is_the_gradient_of_half_its_squared_norm():
    rng = np.random.default_rng(6)
    layer = MultiHeadAttention(6, 2, seed=1)
    x = rng.normal(size=(2, 4, 6))
    mask = np.tril(np.ones((4, 4), bool))
    grads = layer.backward(x, layer(x, mask), mask)  # d(0.5 |y|^2)/dy = y
    loss = lambda: 0.5 * float((layer(x, mask) ** 2).sum())  # noqa: E731
    np.testing.assert_allclose(grads["x"], numeric_gradient(loss, x), **FD_TOL)
    np.testing.assert_allclose(grads["W_Q"], numeric_gradient(loss, layer.W_Q), **FD_TOL)
    q, k, v = rng.normal(size=(3, 5, 3))
    dq, _, _ = attention_backward(q, k, v, scaled_dot_product_attention(q, k, v)[0])
    loss = lambda: 0.5 * float((scaled_dot_product_attention(q, k, v)[0] ** 2).sum())  # noqa: E731
    np.testing.assert_allclose(dq, numeric_gradient(loss, q), **FD_TOL)


def test_gradients_of_broadcast_inputs_are_summed_over_the_dimensions_they_were_spread_along():
    rng = np.random.default_rng(7)
    q = rng.normal(size=(2, 3, 4, 5))
    k = rng.normal(size=(1, 3, 6, 5))      # shared by the batch
    v = rng.normal(size=(6, 2))            # shared by batch and heads
    mask = rng.random((2, 1, 4, 6)) < 0.7  # one mask per batch entry, for every head
    d_out = rng.normal(size=(2, 3, 4, 2))
    dq, dk, dv = attention_backward(q, k, v, d_out, mask)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    full = [np.broadcast_to(a, (2, 3) + a.shape[-2:]).copy() for a in (q, k, v)]
    dq_full, dk_full, dv_full = attention_backward(*full, d_out, mask)
    # float64 products over k <= 6 (n_k, d_k = 5, n_q = 4) of N(0, 1) values, sizes of terms
    # <= ~10 (gamma(6) * 10 = 7e-15), a broadcast layout's kernel on one side; dk and dv then
    # sum 2 or 6 such copies in another order: 1e-13 / 1e-12 relative, 1e-15 / 1e-14 absolute
    np.testing.assert_allclose(dq, dq_full, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dk, dk_full.sum(axis=0, keepdims=True), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dv, dv_full.sum(axis=(0, 1)), rtol=1e-12, atol=1e-14)


def test_float32_stays_float32_and_agrees_with_float64():
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(3, 2, 5, 4))
    d_out = rng.normal(size=(2, 5, 4))
    grads64 = attention_backward(q, k, v, d_out)
    grads32 = attention_backward(*(a.astype(np.float32) for a in (q, k, v, d_out)))
    for g32, g64 in zip(grads32, grads64):
        assert g32.dtype == np.float32
        # float32 (u = 6e-8) chain of products over k <= 5 of N(0, 1) values, sizes <= ~10:
        # gamma(5) * 10 = 3e-6 each, a few deep: 1e-5 absolute, 1e-4 relative
        np.testing.assert_allclose(g32, g64, rtol=1e-4, atol=1e-5)
    dx32 = softmax_backward(softmax(q.astype(np.float32)), d_out.astype(np.float32))
    assert dx32.dtype == np.float32
    layer = MultiHeadAttention(4, 2, seed=0)
    x = rng.normal(size=(5, 4))
    layer_grads = layer.backward(x.astype(np.float32), d_out[0].astype(np.float32))
    expected = layer.backward(x, d_out[0])
    for name in ("x", "W_Q", "W_K", "W_V", "W_O"):
        assert layer_grads[name].dtype == np.float32, name
        np.testing.assert_allclose(layer_grads[name], expected[name], rtol=1e-4,
                                   atol=1e-5)  # as above: d_model 4, n 5, h * d_v 4


def frozen(*arrays):
    """Read-only copies: writing into one raises, so a function that modifies its input fails."""
    out = []
    for a in arrays:
        a = np.array(a)
        a.setflags(write=False)
        out.append(a)
    return out


def test_inputs_and_weights_are_never_modified():
    rng = np.random.default_rng(9)
    q, k, v, d_out = frozen(*rng.normal(size=(4, 2, 5, 4)))
    copies = [a.copy() for a in (q, k, v, d_out)]
    mask = frozen(np.tril(np.ones((5, 5), bool)))[0]
    attention_backward(q, k, v, d_out, mask)
    p, dp = frozen(softmax(q), d_out)
    softmax_backward(p, dp)
    for a, b in zip((q, k, v, d_out), copies):
        np.testing.assert_array_equal(a, b)
    layer = MultiHeadAttention(4, 2, seed=0, rope=True)
    weights = {name: getattr(layer, name) for name in ("W_Q", "W_K", "W_V", "W_O")}
    before = {name: w.copy() for name, w in weights.items()}
    x, d_out = frozen(*rng.normal(size=(2, 2, 5, 4)))
    grads = layer.backward(x, d_out, mask)
    for name, w in weights.items():  # the same arrays, with the same values: backward only reads
        assert getattr(layer, name) is w
        np.testing.assert_array_equal(w, before[name])
        assert not np.shares_memory(grads[name], w)
    cross = MultiHeadAttention(4, 2, seed=0)
    context = frozen(rng.normal(size=(2, 3, 4)))[0]
    cross.backward(x, d_out, context=context)
    assert not context.flags.writeable


def test_two_threads_get_the_same_gradients_as_one():
    rng = np.random.default_rng(10)
    layer = MultiHeadAttention(16, 4, seed=0)
    inputs = [rng.normal(size=(2, 2, 24, 16)) for _ in range(2)]  # (x, d_out) per thread
    mask = np.tril(np.ones((24, 24), bool))
    expected = [layer.backward(x, d_out, mask) for x, d_out in inputs]
    results = [[], []]

    def work(i):
        x, d_out = inputs[i]
        for _ in range(20):
            results[i].append(layer.backward(x, d_out, mask))

    in_threads(work, 2)
    for i in range(2):
        assert len(results[i]) == 20
        for grads in results[i]:
            assert_gradients_close(grads, expected[i], rtol=0, atol=0)  # the same code: exact


# ---- overflow -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, big", [(np.float16, 6e4), (np.float32, 3e38)])
def test_an_overflowing_gradient_is_a_value_error_never_inf(dtype, big):
    """The forward is fine (weights <= 1, moderate values), but d_out near the dtype's largest
    value sums to more than it can hold in dv = P^T d_out."""
    rng = np.random.default_rng(11)
    q, k, v = rng.normal(size=(3, 4, 4)).astype(dtype)
    d_out = np.full((4, 4), big, dtype)
    with no_warnings(), pytest.raises(ValueError, match=rf"overflowed {np.dtype(dtype).name} "
                                      r"\(q \(4, 4\), k \(4, 4\), v \(4, 4\)\).*scale them down"):
        attention_backward(q, k, v, d_out)
    with no_warnings(), pytest.raises(ValueError, match=rf"overflowed {np.dtype(dtype).name}"):
        # (for a true softmax |dx| <= max|dp| / 2; p = 1 everywhere is no softmax, but allowed:
        # dx_0 = dp_0 - (dp_0 + dp_1 + dp_2) = 2 big)
        softmax_backward(np.ones((2, 3), dtype), np.tile(np.array([big, -big, -big], dtype),
                                                          (2, 1)))
    layer = MultiHeadAttention(4, 2, seed=0)
    with no_warnings(), pytest.raises(ValueError, match=rf"overflowed {np.dtype(dtype).name} "
                                      r"\(.*\).*scale them down"):
        layer.backward(q, d_out)


def test_large_but_representable_float32_gradients_are_returned():
    rng = np.random.default_rng(12)
    q, k, v = rng.normal(size=(3, 4, 4)).astype(np.float32)
    dq, dk, dv = attention_backward(q, k, v, np.full((4, 4), 1e30, np.float32))
    assert dv.dtype == np.float32 and np.isfinite(dv).all() and np.abs(dv).max() > 1e29


# ---- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, error, message", bad_arrays("d_out", (2, 4, 5)))
def test_attention_backward_refuses_bad_d_out(bad, error, message):
    with pytest.raises(error, match=message):
        attention_backward(Q, K, V, bad)


@pytest.mark.parametrize("qkv, error, message", BAD_QKV)
def test_attention_backward_refuses_what_the_forward_refuses(qkv, error, message):
    with pytest.raises(error, match=message):
        attention_backward(*qkv, np.zeros((2, 4, 5)))


@pytest.mark.parametrize("shape", [(2, 4, 6), (4, 5), (1, 2, 4, 5), (2, 5, 5)])
def test_attention_backward_names_the_shapes_of_a_wrong_d_out(shape):
    dims = lambda s: str(s).replace("(", r"\(").replace(")", r"\)")  # noqa: E731
    with pytest.raises(ValueError, match=rf"d_out must have the attention output's shape "
                                         rf"\(2, 4, 5\) \(q \(2, 4, 8\), k \(2, 6, 8\), v "
                                         rf"\(2, 6, 5\)\), got {dims(shape)}"):
        attention_backward(Q, K, V, np.zeros(shape))
    with pytest.raises(ValueError, match=rf"shape \(2, 4, 5\) .*mask \(2, 1, 6\)\), got {dims(shape)}"):
        attention_backward(Q, K, V, np.zeros(shape), np.ones((2, 1, 6), bool))


@pytest.mark.parametrize("p, dp, axis, error, message", [
    (np.zeros((2, 3)), np.zeros((3, 2)), -1, ValueError,
     r"p and dp must have the same shape, got p \(2, 3\) and dp \(3, 2\)"),
    (np.zeros((2, 3)), np.zeros((2, 3), int), -1, TypeError, r"dp must be a real floating"),
    (np.zeros((2, 3), int), np.zeros((2, 3)), -1, TypeError, r"p must be a real floating"),
    (np.zeros((2, 3)), np.full((2, 3), np.nan), -1, ValueError, r"dp must contain only finite"),
    (np.full((2, 3), np.inf), np.zeros((2, 3)), -1, ValueError, r"p must contain only finite"),
    (np.zeros((2, 3)), np.zeros((2, 3)), 2, ValueError, r"axis"),
    (np.zeros((2, 3)), np.zeros((2, 3)), 1.0, TypeError, r"axis"),
])
def test_softmax_backward_refuses_bad_input(p, dp, axis, error, message):
    with pytest.raises(error, match=message):
        softmax_backward(p, dp, axis=axis)


def test_layer_backward_refuses_bad_d_out_and_bad_input():
    layer = MultiHeadAttention(8, 2, seed=0)
    x = np.zeros((2, 5, 8))
    with pytest.raises(ValueError, match=r"d_out must have the layer output's shape "
                                         r"\(2, 5, 8\) \(x \(2, 5, 8\)\), got \(2, 8, 5\)"):
        layer.backward(x, np.zeros((2, 8, 5)))
    with pytest.raises(ValueError, match=r"output's shape \(2, 5, 8\) .*got \(5, 8\)"):
        layer.backward(x, np.zeros((5, 8)), context=np.zeros((2, 3, 8)))
    for bad, error, message in bad_arrays("d_out", (2, 5, 8)):
        with pytest.raises(error, match=message):
            layer.backward(x, bad)
    with pytest.raises(TypeError, match=r"x must be a real floating"):
        layer.backward(x.astype(int), np.zeros((2, 5, 8)))
    with pytest.raises(TypeError, match=r"mask must be boolean"):
        layer.backward(x, np.zeros((2, 5, 8)), np.ones((5, 5), int))
    with pytest.raises(ValueError, match=r"not supported with rope=True"):
        MultiHeadAttention(8, 2, seed=0, rope=True).backward(x, np.zeros((2, 5, 8)), context=x)


@pytest.mark.parametrize("cross", [False, True])
def test_layer_backward_of_no_tokens_is_zero_for_every_weight(cross):
    """No queries (n = 0): nothing reaches any weight, and the shapes still hold."""
    layer = MultiHeadAttention(8, 2, seed=0)
    x = np.zeros((2, 0, 8))
    context = np.ones((2, 3, 8)) if cross else None
    grads = layer.backward(x, np.zeros((2, 0, 8)), context=context)
    assert grads["x"].shape == (2, 0, 8)
    assert (grads["context"] is None) == (not cross)
    if cross:
        assert grads["context"].shape == (2, 3, 8) and not grads["context"].any()
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert grads[name].shape == getattr(layer, name).shape and not grads[name].any()


# ---- found by outside tests: float16 steps, extreme gradients, context=x ------------------------

def test_softmax_backward_in_float16_survives_an_intermediate_beyond_float16():
    """dp_j - sum_i p_i dp_i reaches 1.2e5 here, beyond float16's 65504, while the gradient is
    about 110: computed in float32 (as softmax sums float16), it is that gradient, rounded once."""
    p = softmax(np.array([0.0, -7.0], np.float16))            # [0.99909, 0.000911]
    dp = np.array([-6e4, 6e4], np.float16)
    with no_warnings():
        dx = softmax_backward(p, dp)
    assert dx.dtype == np.float16
    exact = p.astype(np.float64) * (dp - (p.astype(np.float64) * dp).sum())   # about +-109
    assert np.abs(exact).max() > 100
    np.testing.assert_array_max_ulp(dx, exact.astype(np.float16), maxulp=1)
    # the same along another axis of a batch, and with float32 dp (float32 then, no detour)
    batch = np.stack([p, p[::-1]], axis=1)                     # (2, 2), softmax along axis 0
    out = softmax_backward(batch, np.stack([dp, dp[::-1]], axis=1), axis=0)
    np.testing.assert_array_equal(out, np.stack([dx, dx[::-1]], axis=1))
    assert softmax_backward(p, dp.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_backward_near_the_largest_float_refuses_only_a_gradient_that_overflows(dtype):
    """|dp| near the dtype's largest number: dp_j - row overflows, p_j (dp_j - row) does not."""
    big = np.finfo(dtype).max / 1.06
    p = softmax(np.array([0.0, -7.0], dtype))
    dp = np.array([-big, big], dtype)
    with no_warnings():
        dx = softmax_backward(p, dp)
    assert dx.dtype == dtype
    # The gradient is linear in dp, and a power of two scales it exactly: the reference runs
    # far from the overflow. Both sums have a rounding error of a few eps * |dp|.
    reference = softmax_backward(p, dp * dtype(2.0**-20)) * dtype(2.0**20)
    assert np.all(np.abs(dx - reference) <= 8 * np.finfo(dtype).eps * big)
    # For a true softmax |dx| <= max|dp| / 2: only a p that is none can make it overflow.
    with pytest.raises(ValueError, match=r"the softmax gradient overflowed"):
        softmax_backward(np.ones(3, dtype), np.array([big, -big, -big], dtype))   # 2 big


def test_attention_backward_in_float16_survives_intermediates_beyond_float16():
    """dP = dO V^T reaches 1.9e5 here and rowsum(O dO) 8e4, while every gradient fits float16."""
    rng = np.random.default_rng(0)
    q, k, v = (2 * a for a in rng.normal(size=(3, 4, 8)).astype(np.float16))
    v = v * np.float16(5)
    d_out = (rng.normal(size=(4, 8)) * 3000).astype(np.float16)
    with no_warnings():
        grads = attention_backward(q, k, v, d_out)
    exact = attention_backward(*(a.astype(np.float64) for a in (q, k, v, d_out)))
    for name, grad, want in zip(("dq", "dk", "dv"), grads, exact):
        assert grad.dtype == np.float16, name
        # The float16 forward rounds P and O (u = 2^-11 relative each); through
        # dS = P (dP - rowsum(O dO)) that is a few u of the largest terms, here of the size of
        # the largest gradient (2.8 u measured for dq); then one rounding to float16.
        u = 2.0**-11
        bound = u * np.abs(want) + 8 * u * np.abs(want).max()
        assert np.all(np.abs(grad - want) <= bound), name


@pytest.mark.parametrize("lead", [(), (2,)])
def test_backward_with_context_x_is_cross_attention_whichever_array_context_is(lead):
    """context=x and context=x.copy() are the same arguments: both get the key/value path apart
    in "context" (it was None for context=x, whose sum then hid in "x"); no context at all is
    self-attention, whose "x" is the sum of the two paths."""
    rng = np.random.default_rng(5)
    layer = MultiHeadAttention(8, 2, kv_heads=1, seed=3)
    x, d_out = rng.normal(size=(2,) + lead + (5, 8))
    mask = np.tril(np.ones((5, 5), bool))
    same = layer.backward(x, d_out, mask, context=x)
    copied = layer.backward(x, d_out, mask, context=x.copy())
    assert same["context"] is not None and same["context"].shape == x.shape
    for name in GRADIENTS:  # the forward took another path (one fused product): rounding only
        # float64 chain of products over k <= 8 (d_model, n = 5, h * d_v) of N(0, 1) inputs and
        # weights ~0.5, sizes of terms <= ~10: gamma(8) * 10 = 9e-15 each, a few deep
        np.testing.assert_allclose(same[name], copied[name], rtol=1e-12, atol=1e-14,
                                   err_msg=name)
    own = layer.backward(x, d_out, mask)
    assert own["context"] is None
    np.testing.assert_allclose(own["x"], same["x"] + same["context"], rtol=1e-12,
                               atol=1e-14)  # as above, one more sum of two
