"""Figures of the chapter on the Q, K, V projections (QKV 矩阵变换)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..experiments import SharedProjectionResult
from ._draw import colorbar, heatmap
from ._style import style
from .case import case_tokens
from ..terms import term

WORDS = {
    "zh": {"shared": "共用一个矩阵：$W^Q = W^K$", "separate": "各用各的：$W^Q \\neq W^K$",
           "top": "方框：每行最高分", "reads": "查询", "looks_at": "键"},
    "en": {"shared": "One shared matrix: $W^Q = W^K$", "separate": "Two matrices: $W^Q \\neq W^K$",
           "top": "boxes: the highest score in each row", "reads": "query", "looks_at": "key"},
}


def plot_shared_projection(result: SharedProjectionResult, lang: str) -> Figure:
    """Score matrices with one shared query/key matrix and with two, highest score boxed
    (every cell of a tie)."""
    words, tokens = WORDS[lang], case_tokens(lang)
    panels = [(words["shared"], result.example_shared),
              (words["separate"], result.example_separate)]
    limit = max(float(np.abs(m).max()) for _, m in panels)
    with style():
        fig = Figure(figsize=(5.2, 9.0), layout="constrained")
        axes = fig.subplots(2, 1)
        for ax, (title, scores) in zip(axes, panels):
            image = heatmap(ax, scores, rows=tokens, cols=tokens, vmax=limit, title=title)
            # Every cell that ties with its row's highest score: a word that occurs twice (the
            # English "the") has the same embedding, so its columns score alike.
            top = np.isclose(scores, scores.max(axis=1, keepdims=True), rtol=1e-9, atol=0)
            for i, j in zip(*np.nonzero(top)):
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False,
                                       edgecolor="black", linewidth=2))
            ax.set_ylabel(words["reads"])
        axes[1].set_xlabel(words["looks_at"] + " · " + words["top"])
        colorbar(fig, image, list(axes), term("attention_score", lang))
    return fig
