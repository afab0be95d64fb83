"""Tolerances, Hypothesis strategies, bad-input tables and small helpers shared by the tests.

Each bad-input table lists ``(value, error, message)``: what a user might pass, the exception
type it must raise and a regular expression its message must match (naming the argument). A
test file adds its own argument name or call around them.
"""

from __future__ import annotations

import importlib.util
import threading
import warnings
from contextlib import contextmanager

import numpy as np
from hypothesis import strategies as st

from tolerance import eps, gamma

# Tolerances against the plain-Python reference, which computes in float64 (rule 2 of
# tests/tolerance.py): a product over the k <= 64 terms of the tests' shapes errs by at most
# gamma(64) = 3.8e-6 (float32) or 7.1e-15 (float64) of the sum of its terms' sizes; attention
# chains two products and a softmax, whose exp turns the scores' absolute error into a relative
# one as large, and cancellation makes the sum of sizes up to ~50x the result: hence 2e-4 and
# 1e-10 relative, with an atol for results near 0. float16 carries ~3 digits.
TOLERANCE = {
    np.dtype(np.float16): {"rtol": 2e-2, "atol": 2e-3},
    np.dtype(np.float32): {"rtol": 2e-4, "atol": 2e-5},
    np.dtype(np.float64): {"rtol": 1e-10, "atol": 1e-12},
}

DTYPES = st.sampled_from([np.float32, np.float64])
MASK_KINDS = ["none", "causal", "window", "padding", "random_bool", "additive", "none_visible"]


def assert_close(actual, expected, dtype=None):
    """``np.testing.assert_allclose`` with the tolerance of ``dtype`` (default: ``actual``'s)."""
    dtype = np.dtype(dtype or np.asarray(actual).dtype)
    np.testing.assert_allclose(actual, expected, **TOLERANCE[dtype])


def attention_error(q, k, v, w, scale=None, input_errors=(0.0, 0.0, 0.0), dtype=None):
    """Rule 2 of tests/tolerance.py for one evaluation of attention ``w = softmax(scale q k^T)``,
    ``out = w v`` in ``dtype`` (default: that of ``q, k, v``): the bounds
    ``(out_error, w_error)``, elementwise. Two evaluations (other shapes, another kernel) differ
    by at most twice them.

    A score sums d_k products and is scaled (gamma(d_k + 2) of ``scale |q| |k|^T``), and softmax
    subtracts the row's largest (u of the two, so gamma(d_k + 4) in all); it turns the scores'
    absolute error into a relative one twice as large (the score's and the row's largest), and
    adds exp's 4 ulp, its sum's gamma(n_k) and the division's ulp; ``w v`` sums n_k terms of
    ``|w| |v|`` more. ``input_errors`` are absolute bounds on the errors ``q, k, v`` already
    carry (a layer's projections), passed on to first order.
    """
    dtype = np.dtype(dtype or np.result_type(q, k, v))
    d_k, n_k = np.shape(q)[-1], np.shape(k)[-2]
    scale = abs(1 / np.sqrt(d_k) if scale is None else scale)
    q, k, v = (np.abs(np.asarray(a, np.float64)) for a in (q, k, v))
    dq, dk, dv = (np.broadcast_to(e, a.shape) for e, a in zip(input_errors, (q, k, v)))
    k_t, dk_t = np.swapaxes(k, -1, -2), np.swapaxes(dk, -1, -2)
    score_error = scale * (gamma(d_k + 4, dtype) * (q @ k_t) + dq @ k_t + q @ dk_t)
    w_rel = (2 * score_error.max(axis=-1, keepdims=True, initial=0.0) + 5 * eps(dtype)
             + gamma(n_k, dtype))
    w = np.abs(np.asarray(w, np.float64))
    out_error = (gamma(n_k, dtype) + w_rel) * (w @ v) + w @ dv
    return out_error, w_rel * w


def layer_error(layer, x, w, context=None, positions=None, return_weights=False):
    """Rule 2 for one evaluation of ``layer`` (a `mha.MultiHeadAttention`) on ``x``, with its
    attention weights ``w``: a bound on the output's error, elementwise (and, with
    ``return_weights``, on the weights' error too).

    Each projection sums d_model terms: gamma(d_model + 2) of ``|x| |W|`` (2 for casting ``x``
    and the weights to the dtype of the computation, if they are). With RoPE a rotated query or
    key errs by more, relative to at most twice its head's largest size: its 2-term sum, cos and
    sin (4 ulp each) and an angle ``p * freq`` off by ~3u of p, for positions p below
    ``positions`` (default n). `attention_error` passes these on through the layer's own
    queries, keys and values (`MultiHeadAttention.trace`); the heads, side by side, sum
    h * d_v terms of ``|heads| |W_O|`` more (and W_O's cast).
    """
    dtype = np.result_type(x)
    stages = layer.trace(x, context=context)  # the queries, keys and values: no mask needed
    g = layer.h // layer.kv_heads
    q = stages["q"]
    k, v = (np.repeat(stages[name], g, axis=-3) for name in ("k", "v"))
    ax = np.abs(np.asarray(x, np.float64))
    ac = ax if context is None else np.abs(np.asarray(context, np.float64))
    size_q = np.einsum("...nd,dhk->...hnk", ax, np.abs(layer.W_Q))
    size_k, size_v = (np.repeat(np.einsum("...md,dhk->...hmk", ac, np.abs(W)), g, axis=-3)
                      for W in (layer.W_K, layer.W_V))
    k_in = layer.d_model + 2
    dv = gamma(k_in, dtype) * size_v
    if layer.rope:
        size_q, size_k = (2 * a.max(axis=-1, keepdims=True) for a in (size_q, size_k))
        k_in += 12 + 3 * (np.shape(x)[-2] if positions is None else positions)
    dq, dk = gamma(k_in, dtype) * size_q, gamma(k_in, dtype) * size_k
    head_error, w_error = attention_error(q, k, v, w, layer.scale, (dq, dk, dv), dtype)
    heads = np.abs(np.asarray(w, np.float64)) @ np.abs(v.astype(np.float64))

    def concat(a):  # (..., h, n, d_v) -> (..., n, h * d_v)
        return np.moveaxis(a, -3, -2).reshape(a.shape[:-3] + (a.shape[-2], -1))

    W_O = np.abs(layer.W_O)
    out_error = (concat(head_error) @ W_O
                 + gamma(layer.h * layer.d_v + 1, dtype) * (concat(heads) @ W_O))
    return (out_error, w_error) if return_weights else out_error


def chunked_error(q, k, v, w, block_size):
    """Rule 2 for chunked_attention's output: one evaluation's `attention_error`, and for each
    of the ceil(n_k / block_size) key blocks one more rescaling of the running sum and output
    by exp(m - m_new) (exp's ulps and the scores' error once more, relative): at most
    (blocks + 1) times the plain path's bound."""
    blocks = -(-np.shape(k)[-2] // block_size)
    return (blocks + 1) * attention_error(q, k, v, w)[0]


def weights_sum_error(n_k, dtype=np.float64, probabilistic=False):
    """Rule 2 for the sum of one row of softmax weights over ``n_k`` keys, which is 1: exp's
    errors cancel (the row is divided by the sum of the same exps), so what is left is that
    sum's gamma(n_k), each weight's division (half an ulp, relative) and this sum's gamma(n_k)
    (``probabilistic``: the sqrt(n_k) form, for float32 rows of hundreds of keys)."""
    return 2 * gamma(n_k, dtype, probabilistic) + eps(dtype) / 2


@contextmanager
def no_warnings():
    """Fail on any warning, overflow, invalid operation or division by zero inside the block.

    Underflow is allowed: exp() of a very negative number rounding to 0 is the intended result.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            yield


def make_mask(kind: str, rng: np.random.Generator, lead: tuple[int, ...], n_q: int, n_k: int):
    """A mask of the given kind broadcastable to ``lead + (n_q, n_k)``, built from first principles.

    The masks are written out from their definitions here (not with ``mha.masks``) so that the
    comparison with the reference does not depend on the code under test.
    """
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    if kind == "none":
        return None
    if kind == "causal":
        return j <= i
    if kind == "window":
        return (j <= i) & (j >= i - int(rng.integers(0, 3)))
    if kind == "padding":  # one length per leading index, keys at or beyond it hidden
        lengths = rng.integers(0, n_k + 1, size=lead)
        return j < np.asarray(lengths)[..., None, None]
    if kind == "random_bool":
        return rng.random(lead + (n_q, n_k)) < 0.6
    if kind == "additive":
        return np.where(rng.random((n_q, n_k)) < 0.6, 0.0, -np.inf)
    if kind == "none_visible":  # every query fully masked
        return np.zeros((n_q, n_k), dtype=bool)
    raise ValueError(kind)


# ---- Hypothesis strategies ----------------------------------------------------------------------

def _narrowed(draw, shape: tuple[int, ...], drop_leading: bool = False) -> tuple[int, ...]:
    """``shape`` with any dimension turned to 1 (and, with ``drop_leading``, some leading ones
    dropped): a shape that still broadcasts to ``shape``."""
    shape = tuple(s if draw(st.booleans()) else 1 for s in shape)
    return shape[draw(st.integers(0, len(shape))):] if drop_leading else shape


def _qkv(draw, n_q: int, n_k: int, drop_leading: bool = False):
    """q, k, v of one drawn dtype whose leading dimensions broadcast to a drawn batch shape."""
    dtype = draw(DTYPES)
    n_lead = draw(st.integers(0, 2))
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=n_lead, max_size=n_lead)))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.normal(size=_narrowed(draw, lead, drop_leading) + (n_q, d_k)).astype(dtype)
    k = rng.normal(size=_narrowed(draw, lead, drop_leading) + (n_k, d_k)).astype(dtype)
    v = rng.normal(size=_narrowed(draw, lead, drop_leading) + (n_k, d_v)).astype(dtype)
    return q, k, v, rng


@st.composite
def attention_inputs(draw):
    """q, k, v (with broadcastable leading dims, d_k != d_v allowed), a mask and its kind."""
    n_q, n_k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    q, k, v, rng = _qkv(draw, n_q, n_k)
    kind = draw(st.sampled_from(MASK_KINDS))
    # A mask may not enlarge the batch that q, k and v define together.
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    mask = make_mask(kind, rng, lead, n_q, n_k)
    return q, k, v, mask, kind


@st.composite
def chunked_inputs(draw):
    """q, k, v with broadcastable leading dims, a mask structure, lengths and a block size."""
    structure = draw(st.sampled_from(["none", "causal", "window"]))
    n_q = draw(st.integers(1, 9))
    n_k = n_q if structure != "none" else draw(st.integers(1, 9))  # n_q != n_k only without
    q, k, v, rng = _qkv(draw, n_q, n_k, drop_leading=True)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    kwargs = {
        "causal": structure == "causal",
        "window": draw(st.integers(0, n_q + 1)) if structure == "window" else None,
        "lengths": (rng.integers(0, n_k + 1, size=_narrowed(draw, batch, drop_leading=True))
                    if draw(st.booleans()) else None),  # 0 included: nothing visible
        "block_size": draw(st.integers(1, max(n_q, n_k) + 2)),  # 1 .. larger than n
    }
    return q, k, v, kwargs


# ---- bad-input tables: (value, error, message) ---------------------------------------------------

def bad_arrays(name: str, shape: tuple[int, ...]) -> list:
    """Arrays of ``shape`` that no float-array argument ``name`` accepts."""
    zeros = np.zeros(shape)
    dims = str(shape).replace("(", r"\(").replace(")", r"\)")
    return [
        (zeros.astype(int), TypeError,
         rf"{name} must be a real floating-point array .*got dtype int64 with shape {dims}"),
        (zeros.astype(bool), TypeError, rf"{name} must be a real floating-point .*dtype bool"),
        (zeros.astype(complex), TypeError, rf"{name} must be a real floating-point .*complex128"),
        (zeros.astype(object), TypeError, rf"{name} must be a real floating-point .*object"),
        (np.ma.masked_array(zeros, mask=True), TypeError,
         rf"{name} must be a plain ndarray, got a numpy.ma.MaskedArray .*its mask would be "
         r"ignored"),
        (np.full(shape, np.nan), ValueError,
         rf"{name} must contain only finite values, got NaN or inf in an array of shape {dims}"),
        (np.full(shape, np.inf), ValueError, rf"{name} must contain only finite values"),
        (np.full(shape, -np.inf), ValueError, rf"{name} must contain only finite values"),
    ]


#: For ``scale=`` of every attention function (inputs of float64).
BAD_SCALES = [
    (float("nan"), ValueError, r"scale must be a finite number in float64 .*got nan"),
    (float("inf"), ValueError, r"scale must be a finite number in float64 .*got inf"),
    (-np.inf, ValueError, r"scale must be a finite number in float64 .*got -inf"),
    (10**400, ValueError, r"scale must be a finite number in float64 .*an integer of 401 digits"),
    ("big", TypeError, r"scale must be a real number, got 'big' of type str"),
    (True, TypeError, r"scale must be a real number, got True of type bool"),
    (1j, TypeError, r"scale must be a real number, got 1j of type complex"),
    (np.array([0.5]), TypeError, r"scale must be a real number, got array\(\[0.5\]\)"),
]

#: For every True/False argument (``causal``, ``return_stats``, ``return_weights``).
BAD_FLAGS = [
    ("yes", r"must be True or False, got 'yes' of type str"),
    ("no", r"must be True or False, got 'no' of type str"),
    (1, r"must be True or False, got 1 of type int"),
    (None, r"must be True or False, got None of type NoneType"),
    (np.array([True]), r"must be True or False, got array\(\[ True\]\)"),
]

#: For every integer argument (``n``, ``window``, ``block_size``, ``d_model``, ``h``, ...).
BAD_INTEGERS = [
    (2.5, TypeError, r"must be an integer, got 2.5 of type float"),
    (2.0, TypeError, r"must be an integer, got 2.0 of type float"),
    (True, TypeError, r"must be an integer, got True of type bool"),
    ("4", TypeError, r"must be an integer, got '4' of type str"),
    (None, TypeError, r"must be an integer, got None of type NoneType"),
    (-1, ValueError, r"must be >= \d, got -1"),
]

#: For ``lengths`` against 6 keys and a batch of 2 (`padding_mask` and `chunked_attention`).
BAD_LENGTHS = [
    ([1.0, 2.0], TypeError, r"lengths must be integers, got dtype float64 with shape \(2,\)"),
    ([True, False], TypeError, r"lengths must be integers, got dtype bool"),
    (["1", "2"], TypeError, r"lengths must be integers, got dtype <U1"),
    ([7, 1], ValueError, r"lengths must lie between 0 and n(_k)?=6, got values from 1 to 7"),
    ([-1, 1], ValueError, r"lengths must lie between 0 and n(_k)?=6, got values from -1 to 1"),
]

#: For ``mask`` of `scaled_dot_product_attention` and `MultiHeadAttention` (square, 6 x 6).
BAD_MASKS = [
    (np.ones((6, 6), int), TypeError,
     r"mask must be boolean \(True = attend\) or float \(0 / -inf\), got dtype int64"),
    (np.ones((6, 6), complex), TypeError, r"mask must be boolean .*got dtype complex128"),
    (np.tril(np.ones((6, 6))), ValueError,
     r"float mask must hold only 0 \(attend\) and -inf \(hide\); got other values such as \[1.0\]"),
    (np.full((6, 6), np.nan), ValueError, r"float mask must hold only 0 .* such as \[nan\]"),
    (np.full((6, 6), np.inf), ValueError, r"float mask must hold only 0 .* such as \[inf\]"),
]

#: For ``seed`` of `MultiHeadAttention`.
BAD_SEEDS = [
    (-1, ValueError, r"seed must be an integer >= 0, got -1"),
    (1.5, TypeError, r"seed must be None, an integer >= 0, a numpy.random.Generator, "
                     r"BitGenerator or SeedSequence, got 1.5"),
    ("7", TypeError, r"seed must be None, an integer >= 0.*got '7' of type str"),
    (True, TypeError, r"seed must be None, an integer >= 0.*got True of type bool"),
    ([1, 2], TypeError, r"seed must be None, an integer >= 0.*got \[1, 2\] of type list"),
]


# ---- q, k and v that disagree: the checks every attention function shares ---------------------

Q = np.zeros((2, 4, 8))
K = np.zeros((2, 6, 8))
V = np.zeros((2, 6, 5))

#: ``(q, k, v), error, message`` for `scaled_dot_product_attention` and `chunked_attention`.
BAD_QKV = [
    ((Q, np.zeros((2, 6, 7)), V), ValueError,
     r"q and k must share their last dimension d_k, got q \(2, 4, 8\) and k \(2, 6, 7\)"),
    ((Q, K, np.zeros((2, 5, 5))), ValueError,
     r"k and v must have the same number of keys n_k .*got k \(2, 6, 8\) and v \(2, 5, 5\)"),
    ((np.zeros((3, 4, 8)), K, V), ValueError,
     r"leading \(batch, head\) dimensions of q, k and v: q \(3,\), k \(2,\), v \(2,\)"),
    ((np.zeros(8), K, V), ValueError, r"q must have shape \(..., n_q, d_k\) .*got shape \(8,\)"),
    ((Q, np.zeros(8), V), ValueError, r"k must have shape \(..., n_k, d_k\) .*got shape \(8,\)"),
    ((Q, K, np.zeros(6)), ValueError, r"v must have shape \(..., n_k, d_v\) .*got shape \(6,\)"),
    ((np.zeros((2, 4, 0)), np.zeros((2, 6, 0)), V), ValueError,
     r"q and k must have d_k >= 1 \(their last dimension\), got q \(2, 4, 0\)"),
] + [((bad, K, V), error, message) for bad, error, message in bad_arrays("q", Q.shape)] \
  + [((Q, bad, V), error, message) for bad, error, message in bad_arrays("k", K.shape)] \
  + [((Q, K, bad), error, message) for bad, error, message in bad_arrays("v", V.shape)]


def numeric_gradient(loss, z: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central differences of ``loss()`` with respect to every entry of ``z`` (changed in place
    and restored: ``loss`` must read ``z``)."""
    grad = np.zeros(z.shape)
    for index in np.ndindex(z.shape):
        old = z[index]
        z[index] = old + step
        up = loss()
        z[index] = old - step
        down = loss()
        z[index] = old
        grad[index] = (up - down) / (2 * step)
    return grad


def load_file(path, name: str | None = None):
    """The Python file ``path`` as a module of its own (``name``, by default its stem): for the
    files no package holds, ``dev.py``, the root ``conftest.py`` and the hooks, none of which
    does anything when imported."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_threads(work, n: int) -> None:
    """Run ``work(i)`` for ``i`` in ``range(n)``, each in a thread of its own, all at once, and
    return when every one has finished."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def random_bert_layer(rng, d_model, d_ff, *, bias_std=0.1, norm_std=0.2):
    """Random weights for one BERT layer under the transformers names ``bert_layer`` reads,
    with prefix ``L``: dense weights of standard deviation 1/sqrt(fan-in), biases of
    ``bias_std`` (0 gives zeros: mha's attention layer has none), LayerNorm gains around 1 and
    shifts around 0 of ``norm_std``."""
    shapes = {"attention.self.query": (d_model, d_model), "attention.self.key": (d_model, d_model),
              "attention.self.value": (d_model, d_model),
              "attention.output.dense": (d_model, d_model),
              "intermediate.dense": (d_ff, d_model), "output.dense": (d_model, d_ff)}
    w = {}
    for name, shape in shapes.items():
        w[f"L.{name}.weight"] = rng.normal(0, shape[1] ** -0.5, size=shape)
        w[f"L.{name}.bias"] = rng.normal(0, bias_std, size=shape[0])
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
        w[f"L.{name}.weight"] = rng.normal(1, norm_std, size=d_model)
        w[f"L.{name}.bias"] = rng.normal(0, norm_std, size=d_model)
    return w
