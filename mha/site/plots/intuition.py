"""The overview's "why a weighted average": attention pooling as Nadaraya-Watson kernel regression.

d2l's chapter on attention (section "Attention Pooling: Nadaraya-Watson Kernel Regression")
introduces attention with a 1-D regression: to predict ``y`` at a new ``x``, average the training
targets ``y_i``, each weighted by a Gaussian kernel of the distance ``x - x_i`` normalised to sum
to 1 (Nadaraya 1964; Watson 1964). Those weights are a softmax of the scores
``-(x - x_i)**2 / (2 * width**2)``: attention, with ``x`` the query, the ``x_i`` the keys and the
``y_i`` the values. `nadaraya_watson` computes the estimate through `mha`'s own attention
function; `plot_pooling` draws it for two kernel widths.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from ...attention import scaled_dot_product_attention
from ._style import COLORS, style
from ..terms import term

#: The two kernel widths the figure compares: narrow (wiggly, close to the nearest point) and
#: d2l's plain Nadaraya-Watson kernel, width 1 (smooth).
WIDTHS = (0.1, 1.0)
#: The query whose row of weights the figure's second panel draws.
QUERY = 2.5


class PoolingData(NamedTuple):
    """Noisy samples of one function on [0, 5], and the grid of queries the figure asks about."""

    x_train: np.ndarray   # (n,) sorted, the keys
    y_train: np.ndarray   # (n,) the values
    x_query: np.ndarray   # (m,) the queries
    y_true: np.ndarray    # (m,) the noiseless function at the queries


def target(x):
    """d2l's example function, ``2 sin(x) + x**0.8``."""
    x = np.asarray(x, dtype=float)
    return 2 * np.sin(x) + x ** 0.8


def pooling_data(n: int = 50, m: int = 101, noise: float = 0.5, seed: int = 0) -> PoolingData:
    """``n`` training points at sorted uniform ``x`` in [0, 5], ``y = target(x)`` plus Gaussian
    noise of standard deviation ``noise``, and ``m`` evenly spaced queries on [0, 5]."""
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0, 5, size=n))                # (n,)
    y_train = target(x_train) + rng.normal(0, noise, size=n)   # (n,)
    x_query = np.linspace(0, 5, m)                             # (m,)
    return PoolingData(x_train, y_train, x_query, target(x_query))


def nadaraya_watson(x_query, x_train, y_train, width: float):
    r"""Gaussian-kernel Nadaraya-Watson regression, computed as scaled dot-product attention.

    Parameters
    ----------
    x_query : array_like of shape ``(m,)``
    x_train, y_train : array_like of shape ``(n,)``
    width : float
        The kernel's width $\sigma > 0$.

    Returns
    -------
    estimate : ndarray of shape ``(m,)``
        $\hat f(x) = \sum_i a_i(x)\, y_i$.
    weights : ndarray of shape ``(m, n)``
        $a_i(x) = \operatorname{softmax}_i\!\big(-(x - x_i)^2 / 2\sigma^2\big)$, each row
        summing to 1.

    Notes
    -----
    Expanding the square, $-(x - x_i)^2 / 2\sigma^2 = (x x_i - x_i^2/2)/\sigma^2 - x^2/2\sigma^2$.
    The last term is the same for every $i$ of one query, and softmax ignores a shift of a whole
    row, so the weights are the attention weights of the query $q = (x, -\tfrac12)$ on the keys
    $k_i = (x_i, x_i^2)$ with the scale $1/\sigma^2$: a dot product, not a distance.

    Examples
    --------
    >>> from mha.site.plots.intuition import nadaraya_watson
    >>> estimate, weights = nadaraya_watson([1.0], [0.0, 1.0, 3.0], [0.0, 10.0, 30.0], width=1.0)
    >>> weights.round(3)
    array([[0.348, 0.574, 0.078]])
    """
    x_query = np.asarray(x_query, dtype=float)
    x_train = np.asarray(x_train, dtype=float)
    q = np.stack([x_query, np.full_like(x_query, -0.5)], axis=-1)   # (m, 2)
    k = np.stack([x_train, x_train ** 2], axis=-1)                   # (n, 2)
    v = np.asarray(y_train, dtype=float)[:, None]                   # (n, 1)
    out, weights = scaled_dot_product_attention(q, k, v, scale=1.0 / width ** 2)  # (m, 1), (m, n)
    return out[:, 0], weights


LABELS = {
    "zh": {
        "title_fit": "Nadaraya–Watson 核回归（高斯核）",
        "data": "训练数据：$x_i$ 是{key}，$y_i$ 是{value}",
        "truth": "真实函数",
        "fit": "核宽 σ = {width:g} 的估计",
        "x_fit": "x（{query}）",
        "title_row": "查询 x = {query_x:g} 的{weight}",
        "x_row": "训练点的 $x_i$（{key}）",
        "query_mark": "查询 x = {query_x:g}",
    },
    "en": {
        "title_fit": "Nadaraya–Watson kernel regression (Gaussian kernel)",
        "data": "training data: the $x_i$ are the {key}s, the $y_i$ the {value}s",
        "truth": "true function",
        "fit": "estimate, kernel width σ = {width:g}",
        "x_fit": "x (the {query})",
        "title_row": "{Weight}s of the query x = {query_x:g}",
        "x_row": "training points' $x_i$ (the {key}s)",
        "query_mark": "the query x = {query_x:g}",
    },
}

#: One colour per width, narrow first (Okabe-Ito, as the other figures).
_WIDTH_COLORS = (COLORS["raw"], COLORS["scaled"])


def plot_pooling(data: PoolingData, lang: str, widths=WIDTHS, query: float = QUERY) -> Figure:
    """Nadaraya-Watson estimates for two kernel widths, and one query's weights for each.

    Parameters
    ----------
    data : PoolingData
        From `pooling_data`.
    lang : {"zh", "en"}
        Language of every label.
    widths : sequence of float
        The kernel widths to compare (one colour each).
    query : float
        The query whose weights the second panel draws.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels, one above the other (readable on a phone).
    """
    names = {name: term(name, lang) for name in ("query", "key", "value", "attention_weight")}
    words = {key: text.replace("{query}", names["query"]).replace("{key}", names["key"])
             .replace("{value}", names["value"]).replace("{weight}", names["attention_weight"])
             .replace("{Weight}", names["attention_weight"].capitalize())
             for key, text in LABELS[lang].items()}
    with style():
        fig = Figure(figsize=(5.6, 7.6), layout="constrained")
        top, bottom = fig.subplots(2, 1, height_ratios=[1.3, 1])
        top.plot(data.x_query, data.y_true, color=COLORS["neutral"], linestyle="--",
                 linewidth=1.2, label=words["truth"])
        top.scatter(data.x_train, data.y_train, s=14, color="#999999", zorder=2,
                    label=words["data"])
        for width, color in zip(widths, _WIDTH_COLORS):
            estimate, _ = nadaraya_watson(data.x_query, data.x_train, data.y_train, width)
            top.plot(data.x_query, estimate, color=color, linewidth=2,
                     label=words["fit"].format(width=width))
            _, row = nadaraya_watson([query], data.x_train, data.y_train, width)
            bottom.plot(data.x_train, row[0], "o-", color=color, markersize=3.5, linewidth=1.2,
                        label=f"σ = {width:g}")
        top.axvline(query, color=COLORS["neutral"], linestyle=":", linewidth=1)
        top.set_title(words["title_fit"])
        top.set_xlabel(words["x_fit"])
        top.set_ylabel("y")
        low, high = top.get_ylim()
        top.set_ylim(low - 0.45 * (high - low), high)   # room for the legend under the data
        top.legend(frameon=False, fontsize=9, loc="lower left")
        bottom.axvline(query, color=COLORS["neutral"], linestyle=":", linewidth=1,
                       label=words["query_mark"].format(query_x=query))
        bottom.set_title(words["title_row"].format(query_x=query))
        bottom.set_xlabel(words["x_row"])
        bottom.set_ylabel(names["attention_weight"])
        bottom.set_ylim(bottom=0)
        bottom.legend(frameon=False, fontsize=9)
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
    return fig
