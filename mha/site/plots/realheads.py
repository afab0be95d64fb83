"""Figures and tables of a real model's heads: the role of each head, measured over a study set
of `mha.site.head_roles`, and a few of them at work on one sentence. The same functions draw
all-MiniLM-L6-v2 on English (72 heads) and multilingual-e5-small on Chinese (144 heads); the
special-token roles are named after each model's own tokens (`role_label`).

Layers and heads are counted from 1 in everything drawn or printed here.
"""

from __future__ import annotations

import html

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ...models.encoder import SpecialTokens
from ...models.sentencepiece import METASPACE
from ...models.wordpiece import is_cjk
from ..head_roles import (ROLES, SENTENCES, SENTENCES_ZH, STABLE_FRACTION, HeadRole,
                          HeadRoleStudy, WordLink, WordLinks)
from ._draw import heatmap
from ._style import style
from ..terms import term

__all__ = ["ROLE_TERMS", "ROLE_COLORS", "EXAMPLE", "EXAMPLE_ZH", "role_label", "plot_roles",
           "example_heads", "case_heads", "plot_examples", "role_table"]

#: The term (in `mha.site.terms`) that names each role of `mha.site.head_roles.ROLES`.
ROLE_TERMS = {"previous": "previous_token_head", "next": "next_token_head",
              "self": "current_token_head", "cls": "cls_head", "sep": "sep_head",
              "punctuation": "punctuation_head", "broad": "broad_head"}

#: One colour per role (Okabe-Ito: distinct for colour-blind readers).
ROLE_COLORS = {"previous": "#0072B2", "next": "#56B4E9", "self": "#009E73", "cls": "#D55E00",
               "sep": "#E69F00", "punctuation": "#CC79A7", "broad": "#F0E442"}
_NONE = "#EEEEEE"

#: The term of the head `mha.site.head_roles.word_links` finds (not a role of the grid).
WITHIN_WORD_TERM = "within_word_head"

#: The sentence of `plot_examples`: short, the first of the study set.
EXAMPLE = SENTENCES[0]
#: The Chinese example: the case itself, the first sentence of `SENTENCES_ZH`.
EXAMPLE_ZH = SENTENCES_ZH[0]

WORDS = {
    "zh": {"layer": "层", "head": "注意力头", "unstable": "平均达标，但达标的句子不到 {p:.0%}",
           "none": "没有明确的分工", "panel": "第 {l} 层 · 注意力头 {j}\n{role}",
           "reads": "正在读的词元（查询）", "looks_at": "被看的词元（键）",
           "role": "分工", "mean": "平均 ± 标准差", "lowest": "最低的一句",
           "stable": "达标的句子", "of": "{k} / {n}", "token_head": "{token} 头"},
    "en": {"layer": "layer", "head": "head",
           "unstable": "passes on average, in fewer than {p:.0%} of sentences",
           "none": "no clear role", "panel": "layer {l} · head {j}\n{role}",
           "reads": "token being read (query)", "looks_at": "token looked at (key)",
           "role": "role", "mean": "mean ± std", "lowest": "lowest sentence",
           "stable": "passes in", "of": "{k} of {n}", "token_head": "{token} head"},
}


def role_label(role: str, lang: str, special: SpecialTokens | None = None) -> str:
    """The name of ``role`` (one of `mha.site.head_roles.ROLES`) on a figure or a table.

    The term of `ROLE_TERMS`, except that ``cls`` and ``sep`` name the model's own start and
    end tokens when ``special`` is given: ``<s> 头`` / ``<s> head`` for multilingual-e5-small,
    and for all-MiniLM-L6-v2 the terms themselves, ``[CLS] 头`` / ``[CLS] head``.

    Examples
    --------
    >>> from mha.models.encoder import SpecialTokens
    >>> from mha.site.plots.realheads import role_label
    >>> xlmr = SpecialTokens("<s>", "</s>", "<pad>", start_id=0, end_id=2, pad_id=1)
    >>> role_label("cls", "en"), role_label("cls", "en", xlmr), role_label("sep", "zh", xlmr)
    ('[CLS] head', '<s> head', '</s> 头')
    """
    if special is None or role not in ("cls", "sep"):
        return term(ROLE_TERMS[role], lang)
    token = special.start if role == "cls" else special.end
    return WORDS[lang]["token_head"].format(token=token)


def _pale(color: str, amount: float = 0.55) -> tuple[float, float, float]:
    """``color`` mixed with ``amount`` of white."""
    rgb = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return tuple(rgb + (1 - rgb) * amount)


def plot_roles(result: HeadRoleStudy, lang: str) -> Figure:
    """Every head's role as a grid: heads down (1 to ``h``), layers across (1 to ``layers``).

    A cell is coloured by the head's role and shows its mean score; a role that passes on
    average but not in `STABLE_FRACTION` of the sentences is pale and hatched; a head with no
    role is grey. The legend names the model's own special tokens (`role_label`). A grid of
    more than 6 layers (multilingual-e5-small's 12) is drawn wider, its scores written without
    the leading zero (``.95``) so that they fit their cells.
    """
    words = WORDS[lang]
    layers, h = result.role.shape
    strength = result.strength()
    wide = layers > 6
    with style():
        fig = Figure(figsize=(4.8, 6.6) if wide else (4.6, 6.6), layout="constrained")
        ax = fig.subplots()
        for l in range(layers):
            for j in range(h):
                r = result.role[l, j]
                if r < 0:
                    ax.add_patch(Rectangle((l - 0.5, j - 0.5), 1, 1, facecolor=_NONE,
                                           edgecolor="white", linewidth=2))
                    continue
                color = ROLE_COLORS[ROLES[r]]
                clear = result.clear[l, j]
                ax.add_patch(Rectangle((l - 0.5, j - 0.5), 1, 1,
                                       facecolor=color if clear else _pale(color),
                                       hatch=None if clear else "///", edgecolor="white",
                                       linewidth=2))
                dark = clear and ROLES[r] in ("previous", "cls", "self")
                score = f"{strength[l, j]:.2f}"
                ax.text(l, j, score[1:] if wide and score.startswith("0.") else score,
                        ha="center", va="center", fontsize=10,
                        color="white" if dark else "black")
        ax.set_xlim(-0.5, layers - 0.5)
        ax.set_ylim(h - 0.5, -0.5)
        ax.set_xticks(range(layers), [str(l + 1) for l in range(layers)])
        ax.set_yticks(range(h), [str(j + 1) for j in range(h)])
        ax.xaxis.tick_top()
        ax.xaxis.set_label_position("top")
        ax.set_xlabel(words["layer"])
        ax.set_ylabel(words["head"])
        ax.tick_params(length=0)
        for side in ax.spines.values():
            side.set_visible(False)
        present = [ROLES[r] for r in sorted(set(result.role[result.role >= 0].tolist()))]
        handles = [Patch(facecolor=ROLE_COLORS[role],
                         label=role_label(role, lang, result.special_tokens))
                   for role in present]
        handles += [Patch(facecolor=_pale("#555555", 0.7), hatch="///", edgecolor="white",
                          label=words["unstable"].format(p=STABLE_FRACTION)),
                    Patch(facecolor=_NONE, label=words["none"])]
        fig.legend(handles=handles, loc="outside lower left", ncol=1, frameon=False,
                   fontsize=10, handlelength=1.4)
    return fig


def example_heads(result: HeadRoleStudy, k: int = 4) -> list[HeadRole]:
    """The clearest head of each role, at most ``k`` of them (the clearest roles), in the order
    of `mha.site.head_roles.ROLES`."""
    rows, seen = [], set()
    for row in result.clearest():
        if row.role not in seen:
            rows.append(row)
            seen.add(row.role)
    return sorted(rows[:k], key=lambda row: ROLES.index(row.role))


def case_heads(result: HeadRoleStudy, links: WordLinks) -> list[HeadRole | WordLink]:
    """The heads the Chinese case figure shows: the clearest head of each role that one short
    sentence makes visible, then the within-word head.

    The clearest ``previous``, ``next`` and ``cls`` heads of ``result`` (`example_heads`), in
    that order: each draws a pattern a reader can check on 11 tokens (a line below the
    diagonal, a line above it, the first column). The ``broad`` heads are left out: an even
    spread over 11 tokens says little, and the role grid shows them. Last, the strongest head
    of ``links.heads()`` (`mha.site.head_roles.word_links`), which ties 探 to 侦 in 侦探.
    """
    shown = [row for row in example_heads(result, k=len(ROLES))
             if row.role in ("previous", "next", "cls")]
    return shown + links.heads()[:1]


def _upright_chinese_columns(ax, tokens: list[str]) -> None:
    """Column labels a Chinese reader reads upright: a token holding Chinese characters is
    written top to bottom, one character a line (找到了 as 找 / 到 / 了), instead of lying on its
    side, and the bare ``▁`` stands as it is (turned, it would look like ``|``); the others
    (``<s>``, ``</s>``, Latin pieces) stay turned a quarter."""
    chinese = [any(is_cjk(c) for c in token) for token in tokens]
    ax.set_xticks(range(len(tokens)), ["\n".join(t) if c else t for t, c in zip(tokens, chinese)],
                  rotation=90)
    for label, token, upright in zip(ax.get_xticklabels(), tokens, chinese):
        upright = upright or token == METASPACE
        if upright:
            label.set_rotation(0)
            label.set_linespacing(1.0)


def _head_title(head: HeadRole | WordLink, lang: str, special: SpecialTokens | None) -> str:
    role = (term(WITHIN_WORD_TERM, lang) if isinstance(head, WordLink)
            else role_label(head.role, lang, special))
    return WORDS[lang]["panel"].format(l=head.layer, j=head.head, role=role)


def plot_examples(tokens: list[str], attentions: np.ndarray, heads: list[HeadRole | WordLink],
                  lang: str, *, special: SpecialTokens | None = None, cols: int = 2,
                  junctions: tuple[int, ...] = ()) -> Figure:
    """The attention weights of a few heads on one sentence, ``cols`` panels a row.

    ``attentions`` is the sentence's ``(layers, h, n, n)`` from `mha.models`; ``heads`` are
    rows of `HeadRoleStudy.clearest` or `WordLinks.heads` (layers and heads counted from 1),
    titled with the head and its role (the model's own tokens for ``cls`` and ``sep`` when
    ``special`` is given). With one column, for a phone, the panels are stacked and each
    carries its own token labels. ``junctions`` (token indices ``q``) outlines the cells
    ``(q, q - 1)`` in the panel of a `WordLink`: a later piece of a word looking at the piece
    before it.
    """
    words = WORDS[lang]
    rows = -(-len(heads) // cols)
    stacked = cols == 1
    with style():
        fig = Figure(figsize=(3.9, 3.3 * rows + 0.7) if stacked else (5.2, 2.9 * rows + 0.6),
                     layout="constrained")
        axes = np.atleast_2d(fig.subplots(rows, cols, sharex=True, sharey=True)).reshape(rows,
                                                                                          cols)
        for i, (ax, head) in enumerate(zip(axes.flat, heads)):
            weights = attentions[head.layer - 1, head.head - 1]          # (n, n)
            image = heatmap(ax, weights, rows=tokens, cols=tokens, diverging=False, vmax=1.0,
                            title=_head_title(head, lang, special))
            ax.tick_params(labelsize=10 if stacked else 9, labelleft=i % cols == 0,
                           labelbottom=stacked or i // cols == rows - 1)
            if isinstance(head, WordLink):
                for q in junctions:
                    ax.add_patch(Rectangle((q - 1.5, q - 0.5), 1, 1, fill=False,
                                           edgecolor=ROLE_COLORS["cls"], linewidth=2.2))
        for ax in axes.flat[len(heads):]:
            ax.set_visible(False)
        for ax in axes.flat[:len(heads)]:      # after every panel: shared axes share their ticks
            _upright_chinese_columns(ax, tokens)
        fig.supylabel(words["reads"], fontsize=10)
        fig.supxlabel(words["looks_at"], fontsize=10)
        bar = fig.colorbar(image, ax=axes, orientation="horizontal", location="top",
                           shrink=0.6, aspect=30, pad=0.02)
        bar.set_label(term("attention_weight", lang), fontsize=10)
        bar.outline.set_visible(False)
    return fig


def role_table(result: HeadRoleStudy, lang: str) -> str:
    """The heads with a clear role as a Markdown table, sorted by role, then by strength.

    Columns: layer, head (both from 1), role, mean ± standard deviation of the score across
    the sentences (a share of attention weight; the normalised entropy for the broad head), the
    lowest score of any sentence, and in how many sentences the head plays its role. A role
    named after ``<s>`` is written ``&lt;s&gt;``, so that Markdown shows it rather than taking
    it for an HTML tag.
    """
    w = WORDS[lang]
    header = [w["layer"], term("head", lang), w["role"], w["mean"], w["lowest"], w["stable"]]
    lines = ["| " + " | ".join(header) + " |", "|---:|---:|---|---:|---:|---:|"]
    for r in sorted(result.clearest(), key=lambda r: (ROLES.index(r.role), -r.mean)):
        label = html.escape(role_label(r.role, lang, result.special_tokens), quote=False)
        lines.append(f"| {r.layer} | {r.head} | {label} | "
                     f"{r.mean:.2f} ± {r.std:.2f} | {r.min:.2f} | "
                     f"{w['of'].format(k=r.stable, n=r.sentences)} |")
    return "\n".join(lines)
