"""Small, seeded experiments with ``mha`` whose numbers the pages quote and the figures draw.

Each experiment returns plain arrays; plotting lives in :mod:`mha.plots`. Imports only NumPy and
the core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import scaled_dot_product_attention

__all__ = ["ScalingResult", "scaling_experiment"]


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
