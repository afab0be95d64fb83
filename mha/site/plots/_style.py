"""The look shared by every figure, and the settings that make saved files byte-identical."""

from __future__ import annotations

import io
import warnings
from contextlib import contextmanager

import matplotlib

#: Fonts tried in order. Noto Sans CJK SC (Debian's fonts-noto-cjk) has every glyph the figures
#: use, Latin and Chinese; the others are what other systems call the same kind of font.
CJK_FONTS = ["Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei",
             "WenQuanYi Zen Hei"]

#: Colours that stay distinct for colour-blind readers (Okabe-Ito) and on a white card.
COLORS = {"raw": "#D55E00", "scaled": "#0072B2", "neutral": "#555555"}

RC = {
    "font.family": "sans-serif",
    "font.sans-serif": CJK_FONTS + ["DejaVu Sans"],
    "axes.unicode_minus": False,     # CJK fonts may lack U+2212; use "-"
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.facecolor": "white",     # a white card reads the same in the light and dark theme
    "savefig.facecolor": "white",
    "svg.hashsalt": "attention-detectives",  # stable ids inside the SVG
    "svg.fonttype": "path",          # glyphs as outlines: no font needed in the reader's browser
}


@contextmanager
def style():
    """Context in which figures are both built and saved (fonts are resolved when drawing)."""
    with matplotlib.rc_context(RC):
        yield


class MissingGlyphError(RuntimeError):
    """A label uses a character that the figure's fonts cannot draw (it would show as a box)."""


def render_svg(fig) -> bytes:
    """Render ``fig`` to SVG bytes, deterministically, failing on any missing glyph.

    Two calls on equal figures give identical bytes (fixed hash salt, no date in the metadata).
    matplotlib only warns about a missing glyph and draws an empty box; here it is an error,
    because on the site it would be a box in the middle of a Chinese label.
    """
    buffer = io.BytesIO()
    with style(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    missing = sorted({str(w.message) for w in caught if "missing from font" in str(w.message)})
    for w in caught:
        if "missing from font" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        raise MissingGlyphError(
            "figure text has characters no available font can draw (install Debian's "
            "fonts-noto-cjk, or another font named in CJK_FONTS in mha/site/plots/_style.py): "
            + "; ".join(missing)
        )
    return buffer.getvalue()
