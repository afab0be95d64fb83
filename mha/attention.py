"""Softmax and scaled dot-product attention, the core every other part of ``mha`` builds on.

Dimension names used throughout: ``n_q`` queries, ``n_k`` keys (and values), ``d_k`` the size of
a query or key vector, ``d_v`` the size of a value vector; ``...`` stands for any leading
(batch, head) dimensions.
"""

from __future__ import annotations

import numpy as np

from ._checks import as_float_array, broadcast_shape
from ._parallel import map_rows
from .masks import as_attention_mask

__all__ = ["softmax", "attention_scores", "scaled_dot_product_attention"]


def softmax(x, axis: int = -1) -> np.ndarray:
    r"""Numerically stable softmax that turns a fully masked slice into zeros.

    Parameters
    ----------
    x : ndarray of shape ``(...)``, floating point
        Logits. Entries may be finite or ``-inf`` (``-inf`` marks a masked position); NaN and
        ``+inf`` are refused.
    axis : int, default -1
        The axis along which the result sums to 1.

    Returns
    -------
    ndarray of the same shape and dtype as ``x``
        Non-negative weights. Along ``axis`` they sum to 1, except in a slice whose logits are
        all ``-inf``, which comes back as all zeros.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point array.
    ValueError
        If ``x`` contains NaN or ``+inf``.

    Notes
    -----
    $$
    \operatorname{softmax}(x)_i = \frac{e^{x_i - m}}{\sum_j e^{x_j - m}},
    \qquad m = \max_j x_j
    $$

    Subtracting the maximum $m$ changes nothing mathematically but keeps every exponent
    at or below 0, so logits of $\pm 10^4$ neither overflow nor underflow to 0/0.
    Positions holding ``-inf`` get exactly 0.

    A slice that is *entirely* ``-inf`` (a query that may attend to no key at all) has no
    distribution to return: the textbook formula gives 0/0 = NaN there. This function returns
    all zeros for such a slice instead, without a warning, so that a fully masked query
    contributes a zero vector rather than poisoning everything downstream with NaN. The weights
    of such a slice therefore sum to 0, not 1.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import softmax
    >>> softmax(np.array([1.0, 1.0, -np.inf]))
    array([0.5, 0.5, 0. ])
    >>> softmax(np.array([-np.inf, -np.inf]))
    array([0., 0.])
    """
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(
            f"x must be a real floating-point array, got dtype {x.dtype} with shape {x.shape}"
        )
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise ValueError(f"axis {axis} is out of range for x of shape {x.shape}")
    if x.size == 0:
        return x.copy()
    moved = np.moveaxis(x, axis, -1)
    out = np.array(moved, order="C")  # a fresh, contiguous copy that the kernel overwrites
    try:
        _softmax_last_axis_inplace(out)
    except ValueError:
        raise ValueError(
            f"x must not contain NaN or +inf (only finite values and -inf), shape {x.shape}"
        ) from None
    return np.moveaxis(out, -1, axis)


def _softmax_rows(rows: np.ndarray) -> None:
    """Softmax of each row of a C-contiguous 2-D array, in place (see `softmax` for the rules)."""
    m = rows.max(axis=1, keepdims=True)  # NaN and +inf anywhere in a row show up in its max
    if not (m < np.inf).all():
        raise ValueError(
            "x must not contain NaN or +inf (only finite values and -inf); "
            f"found in a slice of length {rows.shape[1]}"
        )
    m[m == -np.inf] = 0  # a fully masked row: exp(-inf - 0) = 0 everywhere
    np.subtract(rows, m, out=rows)
    np.exp(rows, out=rows)
    total = rows.sum(axis=1, keepdims=True)
    total[total == 0] = 1  # ...and 0 / 1 = 0, not 0 / 0
    np.divide(rows, total, out=rows)


def _softmax_last_axis_inplace(x: np.ndarray) -> None:
    """Softmax over the last axis of a C-contiguous array, in place, on several threads if big."""
    map_rows(_softmax_rows, x.reshape(-1, x.shape[-1]))  # a view: x is C-contiguous


def _check_q_k(q, k):
    """Validate queries and keys: float arrays, at least 2-D, the same ``d_k``."""
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    for name, array, meaning in (("q", q, "(..., n_q, d_k)"), ("k", k, "(..., n_k, d_k)")):
        if array.ndim < 2:
            raise ValueError(
                f"{name} must have shape {meaning} (at least 2-D), got shape {array.shape}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share their last dimension d_k, got q {q.shape} and k {k.shape}"
        )
    return q, k


def _check_q_k_v(q, k, v):
    """Validate queries, keys and values; return them with their broadcast batch shape."""
    q, k = _check_q_k(q, k)
    v = as_float_array(v, "v")
    if v.ndim < 2:
        raise ValueError(f"v must have shape (..., n_k, d_v) (at least 2-D), got shape {v.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys n_k (second-to-last dimension), "
            f"got k {k.shape} and v {v.shape}"
        )
    batch = broadcast_shape(
        {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]},
        "the leading (batch, head) dimensions of q, k and v",
    )
    return q, k, v, batch


def _check_scale(scale, d_k: int, dtype: np.dtype):
    """The scale as a scalar of ``dtype``; ``None`` means 1/sqrt(d_k)."""
    if scale is None:
        scale = 1.0 / np.sqrt(d_k)
    elif (isinstance(scale, (bool, np.bool_))
          or not isinstance(scale, (int, float, np.integer, np.floating))
          or not np.isfinite(scale)):
        raise TypeError(f"scale must be a finite real number, got {scale!r}")
    return dtype.type(scale)  # a float64 scalar would silently promote float32 scores


def _scaled_scores(q: np.ndarray, k: np.ndarray, scale) -> np.ndarray:
    scores = q @ np.swapaxes(k, -1, -2)  # (..., n_q, d_k) x (..., d_k, n_k) -> (..., n_q, n_k)
    scores *= scale
    return scores


def attention_scores(q, k, *, scale=None) -> np.ndarray:
    r"""The scaled scores ``q @ k.T * scale`` that attention turns into weights.

    Parameters
    ----------
    q : ndarray of shape ``(..., n_q, d_k)``
        Queries.
    k : ndarray of shape ``(..., n_k, d_k)``
        Keys; leading dimensions broadcast against those of ``q``.
    scale : float, optional
        Defaults to $1/\sqrt{d_k}$.

    Returns
    -------
    ndarray of shape ``(..., n_q, n_k)``
        Row ``i`` holds query ``i``'s score for every key, before any mask and before softmax.

    Notes
    -----
    $$
    S = \frac{Q K^\top}{\sqrt{d_k}}
    $$

    `scaled_dot_product_attention` computes exactly these scores before it masks them and
    applies softmax.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import attention_scores
    >>> q = np.array([[1.0, 0.0, 2.0, 0.5]])
    >>> k = np.array([[1.0, 0.0, 2.0, 0.5], [0.0, 1.0, 0.0, 0.0]])
    >>> attention_scores(q, k)                     # dot products divided by sqrt(4) = 2
    array([[2.625, 0.   ]])
    """
    q, k = _check_q_k(q, k)
    broadcast_shape({"q": q.shape[:-2], "k": k.shape[:-2]},
                    "the leading (batch, head) dimensions of q and k")
    return _scaled_scores(q, k, _check_scale(scale, q.shape[-1], np.result_type(q, k)))


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None):
    r"""Scaled dot-product attention: ``softmax(q @ k.T * scale + mask) @ v``.

    Parameters
    ----------
    q : ndarray of shape ``(..., n_q, d_k)``
        Queries.
    k : ndarray of shape ``(..., n_k, d_k)``
        Keys.
    v : ndarray of shape ``(..., n_k, d_v)``
        Values, one per key.
    mask : ndarray broadcastable to ``(..., n_q, n_k)``, optional
        Either **boolean**, True where the query may attend to the key (the convention of
        PyTorch's ``scaled_dot_product_attention``; see `mha.causal_mask`), or **additive
        float** holding only 0 (attend) and ``-inf`` (hide). A float mask with any other value
        (a 0/1 matrix, say) is refused, because adding it would hide nothing.
    scale : float, optional
        Factor applied to the scores. Defaults to $1/\sqrt{d_k}$.

    Returns
    -------
    output : ndarray of shape ``(..., n_q, d_v)``
        Each query's weighted sum of the values.
    weights : ndarray of shape ``(..., n_q, n_k)``
        The attention weights. Each row sums to 1; hidden keys get exactly 0; a query that may
        attend to no key gets a row of zeros and an output of zeros (see `mha.softmax`).
        Their leading dimensions are those of ``q``, ``k`` and ``mask`` broadcast together
        (``v`` plays no part in the weights).

    The leading dimensions ``...`` of ``q``, ``k``, ``v`` and ``mask`` broadcast against each
    other. The result has the dtype NumPy's promotion rules give for ``q``, ``k`` and ``v``
    (float32 inputs give float32).

    Raises
    ------
    TypeError
        If an input is not a floating-point array, or the mask is neither boolean nor floating.
    ValueError
        If the last dimensions disagree (``d_k`` of ``q`` and ``k``, ``n_k`` of ``k`` and ``v``),
        the leading dimensions or the mask do not broadcast, an input holds NaN or inf, or a
        float mask holds a value other than 0 and ``-inf``.

    Notes
    -----
    $$
    \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(
    \frac{Q K^\top}{\sqrt{d_k}} + M\right) V
    $$

    where $M$ is 0 where attention is allowed and $-\infty$ where it is not
    (a boolean mask is turned into that form).

    Examples
    --------
    >>> import numpy as np
    >>> from mha import scaled_dot_product_attention, causal_mask
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 4, 8))           # n = 4 tokens, d_k = d_v = 8
    >>> out, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    >>> out.shape, w.shape
    ((4, 8), (4, 4))
    >>> w[0]                                           # the first token sees only itself
    array([1., 0., 0., 0.])
    >>> np.allclose(w.sum(axis=-1), 1.0)
    True
    """
    q, k, v, batch = _check_q_k_v(q, k, v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    dtype = np.result_type(q, k, v)
    if mask is not None:
        mask = as_attention_mask(mask, batch + (n_q, n_k), "scores (..., n_q, n_k)")
    return _attend(q, k, v, mask, _check_scale(scale, q.shape[-1], dtype))


def _attend(q, k, v, mask, scale):
    """Attention on inputs that are already checked: the fast path shared by the public API.

    ``mask`` is None, a boolean array (True = attend) or an additive float array, broadcastable
    to the scores; ``scale`` is a scalar of the result's dtype.
    """
    scores = (q * scale) @ np.swapaxes(k, -1, -2)  # (..., n_q, d_k) x (..., d_k, n_k): scaled
    if mask is not None:
        full = np.broadcast_shapes(scores.shape, mask.shape)
        if full != scores.shape:  # the mask has batch dimensions that q and k lack
            scores = np.array(np.broadcast_to(scores, full))
        if mask.dtype == np.bool_:
            np.copyto(scores, -np.inf, where=~mask)  # in place: no second n_q x n_k array
        else:
            scores += mask.astype(scores.dtype, copy=False)
    if not scores.flags.c_contiguous:
        scores = np.ascontiguousarray(scores)
    try:
        _softmax_last_axis_inplace(scores)  # the scores become the weights, (..., n_q, n_k)
    except ValueError:
        raise ValueError(
            f"the attention scores of shape {scores.shape} overflowed to inf: the inputs are too "
            f"large for {scores.dtype} (scale them down, or compute in float64)"
        ) from None
    output = scores @ v  # (..., n_q, n_k) x (..., n_k, d_v) -> (..., n_q, d_v)
    return output, scores
