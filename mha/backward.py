r"""The backward pass of attention, derived by hand: gradients of softmax and of attention.

Training needs, for a loss $L$ and every input $z$ of a computation, the gradient
$\partial L / \partial z$ (written ``dz`` here: the same shape as ``z``). Given ``d_out`` (the
gradient of the loss with respect to a function's output), a backward function returns the
gradients with respect to its inputs: a vector-Jacobian product, never the Jacobian itself.

- `softmax_backward`: through ``p = softmax(x)``.
- `attention_backward`: through `mha.scaled_dot_product_attention`, for queries, keys and values.
- ``MultiHeadAttention.backward`` (in `mha.multihead`) adds the projections around it; it calls
  `_attention_backward_from_weights` below, the one place the attention gradients are computed.

Dimension names are those of `mha.attention`: ``n_q`` queries, ``n_k`` keys, ``d_k``, ``d_v``,
``...`` any leading (batch, head) dimensions.
"""

from __future__ import annotations

import numpy as np

from ._checks import (all_finite, as_float_array, as_visible_mask, check_axis, check_q_k_v,
                      check_scale, overflow_error, working_dtype)
from ._parallel import map_rows
from .attention import _attend

__all__ = ["softmax_backward", "attention_backward"]


def softmax_backward(p, dp, axis: int = -1) -> np.ndarray:
    r"""Gradient through softmax: ``dx`` given ``p = softmax(x)`` and ``dp = dL/dp``.

    Parameters
    ----------
    p : ndarray of shape ``(...)``, floating point
        The softmax's output (each slice along ``axis`` sums to 1, or is all zeros for a fully
        masked slice, as `mha.softmax` returns it).
    dp : ndarray of the same shape as ``p``
        The gradient of the loss with respect to ``p``.
    axis : int, default -1
        The axis the softmax normalised.

    Returns
    -------
    ndarray of the same shape as ``p``
        ``dx = p * (dp - sum(p * dp, axis))``, in the dtype NumPy's promotion gives ``p`` and
        ``dp`` (float16 is computed in float32 and rounded once at the end, as `mha.softmax`
        sums). A slice of ``p`` that is all zeros (a fully masked query) gets a gradient of
        exactly zero, never NaN; so does every entry where ``p`` is 0 (a hidden key). Only a
        gradient beyond the dtype's range is refused, not a step on the way to it.

    Raises
    ------
    TypeError
        If ``p`` or ``dp`` is not a floating-point array, or ``axis`` is not an integer.
    ValueError
        If the shapes differ, an input holds NaN or inf, ``axis`` is out of range, or the
        result overflows the dtype.

    Notes
    -----
    The softmax's Jacobian is $\partial p_i / \partial x_j = p_i(\delta_{ij} - p_j)$, so

    $$
    \frac{\partial L}{\partial x_j} = \sum_i \frac{\partial L}{\partial p_i}\, p_i
    (\delta_{ij} - p_j) = p_j \Big( \frac{\partial L}{\partial p_j}
    - \sum_i p_i \frac{\partial L}{\partial p_i} \Big).
    $$

    The $n \times n$ Jacobian is never built: the product costs three passes over the slice.
    Adding the same number to every entry of ``dp`` changes nothing (softmax ignores a shift
    of its input, and its gradient ignores a shift of ``dp``).

    Examples
    --------
    >>> import numpy as np
    >>> from mha import softmax, softmax_backward
    >>> p = softmax(np.array([0.0, np.log(3.0)]))           # [0.25, 0.75]
    >>> softmax_backward(p, np.array([1.0, 0.0]))           # raise the first logit's loss
    array([ 0.1875, -0.1875])
    >>> softmax_backward(np.zeros(3), np.ones(3))           # a fully masked row: no gradient
    array([0., 0., 0.])
    """
    p = as_float_array(p, "p")
    dp = as_float_array(dp, "dp")
    if p.shape != dp.shape:
        raise ValueError(f"p and dp must have the same shape, got p {p.shape} and dp {dp.shape}")
    axis = check_axis(axis, p.shape, "p")
    dtype = np.result_type(p, dp)
    work = working_dtype(dtype)  # float16 in float32, as softmax sums
    p_last = np.ascontiguousarray(np.moveaxis(p, axis, -1), dtype=work)  # the softmax axis last
    dx = np.array(np.moveaxis(dp, axis, -1), dtype=work, order="C")     # a copy to overwrite
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
        row = np.einsum("...i,...i->...", p_last, dx)[..., None]      # sum_i p_i dp_i
        _softmax_grad(dx, p_last, row)                                # p_j (dp_j - row)
        if not all_finite(dx):  # dp_j - row can overflow where p_j (dp_j - row) fits
            dp_last = np.moveaxis(dp, axis, -1).astype(work)
            dx = p_last * dp_last
            dx -= p_last * row                                        # p_j dp_j - p_j row
        dx = dx.astype(dtype, copy=False)
    if not all_finite(dx):
        raise overflow_error("the softmax gradient", dtype, p=p.shape, dp=dp.shape)
    return np.moveaxis(dx, -1, axis)


def attention_backward(q, k, v, d_out, mask=None, *, scale=None):
    r"""Gradients of scaled dot-product attention with respect to its queries, keys and values.

    Recomputes the forward pass of `mha.scaled_dot_product_attention` on the same arguments,
    then runs it backwards.

    Parameters
    ----------
    q : ndarray of shape ``(..., n_q, d_k)``
    k : ndarray of shape ``(..., n_k, d_k)``
    v : ndarray of shape ``(..., n_k, d_v)``
        Exactly what `mha.scaled_dot_product_attention` accepts (leading dimensions broadcast).
    d_out : ndarray of the output's shape ``(..., n_q, d_v)``
        The gradient of the loss with respect to the attention output, whose leading dimensions
        are those of ``q``, ``k``, ``v`` and ``mask`` broadcast together.
    mask : ndarray broadcastable to ``(..., n_q, n_k)``, optional
        Boolean (True = may attend) or additive float (0 / ``-inf``), as in the forward.
    scale : float, optional
        Defaults to $1/\sqrt{d_k}$, as in the forward.

    Returns
    -------
    dq : ndarray of the shape of ``q``
    dk : ndarray of the shape of ``k``
    dv : ndarray of the shape of ``v``
        Each summed over the leading dimensions its input was broadcast along. All three are
        in the forward's result dtype (float32 inputs and ``d_out`` give float32). A hidden key
        receives no gradient from the queries that may not see it; a query that may see no key
        gets ``dq = 0``. The inputs are not modified.

    Raises
    ------
    TypeError
        As `mha.scaled_dot_product_attention`, and if ``d_out`` is not a floating-point array.
    ValueError
        As `mha.scaled_dot_product_attention`, and if ``d_out`` does not have the output's
        shape, holds NaN or inf, or a gradient overflows the dtype.

    Notes
    -----
    With $S = \text{scale}\; Q K^\top$ (plus the mask), $P = \operatorname{softmax}(S)$ by rows
    and $O = P V$, the chain rule gives, one matrix product each:

    $$
    dV = P^\top dO, \qquad dP = dO\, V^\top, \qquad
    dS = P \odot \big(dP - \operatorname{rowsum}(P \odot dP)\big),
    $$

    $$
    dQ = \text{scale}\; dS\, K, \qquad dK = \text{scale}\; dS^\top Q .
    $$

    $dS$ is `softmax_backward` applied to each row. A hidden key has $P_{ij} = 0$, hence
    $dS_{ij} = 0$: no gradient flows through a connection the mask cut, and none to its score.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import attention_backward, causal_mask, scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 4, 8))
    >>> d_out = rng.normal(size=(4, 8))                 # dL/d(output) for L = sum(out * d_out)
    >>> dq, dk, dv = attention_backward(q, k, v, d_out, mask=causal_mask(4))
    >>> dq.shape, dk.shape, dv.shape
    ((4, 8), (4, 8), (4, 8))
    >>> bool(np.allclose(dq[0], 0))        # the first query sees only its own key: a weight of 1
    True
    >>> def loss(q):                       # check one entry of dq by a central difference
    ...     out, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    ...     return (out * d_out).sum()
    >>> e = np.zeros_like(q); e[2, 5] = 1e-6
    >>> bool(np.isclose((loss(q + e) - loss(q - e)) / 2e-6, dq[2, 5]))
    True
    """
    q, k, v, batch = check_q_k_v(q, k, v)
    dtype = np.result_type(q, k, v)
    scale = check_scale(scale, q.shape[-1], dtype)
    visible = None if mask is None else as_visible_mask(
        mask, batch + (q.shape[-2], k.shape[-2]), "scores (..., n_q, n_k)")
    out, weights, _ = _attend(q, k, v, visible, scale)
    out_shape = (np.broadcast_shapes(weights.shape[:-2], v.shape[:-2])   # mask included
                 + (q.shape[-2], v.shape[-1]))                          # (..., n_q, d_v)
    d_out = as_float_array(d_out, "d_out")
    if d_out.shape != out_shape:
        raise ValueError(f"d_out must have the attention output's shape {out_shape} (q {q.shape}"
                         f", k {k.shape}, v {v.shape}"
                         f"{'' if mask is None else f', mask {np.shape(mask)}'}), "
                         f"got {d_out.shape}")
    dq, dk, dv = _attention_backward_from_weights(q, k, v, weights, out,
                                                  d_out.astype(dtype, copy=False), scale)
    return _sum_to(dq, q.shape), _sum_to(dk, k.shape), _sum_to(dv, v.shape)


def _attention_backward_from_weights(q, k, v, weights, out, d_out, scale):
    """The attention gradients on checked inputs, given the forward's weights and output.

    ``weights`` ``(..., n_q, n_k)``, ``out`` and ``d_out`` ``(..., n_q, d_v)``; the gradients
    come back with the full broadcast batch shape (the caller sums them down).

    Two savings over the formulas as written, neither changing the result beyond rounding:
    ``rowsum(P * dP)`` is computed as ``rowsum(O * dO)`` (the same number, since
    ``O = P V`` and ``dP = dO V^T``: ``d_v`` products per query instead of ``n_k``), and the scale
    multiplies ``K`` and ``Q`` (``n d`` entries) rather than ``dS`` (``n^2``).

    float16 is computed in float32 and rounded once at the end, as `mha.softmax` sums: ``dP``
    and ``rowsum(P dP)`` can exceed float16's range where the gradients do not.
    """
    dtype = np.result_type(q, k, v, weights, out, d_out)
    work = working_dtype(dtype)
    if work != dtype:
        q, k, v, weights, out, d_out = (a.astype(work) for a in (q, k, v, weights, out, d_out))
        scale = work.type(scale)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
        dv = np.swapaxes(weights, -1, -2) @ d_out           # (..., n_k, n_q) x (..., n_q, d_v)
        ds = d_out @ np.swapaxes(v, -1, -2)                  # dP: (..., n_q, d_v) x (..., d_v, n_k)
        row = np.einsum("...i,...i->...", out, d_out)[..., None]  # rowsum(P dP): (..., n_q, 1)
        _softmax_grad(ds, weights, row)                      # dS = P (dP - row), in place
        dq = ds @ (k * scale)                                # (..., n_q, n_k) x (..., n_k, d_k)
        dk = np.swapaxes(ds, -1, -2) @ (q * scale)           # (..., n_k, n_q) x (..., n_q, d_k)
        dq, dk, dv = (a.astype(dtype, copy=False) for a in (dq, dk, dv))
    for name, grad in (("dq", dq), ("dk", dk), ("dv", dv)):
        if not all_finite(grad):
            raise overflow_error(f"the attention gradient {name}", grad.dtype, q=q.shape,
                                 k=k.shape, v=v.shape)
    return dq, dk, dv


def _softmax_grad(dp, p, row):
    """``dp = p * (dp - row)`` in place: one pass over the rows, on the threads of `map_rows`
    when ``dp`` is large and ``p`` has its shape (else in one NumPy expression)."""
    full = dp.shape == p.shape == row.shape[:-1] + dp.shape[-1:]
    if full and dp.flags.c_contiguous and p.flags.c_contiguous and dp.size:
        width = dp.shape[-1]
        map_rows(_softmax_grad_rows, dp.reshape(-1, width), p.reshape(-1, width),
                 np.ascontiguousarray(row).reshape(-1, 1))
    else:
        dp -= row
        dp *= p


def _softmax_grad_rows(dp, p, row):
    np.subtract(dp, row, out=dp)
    np.multiply(dp, p, out=dp)


def _sum_to(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the dimensions along which an input of ``shape`` was broadcast."""
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad
