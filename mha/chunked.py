"""Exact attention computed block by block (FlashAttention-style), without the n_q x n_k matrix.

The running softmax is the online normaliser of Milakov & Gimelshein (2018, arXiv:1805.02867);
attention computed this way in chunks is Rabe & Staats (2021, arXiv:2112.05682), and
FlashAttention (Dao et al. 2022, arXiv:2205.14135) is the same idea tiled for a GPU's memory.

`chunked_attention` gives the same output as `mha.scaled_dot_product_attention` with a causal,
sliding-window or padding mask, but it takes the mask by its *structure* (``causal``, ``window``,
``lengths``) rather than as an array, walks over tiles of ``block_size`` queries by
``block_size`` keys, and keeps a running softmax per query (the "online softmax"). Memory grows
with ``n * block_size`` instead of ``n**2``, and tiles that the mask hides entirely are skipped.

Dimension names as in `mha.attention`: ``n_q`` queries, ``n_k`` keys, ``d_k``, ``d_v``, and
``...`` for the leading (batch, head) dimensions.
"""

from __future__ import annotations

import numpy as np

from ._checks import (all_finite, check_flag, check_lengths, check_positive_int, check_q_k_v,
                      check_scale, check_structure, overflow_error)
from ._parallel import map_rows

__all__ = ["chunked_attention"]


def chunked_attention(q, k, v, *, causal=False, window=None, lengths=None, block_size=512,
                      scale=None, return_stats=False):
    r"""Exact attention, one ``block_size x block_size`` tile of scores at a time.

    Parameters
    ----------
    q : ndarray of shape ``(..., n_q, d_k)``
        Queries.
    k : ndarray of shape ``(..., n_k, d_k)``
        Keys; leading dimensions broadcast against those of ``q`` and ``v``.
    v : ndarray of shape ``(..., n_k, d_v)``
        Values, one per key.
    causal : bool, default False
        If True, query ``i`` sees key ``j`` only when ``j <= i`` (as `mha.causal_mask`); needs
        ``n_q == n_k``.
    window : int, optional
        If given (>= 0), query ``i`` sees key ``j`` only when ``i - window <= j <= i`` (as
        `mha.sliding_window_mask`). Implies ``causal=True`` and needs ``n_q == n_k``; any
        ``window >= n_k - 1``, however large, is the same as ``causal=True``.
    lengths : array_like of int, shape ``(...)``, optional
        The true length of each sequence of the batch: keys at position ``lengths[...]`` or
        beyond are hidden (as `mha.padding_mask`). Its shape is the batch shape ``...`` of the
        result, or broadcasts to it without enlarging it; each entry lies in ``0 .. n_k``.
    block_size : int, default 512
        Queries and keys per tile, >= 1. Any value gives the same result up to rounding.
    scale : float, optional
        Factor applied to the scores. Defaults to $1/\sqrt{d_k}$.
    return_stats : bool, default False
        Also return a dict counting the tiles (see Returns).

    Returns
    -------
    output : ndarray of shape ``(..., n_q, d_v)``
        Each query's weighted sum of the values; ``...`` is the leading dimensions of ``q``,
        ``k`` and ``v`` broadcast together. A query that may see no key at all gets zeros
        (never NaN, never a warning). The dtype is NumPy's promotion of ``q``, ``k`` and ``v``
        (float32 inputs give float32, computed in float32 throughout; float16 inputs are
        computed in float32, whose running sums cannot overflow, and rounded to float16).
    stats : dict of str to int
        Only with ``return_stats=True``. ``"blocks_total"``: query blocks times key blocks;
        ``"blocks_visited"``: tiles actually computed (the others are hidden entirely by the mask
        and skipped); ``"blocks_masked"``: visited tiles that needed an element-wise mask.

    Raises
    ------
    TypeError
        If an input is not a floating-point array, ``lengths`` is not integer, ``causal`` or
        ``return_stats`` is not a bool, or ``block_size``, ``window`` or ``scale`` has the wrong
        type.
    ValueError
        If the shapes disagree (as in `mha.scaled_dot_product_attention`), ``causal`` or
        ``window`` is used with ``n_q != n_k``, ``block_size < 1``, ``window < 0``, ``lengths``
        does not broadcast to the batch shape or lies outside ``0 .. n_k``, ``scale`` is not
        finite in the inputs' dtype, or the scores of a query that may see some key overflow
        (to ``+inf``, or all to ``-inf``), or the output does.

    Notes
    -----
    Let $s_{ij} = \text{scale} \cdot q_i \cdot k_j$, with $s_{ij} = -\infty$ for a hidden key.
    Keys are visited in blocks $B_1, B_2, \dots$; for each query $i$ a running maximum $m$,
    a running sum $\ell$ and a running output $o$ start at $m^{(0)} = -\infty$,
    $\ell^{(0)} = 0$, $o^{(0)} = 0$ and are updated once per block:

    $$
    m^{(t)} = \max\Bigl(m^{(t-1)},\ \max_{j \in B_t} s_{ij}\Bigr)
    $$

    $$
    \ell^{(t)} = e^{m^{(t-1)} - m^{(t)}}\,\ell^{(t-1)} + \sum_{j \in B_t} e^{s_{ij} - m^{(t)}}
    $$

    $$
    o^{(t)} = e^{m^{(t-1)} - m^{(t)}}\,o^{(t-1)} + \sum_{j \in B_t} e^{s_{ij} - m^{(t)}}\,v_j
    $$

    The factor $e^{m^{(t-1)} - m^{(t)}} \le 1$ rescales what was summed against the old
    maximum when a larger score turns up, so every exponent stays at or below 0. After the
    last block $T$:

    $$
    \text{output}_i = \frac{o^{(T)}}{\ell^{(T)}}
    = \sum_j \frac{e^{s_{ij}}}{\sum_{j'} e^{s_{ij'}}}\, v_j
    $$

    which is exactly softmax attention, since the common factor $e^{-m^{(T)}}$ cancels. A
    query that sees no key keeps $\ell = 0$ and gets a zero output (while $m = -\infty$ the
    exponents are taken relative to 0 instead, so no $-\infty - (-\infty)$ ever occurs).

    Per step only one tile of scores, ``(..., block_size, block_size)``, exists, beside the
    running $m$ and $\ell$, shape ``(..., block_size, 1)``, and $o$, shape
    ``(..., block_size, d_v)``. The element-wise work on a tile (its maximum, $e^{s - m}$ and
    the sum for $\ell$) runs on several threads, a range of rows each.
    With ``causal`` only the tiles on or below the diagonal are computed: $b(b+1)/2$ of $b^2$
    for $b$ blocks.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import causal_mask, scaled_dot_product_attention
    >>> from mha.chunked import chunked_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 2, 6, 4))     # 2 heads, n = 6 tokens, d_k = d_v = 4
    >>> out, stats = chunked_attention(q, k, v, causal=True, block_size=2, return_stats=True)
    >>> out.shape
    (2, 6, 4)
    >>> stats                                       # 3 x 3 tiles, those above the diagonal skipped
    {'blocks_total': 9, 'blocks_visited': 6, 'blocks_masked': 3}
    >>> plain, _ = scaled_dot_product_attention(q, k, v, causal_mask(6))
    >>> np.allclose(out, plain)
    True
    """
    q, k, v, batch = check_q_k_v(q, k, v)
    dtype = np.result_type(q, k, v)
    scale = check_scale(scale, q.shape[-1], dtype)  # a scalar of dtype: float32 stays float32
    block_size = check_positive_int(block_size, "block_size", minimum=1)
    causal, window = check_structure(causal, window, q.shape, k.shape)  # window <= n_k
    return_stats = check_flag(return_stats, "return_stats")
    if lengths is not None:
        lengths = check_lengths(lengths, k.shape[-2], "n_k", batch)

    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    work = np.promote_types(dtype, np.float32)  # float16 computes in float32: sums of n_k terms
    q, k, v = (a.astype(work, copy=False) for a in (q, k, v))  # mixed dtypes: one dtype
    scale = work.type(scale)
    # The scores have the batch shape of q, k and lengths (v plays no part in them).
    score_batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2],
                                      () if lengths is None else lengths.shape)
    longest = n_k if lengths is None else int(lengths.max(initial=0))
    shortest = n_k if lengths is None else int(lengths.min(initial=n_k))
    key_limit = n_k if lengths is None else lengths[..., None, None]  # (..., 1, 1): keys < it

    output = np.zeros(batch + (n_q, d_v), work)  # (..., n_q, d_v); rows nobody fills stay 0
    k_t = np.swapaxes(k, -1, -2)  # (..., d_k, n_k), a view
    neg_inf = work.type(-np.inf)
    # One flat buffer per per-tile array, reshaped to each tile's size: every tile is contiguous.
    n_s, n_o = int(np.prod(score_batch)), int(np.prod(batch))  # batch sizes, flattened
    tile = min(block_size, n_q) * min(block_size, n_k)
    s_buf = np.empty(n_s * tile, work)  # one tile's scores, then exp(scores - m)
    pv_buf = np.empty(n_o * min(block_size, n_q) * d_v, work)  # one tile's p @ v

    n_q_blocks, n_k_blocks = -(-n_q // block_size), -(-n_k // block_size)
    visited = masked = 0
    for q0 in range(0, n_q, block_size):
        q1 = min(q0 + block_size, n_q)
        nq = q1 - q0
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked below
            q_blk = q[..., q0:q1, :] * scale  # (..., nq, d_k), scaled once per query block
        m = np.full(score_batch + (nq, 1), neg_inf, work)  # running max of the scores
        m_new = np.empty_like(m)  # (..., nq, 1)
        alpha = np.empty_like(m)  # (..., nq, 1): exp(m - m_new), rescales the old sums
        l_tile = np.empty_like(m)  # (..., nq, 1): sum_j p_j over one tile
        # Running sums: o = sum_j exp(s_j - m) v_j and l = sum_j exp(s_j - m).
        o = np.zeros(batch + (nq, d_v), work)  # (..., nq, d_v)
        l_sum = np.zeros_like(m)  # (..., nq, 1)
        for k0 in range(0, n_k, block_size):
            k1 = min(k0 + block_size, n_k)
            # Lowest and highest key of this block that some query of the block may see.
            lo = k0 if window is None else max(k0, q0 - window)
            hi = min(k1, q1) - 1 if causal else k1 - 1
            if lo > hi or lo >= longest:
                continue  # hidden entirely for every query and every sequence: skipped
            visited += 1
            nk = k1 - k0
            s = s_buf[: n_s * nq * nk].reshape(score_batch + (nq, nk))
            with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked below
                np.matmul(q_blk, k_t[..., k0:k1], out=s)  # (..., nq, d_k) x (..., d_k, nk)
            hidden = _hidden_in_tile(q0, q1, k0, k1, causal, window, key_limit, shortest)
            if hidden is not None:
                masked += 1
                np.copyto(s, neg_inf, where=hidden)  # (..., nq, nk), in place
            # The online-softmax step, element-wise over the tile: split by rows across threads
            # (NumPy's ufuncs run on one core; BLAS is idle meanwhile).
            finite = map_rows(_online_softmax_step, s.reshape(-1, nk), m.reshape(-1, 1),
                               m_new.reshape(-1, 1), alpha.reshape(-1, 1),
                               l_tile.reshape(-1, 1))
            if not all(finite):  # a score of +inf or NaN
                raise overflow_error("the attention scores", work, q=q.shape, k=k.shape)
            pv = pv_buf[: n_o * nq * d_v].reshape(batch + (nq, d_v))
            with np.errstate(over="ignore", invalid="ignore"):  # the output is checked at the end
                np.matmul(s, v[..., k0:k1, :], out=pv)  # (..., nq, nk) x (..., nk, d_v)
                o *= alpha
                o += pv  # o = alpha o + sum_j p_j v_j
            l_sum *= alpha
            l_sum += l_tile  # l = alpha l + sum_j p_j
            m, m_new = m_new, m
        # A query that may see a key but kept l = 0 had all its scores overflow to -inf.
        if (l_sum == 0).any() and ((l_sum == 0) & _sees_a_key(q0, q1, window, key_limit)).any():
            raise overflow_error("the attention scores", work, q=q.shape, k=k.shape)
        # output = o / l; a query that saw no key (l = 0) keeps its zeros.
        np.divide(o, l_sum, out=output[..., q0:q1, :], where=l_sum > 0)
        if not all_finite(output[..., q0:q1, :]):  # the running sum o overflowed
            raise overflow_error("the attention output", work, v=v.shape)

    output = output.astype(dtype, copy=False)
    if not return_stats:
        return output
    stats = {"blocks_total": n_q_blocks * n_k_blocks, "blocks_visited": visited,
             "blocks_masked": masked}
    return output, stats


def _online_softmax_step(s, m, m_new, alpha, l_tile) -> bool:
    """One tile's update of the running maximum, for a range of its rows, in place.

    ``s`` ``(rows, nk)`` holds the tile's scores and becomes ``p = exp(s - m_new)``; ``m``
    ``(rows, 1)`` is the running maximum so far, ``m_new`` receives ``max(m, max_j s)``,
    ``alpha`` ``exp(m - m_new)`` and ``l_tile`` the row sums of ``p``. While a row has seen no
    key (``m_new = -inf``) the exponents are taken relative to 0, so ``p`` and ``alpha`` are 0
    and no ``-inf - (-inf)`` occurs.
    Returns False if a score overflowed to +inf (the caller raises).
    """
    np.max(s, axis=1, keepdims=True, out=m_new)  # (rows, 1)
    if not (m_new < np.inf).all():
        return False
    np.maximum(m_new, m, out=m_new)
    shift = np.where(m_new == -np.inf, 0, m_new).astype(s.dtype, copy=False)  # (rows, 1)
    with np.errstate(over="ignore"):  # a difference below float's range is -inf: exp gives 0
        np.subtract(m, shift, out=alpha)
        np.subtract(s, shift, out=s)
    np.exp(alpha, out=alpha)  # exp(m_old - m_new) <= 1; 0 on the first visible block
    np.exp(s, out=s)  # p = exp(s - m_new), each <= 1
    np.sum(s, axis=1, keepdims=True, out=l_tile)  # while the rows are still in cache
    return True


def _hidden_in_tile(q0, q1, k0, k1, causal, window, key_limit, shortest):
    """Boolean mask of the hidden scores of one tile, or None when the tile is fully visible.

    The tile holds queries ``q0 .. q1-1`` and keys ``k0 .. k1-1``; ``key_limit`` is ``lengths``
    shaped ``(..., 1, 1)`` (or ``n_k`` without lengths) and ``shortest`` its minimum.
    """
    structure = causal and (k1 - 1 > q0 or (window is not None and k0 < q1 - 1 - window))
    padding = k1 > shortest
    if not (structure or padding):
        return None
    i = np.arange(q0, q1)[:, None]  # (nq, 1) query positions
    j = np.arange(k0, k1)[None, :]  # (1, nk) key positions
    hidden = np.zeros((q1 - q0, k1 - k0), bool)  # (nq, nk)
    if structure:
        hidden |= j > i
        if window is not None:
            hidden |= j < i - window
    if padding:
        hidden = hidden | (j >= key_limit)  # (..., nq, nk)
    return hidden


def _sees_a_key(q0, q1, window, key_limit):
    """Whether each of the queries ``q0 .. q1-1`` may see some key: ``(nq, 1)`` or ``(..., nq, 1)``.

    Query ``i``'s first visible key is ``i - window`` (0 without a window); it is visible when
    it comes before ``key_limit`` (the sequence's length, or ``n_k``).
    """
    i = np.arange(q0, q1)[:, None]  # (nq, 1)
    first = np.zeros_like(i) if window is None else np.maximum(i - window, 0)
    return first < key_limit
