"""The slow, obvious implementation: one head at a time, one query at a time.

This module exists to be read and to be the test oracle. Every number is computed with plain
Python arithmetic on one query row at a time, straight from the definition, so it shares no
vectorised code with the fast path (``mha.attention``, ``mha.multihead``), which never calls it.
It assumes valid input: the public functions are the ones that check arguments.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["attention_reference", "multi_head_attention_reference", "sinusoidal_reference",
           "rope_reference"]


def attention_reference(q, k, v, mask=None, scale=None):
    """Scaled dot-product attention, computed query by query.

    Parameters
    ----------
    q : ndarray of shape ``(..., n_q, d_k)``
    k : ndarray of shape ``(..., n_k, d_k)``
    v : ndarray of shape ``(..., n_k, d_v)``
    mask : ndarray broadcastable to ``(..., n_q, n_k)``, optional
        Boolean (True = may attend) or additive float (0 / ``-inf``).
    scale : float, optional
        Defaults to ``1 / sqrt(d_k)``.

    Returns
    -------
    output : ndarray of shape ``(..., n_q, d_v)``
    weights : ndarray of shape ``(..., n_q, n_k)``
        A query that may attend to no key gets zero weights and a zero output.

    Examples
    --------
    >>> import numpy as np
    >>> from mha.reference import attention_reference
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]]); v = np.eye(2)
    >>> out, w = attention_reference(q, k, v, scale=1.0)
    >>> np.round(w, 4)                  # softmax([1, 0]) = [e, 1] / (e + 1)
    array([[0.7311, 0.2689]])
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is None:
        mask = np.ones((n_q, n_k), dtype=bool)
    mask = np.asarray(mask)
    batch = np.broadcast_shapes(batch, mask.shape[:-2])
    q = np.broadcast_to(q, batch + (n_q, d_k))
    k = np.broadcast_to(k, batch + (n_k, d_k))
    v = np.broadcast_to(v, batch + (n_k, d_v))
    mask = np.broadcast_to(mask, batch + (n_q, n_k))

    output = np.zeros(batch + (n_q, d_v))
    weights = np.zeros(batch + (n_q, n_k))
    for index in np.ndindex(*batch):
        for i in range(n_q):
            # Score of query i against every key it may see.
            scores = {}
            for j in range(n_k):
                score = sum(float(a) * float(b) for a, b in zip(q[index][i], k[index][j])) * scale
                if mask.dtype == np.bool_:
                    visible = bool(mask[index][i, j])
                else:  # additive: adding 0 changes nothing, adding -inf hides the key
                    visible = float(mask[index][i, j]) != -math.inf
                if visible:
                    scores[j] = score
            if not scores:
                continue  # nobody to listen to: weights and output stay zero
            # Softmax over the visible keys (subtracting the largest score changes nothing but
            # keeps exp() from overflowing).
            top = max(scores.values())
            exps = {j: math.exp(s - top) for j, s in scores.items()}
            total = sum(exps.values())
            for j, e in exps.items():
                weights[index][i, j] = e / total
                output[index][i] += weights[index][i, j] * v[index][j].astype(float)
    dtype = np.result_type(q, k, v)
    return output.astype(dtype), weights.astype(dtype)


def sinusoidal_reference(n, d_model, base=10000.0):
    """The sinusoidal position table, entry by entry from the formula of section 3.5.

    Returns
    -------
    ndarray of float64, shape ``(n, d_model)``
        ``PE[p, 2i] = sin(p / base^(2i/d_model))``, ``PE[p, 2i+1] = cos(p / base^(2i/d_model))``.
    """
    table = np.zeros((n, d_model))
    for p in range(n):
        for column in range(d_model):
            i = column // 2                       # the pair this column belongs to
            angle = p / base ** (2 * i / d_model)
            table[p, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return table


def rope_reference(x, positions=None, base=10000.0):
    """Rotary position embedding, one token and one 2 x 2 rotation matrix at a time.

    Parameters
    ----------
    x : ndarray of shape ``(..., n, d)``, ``d`` even
    positions : sequence of ``n`` numbers, optional
        Defaults to ``0, 1, ..., n - 1``.

    Returns
    -------
    ndarray of shape ``(..., n, d)``, the dtype of ``x``
        Pair ``(x[..., j, 2i], x[..., j, 2i+1])`` multiplied by the rotation matrix of angle
        ``positions[j] * base^(-2i/d)`` (RoFormer, eq. 34).
    """
    x = np.asarray(x)
    n, d = x.shape[-2:]
    positions = range(n) if positions is None else [float(p) for p in positions]
    out = np.zeros(x.shape)
    for index in np.ndindex(*x.shape[:-2]):
        for j, p in enumerate(positions):
            for i in range(d // 2):
                angle = p * base ** (-2 * i / d)
                rotation = [[math.cos(angle), -math.sin(angle)],
                            [math.sin(angle), math.cos(angle)]]
                pair = [float(x[index][j, 2 * i]), float(x[index][j, 2 * i + 1])]
                for row in range(2):
                    out[index][j, 2 * i + row] = (rotation[row][0] * pair[0]
                                                  + rotation[row][1] * pair[1])
    return out.astype(x.dtype)


def multi_head_attention_reference(x, W_Q, W_K, W_V, W_O, mask=None, context=None, rope=False,
                                   *, kv_heads=None):
    """Multi-head attention, computed one sequence and one head at a time.

    With fewer key/value heads than query heads (multi-query or grouped-query attention), query
    head ``i`` reads key/value head ``i // (h // kv_heads)``.

    Parameters
    ----------
    x : ndarray of shape ``(n, d_model)`` or ``(b, n, d_model)``
    W_Q : ndarray of shape ``(d_model, h, d_k)``
    W_K : ndarray of shape ``(d_model, kv_heads, d_k)``
    W_V : ndarray of shape ``(d_model, kv_heads, d_v)``
    W_O : ndarray of shape ``(h * d_v, d_model)``
    mask : ndarray broadcastable to ``(n, m)`` or ``(b, n, m)``, optional
    context : ndarray of shape ``(m, d_model)`` or ``(b, m, d_model)``, optional
        Keys and values come from here; defaults to ``x``.
    rope : bool, default False
        Rotate each head's queries and keys with `rope_reference` (self-attention only).
    kv_heads : int, optional
        Number of key/value heads, dividing ``h``. Defaults to ``W_K.shape[1]`` (``h`` for the
        classic layer: one key/value head per query head).

    Returns
    -------
    output : ndarray of shape ``(n, d_model)`` or ``(b, n, d_model)``
    weights : ndarray of shape ``(h, n, m)`` or ``(b, h, n, m)``

    Examples
    --------
    >>> import numpy as np
    >>> from mha import MultiHeadAttention
    >>> from mha.reference import multi_head_attention_reference
    >>> layer = MultiHeadAttention(d_model=8, h=2, seed=0)
    >>> x = np.random.default_rng(0).normal(size=(5, 8))
    >>> slow, _ = multi_head_attention_reference(x, layer.W_Q, layer.W_K, layer.W_V, layer.W_O)
    >>> np.allclose(slow, layer(x))
    True
    >>> gqa = MultiHeadAttention(d_model=8, h=4, kv_heads=2, seed=0)   # heads 0, 1 share K/V 0
    >>> slow, _ = multi_head_attention_reference(x, gqa.W_Q, gqa.W_K, gqa.W_V, gqa.W_O,
    ...                                          kv_heads=2)
    >>> np.allclose(slow, gqa(x))
    True
    """
    x = np.asarray(x)
    context = x if context is None else np.asarray(context)
    if x.ndim == 2:  # a single sequence is a batch of one
        out, w = multi_head_attention_reference(
            x[None], W_Q, W_K, W_V, W_O, None if mask is None else np.asarray(mask)[None],
            context[None], rope, kv_heads=kv_heads)
        return out[0], w[0]

    b, n, _ = x.shape
    m = context.shape[1]
    h = W_Q.shape[1]
    kv_heads = W_K.shape[1] if kv_heads is None else kv_heads
    group = h // kv_heads                    # query heads per key/value head
    masks = np.broadcast_to(np.ones((n, m), bool) if mask is None else mask, (b, n, m))
    outputs, all_weights = [], []
    for s in range(b):
        heads, head_weights = [], []
        for i in range(h):
            j = i // group                   # the key/value head query head i reads
            q_i = x[s] @ W_Q[:, i, :]        # (n, d_k): what head i's detectives ask
            k_i = context[s] @ W_K[:, j, :]  # (m, d_k): the tags on the evidence
            v_i = context[s] @ W_V[:, j, :]  # (m, d_v): what the evidence says
            if rope:                         # stamp each query and key with its position
                q_i, k_i = rope_reference(q_i), rope_reference(k_i)
            head, w = attention_reference(q_i, k_i, v_i, masks[s])
            heads.append(head)
            head_weights.append(w)
        concat = np.concatenate(heads, axis=-1)  # (n, h*d_v): the reports side by side
        outputs.append(concat @ W_O)             # (n, d_model)
        all_weights.append(np.stack(head_weights))
    return np.stack(outputs), np.stack(all_weights)
