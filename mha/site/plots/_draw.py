"""Drawing helpers shared by the figure modules: heatmaps of matrices with token labels."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from .case import CAST


def heatmap(ax, data, *, rows=None, cols=None, title="", diverging=True, vmax=None,
            title_color=None):
    """Draw ``data`` (2-D) on ``ax``; return the image (for a colour bar).

    Diverging data (activations, scores) use a red-blue map centred on 0; weights use a
    sequential map from 0.
    """
    data = np.asarray(data)
    if diverging:
        limit = float(np.abs(data).max()) if vmax is None else vmax
        image = ax.imshow(data, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto",
                          interpolation="nearest")
    else:
        image = ax.imshow(data, cmap="Blues", vmin=0, vmax=vmax or float(data.max()),
                          aspect="auto", interpolation="nearest")
    ax.set_yticks(range(data.shape[0]), rows if rows is not None else [""] * data.shape[0])
    if cols is not None:
        ax.set_xticks(range(data.shape[1]), cols, rotation=90)
    else:
        ax.set_xticks([])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    if title:
        ax.set_title(title, color=title_color or "black")
    return image


def head_bands(ax, h: int, width: int, n_rows: int):
    """Separate ``h`` equal column blocks with lines and mark each with its detective's colour."""
    block = width // h
    for i in range(h):
        ax.add_patch(Rectangle((i * block - 0.5, -1.4), block, 0.7, color=CAST[i].color,
                               clip_on=False))
        if i:
            ax.axvline(i * block - 0.5, color="black", linewidth=1.2)
    ax.set_ylim(n_rows - 0.5, -1.5)


def colorbar(fig, image, axes, label: str = ""):
    bar = fig.colorbar(image, ax=axes, shrink=0.8, pad=0.02)
    if label:
        bar.set_label(label)
    bar.outline.set_visible(False)
    return bar
