"""Figures of the chapter on attention scores (注意力分数计算)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..experiments import ScalingResult
from ._style import COLORS, style
from ..terms import term

LABELS = {
    "zh": {
        "title_variance": "{dot}的{variance}随{dimension}增长",
        "title_max": "softmax 之后每行最大的{weight}",
        "raw": r"未缩放：$q \cdot k$",
        "scaled": r"除以 $\sqrt{d_k}$ 之后",
        "uniform": "平均分配：1/{n}",
        "ratio": "缩放后：约为平均分配的 {ratio} 倍",
        "x": "{dimension} $d_k$",
        "y_variance": "{variance}",
        "y_max": "最大{weight}\n（各查询平均）",
    },
    "en": {
        "title_variance": "The {variance} of the {dot} grows with the {dimension}",
        "title_max": "Largest {weight} in each row after softmax",
        "raw": r"unscaled: $q \cdot k$",
        "scaled": r"divided by $\sqrt{d_k}$",
        "uniform": "spread evenly: 1/{n}",
        "ratio": "scaled: about {ratio}× an even split",
        "x": "{dimension} $d_k$",
        "y_variance": "{variance}",
        "y_max": "largest {weight}\n(mean over queries)",
    },
}


def plot_scaling(result: ScalingResult, lang: str) -> Figure:
    """Variance of the scores and sharpness of softmax against ``d_k``, with and without scaling.

    Parameters
    ----------
    result : ScalingResult
        From `mha.site.experiments.scaling_experiment`.
    lang : {"zh", "en"}
        Language of every label.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels, one above the other (readable on a phone).
    """
    words = {"dot": term("dot_product", lang), "variance": term("variance", lang),
             "dimension": term("dimension", lang), "weight": term("attention_weight", lang),
             "n": result.n_keys}
    text = {}
    for key, value in LABELS[lang].items():  # str.format would trip over the TeX braces
        for name, word in words.items():
            value = value.replace("{" + name + "}", str(word))
        text[key] = value
    with style():
        fig = Figure(figsize=(5.6, 6.4), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        d_k = result.d_k
        top.plot(d_k, result.variance_raw, "o-", color=COLORS["raw"], label=text["raw"])
        top.plot(d_k, result.variance_scaled, "s-", color=COLORS["scaled"], label=text["scaled"])
        top.set_yscale("log", base=2)
        top.set_ylabel(text["y_variance"])
        top.set_title(text["title_variance"])
        top.legend(frameon=False)

        bottom.plot(d_k, result.max_weight_raw, "o-", color=COLORS["raw"], label=text["raw"])
        bottom.plot(d_k, result.max_weight_scaled, "s-", color=COLORS["scaled"],
                    label=text["scaled"])
        bottom.axhline(1 / result.n_keys, color=COLORS["neutral"], linestyle=":",
                       label=text["uniform"])
        # On a 0-1 axis, 0.1 and 1/64 look close: say how many times the even split it is.
        ratio = float(np.mean(result.max_weight_scaled)) * result.n_keys
        bottom.text(d_k[0], float(np.max(result.max_weight_scaled)) + 0.06,
                    text["ratio"].replace("{ratio}", f"{ratio:.0f}"), color=COLORS["scaled"],
                    fontsize="small", va="bottom")
        bottom.set_ylim(0, 1)
        bottom.set_ylabel(text["y_max"], linespacing=1.5)  # two lines, CJK glyphs included
        bottom.set_title(text["title_max"])
        bottom.set_xscale("log", base=2)
        bottom.set_xticks(d_k, [str(int(d)) for d in d_k])
        bottom.set_xlabel(text["x"])
        bottom.legend(frameon=False, loc="center right")
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
    return fig
