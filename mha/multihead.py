"""Multi-head attention as one class whose weights are plain, overwritable NumPy arrays.

Dimension names: ``b`` batch, ``n`` query tokens, ``m`` key/value tokens (``m == n`` in
self-attention), ``d_model`` model width, ``h`` heads, ``d_k`` query/key size per head, ``d_v``
value size per head.
"""

from __future__ import annotations

import numpy as np

from ._checks import (all_finite, as_float_array, as_visible_mask, check_flag, check_kv_heads,
                      check_scale, check_seed, check_sizes, check_tokens, check_weight,
                      nonfinite_weight, overflow_error)
from .attention import _attend
from .backward import _attention_backward_from_weights
from .cache import KVCache
from .positions import _rotate

__all__ = ["MultiHeadAttention", "split_heads", "merge_heads"]


def _group(a: np.ndarray, kv_heads: int) -> np.ndarray:
    """``(..., h, n, d)`` -> ``(..., kv_heads, h // kv_heads, n, d)``: query head ``i`` lands in
    group ``i // (h // kv_heads)``. A view."""
    h = a.shape[-3]
    return a.reshape(a.shape[:-3] + (kv_heads, h // kv_heads) + a.shape[-2:])


def _ungroup(a: np.ndarray) -> np.ndarray:
    """The inverse of `_group`: ``(..., kv_heads, g, n, d)`` -> ``(..., kv_heads * g, n, d)``."""
    return a.reshape(a.shape[:-4] + (a.shape[-4] * a.shape[-3],) + a.shape[-2:])


def split_heads(x: np.ndarray, h: int) -> np.ndarray:
    """Cut each token's vector into ``h`` equal parts and gather each head's part.

    Parameters
    ----------
    x : ndarray of shape ``(..., n, h * d)``
    h : int
        Number of heads; must divide the last dimension.

    Returns
    -------
    ndarray of shape ``(..., h, n, d)``
        ``out[..., i, t, :]`` is ``x[..., t, i * d:(i + 1) * d]``: a view where possible.

    Examples
    --------
    >>> import numpy as np
    >>> from mha.multihead import split_heads, merge_heads
    >>> x = np.arange(12.0).reshape(2, 6)          # n = 2 tokens, h * d = 6
    >>> split_heads(x, 3)[1]                       # head 1: columns 2 and 3 of each token
    array([[2., 3.],
           [8., 9.]])
    >>> bool((merge_heads(split_heads(x, 3)) == x).all())
    True
    """
    *lead, n, width = x.shape
    if width % h:
        raise ValueError(f"the last dimension of x {x.shape} is not divisible by h={h}")
    return x.reshape(*lead, n, h, width // h).swapaxes(-2, -3)  # (..., h, n, d)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """Put the heads side by side again: the inverse of `split_heads`.

    Parameters
    ----------
    x : ndarray of shape ``(..., h, n, d)``

    Returns
    -------
    ndarray of shape ``(..., n, h * d)``
    """
    *lead, h, n, d = x.shape
    return x.swapaxes(-2, -3).reshape(*lead, n, h * d)  # (..., n, h, d) -> (..., n, h*d)


def glorot_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, fan_out: int):
    r"""Draw a float64 array from $\mathcal N(0, 2 / (\text{fan\_in} + \text{fan\_out}))$.

    Glorot (Xavier) initialisation: it keeps the variance of activations roughly the same from
    a layer's input to its output, so a freshly built layer neither blows up nor fades out.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness (``np.random.default_rng(seed)``); no global state is used.
    shape : tuple of int
        Shape of the array to draw.
    fan_in, fan_out : int
        Number of inputs and outputs of the linear map the array represents.

    Returns
    -------
    ndarray of float64, shape ``shape``
    """
    return rng.normal(0.0, np.sqrt(2.0 / (fan_in + fan_out)), size=shape)


class MultiHeadAttention:
    r"""Multi-head attention with ``h`` heads, each projecting into its own subspace.

    Parameters
    ----------
    d_model : int
        Width of the input and output vectors.
    h : int
        Number of heads, >= 1.
    d_k : int, optional
        Query/key size per head. Defaults to ``d_model // h`` (then ``d_model`` must be
        divisible by ``h``).
    d_v : int, optional
        Value size per head. Defaults to ``d_k`` when given, else ``d_model // h``.
    seed : int, numpy.random.Generator, BitGenerator or SeedSequence, optional
        What ``np.random.default_rng`` takes (an integer >= 0, or a generator to draw from);
        the same seed gives the same weights.
    rope : bool, default False
        Rotate every head's queries and keys with `mha.rope` after the projection, at positions
        ``0, 1, ..., n - 1`` (rotary position embedding); ``d_k`` must then be even. Only for
        self-attention. It draws no random numbers: the same seed gives the same weights either
        way.
    scale : float, optional
        The factor applied to every head's scores ``q k^T``. Defaults to $1/\sqrt{d_k}$
        (the paper's); ``scale=1.0`` gives unscaled dot products (to see why the paper scales).
    kv_heads : int, optional
        Number of key/value heads, dividing ``h``; defaults to ``h`` (one per query head, and
        exactly the weights earlier versions drew for the same seed). Query head ``i`` uses
        key/value head ``i // (h // kv_heads)``, as PyTorch's ``enable_gqa`` groups them:
        ``kv_heads=1`` is multi-query attention (MQA), anything between grouped-query attention
        (GQA). Fewer key/value heads mean a smaller `mha.KVCache`.

    Attributes
    ----------
    W_Q : ndarray of shape ``(d_model, h, d_k)``
        Query projections: ``W_Q[:, i, :]`` is head ``i``'s $W_i^Q$.
    W_K : ndarray of shape ``(d_model, kv_heads, d_k)``
        Key projections (``kv_heads`` is ``h`` unless the layer shares keys and values).
    W_V : ndarray of shape ``(d_model, kv_heads, d_v)``
        Value projections.
    W_O : ndarray of shape ``(h * d_v, d_model)``
        Output projection applied to the concatenated heads (head ``i`` owns rows
        ``i * d_v`` to ``(i + 1) * d_v``).

    The weights are ordinary float64 arrays, drawn with Glorot initialisation
    (`glorot_normal`); there are no biases. Read or overwrite them at any time, in place or
    by assigning a new array: every call uses their current values (nothing is cached). A call
    on many tokens casts them to the input's dtype; a call on a few (a decoding step) reads
    them as they are stored and rounds each product to the input's dtype. A weight that
    holds NaN or inf is named in a ``ValueError`` by the first call that uses it: a call reads
    the weights through only when a result computed from them is not finite.

    Raises
    ------
    TypeError
        If ``d_model``, ``h``, ``d_k`` or ``d_v`` is not an integer, ``seed`` is none of
        None, an integer, a Generator, a BitGenerator or a SeedSequence, ``rope`` is not a
        bool, ``scale`` is not a real number, or ``kv_heads`` is not an integer.
    ValueError
        If one of them is < 1 (``seed`` < 0), ``d_model`` is not divisible by ``h`` when
        ``d_k`` is not given, ``rope`` is True and ``d_k`` is odd, ``scale`` is not finite,
        or ``kv_heads`` is < 1 or does not divide ``h``.

    Notes
    -----
    $$
    \operatorname{head}_i = \operatorname{Attention}(X W_i^Q,\; C W_i^K,\; C W_i^V),
    \qquad
    \operatorname{MultiHead}(X, C) = \operatorname{Concat}(\operatorname{head}_1, \dots,
    \operatorname{head}_h)\, W^O
    $$

    with $C = X$ for self-attention. With ``rope=True``, each head's queries $X W_i^Q$ and keys
    $X W_i^K$ are rotated by `mha.rope` before their dot products. The layout is that of the
    source document's ``MultiHeadAttention``; the computation runs all heads at once with batched matrix products.
    `mha.reference.multi_head_attention_reference` computes the same thing one head and
    one query at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import MultiHeadAttention, causal_mask
    >>> layer = MultiHeadAttention(d_model=16, h=4, seed=0)
    >>> layer.W_Q.shape, layer.W_O.shape
    ((16, 4, 4), (16, 16))
    >>> x = np.random.default_rng(1).normal(size=(6, 16))       # n = 6 tokens
    >>> y, w = layer(x, mask=causal_mask(6), return_weights=True)
    >>> y.shape, w.shape                                          # w: (h, n_q, n_k)
    ((6, 16), (4, 6, 6))
    """

    def __init__(self, d_model: int, h: int, d_k: int | None = None, d_v: int | None = None,
                 *, seed=None, rope: bool = False, scale: float | None = None,
                 kv_heads: int | None = None):
        d_model, h, d_k, d_v = check_sizes(d_model, h, d_k, d_v)  # d_k, d_v: d_model // h
        self.d_model, self.h, self.d_k, self.d_v = d_model, h, d_k, d_v
        self.kv_heads = check_kv_heads(kv_heads, h)
        self.rope = check_flag(rope, "rope")
        if scale is not None:
            scale = float(check_scale(scale, d_k, np.dtype(np.float64)))
        self.scale = scale  # None: 1 / sqrt(d_k), in the dtype of each call
        if self.rope and d_k % 2:
            raise ValueError(f"rope=True needs an even d_k (RoPE rotates pairs of dimensions), "
                             f"got d_k={d_k}")

        rng = np.random.default_rng(check_seed(seed))
        self.W_Q = glorot_normal(rng, (d_model, h, d_k), d_model, h * d_k)
        kv = self.kv_heads  # h by default: the same draws, in the same order, as before
        self.W_K = glorot_normal(rng, (d_model, kv, d_k), d_model, kv * d_k)
        self.W_V = glorot_normal(rng, (d_model, kv, d_v), d_model, kv * d_v)
        self.W_O = glorot_normal(rng, (h * d_v, d_model), h * d_v, d_model)

    def __repr__(self) -> str:
        return (f"MultiHeadAttention(d_model={self.d_model}, h={self.h}, d_k={self.d_k}, "
                f"d_v={self.d_v}{', rope=True' if self.rope else ''}"
                f"{'' if self.scale is None else f', scale={self.scale!r}'}"
                f"{'' if self.kv_heads == self.h else f', kv_heads={self.kv_heads}'})")

    def forward(self, x, mask=None, *, context=None, return_weights: bool = False, cache=None):
        """Apply the layer.

        Parameters
        ----------
        x : ndarray of shape ``(n, d_model)`` or ``(b, n, d_model)``
            The tokens that ask (queries); float32 or float64. With ``cache``, only the new
            tokens.
        mask : ndarray broadcastable to ``(n, m)`` or ``(b, n, m)``, optional
            Boolean (True = may attend) or additive float (0 / ``-inf``), as in
            `mha.scaled_dot_product_attention`. The same mask applies to every head. With
            ``cache``, ``m = len(cache) + n`` (the cached tokens, then the new ones), and the
            mask is combined with the causal rule.
        context : ndarray of shape ``(m, d_model)`` or ``(b, m, d_model)``, optional
            The tokens that answer (keys and values) for cross-attention, with the same number
            of dimensions (and batch size) as ``x``. Defaults to ``x`` (self-attention). Not
            allowed when the layer was built with ``rope=True``.
        return_weights : bool, default False
            Also return the attention weights of every head.
        cache : mha.KVCache, optional
            For generation: the keys and values of the tokens this layer has already seen.
            The new tokens' keys and values are appended to it (in place), and each new token
            attends to every cached token and to the new tokens up to itself (causal). With
            ``rope=True`` the new tokens' positions continue from ``len(cache)``. Feeding a
            sequence in pieces this way gives the outputs of one causal forward over all of it.
            Not allowed with ``context``.

        Returns
        -------
        output : ndarray of shape ``(n, d_model)`` or ``(b, n, d_model)``
            In the dtype of ``x`` (and ``context``). With no keys (``m = 0``) it is zeros.
        weights : ndarray of shape ``(h, n, m)`` or ``(b, h, n, m)``
            Only when ``return_weights`` is True (one map per query head, also when key/value
            heads are shared).

        Raises
        ------
        TypeError
            If ``x``, ``context`` or a weight is not a floating-point array, the mask is
            neither boolean nor floating, or ``return_weights`` is not a bool.
        ValueError
            If a shape is wrong (``x``, ``context``, the mask, or a weight overwritten with
            another shape), an input or weight holds NaN or inf, a result overflows the
            input's dtype (as in `mha.scaled_dot_product_attention`), ``context`` is given
            to a layer with ``rope=True`` or together with ``cache``, or ``cache`` holds
            tokens of another layout (batch shape, ``kv_heads``, ``d_k``, ``d_v``, dtype).

        Examples
        --------
        Generation one token at a time with a cache gives what one causal pass over the
        whole sequence gives:

        >>> import numpy as np
        >>> from mha import KVCache, MultiHeadAttention, causal_mask
        >>> layer = MultiHeadAttention(d_model=8, h=2, seed=0)
        >>> x = np.random.default_rng(0).normal(size=(4, 8))
        >>> cache = KVCache()
        >>> first = layer(x[:3], cache=cache)                  # the prompt, 3 tokens at once
        >>> last = layer(x[3:], cache=cache)                   # then one new token
        >>> len(cache), bool(np.allclose(np.vstack([first, last]), layer(x, causal_mask(4))))
        (4, True)
        """
        return_weights = check_flag(return_weights, "return_weights")
        if isinstance(cache, KVCache):  # one call at a time on a cache: from its length read
            with cache._lock:           # to its append, or the undo of a failure (see KVCache)
                stages = self._run(x, mask, context, "forward", cache)
        else:
            stages = self._run(x, mask, context, "forward", cache)
        return (stages["output"], stages["weights"]) if return_weights else stages["output"]

    def trace(self, x, mask=None, *, context=None) -> dict:
        """Every intermediate array of one forward pass, by stage: for figures and for reading.

        Takes the same arguments as `forward` and runs the same computation.

        Returns
        -------
        dict of str to ndarray
            With ``...`` standing for the batch dimension, if any:

            - ``"x"`` ``(..., n, d_model)`` and ``"context"`` ``(..., m, d_model)``: the inputs;
            - ``"q"`` ``(..., h, n, d_k)``, ``"k"`` ``(..., kv_heads, m, d_k)``, ``"v"``
              ``(..., kv_heads, m, d_v)``: each head's queries, keys and values (with
              ``rope=True``, the queries and keys after the rotation);
            - ``"scores"`` ``(..., h, n, m)``: ``q k^T / sqrt(d_k)`` (``scale * q k^T``)
              before the mask, the very
              array the weights were computed from;
            - ``"weights"`` ``(..., h, n, m)``: after the mask and softmax;
            - ``"heads"`` ``(..., h, n, d_v)``: each head's weighted sum of its values;
            - ``"concat"`` ``(..., n, h * d_v)``: the heads side by side;
            - ``"output"`` ``(..., n, d_model)``: ``concat @ W_O``.

        Examples
        --------
        >>> import numpy as np
        >>> from mha import MultiHeadAttention
        >>> layer = MultiHeadAttention(d_model=16, h=4, seed=0)
        >>> stages = layer.trace(np.random.default_rng(0).normal(size=(8, 16)))
        >>> {name: a.shape for name, a in stages.items()}     # doctest: +NORMALIZE_WHITESPACE
        {'x': (8, 16), 'context': (8, 16), 'q': (4, 8, 4), 'k': (4, 8, 4), 'v': (4, 8, 4),
         'scores': (4, 8, 8), 'weights': (4, 8, 8), 'heads': (4, 8, 4), 'concat': (8, 16),
         'output': (8, 16)}
        """
        return self._run(x, mask, context, "trace")

    def backward(self, x, d_out, mask=None, *, context=None) -> dict:
        r"""Gradients of a loss with respect to the input and every weight, by hand.

        Recomputes the forward pass on the same arguments (the layer caches nothing between
        calls) and runs it backwards. The weights are not changed: an optimiser does that.

        Parameters
        ----------
        x : ndarray of shape ``(n, d_model)`` or ``(b, n, d_model)``
        d_out : ndarray of the output's shape ``(n, d_model)`` or ``(b, n, d_model)``
            The gradient of the loss with respect to the layer's output.
        mask, context
            As in `forward`.

        Returns
        -------
        dict of str to ndarray
            ``"x"`` (the shape of ``x``), ``"W_Q"``, ``"W_K"``, ``"W_V"``, ``"W_O"`` (the shapes
            of the weights, summed over the batch) and ``"context"`` (the shape of ``context``,
            or None for self-attention, where ``x`` plays both parts and ``"x"`` holds the sum
            of both paths). All in the forward's dtype: float32 input gives float32 gradients.
            Whether ``context`` was given decides, not which array it is: ``context=x`` gets
            the two paths apart (``"x"`` the queries', ``"context"`` the keys' and values'),
            as ``context=x.copy()`` does; their sum is the self-attention ``"x"``.

        Raises
        ------
        TypeError, ValueError
            As `forward`, and a ``ValueError`` if ``d_out`` does not have the output's shape
            or holds NaN or inf, or a gradient overflows the dtype.

        Notes
        -----
        With $Q_i = X W_i^Q$, $K_i = C W_i^K$, $V_i = C W_i^V$, $H = \operatorname{Concat}_i
        \operatorname{Attention}(Q_i, K_i, V_i)$ and $Y = H W^O$, every product
        $Y = A B$ sends $dA = dY B^\top$ and $dB = A^\top dY$ back:

        $$
        dW^O = H^\top dY, \qquad dH = dY\, (W^O)^\top,
        $$

        $$
        dW_i^Q = X^\top dQ_i, \quad dW_i^K = C^\top dK_i, \quad dW_i^V = C^\top dV_i, \quad
        dX = \textstyle\sum_i dQ_i (W_i^Q)^\top, \quad
        dC = \sum_i dK_i (W_i^K)^\top + dV_i (W_i^V)^\top,
        $$

        with $dQ_i, dK_i, dV_i$ from `mha.attention_backward` applied to head $i$'s slice of
        $dH$. In self-attention $C = X$, so $X$ receives $dX + dC$. With ``rope=True`` the
        rotation $R_p$ of each position is orthogonal, so the gradients of the rotated queries
        and keys go back through $R_p^\top = R_{-p}$ before the projections.

        Examples
        --------
        >>> import numpy as np
        >>> from mha import MultiHeadAttention, causal_mask
        >>> layer = MultiHeadAttention(d_model=8, h=2, seed=0)
        >>> x = np.random.default_rng(1).normal(size=(5, 8))
        >>> target = np.zeros((5, 8))
        >>> def loss(x):                                   # L = 0.5 * |y - target|^2
        ...     return 0.5 * ((layer(x, mask=causal_mask(5)) - target) ** 2).sum()
        >>> grads = layer.backward(x, layer(x, mask=causal_mask(5)) - target, mask=causal_mask(5))
        >>> sorted(grads), grads["W_Q"].shape
        (['W_K', 'W_O', 'W_Q', 'W_V', 'context', 'x'], (8, 2, 4))
        >>> e = np.zeros_like(x); e[3, 2] = 1e-6            # one entry of dL/dx, checked
        >>> bool(np.isclose((loss(x + e) - loss(x - e)) / 2e-6, grads["x"][3, 2]))
        True
        """
        self_attention = context is None  # the argument, not `context is x`: no identity test
        s = self._run(x, mask, context, "backward")
        x, context, h, d_model = s["x"], s["context"], self.h, self.d_model
        dtype, out_shape = s["concat"].dtype, x.shape[:-1] + (d_model,)
        d_out = as_float_array(d_out, "d_out")
        if d_out.shape != out_shape:
            raise ValueError(f"d_out must have the layer output's shape {out_shape} "
                             f"(x {x.shape}), got {d_out.shape}")
        d_out = d_out.astype(dtype, copy=False)
        W_O = self.W_O.astype(dtype, copy=False)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            # Y = H W^O: (..., n, h*d_v) x (h*d_v, d_model)
            dW_O = s["concat"].reshape(-1, h * self.d_v).T @ d_out.reshape(-1, d_model)
            d_heads = split_heads(d_out @ W_O.T, h)                    # (..., h, n, d_v)
        kv, g = self.kv_heads, self.h // self.kv_heads
        try:
            if g == 1:
                dq, dk, dv = _attention_backward_from_weights(
                    s["q"], s["k"], s["v"], s["weights"], s["heads"], d_heads, s["scale"])
            else:  # the query heads of a group share one key/value head: sum their gradients
                dq, dk, dv = _attention_backward_from_weights(
                    _group(s["q"], kv), s["k"][..., None, :, :], s["v"][..., None, :, :],
                    _group(s["weights"], kv), _group(s["heads"], kv), _group(d_heads, kv),
                    s["scale"])
                dq = _ungroup(dq)
                dk, dv = dk.sum(axis=-3), dv.sum(axis=-3)
        except ValueError:  # an overflow, named there by the heads' inner shapes: name the user's
            raise overflow_error("the gradient of the attention weights", dtype, x=x.shape,
                                 context=context.shape, d_out=d_out.shape) from None
        # dq (..., h, n, d_k), dk (..., kv_heads, m, d_k), dv (..., kv_heads, m, d_v)
        if self.rope:  # back through the rotation: R_p^T = R_{-p}
            positions = -np.arange(x.shape[-2])
            dq, dk = _rotate(dq, positions, 10000.0), _rotate(dk, positions, 10000.0)
        dq, dk, dv = merge_heads(dq), merge_heads(dk), merge_heads(dv)  # (..., n|m, heads*d)
        flat = [W.reshape(d_model, -1).astype(dtype, copy=False)
                for W in (self.W_Q, self.W_K, self.W_V)]
        with np.errstate(over="ignore", invalid="ignore"):
            x2 = x.reshape(-1, d_model)                                 # (b*n, d_model)
            if self_attention:  # one product for the three roles, as in the forward
                d_qkv = np.concatenate([dq, dk, dv], axis=-1)           # (..., n, all columns)
                d_fused = x2.T @ d_qkv.reshape(len(x2), d_qkv.shape[-1])  # (d_model, columns)
                dW = np.split(d_fused, [h * self.d_k, (h + kv) * self.d_k], axis=1)
                dx = d_qkv @ np.concatenate(flat, axis=1).T             # (..., n, d_model)
                d_context = None
            else:
                c2 = context.reshape(-1, d_model)                       # (b*m, d_model)
                dW = [x2.T @ dq.reshape(len(x2), dq.shape[-1]),
                      c2.T @ dk.reshape(len(c2), dk.shape[-1]),
                      c2.T @ dv.reshape(len(c2), dv.shape[-1])]
                dx = dq @ flat[0].T
                d_context = dk @ flat[1].T + dv @ flat[2].T
        grads = {"x": dx, "context": d_context,
                 "W_Q": dW[0].reshape(self.W_Q.shape), "W_K": dW[1].reshape(self.W_K.shape),
                 "W_V": dW[2].reshape(self.W_V.shape), "W_O": dW_O}
        for name, grad in grads.items():
            if grad is not None and not all_finite(grad):
                raise overflow_error(f"the gradient of {name}", dtype, x=x.shape,
                                     context=context.shape)
        return grads

    def _run(self, x, mask, context, mode: str, cache=None) -> dict:
        """The forward pass. ``mode`` says what to return: ``"forward"`` the output and the
        weights; ``"trace"`` every stage (see `trace`); ``"backward"`` what `backward` needs:
        every stage up to the concatenated heads (not the scores, not the output) and the
        scale. ``cache``: see `forward`."""
        d_model, h, kv, d_k, d_v = self.d_model, self.h, self.kv_heads, self.d_k, self.d_v
        if self.rope and context is not None:
            raise ValueError("context= (cross-attention) is not supported with rope=True: RoPE "
                             "rotates queries and keys by their positions in one sequence, and "
                             "keys from another sequence have no positions relative to the "
                             "queries")
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a mha.KVCache, got {type(cache).__name__}")
            if context is not None:
                raise ValueError("context= (cross-attention) cannot be combined with cache=: the "
                                 "cache holds the keys and values of the sequence being "
                                 "generated, one token after another")
        x, context = check_tokens(x, context, d_model)
        # The weights' types and shapes are checked now, their entries only if a result computed
        # from them is not finite (`nonfinite_weight`): reading the four float64 matrices through
        # for NaN on every call would cost a decoding step more than its products. `backward`,
        # whose gradients read the weights again, checks them now.
        now = mode == "backward"
        W_Q = check_weight(self.W_Q, "self.W_Q", (d_model, h, d_k), finite=now)
        W_K = check_weight(self.W_K, "self.W_K", (d_model, kv, d_k), finite=now)
        W_V = check_weight(self.W_V, "self.W_V", (d_model, kv, d_v), finite=now)
        W_O = check_weight(self.W_O, "self.W_O", (h * d_v, d_model), finite=now)
        named = {"self.W_Q": W_Q, "self.W_K": W_K, "self.W_V": W_V, "self.W_O": W_O}
        lead, n = x.shape[:-2], x.shape[-2]
        dtype = np.result_type(x, context)
        start = 0 if cache is None else len(cache)  # the position of the first token of x
        m = start + context.shape[-2]  # keys: with a cache, the cached tokens and then x
        visible = None if mask is None else as_visible_mask(
            mask, lead + (n, m), "the weights of one head (..., n, m)")  # True = may attend
        if cache is not None and n > 1:  # the causal rule: token start + i sees keys 0..start + i
            causal = np.arange(m)[None, :] <= start + np.arange(n)[:, None]  # (n, m)
            visible = causal if visible is None else visible & causal
        if visible is not None and visible.ndim == 3:
            visible = visible[:, None]  # (b, n, m) -> (b, 1, n, m): the same for every head

        flat = [W_Q.reshape(d_model, h * d_k), W_K.reshape(d_model, kv * d_k),
                W_V.reshape(d_model, kv * d_v)]
        # A few tokens (one new token while generating): the products read the weights as they
        # are. Casting and joining the matrices first would cost more than the products.
        few = 8 * (max(x.size, context.size) // d_model) < d_model
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            if few:
                q, k, v = ((context if i else x) @ W for i, W in enumerate(flat))
                q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
            elif context is x:
                # Self-attention: one product for all three roles and all heads. The fused
                # matrix is built from the current weights on every call: it never goes stale.
                # (d_model, (h + kv) d_k + kv d_v)
                fused = np.concatenate(flat, axis=1, dtype=dtype)
                q, k, v = np.split(x @ fused, [h * d_k, (h + kv) * d_k], axis=-1)
            else:
                q = x @ flat[0].astype(dtype, copy=False)                      # (..., n, h*d_k)
                k, v = np.split(context @ np.concatenate(flat[1:], axis=1, dtype=dtype),
                                [kv * d_k], axis=-1)                           # (..., m, kv*d)
        if not (all_finite(q) and all_finite(k) and all_finite(v)):
            error = nonfinite_weight(named)  # else an overflow, refused further on
            if error is not None:
                raise error
        q, k, v = split_heads(q, h), split_heads(k, kv), split_heads(v, kv)
        # q (..., h, n, d_k), k (..., kv_heads, m, d_k), v (..., kv_heads, m, d_v)
        if self.rope:  # turn each token's query and key by its position
            positions = start + np.arange(n)
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
                q, k = _rotate(q, positions, 10000.0), _rotate(k, positions, 10000.0)
        if cache is not None:  # every argument has been checked: tie the cache, and append
            cache._check_layout(lead, kv, d_k, d_v, dtype)
            k, v = cache._append(k, v)  # (..., kv_heads, start + n, d): the cached ones too
        try:
            scale = check_scale(self.scale, d_k, dtype)  # 1 / sqrt(d_k) unless the layer says
            heads, weights, scores = self._attend(q, k, v, visible, scale, mode == "trace")
            # heads (..., h, n, d_v), weights and scores (..., h, n, m)
            concat = merge_heads(heads)                                   # (..., n, h*d_v)
            if mode == "backward":
                return {"x": x, "context": context, "q": q, "k": k, "v": v, "weights": weights,
                        "heads": heads, "concat": concat, "scale": scale}
            with np.errstate(over="ignore", invalid="ignore"):
                if few:  # W^O read as stored, the product rounded to dtype once
                    output = (concat @ W_O).astype(dtype, copy=False)     # (..., n, d_model)
                else:
                    output = concat @ W_O.astype(dtype, copy=False)       # (..., n, d_model)
            if not all_finite(output):
                raise overflow_error("the layer's output", dtype, x=x.shape,
                                     context=context.shape)
        except BaseException as failure:
            if cache is not None:
                cache._truncate(start)  # a call that fails leaves the cache as it found it
            if isinstance(failure, ValueError):  # NaN or inf from a weight: name the weight
                error = nonfinite_weight(named)
                if error is not None:
                    raise error from None
            raise
        if mode == "forward":
            return {"output": output, "weights": weights}
        return {"x": x, "context": context, "q": q, "k": k, "v": v, "scores": scores,
                "weights": weights, "heads": heads, "concat": concat, "output": output}

    def _attend(self, q, k, v, visible, scale, keep_scores: bool):
        """`mha.attention._attend` for every query head, each group of ``h // kv_heads`` query
        heads on its shared key/value head (without copying the keys and values)."""
        if self.kv_heads == self.h:
            return _attend(q, k, v, visible, scale, keep_scores=keep_scores)
        kv = self.kv_heads
        # q (..., kv, g, n, d_k) against k (..., kv, 1, m, d_k): broadcast over the group.
        if visible is not None:
            visible = visible[..., None, :, :]  # (..., 1, 1, n, m) against (..., kv, g, n, m)
        try:
            heads, weights, scores = _attend(_group(q, kv), k[..., None, :, :],
                                             v[..., None, :, :], visible, scale,
                                             keep_scores=keep_scores)
        except ValueError:  # an overflow, named there by the grouped inner shapes
            raise overflow_error("the attention scores or output", q.dtype, q=q.shape,
                                 k=k.shape, v=v.shape) from None
        return (_ungroup(heads), _ungroup(weights),
                None if scores is None else _ungroup(scores))

    __call__ = forward
