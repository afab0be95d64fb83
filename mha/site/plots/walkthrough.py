"""Figures that follow the case through the layer: the home page's map of shapes, the visual
walkthrough's step-by-step heatmaps, and the overview's one-query view.

Every function takes traces from `mha.site.experiments.walkthrough` (run on the case in the
figure's language) and a language, and returns a Figure.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from ._draw import colorbar, head_bands, heatmap
from ._style import COLORS, style
from .case import CASE_ORDER, CAST, case_tokens
from ..terms import term

WORDS = {
    "zh": {
        "dim": "维度",
        "value": "数值",
        "input": "输入 X：每个词元一行",
        "head_of": "{name}",
        "concat": "拼接：四位侦探的报告并排",
        "output": "输出 = 拼接 × $W^O$",
        "layer_in": "输入 X",
        "layer_out": "第 {i} 层的输出",
        "query_row": "读“{token}”时的注意力权重",
        "matrix": "{name}的注意力权重（每行和为 1）",
        "reads": "正在读的词元（查询）",
        "looks_at": "被看的词元（键）",
        "shapes": ["嵌入 X", "查询 Q / 键 K / 值 V\n（每位侦探一份）", r"注意力分数" "\n" r"$QK^\top/\sqrt{d_k}$",
                   "注意力权重\nsoftmax", "各头输出\n权重 × V", "拼接", "输出\n拼接 × $W^O$"],
        "shape_title": "一层多头注意力里的形状（n = {n} 个词元，h = {h} 位侦探）",
    },
    "en": {
        "dim": "dimension",
        "value": "value",
        "input": "Input X: one row per token",
        "head_of": "{name}",
        "concat": "Concatenation: the four reports side by side",
        "output": "Output = concatenation × $W^O$",
        "layer_in": "input X",
        "layer_out": "output of layer {i}",
        "query_row": "Attention weights while reading '{token}'",
        "matrix": "The {name}'s attention weights (rows sum to 1)",
        "reads": "token being read (query)",
        "looks_at": "token looked at (key)",
        "shapes": ["embeddings X", "queries Q / keys K / values V\n(one set per detective)",
                   r"attention scores" "\n" r"$QK^\top/\sqrt{d_k}$", "attention weights\nsoftmax",
                   "each head's output\nweights × V", "concatenation",
                   "output\nconcatenation × $W^O$"],
        "shape_title": "Shapes inside one multi-head attention layer (n = {n} tokens, h = {h})",
    },
}


def _shape(a) -> str:
    return "(" + ", ".join(str(s) for s in np.shape(a)) + ")"


def plot_shapes(traces: list, lang: str) -> Figure:
    """The home page's map: every stage of one layer with the shape ``mha`` gives it."""
    words = WORDS[lang]
    t = traces[0]
    n, h = t["x"].shape[0], t["q"].shape[0]
    stages = [t["x"], (t["q"], t["k"], t["v"]), t["scores"], t["weights"], t["heads"],
              t["concat"], t["output"]]
    shapes = [_shape(s) if not isinstance(s, tuple) else " ".join(_shape(a) for a in s)
              for s in stages]
    with style():
        fig = Figure(figsize=(5.6, 6.6), layout="constrained")
        ax = fig.subplots()
        ax.set_xlim(0, 10)
        ax.set_ylim(-0.6, len(stages) - 0.2)
        ax.axis("off")
        ax.set_title(words["shape_title"].format(n=n, h=h))
        colors = ["#EEEEEE", "#FCE3D2", "#FFF1CC", "#DCEBF7", "#D9F0E8", "#ECE2F3", "#EEEEEE"]
        for i, (label, shape) in enumerate(zip(words["shapes"], shapes)):
            y = len(stages) - 1 - i
            ax.add_patch(FancyBboxPatch((0.3, y - 0.33), 9.4, 0.66,
                                        boxstyle="round,pad=0.02,rounding_size=0.15",
                                        facecolor=colors[i], edgecolor="#888888"))
            ax.text(0.6, y, label, va="center", ha="left", fontsize=10.5, linespacing=1.45)
            ax.text(9.4, y, shape, va="center", ha="right", fontsize=10.5, family="monospace")
            if i:
                ax.annotate("", xy=(5, y + 0.34), xytext=(5, y + 0.66),
                            arrowprops={"arrowstyle": "->", "color": COLORS["neutral"]})
    return fig


def _one_matrix(data, title: str, lang: str, *, heads: int | None = None) -> Figure:
    """One (tokens x width) matrix of the case as a heatmap, with its shape in the title: a
    (tokens x d_model) matrix, or with ``heads`` the heads side by side, banded by head."""
    words, tokens = WORDS[lang], case_tokens(lang)
    with style():
        fig = Figure(figsize=(5.6, 3.4 if heads is None else 3.6), layout="constrained")
        ax = fig.subplots()
        image = heatmap(ax, data, rows=tokens, title=f"{title} {_shape(data)}")
        if heads is None:
            ax.set_xlabel(words["dim"] + f" (d_model = {data.shape[1]})")
        else:
            head_bands(ax, heads, data.shape[1], data.shape[0])
        colorbar(fig, image, ax)
    return fig


def plot_input(traces: list, lang: str) -> Figure:
    return _one_matrix(traces[0]["x"], WORDS[lang]["input"], lang)


def plot_qkv(traces: list, lang: str) -> Figure:
    words, tokens = WORDS[lang], case_tokens(lang)
    t = traces[0]
    with style():
        fig = Figure(figsize=(5.6, 8.0), layout="constrained")
        axes = fig.subplots(3, 1)
        limit = max(float(np.abs(t[k]).max()) for k in "qkv")
        for ax, key, name in zip(axes, "qkv", ("query", "key", "value")):
            h, n, d = t[key].shape
            side_by_side = t[key].transpose(1, 0, 2).reshape(n, h * d)  # (n, h*d): heads in a row
            image = heatmap(ax, side_by_side, rows=tokens, vmax=limit,
                            title=f"{term(name, lang)} ${key.upper()} = X W^{key.upper()}$  "
                                  f"({h} × {_shape(t[key][0])})")
            head_bands(ax, h, h * d, n)
        colorbar(fig, image, list(axes))
    return fig


def _four_heads(matrices, lang, *, diverging, vmax=None, label=""):
    tokens = case_tokens(lang)
    with style():
        fig = Figure(figsize=(5.6, 6.2), layout="constrained")
        axes = fig.subplots(2, 2)
        for i, ax in enumerate(axes.flat):
            image = heatmap(ax, matrices[i], rows=tokens if i % 2 == 0 else None,
                            cols=tokens if i >= 2 else None, diverging=diverging, vmax=vmax,
                            title=getattr(CAST[i], lang), title_color=CAST[i].color)
        colorbar(fig, image, list(axes.flat), label)
    return fig


def plot_scores(traces: list, lang: str) -> Figure:
    scores = traces[0]["scores"]
    return _four_heads(scores, lang, diverging=True, vmax=float(np.abs(scores).max()),
                       label=term("attention_score", lang))


def plot_weights(traces: list, lang: str) -> Figure:
    weights = traces[0]["weights"]
    return _four_heads(weights, lang, diverging=False, vmax=float(weights.max()),
                       label=term("attention_weight", lang))


def plot_concat(traces: list, lang: str) -> Figure:
    t = traces[0]
    return _one_matrix(t["concat"], WORDS[lang]["concat"], lang, heads=t["heads"].shape[0])


def plot_output(traces: list, lang: str) -> Figure:
    return _one_matrix(traces[0]["output"], WORDS[lang]["output"], lang)


def plot_layers(traces: list, lang: str) -> Figure:
    words, tokens = WORDS[lang], case_tokens(lang)
    panels = [(words["layer_in"], traces[0]["x"])]
    panels += [(words["layer_out"].format(i=i + 1), t["output"]) for i, t in enumerate(traces)]
    limit = max(float(np.abs(a).max()) for _, a in panels)
    with style():
        fig = Figure(figsize=(5.6, 2.5 * len(panels) + 0.4), layout="constrained")
        axes = fig.subplots(len(panels), 1)
        for ax, (title, data) in zip(axes, panels):
            image = heatmap(ax, data, rows=tokens, vmax=limit, title=f"{title} {_shape(data)}")
        colorbar(fig, image, list(axes))
    return fig


def plot_one_query(traces: list, lang: str, head: int = 0, concept: int = 4) -> Figure:
    """One detective's weight matrix, and the row of one query (the key, concept 4) as bars."""
    words, tokens = WORDS[lang], case_tokens(lang)
    weights = traces[0]["weights"][head]
    row = CASE_ORDER[lang].index(concept)
    name = getattr(CAST[head], lang)
    with style():
        fig = Figure(figsize=(5.6, 7.4), layout="constrained")
        top, bottom = fig.subplots(2, 1, height_ratios=[1.25, 1])
        image = heatmap(top, weights, rows=tokens, cols=tokens, diverging=False,
                        title=words["matrix"].format(name=name), title_color=CAST[head].color)
        top.add_patch(FancyBboxPatch((-0.5, row - 0.5), weights.shape[1], 1, fill=False,
                                     edgecolor=CAST[head].color, linewidth=2,
                                     boxstyle="square,pad=0"))
        top.set_ylabel(words["reads"])
        top.set_xlabel(words["looks_at"])
        colorbar(fig, image, top)
        bars = bottom.bar(range(len(tokens)), weights[row], color=CAST[head].color)
        bottom.bar_label(bars, fmt="%.2f", fontsize=9)
        bottom.set_xticks(range(len(tokens)), tokens, rotation=45, ha="right",
                          rotation_mode="anchor")
        bottom.set_ylim(0, max(0.5, float(weights[row].max()) * 1.2))
        bottom.set_ylabel(term("attention_weight", lang))
        bottom.set_title(words["query_row"].format(token=tokens[row]))
        bottom.spines[["top", "right"]].set_visible(False)
    return fig
