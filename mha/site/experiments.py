"""Small, seeded experiments with ``mha`` whose numbers the pages quote and the figures draw.

Each experiment returns plain arrays; plotting lives in `mha.site.plots`. Imports only NumPy and
the core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..attention import attention_scores, scaled_dot_product_attention
from ..multihead import MultiHeadAttention
from ..positions import rope, sinusoidal_positions

__all__ = ["ScalingResult", "scaling_experiment", "row_entropy", "case_embeddings", "walkthrough",
           "walkthrough_layers",
           "SharedProjectionResult", "shared_projection_experiment", "AttentionCost",
           "attention_cost", "reach", "application_patterns", "PositionTableResult",
           "position_table_experiment", "RelativeScoresResult", "relative_scores_experiment",
           "WordOrderResult", "word_order_experiment"]


@dataclass(frozen=True)
class ScalingResult:
    """What `scaling_experiment` measured, one entry per ``d_k``.

    Attributes
    ----------
    d_k : ndarray of int, shape ``(s,)``
    n_keys : int
        Keys per query (each softmax row has this many entries).
    variance_raw, variance_scaled : ndarray of shape ``(s,)``
        Variance of the raw dot products $q \\cdot k$ and of $q \\cdot k / \\sqrt{d_k}$.
    max_weight_raw, max_weight_scaled : ndarray of shape ``(s,)``
        Mean over queries of the largest attention weight in the row.
    entropy_raw, entropy_scaled : ndarray of shape ``(s,)``
        Mean over queries of the entropy of the row, in nats (at most ``log(n_keys)``).
    """

    d_k: np.ndarray
    n_keys: int
    variance_raw: np.ndarray
    variance_scaled: np.ndarray
    max_weight_raw: np.ndarray
    max_weight_scaled: np.ndarray
    entropy_raw: np.ndarray
    entropy_scaled: np.ndarray


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy of each row (the last axis) in nats, with 0 * log 0 taken as 0."""
    logs = np.log(weights, out=np.zeros_like(weights), where=weights > 0)
    return -(weights * logs).sum(axis=-1)


def scaling_experiment(d_ks=(4, 8, 16, 32, 64, 128, 256, 512, 1024), n_queries: int = 256,
                       n_keys: int = 64, seed: int = 0) -> ScalingResult:
    r"""Measure what dividing the scores by $\sqrt{d_k}$ does, for growing ``d_k``.

    Queries and keys have independent standard-normal components, as in the footnote of
    Vaswani et al. (2017) that motivates the scaling.

    Parameters
    ----------
    d_ks : sequence of int
        The query/key sizes to try.
    n_queries, n_keys : int
        How many queries, and how many keys each query scores.
    seed : int
        Seed for ``np.random.default_rng``.

    Returns
    -------
    ScalingResult

    Notes
    -----
    For independent components with mean 0 and variance 1,
    $\operatorname{Var}(q \cdot k) = d_k$; dividing by $\sqrt{d_k}$ brings it back to 1.

    Examples
    --------
    >>> from mha.site.experiments import scaling_experiment
    >>> r = scaling_experiment(d_ks=(16, 256))
    >>> [round(float(v / d), 1) for v, d in zip(r.variance_raw, r.d_k)]   # Var(q.k) / d_k
    [1.0, 1.0]
    """
    rng = np.random.default_rng(seed)
    rows = {key: [] for key in ("variance_raw", "variance_scaled", "max_weight_raw",
                                "max_weight_scaled", "entropy_raw", "entropy_scaled")}
    for d_k in d_ks:
        q = rng.normal(size=(n_queries, d_k))  # (n_queries, d_k)
        k = rng.normal(size=(n_keys, d_k))     # (n_keys, d_k)
        v = np.zeros((n_keys, 1))              # values play no part in the weights
        raw = q @ k.T                          # (n_queries, n_keys)
        _, w_raw = scaled_dot_product_attention(q, k, v, scale=1.0)
        _, w_scaled = scaled_dot_product_attention(q, k, v)  # scale = 1 / sqrt(d_k)
        rows["variance_raw"].append(raw.var())
        rows["variance_scaled"].append((raw / np.sqrt(d_k)).var())
        rows["max_weight_raw"].append(w_raw.max(axis=-1).mean())
        rows["max_weight_scaled"].append(w_scaled.max(axis=-1).mean())
        rows["entropy_raw"].append(row_entropy(w_raw).mean())
        rows["entropy_scaled"].append(row_entropy(w_scaled).mean())
    return ScalingResult(d_k=np.asarray(d_ks), n_keys=n_keys,
                         **{key: np.asarray(values) for key, values in rows.items()})


def case_embeddings(n_tokens: int = 8, d_model: int = 16, seed: int = 0) -> np.ndarray:
    """Stand-in embeddings for the running example: one standard-normal row per word.

    Real embeddings are learned; these are random numbers, enough to follow the data through
    the layer. Row ``r`` is the embedding of word ``r`` of the case's vocabulary (see
    ``mha.site.plots.case``). The rows are drawn in order, so the first rows do not depend on
    ``n_tokens``.

    Returns
    -------
    ndarray of shape ``(n_tokens, d_model)``
    """
    return np.random.default_rng(seed).normal(size=(n_tokens, d_model))


def walkthrough_layers(d_model: int = 16, h: int = 4, n_layers: int = 2, seed: int = 0, *,
                       scale: float | None = None) -> list[MultiHeadAttention]:
    """The layers of `walkthrough`: layer ``l`` is ``MultiHeadAttention(d_model, h,
    seed=seed + 1 + l, scale=scale)``."""
    return [MultiHeadAttention(d_model, h, seed=seed + 1 + index, scale=scale)
            for index in range(n_layers)]


def walkthrough(order, d_model: int = 16, h: int = 4, n_layers: int = 2, seed: int = 0, *,
                mask=None, scale: float | None = None) -> list:
    """Run the case through a stack of ``n_layers`` attention layers, keeping every stage.

    Parameters
    ----------
    order : sequence of int
        Which row of `case_embeddings` stands at each position (the sentence in one language);
        a word that occurs twice has the same row twice.
    d_model, h : int
        Width of the layers and number of heads (the detectives).
    n_layers : int
        How many attention layers are stacked; layer ``l + 1`` reads layer ``l``'s output.
        (A real Transformer block adds a residual connection, LayerNorm and a feed-forward
        network around each attention layer; they are left out to show attention alone.)
    seed : int
        Seeds the embeddings (``seed``) and layer ``l``'s weights (``seed + 1 + l``).
    mask : array_like of bool, optional
        Given to every layer (`mha.MultiHeadAttention.trace`); None: every token sees every one.
    scale : float, optional
        The layers' score factor; None: ``1 / sqrt(d_k)``.

    Returns
    -------
    list of dict
        One `mha.MultiHeadAttention.trace` per layer.

    Examples
    --------
    >>> from mha.site.experiments import walkthrough
    >>> layers = walkthrough(order=range(8))
    >>> len(layers), layers[0]["weights"].shape, layers[1]["x"] is layers[0]["output"]
    (2, (4, 8, 8), True)
    """
    order = list(order)
    x = case_embeddings(n_tokens=max(order) + 1, d_model=d_model, seed=seed)[order]  # (n, d_model)
    traces = []
    for layer in walkthrough_layers(d_model, h, n_layers, seed, scale=scale):
        stages = layer.trace(x, mask)
        traces.append(stages)
        x = stages["output"]
    return traces


@dataclass(frozen=True)
class SharedProjectionResult:
    """What `shared_projection_experiment` measured.

    Attributes
    ----------
    self_first_shared, self_first_separate : float
        Fraction of queries whose highest score is their own key, with one matrix for queries
        and keys (``W_Q = W_K``) and with two independent ones.
    chance : float
        ``1 / n``: what a query would get by picking its top key at random.
    symmetric_shared, symmetric_separate : bool
        Whether the score matrix equals its transpose.
    example_shared, example_separate : ndarray of shape ``(n_example, n_example)``
        Score matrices of one small example, to draw.
    """

    self_first_shared: float
    self_first_separate: float
    chance: float
    symmetric_shared: bool
    symmetric_separate: bool
    example_shared: np.ndarray
    example_separate: np.ndarray


def shared_projection_experiment(n: int = 32, d_model: int = 64, d_k: int = 64,
                                 trials: int = 50, example=None,
                                 seed: int = 0) -> SharedProjectionResult:
    r"""What happens to the scores when queries and keys share one projection matrix.

    With $W_Q = W_K = W$, the scores $S = X W (X W)^\top / \sqrt{d_k}$ form a
    symmetric, positive semi-definite matrix, and each token's own key tends to win its row.

    Parameters
    ----------
    n, d_model, d_k : int
        Tokens, input width and query/key size of each random trial.
    trials : int
        Number of random inputs the fractions are averaged over.
    example : ndarray of shape ``(n_example, width)``, optional
        Inputs of the small example to return for drawing (default: 8 random tokens of width
        16), projected by square ``(width, width)`` matrices.
    seed : int
        Seed for ``np.random.default_rng``.

    Returns
    -------
    SharedProjectionResult

    Examples
    --------
    >>> from mha.site.experiments import shared_projection_experiment
    >>> r = shared_projection_experiment()
    >>> r.self_first_shared, round(r.self_first_separate, 2), r.chance
    (1.0, 0.03, 0.03125)
    >>> r.symmetric_shared, r.symmetric_separate
    (True, False)
    """
    rng = np.random.default_rng(seed)

    def scores(x, w_q, w_k):
        return attention_scores(x @ w_q, x @ w_k)  # (n, d_k) x (n, d_k) -> (n, n)

    def self_first(s):
        return float(np.mean(s.argmax(axis=1) == np.arange(s.shape[0])))

    shared, separate = [], []
    for _ in range(trials):
        x = rng.normal(size=(n, d_model))
        w, w2 = rng.normal(size=(2, d_model, d_k)) / np.sqrt(d_model)
        shared.append(self_first(scores(x, w, w)))
        separate.append(self_first(scores(x, w, w2)))

    x = rng.normal(size=(8, 16)) if example is None else np.asarray(example)
    w, w2 = rng.normal(size=(2, x.shape[1], x.shape[1])) / np.sqrt(x.shape[1])
    example_shared, example_separate = scores(x, w, w), scores(x, w, w2)
    return SharedProjectionResult(
        self_first_shared=float(np.mean(shared)), self_first_separate=float(np.mean(separate)),
        chance=1 / n,
        symmetric_shared=bool(np.allclose(example_shared, example_shared.T)),
        symmetric_separate=bool(np.allclose(example_separate, example_separate.T)),
        example_shared=example_shared, example_separate=example_separate)


@dataclass(frozen=True)
class AttentionCost:
    """Arithmetic and memory of one self-attention layer on one sequence, per length ``n``.

    Attributes
    ----------
    n : ndarray of int, shape ``(s,)``
    projection_flops : ndarray of shape ``(s,)``
        The four products with ``W_Q``, ``W_K``, ``W_V``, ``W_O``: $8 n d^2$.
    attention_flops : ndarray of shape ``(s,)``
        $Q K^\\top$ and weights times $V$, all heads together: $4 n^2 d$.
    score_bytes : ndarray of shape ``(s,)``
        One ``n x n`` score matrix per head: $h n^2$ numbers.
    """

    n: np.ndarray
    d_model: int
    h: int
    bytes_per_number: int
    projection_flops: np.ndarray
    attention_flops: np.ndarray
    score_bytes: np.ndarray


def attention_cost(ns, d_model: int = 512, h: int = 8, bytes_per_number: int = 4) -> AttentionCost:
    r"""Count, without running anything, what naive self-attention costs for each length.

    A multiply-add counts as 2 floating-point operations. The projections cost
    $4 \cdot 2 n d^2 = 8 n d^2$, the attention proper $2 \cdot 2 n^2 d = 4 n^2 d$
    whatever ``h`` is (each head works on $d/h$ of the width), so the attention part
    overtakes the projections once $n > 2d$. The scores need $h n^2$ numbers.

    Examples
    --------
    >>> from mha.site.experiments import attention_cost
    >>> c = attention_cost([1024])
    >>> int(c.projection_flops[0]) == int(c.attention_flops[0])      # n = 2 d: break-even
    True
    >>> int(c.score_bytes[0]) // 2**20                                 # MiB of float32 scores
    32
    """
    n = np.asarray(ns, dtype=np.int64)
    return AttentionCost(n=n, d_model=d_model, h=h, bytes_per_number=bytes_per_number,
                         projection_flops=8 * n * d_model**2,
                         attention_flops=4 * n**2 * d_model,
                         score_bytes=h * n**2 * bytes_per_number)


def reach(mask: np.ndarray, layers: int) -> np.ndarray:
    """Which positions can influence which after stacking ``layers`` layers with ``mask``.

    Parameters
    ----------
    mask : ndarray of bool, shape ``(n, n)``
        ``mask[i, j]``: query ``i`` may attend to key ``j`` in one layer.
    layers : int
        How many layers are stacked.

    Returns
    -------
    ndarray of bool, shape ``(layers, n, n)``
        Entry ``[l, i, j]``: after ``l + 1`` layers, position ``j``'s input can have reached
        position ``i``'s output (a path of ``l + 1`` allowed hops).

    Examples
    --------
    >>> from mha import sliding_window_mask
    >>> from mha.site.experiments import reach
    >>> r = reach(sliding_window_mask(7, 2), layers=3)
    >>> [int(r[l, 6].sum()) for l in range(3)]     # the last token hears 3, 5, then 7 tokens
    [3, 5, 7]
    """
    mask = np.asarray(mask, dtype=bool)
    step = mask.astype(np.int64)
    current = step.copy()
    out = []
    for _ in range(layers):
        out.append(current > 0)
        current = np.minimum(current @ step, 1)  # one more hop; keep 0/1 so it never overflows
    return np.stack(out)


def application_patterns(order, n_pad: int = 2, n_target: int = 4, seed: int = 0) -> dict:
    """One head's weights on the case in three settings: BERT-like, GPT-like, translation.

    Parameters
    ----------
    order : sequence of int
        The case sentence as rows of `case_embeddings` in reading order (see `walkthrough`).
    n_pad : int
        Padding tokens appended for the BERT-like encoder (hidden by `mha.padding_mask`).
    n_target : int
        Target-language tokens (random stand-ins) that query the case in the translation
        setting, through cross-attention.
    seed : int
        Seeds the embeddings (``seed``) and the layer (``seed + 1``), as in `walkthrough`.

    Returns
    -------
    dict of str to ndarray
        ``"bert"`` ``(n + n_pad, n + n_pad)``: no causal mask, padding keys hidden;
        ``"gpt"`` ``(n, n)``: causal mask; ``"cross"`` ``(n_target, n)``: queries from the
        target side, keys and values from the case. All from head 0.
    """
    from ..masks import causal_mask, padding_mask

    order = list(order)
    rng = np.random.default_rng(seed + 100)
    x = case_embeddings(n_tokens=max(order) + 1, seed=seed)[order]  # (n, d_model)
    d_model = x.shape[1]
    layer = MultiHeadAttention(d_model, 4, seed=seed + 1)
    pads = np.tile(rng.normal(size=(1, d_model)), (n_pad, 1))       # one [PAD] embedding
    padded = np.concatenate([x, pads])[None]                        # (1, n + n_pad, d_model)
    _, bert = layer(padded, padding_mask([len(order)], len(order) + n_pad), return_weights=True)
    _, gpt = layer(x, causal_mask(len(order)), return_weights=True)
    target = rng.normal(size=(n_target, d_model))                   # (n_target, d_model)
    _, cross = layer(target, context=x, return_weights=True)
    return {"bert": bert[0, 0], "gpt": gpt[0], "cross": cross[0]}


@dataclass(frozen=True)
class PositionTableResult:
    """What `position_table_experiment` computed.

    Attributes
    ----------
    table : ndarray of shape ``(n, d_model)``
        `mha.sinusoidal_positions` for positions ``0, ..., n - 1``: row ``p`` is $PE_p$.
    distances : ndarray of int, shape ``(K,)``
        The distances ``k`` (negative: the second position comes first).
    starts : ndarray of int, shape ``(s,)``
        The starting positions ``p``.
    dots : ndarray of shape ``(s, K)``
        ``dots[i, j]`` is $PE_p \\cdot PE_{p+k}$ for ``p = starts[i]``, ``k = distances[j]``.
    """

    table: np.ndarray
    distances: np.ndarray
    starts: np.ndarray
    dots: np.ndarray


def position_table_experiment(n: int = 64, d_model: int = 64, starts=(64, 200, 1000),
                              max_distance: int = 64) -> PositionTableResult:
    r"""The sinusoidal table, and the dot product of two of its rows against their distance.

    Parameters
    ----------
    n, d_model : int
        Size of the table returned for drawing: ``n`` positions of width ``d_model`` (even).
    starts : sequence of int
        Starting positions ``p``; each must be at least ``max_distance`` (so that ``p + k``
        is a position for every ``k`` down to ``-max_distance``).
    max_distance : int
        The distances run from ``-max_distance`` to ``max_distance``.

    Returns
    -------
    PositionTableResult

    Raises
    ------
    ValueError
        If a starting position is smaller than ``max_distance``.

    Notes
    -----
    $PE_p \cdot PE_{p+k} = \sum_i \cos(k / 10000^{2i/d_\text{model}})$: it depends on ``k``
    only, is even in ``k`` and is largest, ``d_model / 2``, at ``k = 0``.

    Examples
    --------
    >>> from mha.site.experiments import position_table_experiment
    >>> r = position_table_experiment()
    >>> r.table.shape, r.dots.shape
    ((64, 64), (3, 129))
    >>> float(r.dots[0, r.distances == 0][0])     # d_model / 2
    32.0
    """
    starts = np.asarray(starts, dtype=np.int64)                         # (s,)
    if starts.min() < max_distance:
        raise ValueError(f"every start must be >= max_distance={max_distance} (p + k must be a "
                         f"position), got starts {starts.tolist()}")
    distances = np.arange(-max_distance, max_distance + 1)              # (K,)
    pe = sinusoidal_positions(int(starts.max()) + max_distance + 1, d_model)  # (N, d_model)
    dots = np.stack([pe[p + distances] @ pe[p] for p in starts])        # (s, K)
    return PositionTableResult(table=sinusoidal_positions(n, d_model), distances=distances,
                               starts=starts, dots=dots)


@dataclass(frozen=True)
class RelativeScoresResult:
    """What `relative_scores_experiment` measured.

    Attributes
    ----------
    distances : ndarray of int, shape ``(K,)``
        ``m - n``: how far the query stands after the key.
    starts : ndarray of int, shape ``(s,)``
        The key's position ``n``; the query stands at ``m = n + distance``.
    rope : ndarray of shape ``(s, K)``
        The score with `mha.rope` applied to the query and the key.
    absolute : ndarray of shape ``(s, K)``
        The score with `mha.sinusoidal_positions` added to the two embeddings before the
        projections.
    d_k : int
        Query/key size of the head (the scores are divided by ``sqrt(d_k)``).
    """

    distances: np.ndarray
    starts: np.ndarray
    rope: np.ndarray
    absolute: np.ndarray
    d_k: int


def relative_scores_experiment(d_model: int = 64, starts=(0, 100, 1000), max_distance: int = 64,
                               seed: int = 0) -> RelativeScoresResult:
    r"""One query token and one key token, moved along the sequence: RoPE against added positions.

    Two token embeddings (standard normal, seeded) go through one head of a
    `mha.MultiHeadAttention` layer (``h = 1``, so ``d_k = d_model``). The key stands at
    position ``n``, the query at ``m = n + distance``, and the score $q \cdot k / \sqrt{d_k}$ is
    computed two ways: RoPE rotates the projected query and key by their positions; the
    absolute way adds the sinusoidal rows $PE_m$ and $PE_n$ to the embeddings first.

    Parameters
    ----------
    d_model : int
        Width of the embeddings and of the head's queries and keys (even).
    starts : sequence of int
        The key positions ``n`` to try.
    max_distance : int
        The distances ``m - n`` run from 0 to ``max_distance``.
    seed : int
        Seeds the embeddings (``seed``) and the layer (``seed + 1``).

    Returns
    -------
    RelativeScoresResult

    Notes
    -----
    With RoPE, $R_m q \cdot R_n k = q \cdot R_{n-m} k$: the score depends on $m - n$ only, so
    the rows of ``rope`` agree up to rounding. With added positions,
    $(e_q + PE_m) W^Q \cdot (e_k + PE_n) W^K$ has terms in $PE_m$ and $PE_n$ alone, and the
    rows of ``absolute`` differ.

    Examples
    --------
    >>> import numpy as np
    >>> from mha.site.experiments import relative_scores_experiment
    >>> r = relative_scores_experiment()
    >>> bool(np.allclose(r.rope, r.rope[0])), bool(np.allclose(r.absolute, r.absolute[0]))
    (True, False)
    """
    rng = np.random.default_rng(seed)
    e_q, e_k = rng.normal(size=(2, d_model))                             # (d_model,) each
    layer = MultiHeadAttention(d_model, 1, seed=seed + 1)
    w_q, w_k = layer.W_Q[:, 0, :], layer.W_K[:, 0, :]                    # (d_model, d_k)
    starts = np.asarray(starts, dtype=np.int64)                          # (s,)
    distances = np.arange(max_distance + 1)                              # (K,)
    pe = sinusoidal_positions(int(starts.max()) + max_distance + 1, d_model)  # (N, d_model)
    q, k = e_q @ w_q, e_k @ w_k                                          # (d_k,) each
    rotated, added = [], []
    for n in starts:
        m = n + distances                                                # (K,) query positions
        q_m = rope(np.tile(q, (len(m), 1)), m)                           # (K, d_k)
        k_n = rope(k[None, :], [n])                                      # (1, d_k)
        rotated.append(attention_scores(q_m, k_n)[:, 0])                 # (K,)
        q_abs = (e_q + pe[m]) @ w_q                                      # (K, d_k)
        k_abs = ((e_k + pe[n]) @ w_k)[None, :]                           # (1, d_k)
        added.append(attention_scores(q_abs, k_abs)[:, 0])               # (K,)
    return RelativeScoresResult(distances=distances, starts=starts, rope=np.stack(rotated),
                                absolute=np.stack(added), d_k=layer.d_k)


@dataclass(frozen=True)
class WordOrderResult:
    """What `word_order_experiment` measured: one head's weights for one query, two sentences.

    Attributes
    ----------
    orders : tuple of two tuples of int
        The sentence and the sentence with the two words swapped, as rows of `case_embeddings`.
    perm : ndarray of int, shape ``(n,)``
        ``orders[1] == [orders[0][i] for i in perm]``: the swap as a permutation of positions.
    query : tuple of two ints
        Where the query word stands in each sentence.
    head : int
        The head (detective) whose weights these are.
    plain : ndarray of shape ``(2, n)``
        The query's attention weights over each sentence, without positional information.
    positioned : ndarray of shape ``(2, n)``
        The same with `mha.sinusoidal_positions` added to the embeddings.
    """

    orders: tuple
    perm: np.ndarray
    query: tuple
    head: int
    plain: np.ndarray
    positioned: np.ndarray


def word_order_experiment(order, swap, head: int = 2, d_model: int = 16, h: int = 4,
                          seed: int = 0) -> WordOrderResult:
    """Swap two words of the case: can a detective tell the two sentences apart?

    The layer and embeddings are those of `walkthrough`'s first layer. Without positions, the
    query word's weights in the swapped sentence are its weights in the original one, swapped
    the same way: attention cannot tell the sentences apart. With the sinusoidal table added to
    the embeddings (the same table for both sentences: position ``p`` gets row ``p``), they
    differ.

    Parameters
    ----------
    order : sequence of int
        The sentence as rows of `case_embeddings`, in reading order (see `walkthrough`).
    swap : pair of int
        Two rows of `case_embeddings` that occur once each in ``order``: the two words to
        exchange. The first is the query word.
    head : int
        Which head's weights to keep.
    d_model, h, seed : int
        As in `walkthrough` (the layer is its layer 0).

    Returns
    -------
    WordOrderResult

    Raises
    ------
    ValueError
        If a word of ``swap`` does not occur exactly once in ``order``.

    Examples
    --------
    >>> import numpy as np
    >>> from mha.site.experiments import word_order_experiment
    >>> r = word_order_experiment([0, 1, 2, 3], swap=(1, 3))     # a 4-word sentence, 1 <-> 3
    >>> r.orders, r.perm.tolist(), r.query
    (((0, 1, 2, 3), (0, 3, 2, 1)), [0, 3, 2, 1], (1, 3))
    >>> bool(np.allclose(r.plain[1], r.plain[0][r.perm]))
    True
    >>> bool(np.allclose(r.positioned[1], r.positioned[0][r.perm]))
    False
    """
    order = tuple(int(r) for r in order)
    a, b = swap
    for word in (a, b):
        if order.count(word) != 1:
            raise ValueError(f"swap: word {word} must occur exactly once in order {list(order)}, "
                             f"it occurs {order.count(word)} times")
    i, j = order.index(a), order.index(b)
    perm = np.arange(len(order))                                     # (n,)
    perm[[i, j]] = perm[[j, i]]
    swapped = tuple(order[p] for p in perm)
    rows = case_embeddings(n_tokens=max(order) + 1, d_model=d_model, seed=seed)
    layer = MultiHeadAttention(d_model, h, seed=seed + 1)            # walkthrough's layer 0
    pe = sinusoidal_positions(len(order), d_model)                   # (n, d_model)
    query = (i, j)                                                   # the word a, in each
    plain, positioned = [], []
    for sentence, at in zip((order, swapped), query):
        x = rows[list(sentence)]                                     # (n, d_model)
        _, w = layer(x, return_weights=True)                         # (h, n, n)
        _, w_pos = layer(x + pe, return_weights=True)                # (h, n, n)
        plain.append(w[head, at])                                    # (n,)
        positioned.append(w_pos[head, at])                           # (n,)
    return WordOrderResult(orders=(order, swapped), perm=perm, query=query, head=head,
                           plain=np.stack(plain), positioned=np.stack(positioned))
