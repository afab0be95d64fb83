"""Figures of the chapter on positions (位置): the sinusoidal table, RoPE's relative property, and
the case with two words swapped.

Every function takes the result of an experiment in `mha.site.experiments` and a language, and
returns a Figure.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..experiments import PositionTableResult, RelativeScoresResult, WordOrderResult
from ._draw import colorbar
from ._style import COLORS, style
from .case import CAST, EMBEDDING_ROWS
from ..terms import term

__all__ = ["SWAP", "plot_table", "plot_relative", "plot_word_order"]

#: The two words the chapter swaps, as rows of `EMBEDDING_ROWS`: "key" (the query) and "desk".
SWAP = tuple(next(r for r, (_, en) in enumerate(EMBEDDING_ROWS) if en == word)
             for word in ("key", "desk"))

#: Line styles of the starting positions, drawn in this order: a wide pale line under a dashed
#: one under a dotted one, so that curves lying on top of each other stay visible.
LINES = ({"color": "#999999", "linewidth": 5.0, "alpha": 0.6, "linestyle": "-"},
         {"color": COLORS["scaled"], "linewidth": 2.0, "linestyle": (0, (5, 3))},
         {"color": COLORS["raw"], "linewidth": 1.6, "linestyle": (0, (1, 2))})

#: The colour of the word the query word swaps places with (Okabe-Ito's reddish purple).
PARTNER = "#CC79A7"

LABELS = {
    "zh": {
        "table_title": "{sinusoidal}：{n} 个位置 × {d} 维",
        "position": "位置 p",
        "dimension": "{dimension}（第 2i 列 sin，第 2i+1 列 cos）",
        "value": "数值",
        "dots_title": "两行的{dot} $PE_p \\cdot PE_{{p+k}}$ 只取决于距离 k",
        "distance": "距离 k",
        "dots_y": "{dot}",
        "start": "p = {p}",
        "peak": "k = 0 时最大：{peak:g}",
        "rope_title": "{rope}：几条曲线完全重合",
        "absolute_title": "{sinusoidal}加在嵌入上：曲线各不相同",
        "rel_distance": "{relative} $m - n$（查询在 m，键在 n）",
        "score": "{score}",
        "key_at": "键在 n = {n}",
        "word_title": "{detective}读“{query}”时的{weight}",
        "plain": "不加{encoding}：\n还是这几个数，只是跟着词换了位置",
        "positioned": "加上{sinusoidal}：\n数不一样了",
        "original": "原句",
        "swapped": "对调后",
    },
    "en": {
        "table_title": "{sinusoidal}: {n} positions × {d} dimensions",
        "position": "position p",
        "dimension": "{dimension} (sin in column 2i, cos in 2i+1)",
        "value": "value",
        "dots_title": "The {dot} of two rows, $PE_p \\cdot PE_{{p+k}}$,\ndepends only on the "
                      "distance k",
        "distance": "distance k",
        "dots_y": "{dot}",
        "start": "p = {p}",
        "peak": "largest at k = 0: {peak:g}",
        "rope_title": "{rope}:\nthe curves lie exactly on top of each other",
        "absolute_title": "{sinusoidal} added to the embeddings:\nthe curves differ",
        "rel_distance": "{relative} $m - n$ (query at m, key at n)",
        "score": "{score}",
        "key_at": "key at n = {n}",
        "word_title": "The {detective}'s {weight}s\nwhile reading '{query}'",
        "plain": "No {encoding}:\nthe same numbers, moved with the words",
        "positioned": "{sinusoidal} added:\nthe numbers change",
        "original": "original",
        "swapped": "swapped",
    },
}

#: English titles that start with a glossary term: capitalised (axis labels stay lower-case).
CAPITALISED = {"table_title", "rope_title", "absolute_title", "positioned"}


def _label(lang: str, key: str, **values) -> str:
    """``LABELS[lang][key]`` with the glossary's words and ``values`` filled in."""
    words = {"sinusoidal": term("sinusoidal_encoding", lang), "dot": term("dot_product", lang),
             "dimension": term("dimension", lang), "rope": term("rope", lang),
             "relative": term("relative_position", lang),
             "score": term("attention_score", lang), "weight": term("attention_weight", lang),
             "encoding": term("positional_encoding", lang)}
    text = LABELS[lang][key].format(**words, **values)
    if lang == "en" and key in CAPITALISED:
        text = text[0].upper() + text[1:]
    return text


def plot_table(result: PositionTableResult, lang: str) -> Figure:
    """The sinusoidal table as a heatmap, and the dot product of two rows against distance.

    Parameters
    ----------
    result : PositionTableResult
        From `mha.site.experiments.position_table_experiment`.
    lang : {"zh", "en"}
        Language of every label.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels, one above the other (readable on a phone).
    """
    n, d = result.table.shape
    with style():
        fig = Figure(figsize=(5.6, 8.0), layout="constrained")
        top, bottom = fig.subplots(2, 1, height_ratios=[1.15, 1])
        image = top.imshow(result.table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                           interpolation="nearest")
        top.set_ylabel(_label(lang, "position"))
        top.set_xlabel(_label(lang, "dimension"))
        top.set_title(_label(lang, "table_title", n=n, d=d))
        colorbar(fig, image, top, _label(lang, "value"))
        for side in top.spines.values():
            side.set_visible(False)

        for p, dots, line in zip(result.starts, result.dots, LINES):
            bottom.plot(result.distances, dots, label=_label(lang, "start", p=int(p)), **line)
        peak = float(result.dots[0][result.distances == 0][0])
        bottom.annotate(_label(lang, "peak", peak=round(peak, 6)), (0, peak), xytext=(8, 2),
                        textcoords="offset points", va="bottom")
        bottom.set_xlabel(_label(lang, "distance"))
        bottom.set_ylabel(_label(lang, "dots_y"))
        bottom.set_title(_label(lang, "dots_title"))
        bottom.set_xlim(result.distances[0], result.distances[-1])
        bottom.set_ylim(top=peak * 1.15)
        bottom.grid(True, alpha=0.3)
        bottom.legend(frameon=False, loc="upper left")
    return fig


def plot_relative(result: RelativeScoresResult, lang: str) -> Figure:
    """Score against distance for several key positions: with RoPE, and with added positions.

    Parameters
    ----------
    result : RelativeScoresResult
        From `mha.site.experiments.relative_scores_experiment`.
    lang : {"zh", "en"}
        Language of every label.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels, one above the other, on the same axes.
    """
    with style():
        fig = Figure(figsize=(5.6, 7.0), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, sharey=True)
        for ax, scores, title in ((top, result.rope, "rope_title"),
                                  (bottom, result.absolute, "absolute_title")):
            for n, row, line in zip(result.starts, scores, LINES):
                ax.plot(result.distances, row, label=_label(lang, "key_at", n=int(n)), **line)
            ax.axhline(0, color=COLORS["neutral"], linewidth=0.8)
            ax.set_title(_label(lang, title))
            ax.set_ylabel(_label(lang, "score"))
            ax.grid(True, alpha=0.3)
        top.legend(frameon=False, loc="lower left")
        bottom.set_xlabel(_label(lang, "rel_distance"))
        bottom.set_xlim(result.distances[0], result.distances[-1])
    return fig


def plot_word_order(result: WordOrderResult, lang: str) -> Figure:
    """One detective's weights for the query word, in the case and with two words swapped.

    Parameters
    ----------
    result : WordOrderResult
        From `mha.site.experiments.word_order_experiment`, run on the case in ``lang``.
    lang : {"zh", "en"}
        Language of every label; the tokens are the case's in that language.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels, one above the other: without positions, then with the sinusoidal table
        added. In each, one column per sentence (the original left, its tokens on the left; the
        swapped one right, its tokens on the right), one row per position, the weight in each
        cell. The query word is in its detective's colour, the word it swaps with in purple.
    """
    column = 0 if lang == "zh" else 1
    original, swapped = result.orders
    query_row = original[result.query[0]]
    partner_row = next(r for r, s in zip(original, swapped) if r != s and r != query_row)
    detective = CAST[result.head]
    accents = {query_row: detective.color, partner_row: PARTNER}
    vmax = float(max(result.plain.max(), result.positioned.max()))
    n = len(original)
    with style():
        fig = Figure(figsize=(4.4, 7.8), layout="constrained")
        panels = fig.subplots(2, 1)
        for ax, weights, title in ((panels[0], result.plain, "plain"),
                                   (panels[1], result.positioned, "positioned")):
            ax.imshow(weights.T, cmap="Blues", vmin=0, vmax=vmax * 1.25, aspect="auto",
                      interpolation="nearest")                          # (n, 2): one column each
            for col in range(2):
                for row in range(n):
                    value = weights[col, row]
                    ax.text(col, row, f"{value:.3f}", ha="center", va="center", fontsize=10.5,
                            color="white" if value > 0.6 * vmax else "black")
                ax.add_patch(Rectangle((col - 0.5, result.query[col] - 0.5), 1, 1, fill=False,
                                       edgecolor=detective.color, linewidth=2.4))
            ax.set_xticks([0, 1], [_label(lang, "original"), _label(lang, "swapped")])
            ax.xaxis.tick_top()
            ax.set_yticks(range(n), [EMBEDDING_ROWS[r][column] for r in original])
            right = ax.secondary_yaxis("right")
            right.set_yticks(range(n), [EMBEDDING_ROWS[r][column] for r in swapped])
            for axis, order in ((ax.yaxis, original), (right.yaxis, swapped)):
                for label, r in zip(axis.get_ticklabels(), order):
                    if r in accents:
                        label.set_color(accents[r])
                        label.set_fontweight("bold")
            for axis in (ax, right):
                axis.tick_params(length=0)
                for side in axis.spines.values():
                    side.set_visible(False)
            ax.set_title(_label(lang, title), fontsize=11)
        fig.suptitle(_label(lang, "word_title", detective=getattr(detective, lang),
                            query=EMBEDDING_ROWS[query_row][column]), color=detective.color)
    return fig
