"""Figures of the applications chapter (实际应用场景): who may look at whom in BERT, GPT and
translation, drawn from ``mha`` layers run on the case."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ._draw import colorbar, heatmap
from ._style import style

WORDS = {
    "zh": {"bert": "BERT 式编码器：双向，遮住填充", "gpt": "GPT 式解码器：因果掩码",
           "cross": "翻译里的交叉注意力：\n译文查源句", "target": "译文第 {i} 个词元",
           "weight": "注意力权重"},
    "en": {"bert": "BERT-style encoder:\nboth directions, padding hidden",
           "gpt": "GPT-style decoder: causal mask",
           "cross": "Translation (cross-attention):\nthe target asks the source",
           "target": "target token {i}", "weight": "attention weight"},
}


def plot_patterns(bert: np.ndarray, gpt: np.ndarray, cross: np.ndarray, tokens: list[str],
                  pad: str, lang: str) -> Figure:
    """Weights of one head in three settings (``bert`` is ``(n + p, n + p)`` with ``p`` pads,
    ``gpt`` is ``(n, n)``, ``cross`` is ``(n_target, n)``)."""
    words = WORDS[lang]
    n_pad = bert.shape[0] - len(tokens)
    padded = list(tokens) + [pad] * n_pad
    targets = [words["target"].format(i=i + 1) for i in range(cross.shape[0])]
    vmax = float(max(bert.max(), gpt.max(), cross.max()))
    with style():
        fig = Figure(figsize=(5.6, 12.0), layout="constrained")
        axes = fig.subplots(3, 1, height_ratios=[len(padded), len(tokens), cross.shape[0] + 2])
        heatmap(axes[0], bert, rows=padded, cols=padded, diverging=False, vmax=vmax,
                title=words["bert"])
        heatmap(axes[1], gpt, rows=tokens, cols=tokens, diverging=False, vmax=vmax,
                title=words["gpt"])
        image = heatmap(axes[2], cross, rows=targets, cols=tokens, diverging=False, vmax=vmax,
                        title=words["cross"])
        colorbar(fig, image, list(axes), words["weight"])
    return fig
