"""Figures and the table of the real model's heads: the role of each of all-MiniLM-L6-v2's 72
heads, measured over the study sentences of `mha.site.head_roles`, and a few of them at work.

Layers and heads are counted from 1 in everything drawn or printed here.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..head_roles import ROLES, STABLE_FRACTION, HeadRole, HeadRoleStudy
from ._draw import heatmap
from ._style import style
from ..terms import term

__all__ = ["ROLE_TERMS", "ROLE_COLORS", "EXAMPLE", "plot_roles", "example_heads",
           "plot_examples", "role_table"]

#: The term (in `mha.site.terms`) that names each role of `mha.site.head_roles.ROLES`.
ROLE_TERMS = {"previous": "previous_token_head", "next": "next_token_head",
              "self": "current_token_head", "cls": "cls_head", "sep": "sep_head",
              "punctuation": "punctuation_head", "broad": "broad_head"}

#: One colour per role (Okabe-Ito: distinct for colour-blind readers).
ROLE_COLORS = {"previous": "#0072B2", "next": "#56B4E9", "self": "#009E73", "cls": "#D55E00",
               "sep": "#E69F00", "punctuation": "#CC79A7", "broad": "#F0E442"}
_NONE = "#EEEEEE"

#: The sentence of `plot_examples`: short, the first of the study set.
EXAMPLE = "The detective found the key because it was hidden under the desk."

WORDS = {
    "zh": {"layer": "层", "head": "注意力头", "unstable": "平均达标，但达标的句子不到 {p:.0%}",
           "none": "没有明确的分工", "panel": "第 {l} 层 · 注意力头 {j}\n{role}",
           "reads": "正在读的词元（查询）", "looks_at": "被看的词元（键）",
           "role": "分工", "mean": "平均 ± 标准差", "lowest": "最低的一句",
           "stable": "达标的句子", "of": "{k} / {n}"},
    "en": {"layer": "layer", "head": "head",
           "unstable": "passes on average, in fewer than {p:.0%} of sentences",
           "none": "no clear role", "panel": "layer {l} · head {j}\n{role}",
           "reads": "token being read (query)", "looks_at": "token looked at (key)",
           "role": "role", "mean": "mean ± std", "lowest": "lowest sentence",
           "stable": "passes in", "of": "{k} of {n}"},
}


def _pale(color: str, amount: float = 0.55) -> tuple[float, float, float]:
    """``color`` mixed with ``amount`` of white."""
    rgb = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return tuple(rgb + (1 - rgb) * amount)


def plot_roles(result: HeadRoleStudy, lang: str) -> Figure:
    """Every head's role as a grid: heads down (1 to 12), layers across (1 to 6).

    A cell is coloured by the head's role and shows its mean score; a role that passes on
    average but not in `STABLE_FRACTION` of the sentences is pale and hatched; a head with no
    role is grey.
    """
    words = WORDS[lang]
    layers, h = result.role.shape
    strength = result.strength()
    with style():
        fig = Figure(figsize=(4.6, 6.6), layout="constrained")
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
                ax.text(l, j, f"{strength[l, j]:.2f}", ha="center", va="center", fontsize=10,
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
        handles = [Patch(facecolor=ROLE_COLORS[role], label=term(ROLE_TERMS[role], lang))
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


def plot_examples(tokens: list[str], attentions: np.ndarray, heads: list[HeadRole],
                  lang: str) -> Figure:
    """The attention weights of a few heads on one sentence, two panels a row.

    ``attentions`` is the sentence's ``(layers, h, n, n)`` from `mha.minilm`; ``heads`` are
    rows of `HeadRoleStudy.clearest` (layers and heads counted from 1).
    """
    words = WORDS[lang]
    cols = 2
    rows = -(-len(heads) // cols)
    with style():
        fig = Figure(figsize=(5.2, 2.9 * rows + 0.6), layout="constrained")
        axes = np.atleast_2d(fig.subplots(rows, cols, sharex=True, sharey=True))
        for i, (ax, head) in enumerate(zip(axes.flat, heads)):
            weights = attentions[head.layer - 1, head.head - 1]          # (n, n)
            image = heatmap(ax, weights, rows=tokens, cols=tokens, diverging=False, vmax=1.0,
                            title=words["panel"].format(l=head.layer, j=head.head,
                                                        role=term(ROLE_TERMS[head.role], lang)))
            ax.tick_params(labelsize=9, labelleft=i % cols == 0,
                           labelbottom=i // cols == rows - 1)
        for ax in axes.flat[len(heads):]:
            ax.set_visible(False)
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
    lowest score of any sentence, and in how many sentences the head plays its role.
    """
    w = WORDS[lang]
    header = [w["layer"], term("head", lang), w["role"], w["mean"], w["lowest"], w["stable"]]
    lines = ["| " + " | ".join(header) + " |", "|---:|---:|---|---:|---:|---:|"]
    for r in sorted(result.clearest(), key=lambda r: (ROLES.index(r.role), -r.mean)):
        lines.append(f"| {r.layer} | {r.head} | {term(ROLE_TERMS[r.role], lang)} | "
                     f"{r.mean:.2f} ± {r.std:.2f} | {r.min:.2f} | "
                     f"{w['of'].format(k=r.stable, n=r.sentences)} |")
    return "\n".join(lines)
