"""Tolerances, Hypothesis strategies and small helpers shared by the tests."""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
from hypothesis import strategies as st

# Tolerances against the plain-Python reference, which computes in float64: float32 carries ~7
# significant digits, so after a few matrix products results may differ from the 5th digit on.
TOLERANCE = {
    np.dtype(np.float32): {"rtol": 2e-4, "atol": 2e-5},
    np.dtype(np.float64): {"rtol": 1e-10, "atol": 1e-12},
}

DTYPES = st.sampled_from([np.float32, np.float64])
MASK_KINDS = ["none", "causal", "window", "padding", "random_bool", "additive", "none_visible"]


def assert_close(actual, expected, dtype=None):
    """``np.testing.assert_allclose`` with the tolerance of ``dtype`` (default: ``actual``'s)."""
    dtype = np.dtype(dtype or np.asarray(actual).dtype)
    np.testing.assert_allclose(actual, expected, **TOLERANCE[dtype])


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


@st.composite
def attention_inputs(draw):
    """q, k, v (with broadcastable leading dims, d_k != d_v allowed), a mask and a dtype."""
    dtype = draw(DTYPES)
    n_lead = draw(st.integers(0, 2))
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=n_lead, max_size=n_lead)))
    # Each of q, k, v may drop any leading dimension to 1 and still broadcast.
    def sub(shape):
        return tuple(s if draw(st.booleans()) else 1 for s in shape)
    n_q, n_k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.normal(size=sub(lead) + (n_q, d_k)).astype(dtype)
    k = rng.normal(size=sub(lead) + (n_k, d_k)).astype(dtype)
    v = rng.normal(size=sub(lead) + (n_k, d_v)).astype(dtype)
    kind = draw(st.sampled_from(MASK_KINDS))
    # A mask may not enlarge the batch that q, k and v define together.
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    mask = make_mask(kind, rng, lead, n_q, n_k)
    return q, k, v, mask, kind
