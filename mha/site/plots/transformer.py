"""The whole Transformer in one figure: the encoder stack and the decoder stack of the original
paper (Vaswani et al. 2017, §3.1 and its Figure 1), drawn from a data description.

`ENCODER_LAYER` and `DECODER_LAYER` list one layer of each stack, bottom to top, as sublayers;
`plot_transformer` walks the lists it is given, so a box exists only where the description has
a sublayer. Every
sublayer sits inside a residual connection and is followed by LayerNorm, as in the paper
(Post-LN, `POST_LN`). ``tests/test_transformer_figure.py`` runs the encoder's description with
``mha``'s own pieces and checks it against `mha.models.encoder.bert_layer`, the layer the site's
real models run, and runs the decoder's to check who sees whom.

Every concept is labelled with its word from `mha.site.terms`; `WORDS` holds only the figure's
structure (title, the two stacks' names, the inputs and the output).
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from ._style import COLORS, style
from ..terms import term

__all__ = ["DECODER_LAYER", "ENCODER_LAYER", "POST_LN", "STACK_DEPTH", "Sublayer", "WORDS",
           "concept_labels", "plot_transformer"]


@dataclass(frozen=True)
class Sublayer:
    """One sublayer of a layer: what it computes and the mask it applies (keys of the terms).

    ``kind`` is ``"self_attention"``, ``"cross_attention"`` (queries from this stack, keys and
    values from the encoder's output) or ``"feed_forward_network"``; ``mask`` is
    ``"padding_mask"``, ``"causal_mask"`` or None.
    """

    kind: str
    mask: str | None = None


#: One encoder layer, bottom to top: self-attention over the source (padding hidden), then the
#: feed-forward network.
ENCODER_LAYER = (Sublayer("self_attention", "padding_mask"),
                 Sublayer("feed_forward_network"))
#: One decoder layer, bottom to top: masked (causal) self-attention over the target written so
#: far, cross-attention to the encoder's output (the source's padding hidden), the feed-forward
#: network.
DECODER_LAYER = (Sublayer("self_attention", "causal_mask"),
                 Sublayer("cross_attention", "padding_mask"),
                 Sublayer("feed_forward_network"))
#: Where LayerNorm goes: after the residual addition, x <- LayerNorm(x + sublayer(x)).
POST_LN = True
#: Layers per stack in the paper's base model.
STACK_DEPTH = 6

#: The figure's own words: its title, the stacks, what goes in and what comes out. Every
#: concept's label comes from `mha.site.terms`.
WORDS = {
    "zh": {"title": "Transformer：编码器和解码器", "encoder": "编码器", "decoder": "解码器",
           "target_in": "已写出的译文\n（右移一位）", "linear": "线性层",
           "probabilities": "下一个词元的概率", "repeat": "N×", "depth": "原论文 N = {n}"},
    "en": {"title": "The Transformer: encoder and decoder", "encoder": "encoder",
           "decoder": "decoder", "target_in": "target written so far\n(shifted right)",
           "linear": "linear layer", "probabilities": "next-token probabilities", "repeat": "N×",
           "depth": "paper: N = {n}"},
}

_FILL = {"self_attention": "#FCE3D2", "cross_attention": "#FFE9B3",
         "feed_forward_network": "#DCEBF7", "layer_norm": "#EEEEEE", "embedding": "#D9F0E8",
         "output": "#ECE2F3"}
_RESIDUAL = "#0072B2"
_MEMORY = "#D55E00"


def sublayer_label(sublayer: Sublayer, lang: str) -> str:
    """A sublayer's box text: its term, and under it the mask's term."""
    label = term(sublayer.kind, lang)
    return label if sublayer.mask is None else f"{label}\n{term(sublayer.mask, lang)}"


def concept_labels(lang: str) -> set[str]:
    """Every concept word the figure draws, each from `mha.site.terms`."""
    keys = {s.kind for s in ENCODER_LAYER + DECODER_LAYER}
    keys |= {s.mask for s in ENCODER_LAYER + DECODER_LAYER if s.mask}
    keys |= {"layer_norm", "residual_connection", "embedding", "positional_encoding",
             "source_sentence", "softmax"}
    return {term(key, lang) for key in keys}


def _box(ax, x, y, w, h, text, fill, *, fontsize=9.5):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=fill, edgecolor="#777777", linewidth=0.9))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, linespacing=1.15)


def _arrow(ax, start, end, *, color=COLORS["neutral"], style_="-|>", lw=1.0, **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style_, mutation_scale=9, color=color,
                                 linewidth=lw, shrinkA=0, shrinkB=0, **kw))


def _stack(ax, cx, layer, side, lang, *, y0, slot, width):
    """Draw one stack's layer at centre ``cx`` from ``y0`` up; residual paths on ``side``
    (-1 left, +1 right). Return the frame's top and the centre y of each sublayer box."""
    centres = []
    edge = cx + side * (width / 2 + 0.28)
    for k, sub in enumerate(layer):
        y = y0 + 0.55 + k * slot
        norm_y = y + 0.78
        _arrow(ax, (cx, y - 0.55), (cx, y - 0.36))
        _box(ax, cx, y, width, 0.72, sublayer_label(sub, lang), _FILL[sub.kind])
        _arrow(ax, (cx, y + 0.36), (cx, norm_y - 0.19))
        _box(ax, cx, norm_y, width, 0.4, term("layer_norm", lang), _FILL["layer_norm"],
             fontsize=10)
        # The residual connection: from below the sublayer round it, added before LayerNorm.
        ax.plot([cx, edge, edge], [y - 0.5, y - 0.5, norm_y], color=_RESIDUAL, linewidth=1.1)
        _arrow(ax, (edge, norm_y), (cx + side * width / 2, norm_y), color=_RESIDUAL)
        ax.add_patch(Circle((edge, norm_y), 0.09, facecolor="white", edgecolor=_RESIDUAL,
                            linewidth=1.0, zorder=3))
        ax.text(edge, norm_y, "+", ha="center", va="center", fontsize=7, color=_RESIDUAL,
                zorder=4)
        centres.append(y)
    top = y0 + len(layer) * slot
    pad = width / 2 + 0.5
    ax.add_patch(FancyBboxPatch((cx - pad, y0 - 0.05), 2 * pad, top - y0 + 0.02,
                                boxstyle="round,pad=0.02,rounding_size=0.2", facecolor="none",
                                edgecolor="#999999", linewidth=1.0, linestyle="--"))
    return top, centres


def _inputs(ax, cx, lang, label, side, *, width):
    """Input text, embedding box, the position added: from y = 0.25 up to 2.2."""
    ax.text(cx, 0.25, label, ha="center", va="center", fontsize=9.5, linespacing=1.1)
    _arrow(ax, (cx, 0.62), (cx, 0.92))
    _box(ax, cx, 1.2, width, 0.52, term("embedding", lang), _FILL["embedding"])
    _arrow(ax, (cx, 1.46), (cx, 1.82))
    ax.add_patch(Circle((cx, 1.95), 0.12, facecolor="white", edgecolor=COLORS["neutral"]))
    ax.text(cx, 1.95, "+", ha="center", va="center", fontsize=9)
    x_text = cx + side * 0.22
    ax.text(x_text, 1.95, term("positional_encoding", lang), ha="left" if side > 0 else "right",
            va="center", fontsize=9.5)


def plot_transformer(encoder_layer, decoder_layer, lang: str, *,
                     depth: int = STACK_DEPTH) -> Figure:
    """An encoder-decoder Transformer: embeddings and positions, one layer of each stack drawn
    from its list of `Sublayer` (bottom to top; the site draws `ENCODER_LAYER` and
    `DECODER_LAYER`, the original paper's) and marked as repeated ``depth`` times, the
    encoder's output feeding each cross-attention sublayer of the decoder, and the output
    linear layer and softmax."""
    words = WORDS[lang]
    width, slot, y0 = 4.0, 1.75, 2.35
    enc_x, dec_x = 2.2, 8.3
    with style():
        fig = Figure(figsize=(6.2, 5.4), layout="constrained")
        ax = fig.subplots()
        ax.axis("off")
        ax.set_title(words["title"])
        _inputs(ax, enc_x, lang, term("source_sentence", lang), -1, width=width)
        _inputs(ax, dec_x, lang, words["target_in"], +1, width=width)
        enc_top, _ = _stack(ax, enc_x, encoder_layer, -1, lang, y0=y0, slot=slot, width=width)
        dec_top, dec_y = _stack(ax, dec_x, decoder_layer, +1, lang, y0=y0, slot=slot,
                                width=width)
        for cx, top, name, side in ((enc_x, enc_top, words["encoder"], -1),
                                    (dec_x, dec_top, words["decoder"], +1)):
            edge = cx + side * (width / 2 + 0.7)
            ax.text(edge, top - 0.1, name, ha="right" if side < 0 else "left", va="top",
                    fontsize=11, fontweight="bold")
            ax.text(edge, top - 0.55, words["repeat"] + "\n" + words["depth"].format(
                    n=depth), ha="right" if side < 0 else "left", va="top", fontsize=9.5,
                    multialignment="center")
        # The encoder's output: the keys and values of every decoder layer's cross-attention.
        out_y = enc_top + 0.35
        mid = (enc_x + dec_x) / 2
        for k, sub in enumerate(decoder_layer):
            if sub.kind == "cross_attention":
                ax.plot([enc_x, enc_x, mid, mid], [enc_top - 0.05, out_y, out_y, dec_y[k]],
                        color=_MEMORY, linewidth=1.3)
                _arrow(ax, (mid, dec_y[k]), (dec_x - width / 2, dec_y[k]), color=_MEMORY,
                       lw=1.3)
                ax.text((enc_x + mid) / 2, out_y + 0.06, "K, V", color=_MEMORY, fontsize=9.5,
                        ha="center", va="bottom")
        # On top of the decoder: the linear layer, softmax, the next token's probabilities.
        _arrow(ax, (dec_x, dec_top - 0.05), (dec_x, dec_top + 0.22))
        _box(ax, dec_x, dec_top + 0.47, width, 0.46, words["linear"], _FILL["output"])
        _arrow(ax, (dec_x, dec_top + 0.7), (dec_x, dec_top + 0.95))
        _box(ax, dec_x, dec_top + 1.18, width, 0.46, term("softmax", lang), _FILL["output"])
        _arrow(ax, (dec_x, dec_top + 1.41), (dec_x, dec_top + 1.66))
        ax.text(dec_x, dec_top + 1.82, words["probabilities"], ha="center", va="center",
                fontsize=9.5)
        # Legend: the residual connection's colour.
        ax.plot([-0.8, -0.2], [dec_top + 1.18, dec_top + 1.18], color=_RESIDUAL, linewidth=1.1)
        ax.text(-0.05, dec_top + 1.18, term("residual_connection", lang) + "  x + f(x)",
                ha="left", va="center", fontsize=9.5, color=_RESIDUAL)
        ax.set_xlim(-2.3, 12.8)
        ax.set_ylim(0, dec_top + 2.05)
        ax.set_aspect("equal")
    return fig
