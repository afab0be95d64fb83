"""Small, seeded experiments with ``mha`` whose numbers the pages quote and the figures draw.

Each experiment returns plain arrays; plotting lives in :mod:`mha.plots`. Imports only NumPy and
the core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import attention_scores, scaled_dot_product_attention
from .multihead import MultiHeadAttention

__all__ = ["ScalingResult", "scaling_experiment", "case_embeddings", "walkthrough",
           "SharedProjectionResult", "shared_projection_experiment"]


@dataclass(frozen=True)
class ScalingResult:
    """What :func:`scaling_experiment` measured, one entry per ``d_k``.

    Attributes
    ----------
    d_k : ndarray of int, shape ``(s,)``
    n_keys : int
        Keys per query (each softmax row has this many entries).
    variance_raw, variance_scaled : ndarray of shape ``(s,)``
        Variance of the raw dot products :math:`q \\cdot k` and of :math:`q \\cdot k / \\sqrt{d_k}`.
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


def _entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy of each row in nats, with 0 * log 0 taken as 0."""
    logs = np.log(weights, out=np.zeros_like(weights), where=weights > 0)
    return -(weights * logs).sum(axis=-1)


def scaling_experiment(d_ks=(4, 8, 16, 32, 64, 128, 256, 512, 1024), n_queries: int = 256,
                       n_keys: int = 64, seed: int = 0) -> ScalingResult:
    r"""Measure what dividing the scores by :math:`\sqrt{d_k}` does, for growing ``d_k``.

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
    :math:`\operatorname{Var}(q \cdot k) = d_k`; dividing by :math:`\sqrt{d_k}` brings it back to 1.

    Examples
    --------
    >>> from mha.experiments import scaling_experiment
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
        rows["entropy_raw"].append(_entropy(w_raw).mean())
        rows["entropy_scaled"].append(_entropy(w_scaled).mean())
    return ScalingResult(d_k=np.asarray(d_ks), n_keys=n_keys,
                         **{key: np.asarray(values) for key, values in rows.items()})


def case_embeddings(n_tokens: int = 8, d_model: int = 16, seed: int = 0) -> np.ndarray:
    """Stand-in embeddings for the running example: one standard-normal row per concept.

    Real embeddings are learned; these are random numbers, enough to follow the data through
    the layer. Row ``c`` belongs to concept ``c`` of the case (see ``mha.plots.case``).

    Returns
    -------
    ndarray of shape ``(n_tokens, d_model)``
    """
    return np.random.default_rng(seed).normal(size=(n_tokens, d_model))


def walkthrough(order, d_model: int = 16, h: int = 4, n_layers: int = 2, seed: int = 0) -> list:
    """Run the case through a stack of ``n_layers`` attention layers, keeping every stage.

    Parameters
    ----------
    order : sequence of int
        Which concept's embedding stands at each position (the sentence in one language).
    d_model, h : int
        Width of the layers and number of heads (the detectives).
    n_layers : int
        How many attention layers are stacked; layer ``l + 1`` reads layer ``l``'s output.
        (A real Transformer block adds a residual connection, LayerNorm and a feed-forward
        network around each attention layer; they are left out to show attention alone.)
    seed : int
        Seeds the embeddings (``seed``) and layer ``l``'s weights (``seed + 1 + l``).

    Returns
    -------
    list of dict
        One :meth:`mha.MultiHeadAttention.trace` per layer.

    Examples
    --------
    >>> from mha.experiments import walkthrough
    >>> layers = walkthrough(order=range(8))
    >>> len(layers), layers[0]["weights"].shape, layers[1]["x"] is layers[0]["output"]
    (2, (4, 8, 8), True)
    """
    x = case_embeddings(n_tokens=len(list(order)), d_model=d_model, seed=seed)[list(order)]
    traces = []
    for layer_index in range(n_layers):
        layer = MultiHeadAttention(d_model, h, seed=seed + 1 + layer_index)
        stages = layer.trace(x)
        traces.append(stages)
        x = stages["output"]
    return traces


@dataclass(frozen=True)
class SharedProjectionResult:
    """What :func:`shared_projection_experiment` measured.

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

    With :math:`W_Q = W_K = W`, the scores :math:`S = X W (X W)^\top / \sqrt{d_k}` form a
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
    >>> from mha.experiments import shared_projection_experiment
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
