"""Softmax and scaled dot-product attention, the core every other part of ``mha`` builds on.

Dimension names used throughout: ``n_q`` queries, ``n_k`` keys (and values), ``d_k`` the size of
a query or key vector, ``d_v`` the size of a value vector; ``...`` stands for any leading
(batch, head) dimensions.

Read from the top: the three public functions; then `_attend`, the maths they share (scores,
mask, softmax, weighted sum of the values); last, the softmax kernel, which hands its rows to the
thread pool of `mha._parallel`. The input checks live in `mha._checks`.
"""

from __future__ import annotations

import numpy as np

from ._checks import (all_finite, as_float_array, as_visible_mask, broadcast_shape, check_axis,
                      check_q_k, check_q_k_v, check_scale, overflow_error, working_dtype)
from ._parallel import map_rows

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
        If ``x`` is not a floating-point array (or is a masked array), or ``axis`` is not an
        integer.
    ValueError
        If ``x`` contains NaN or ``+inf``, or ``axis`` is out of range for ``x`` (a 0-d ``x``
        has no axis).

    Notes
    -----
    $$
    \operatorname{softmax}(x)_i = \frac{e^{x_i - m}}{\sum_j e^{x_j - m}},
    \qquad m = \max_j x_j
    $$

    Subtracting the maximum $m$ changes nothing mathematically but keeps every exponent
    at or below 0, so logits of $\pm 10^4$ neither overflow nor underflow to 0/0.
    Positions holding ``-inf`` get exactly 0. (In float16 the sum is taken in float32, so a
    slice longer than float16's largest value, 65504, still sums to 1.)

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
    x = as_float_array(x, "x", finite=False)  # NaN and +inf are caught by the kernel
    axis = check_axis(axis, x.shape)
    out = np.array(np.moveaxis(x, axis, -1), order="C")  # a fresh, contiguous copy to overwrite
    if out.size:
        try:
            _softmax_inplace(out)
        except ValueError:
            raise ValueError(
                f"x must not contain NaN or +inf (only finite values and -inf), shape {x.shape}"
            ) from None
    return np.moveaxis(out, -1, axis)


def attention_scores(q, k, *, scale=None) -> np.ndarray:
    r"""The scaled scores ``(q * scale) @ k.T`` that attention turns into weights.

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

    Raises
    ------
    TypeError
        If ``q`` or ``k`` is not a floating-point array, or ``scale`` is not a real number.
    ValueError
        If the shapes disagree (as in `scaled_dot_product_attention`), an input holds NaN or
        inf, ``scale`` is not finite in the inputs' dtype, or a score overflows that dtype.

    Notes
    -----
    $$
    S = \frac{Q K^\top}{\sqrt{d_k}}
    $$

    computed as $(Q \cdot \text{scale})\, K^\top$. `scaled_dot_product_attention` computes
    exactly these scores, bit for bit, before it masks them and applies softmax (for ``q``,
    ``k`` and ``v`` of one dtype; a wider ``v`` makes it compute them in that dtype).

    Examples
    --------
    >>> import numpy as np
    >>> from mha import attention_scores
    >>> q = np.array([[1.0, 0.0, 2.0, 0.5]])
    >>> k = np.array([[1.0, 0.0, 2.0, 0.5], [0.0, 1.0, 0.0, 0.0]])
    >>> attention_scores(q, k)                     # dot products divided by sqrt(4) = 2
    array([[2.625, 0.   ]])
    """
    q, k = check_q_k(q, k)
    broadcast_shape({"q": q.shape[:-2], "k": k.shape[:-2]},
                    "the leading (batch, head) dimensions of q and k")
    dtype = np.result_type(q, k)
    scores = _scores(q, k, check_scale(scale, q.shape[-1], dtype))
    if not all_finite(scores):
        raise overflow_error("the attention scores", dtype, q=q.shape, k=k.shape)
    return scores


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
        (a 0/1 matrix, say) is refused, because adding it would hide nothing. Both forms hide
        the same way: a hidden key's score is never looked at.
    scale : float, optional
        Factor applied to the scores. Defaults to $1/\sqrt{d_k}$.

    Returns
    -------
    output : ndarray of shape ``(..., n_q, d_v)``
        Each query's weighted sum of the values.
    weights : ndarray of shape ``(..., n_q, n_k)``
        The attention weights. Each row sums to 1; hidden keys get exactly 0; a query that may
        attend to no key gets a row of zeros and an output of zeros (see `mha.softmax`), and
        so does every query when there are no keys at all (``n_k = 0``).
        Their leading dimensions are those of ``q``, ``k`` and ``mask`` broadcast together
        (``v`` plays no part in the weights).

    The leading dimensions ``...`` of ``q``, ``k``, ``v`` and ``mask`` broadcast against each
    other. The result has the dtype NumPy's promotion rules give for ``q``, ``k`` and ``v``
    (float32 inputs give float32).

    Raises
    ------
    TypeError
        If an input is not a floating-point array, the mask is neither boolean nor floating, or
        ``scale`` is not a real number.
    ValueError
        If the last dimensions disagree (``d_k`` of ``q`` and ``k``, ``n_k`` of ``k`` and ``v``)
        or ``d_k`` is 0, the leading dimensions or the mask do not broadcast, an input holds NaN
        or inf, a float mask holds a value other than 0 and ``-inf``, ``scale`` is not finite
        in the inputs' dtype, or the scores of a query that may see some key overflow that
        dtype (to ``+inf``, or all to ``-inf``).

    Notes
    -----
    $$
    \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(
    \frac{Q K^\top}{\sqrt{d_k}} + M\right) V
    $$

    where $M$ is 0 where attention is allowed and $-\infty$ where it is not
    (a boolean mask is turned into that form). The scores are computed as
    $(Q \cdot \text{scale})\, K^\top$, exactly as `attention_scores` does.

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
    q, k, v, batch = check_q_k_v(q, k, v)
    scale = check_scale(scale, q.shape[-1], np.result_type(q, k, v))
    visible = None if mask is None else as_visible_mask(
        mask, batch + (q.shape[-2], k.shape[-2]), "scores (..., n_q, n_k)")
    output, weights, _ = _attend(q, k, v, visible, scale)
    return output, weights


# ---- the maths: scores, mask, softmax, weighted sum -------------------------------------------


def _scores(q, k, scale):
    """``(q * scale) @ k^T``, shape ``(..., n_q, n_k)``: the one way scores are computed."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow: checked by the callers
        return (q * scale) @ np.swapaxes(k, -1, -2)  # (..., n_q, d_k) x (..., d_k, n_k)


def _attend(q, k, v, visible, scale, keep_scores: bool = False):
    """Attention on checked inputs: the maths shared by the public API and the layer.

    ``visible`` is None or a boolean mask broadcastable to the scores, True where a query may
    see a key; ``scale`` is a scalar of the result's dtype. Returns ``output`` ``(..., n_q, d_v)``,
    ``weights`` ``(..., n_q, n_k)`` and, with ``keep_scores``, a copy of the scores before the
    mask (else None).
    """
    # (..., n_q, d_k) x (..., d_k, n_k) -> (..., n_q, n_k)
    scores = _scores(q, k, scale)                   # scaled
    kept = scores.copy() if keep_scores else None   # for MultiHeadAttention.trace
    if visible is not None:
        scores = _hide(scores, visible)             # hidden keys get -inf, so e^-inf = 0
    weights = _softmax_scores(scores, visible, q.shape, k.shape)  # over the keys, in place
    # (..., n_q, n_k) x (..., n_k, d_v) -> (..., n_q, d_v)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
        output = weights @ v
    if not all_finite(output):
        raise overflow_error("the attention output", output.dtype, v=v.shape)
    return output, weights, kept


def _hide(scores, visible):
    """``scores`` with ``-inf`` where ``visible`` is False, in place (copied to the mask's batch
    shape first if the mask has batch dimensions that ``q`` and ``k`` lack)."""
    full = np.broadcast_shapes(scores.shape, visible.shape)
    if full != scores.shape:
        scores = np.array(np.broadcast_to(scores, full))
    np.copyto(scores, -np.inf, where=~visible)  # in place: no second n_q x n_k array
    return scores


def _softmax_scores(scores, visible, q_shape, k_shape):
    """`softmax` of masked scores in place, refusing the scores that overflowed.

    A score of ``+inf`` (or NaN) is an overflow. So is a row that is all ``-inf`` although the
    mask lets its query see some key: those scores overflowed to ``-inf``, and a row of zeros
    would be a silently wrong answer. Only rows that are all ``-inf`` are looked at again.
    """
    if not scores.flags.c_contiguous:
        scores = np.ascontiguousarray(scores)
    if scores.size == 0:  # no keys (or no queries): nothing to normalise, the output is zeros
        return scores
    try:
        some_row_all_minus_inf = _softmax_inplace(scores)
    except ValueError:  # +inf or NaN
        raise overflow_error("the attention scores", scores.dtype, q=q_shape, k=k_shape) from None
    if some_row_all_minus_inf:
        left_empty = ~scores.any(axis=-1)  # (..., n_q): the rows the softmax left at zero
        sees_a_key = True if visible is None else visible.any(axis=-1)
        if (left_empty & sees_a_key).any():
            raise overflow_error("the attention scores", scores.dtype, q=q_shape, k=k_shape)
    return scores


# ---- the softmax kernel: rows in cache-sized pieces, on several threads when large ------------


def _softmax_inplace(x: np.ndarray) -> bool:
    """Softmax over the last axis of a C-contiguous array, in place.

    Returns True if some slice was entirely ``-inf`` (it is now zeros). Raises ``ValueError``
    on NaN or ``+inf``.
    """
    return any(map_rows(_softmax_rows, x.reshape(-1, x.shape[-1])))  # a view: x is contiguous


def _softmax_rows(rows: np.ndarray) -> bool:
    """Softmax of each row of a C-contiguous 2-D array, in place (see `softmax` for the rules).

    Returns True if some row was entirely ``-inf``.
    """
    m = rows.max(axis=1, keepdims=True)  # NaN and +inf anywhere in a row show up in its max
    if not (m < np.inf).all():
        raise ValueError(
            "x must not contain NaN or +inf (only finite values and -inf); "
            f"found in a slice of length {rows.shape[1]}"
        )
    empty = m == -np.inf
    some_empty = bool(empty.any())
    if some_empty:
        m[empty] = 0  # a row of -inf: exp(-inf - 0) = 0 everywhere
    with np.errstate(over="ignore"):  # x - m below float's range is -inf, and exp(-inf) = 0
        np.subtract(rows, m, out=rows)
    np.exp(rows, out=rows)
    # float16 sums in float32: a row longer than 65504 would otherwise sum to inf.
    total = rows.sum(axis=1, keepdims=True, dtype=working_dtype(rows.dtype))
    total[total == 0] = 1  # ...and 0 / 1 = 0, not 0 / 0
    np.divide(rows, total, out=rows)
    return some_empty
