"""Figures and tables of the training chapter (侦探训练营), drawn from the kept training run.

Every function takes the parsed kept run (`mha.site.training.kept_run`) and a language, and
returns a Figure or a Markdown table; nothing here trains. Seeds are drawn as thin lines, their
mean as a thick one; spreads in the tables are the sample standard deviation over seeds
(ddof = 1) and the min-max range.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..training import roles
from ._style import COLORS, style
from .case import CAST
from ..terms import term

__all__ = ["plot_induction_curves", "plot_induction_maps", "plot_heads", "plot_scale_init",
           "plot_scale_curves", "head_scores_table", "heads_table", "scale_table"]

#: One colour per number of heads (Okabe-Ito: vermillion, blue, bluish green).
H_COLORS = {1: COLORS["raw"], 2: COLORS["scaled"], 4: "#009E73"}
#: With the scale 1/sqrt(d_k) (the paper's) and without it (scale = 1).
SCALE_COLORS = {True: COLORS["scaled"], False: COLORS["raw"]}
#: The arms of Measurement 3b (`mha.site.training.SCALE_ARMS`): the two above, and the control
#: (no scale, W_Q at lr / sqrt(d_k): the scaled model started hotter) in Okabe-Ito bluish green.
ARM_COLORS = {"scaled": COLORS["scaled"], "unscaled": COLORS["raw"],
              "unscaled_slow_W_Q": "#009E73"}

LABELS = {
    "zh": {
        "step": "训练步数",
        "loss": "{loss}（重复的后半段）",
        "accuracy": "重复后半段的预测准确率",
        "curves_title": "两层纯注意力模型学会复制：{seeds} 个种子",
        "seed": "单个种子",
        "mean": "平均",
        "chance": "瞎猜：1/{vocab}",
        "map_before": "第 {layer} 层 · 头 {head}：训练前",
        "map_after": "训练后：前一词元分 {prev:.2f}\n诱导分 {ind:.2f}",
        "named": "{role}",
        "maps_title": "序列：前缀 {prefix} 个词元，A 长 {length}，再重复 A（种子 {seed}）",
        "query": "查询位置",
        "key_pos": "键位置",
        "heads_accuracy": "每个读出的准确率",
        "half": "一个读出全对、另一个瞎猜：(1 + 1/{vocab}) / 2",
        "heads_title": "同样的 d_model = {d_model}、同样 {parameters} 个参数",
        "h_label": "h = {h}（d_k = {d_k}）",
        "final_title": "训练结束时，每个种子",
        "one": "每个读出的准确率",
        "both": "两个都对",
        "h_axis": "{h_term} h",
        "max_entropy": "完全平均：ln {n}",
        "entropy_title": "每行权重的{entropy}",
        "entropy_axis": "nats",
        "rows_below": "行的比例",
        "rows_below_title": "只放行不到 0.1% {gradient}的 softmax 行",
        "grad": "范数",
        "grad_title": "到达 $W^Q$ 的{gradient}，对所有查询加总",
        "query_ratio": "不缩放 / 缩放",
        "query_ratio_title": "逐个查询：$\\|dQ_i\\|$ 不缩放比缩放，所有查询的中位数",
        "equal": "一样大",
        "d_k": "$d_k$",
        "scaled": "除以 √d_k",
        "unscaled": "不缩放（scale = 1）",
        "unscaled_slow_W_Q": "不缩放，$W^Q$ 的学习率除以 √d_k\n（即缩放、起点热 √d_k 倍）",
        "init_title": "初始化时（q、k 每个分量方差为 1，n = {n}）",
        "scale_title": "同一任务，d_k = {d_k}：{seeds} 个种子",
        "scale_loss": "{loss}（对数刻度）",
    },
    "en": {
        "step": "training step",
        "loss": "{loss} (repeated half)",
        "accuracy": "accuracy on the repeated half",
        "curves_title": "A two-layer attention-only model learns to copy: {seeds} seeds",
        "seed": "one seed",
        "mean": "mean",
        "chance": "guessing: 1/{vocab}",
        "map_before": "layer {layer} · head {head}: before",
        "map_after": "after: previous-token {prev:.2f}\ninduction {ind:.2f}",
        "named": "{role}",
        "maps_title": "Prefix of {prefix} tokens, A of {length}, then A again (seed {seed})",
        "query": "query position",
        "key_pos": "key position",
        "heads_accuracy": "accuracy per readout",
        "half": "one readout right, the other guessing: (1 + 1/{vocab}) / 2",
        "heads_title": "The same d_model = {d_model}, the same {parameters} parameters",
        "h_label": "h = {h} (d_k = {d_k})",
        "final_title": "At the end of training, each seed",
        "one": "accuracy per readout",
        "both": "both right",
        "h_axis": "{h_term} h",
        "max_entropy": "perfectly even: ln {n}",
        "entropy_title": "{entropy} of a row of weights",
        "entropy_axis": "nats",
        "rows_below": "share of rows",
        "rows_below_title": "softmax rows that pass back less than 0.1% of a {gradient}",
        "grad": "norm",
        "grad_title": "the {gradient} reaching $W^Q$, summed over all queries",
        "query_ratio": "unscaled / scaled",
        "query_ratio_title": "query by query: $\\|dQ_i\\|$ unscaled over scaled, median",
        "equal": "equal",
        "d_k": "$d_k$",
        "scaled": "divided by √d_k",
        "unscaled": "not scaled (scale = 1)",
        "unscaled_slow_W_Q": "not scaled, $W^Q$'s learning rate / √d_k\n"
                             "(= scaled, started √d_k hotter)",
        "init_title": "At initialisation (unit-variance q and k, n = {n})",
        "scale_title": "The same task with d_k = {d_k}: {seeds} seeds",
        "scale_loss": "{loss} (log scale)",
    },
}


def _label(lang: str, key: str, **values) -> str:
    words = {"loss": term("loss", lang), "entropy": term("entropy", lang),
             "gradient": term("gradient", lang), "h_term": term("number_of_heads", lang)}
    text = LABELS[lang][key].format(**{**words, **values})
    return text[0].upper() + text[1:] if lang == "en" and key.endswith("title") else text


def _seed_lines(ax, steps, curves, color, label=None, lang="en"):
    """Each seed thin, the mean thick, in one colour."""
    curves = np.asarray(curves, dtype=float)                          # (seeds, steps)
    for row in curves:
        ax.plot(steps, row, color=color, linewidth=0.8, alpha=0.45)
    ax.plot(steps, curves.mean(axis=0), color=color, linewidth=2.4, label=label)


def plot_induction_curves(run: dict, lang: str) -> Figure:
    """Loss and accuracy on the repeated half against the step, every seed and their mean.

    Parameters
    ----------
    run : dict
        The kept run.
    lang : {"zh", "en"}
    """
    ind = run["induction"]
    steps = ind["steps"]
    color = COLORS["scaled"]
    with style():
        fig = Figure(figsize=(5.6, 6.6), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        _seed_lines(top, steps, [r["loss"] for r in ind["runs"]], color)
        _seed_lines(bottom, steps, [r["repeat_accuracy"] for r in ind["runs"]], color)
        top.plot([], [], color=color, linewidth=0.8, alpha=0.45, label=_label(lang, "seed"))
        top.plot([], [], color=color, linewidth=2.4, label=_label(lang, "mean"))
        top.set_ylabel(_label(lang, "loss"))
        top.set_title(_label(lang, "curves_title", seeds=len(ind["runs"])))
        top.legend(frameon=False, loc="upper right")
        vocab = ind["config"]["vocab"]
        bottom.axhline(1 / vocab, color=COLORS["neutral"], linewidth=1, linestyle=(0, (4, 3)))
        bottom.annotate(_label(lang, "chance", vocab=vocab), (steps[-1], 1 / vocab),
                        xytext=(0, 4), textcoords="offset points", ha="right", va="bottom",
                        color=COLORS["neutral"])
        bottom.set_ylim(0, 1.02)
        bottom.set_ylabel(_label(lang, "accuracy"))
        bottom.set_xlabel(_label(lang, "step"))
        bottom.set_xlim(steps[0], steps[-1])
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
    return fig


def _role(run: dict, layer: int, head: int, lang: str) -> str:
    """The head's role by its scores after training (`mha.site.training.roles`), or ""."""
    found = roles(run["scores_after"])
    return " / ".join(term(f"{key}_head", lang) for key in ("previous_token", "induction")
                      if [layer, head] in found[key])


def plot_induction_maps(run: dict, lang: str) -> Figure:
    """Every head's attention weights on one sequence, before and after training.

    Each head's title gives its previous-token and induction scores after training (measured on
    the whole evaluation batch); the heads with the highest of each are named. Lines mark where
    ``A`` starts and where its copy starts.
    """
    ind = run["induction"]
    ex = ind["example"]
    seed_run = next(r for r in ind["runs"] if r["seed"] == ex["seed"])
    before, after = np.asarray(ex["weights_before"]), np.asarray(ex["weights_after"])
    layers, h, n, _ = after.shape
    starts = (ex["prefix"], ex["prefix"] + ex["length"])
    with style():
        fig = Figure(figsize=(5.4, 2.55 * layers * h + 0.6), layout="constrained")
        axes = fig.subplots(layers * h, 2, squeeze=False)
        for layer in range(layers):
            for head in range(h):
                row = layer * h + head
                role = _role(seed_run, layer, head, lang)
                for col, weights in enumerate((before, after)):
                    ax = axes[row, col]
                    ax.imshow(weights[layer, head], cmap="Blues", vmin=0, vmax=1,
                              interpolation="nearest")
                    for s in starts:
                        for line in (ax.axvline, ax.axhline):
                            line(s - 0.5, color=COLORS["raw"], linewidth=0.9)
                    ax.set_xticks([0, n - 1])
                    ax.set_yticks([0, n - 1])
                    ax.tick_params(length=0, labelsize=8)
                    for side in ax.spines.values():
                        side.set_visible(False)
                    if col == 0:
                        ax.set_ylabel(_label(lang, "query"), fontsize=9)
                    if row == layers * h - 1:
                        ax.set_xlabel(_label(lang, "key_pos"), fontsize=9)
                scores = seed_run["scores_after"]
                axes[row, 0].set_title(_label(lang, "map_before", layer=layer + 1, head=head + 1),
                                       fontsize=9, loc="left")
                text = _label(lang, "map_after", prev=scores["previous_token"][layer][head],
                              ind=scores["induction"][layer][head])
                axes[row, 1].set_title(f"{text}\n{role}" if role else text, fontsize=9,
                                       loc="left", color=CAST[1].color if role else "black")
        fig.suptitle(_label(lang, "maps_title", prefix=ex["prefix"], length=ex["length"],
                            seed=ex["seed"]), fontsize=11)
    return fig


def plot_heads(run: dict, lang: str) -> Figure:
    """h = 1, 2, 4 at the same budget: accuracy against the step, and each seed's final numbers."""
    heads = run["heads"]
    steps = heads["steps"]
    settings = heads["settings"]
    with style():
        fig = Figure(figsize=(5.6, 7.0), layout="constrained")
        top, bottom = fig.subplots(2, 1, height_ratios=[1.2, 1])
        for s in settings:
            _seed_lines(top, steps, [r["accuracy"] for r in s["runs"]], H_COLORS[s["h"]],
                        _label(lang, "h_label", h=s["h"], d_k=s["d_k"]))
        vocab = heads["config"]["vocab"]
        half = (1 + 1 / vocab) / 2            # one readout right, the other guessing
        top.axhline(half, color=COLORS["neutral"], linewidth=1, linestyle=(0, (4, 3)))
        top.annotate(_label(lang, "half", vocab=vocab), (steps[-1], half), xytext=(0, -3),
                     textcoords="offset points", ha="right", va="top", color=COLORS["neutral"],
                     fontsize=9)
        top.set_ylim(0, 1.02)
        top.set_xlim(steps[0], steps[-1])
        top.set_xlabel(_label(lang, "step"))
        top.set_ylabel(_label(lang, "heads_accuracy"))
        top.set_title(_label(lang, "heads_title", d_model=heads["config"]["d_model"],
                             parameters=settings[0]["parameters"]))
        top.legend(frameon=False, loc="lower right")
        top.grid(True, alpha=0.3)
        for x, s in enumerate(settings):
            color = H_COLORS[s["h"]]
            for offset, key, marker in ((-0.12, "accuracy", "o"), (0.12, "both_accuracy", "^")):
                values = [r[key][-1] for r in s["runs"]]
                jitter = np.linspace(-0.05, 0.05, len(values))
                bottom.scatter(x + offset + jitter, values, color=color, marker=marker, s=30,
                               zorder=3, label=None)
                bottom.hlines(np.mean(values), x + offset - 0.1, x + offset + 0.1, color=color,
                              linewidth=2.4)
        bottom.scatter([], [], color=COLORS["neutral"], marker="o", label=_label(lang, "one"))
        bottom.scatter([], [], color=COLORS["neutral"], marker="^", label=_label(lang, "both"))
        bottom.set_xticks(range(len(settings)), [f"h = {s['h']}" for s in settings])
        bottom.set_xlabel(_label(lang, "h_axis"))
        bottom.set_ylim(0, 1.05)
        bottom.set_title(_label(lang, "final_title"))
        bottom.legend(frameon=False, loc="lower right")
        bottom.grid(True, axis="y", alpha=0.3)
    return fig


def plot_scale_init(run: dict, lang: str) -> Figure:
    """At initialisation, against d_k: row entropy, the share of softmax rows that pass back
    less than 0.1 % of a gradient (`mha.site.training.ROW_GAIN_FLOOR`), the norm of grad W_Q
    summed over the queries, and the median over the queries of |dQ_i| unscaled over scaled
    (each seed's median: their mean, and their range shaded)."""
    init = run["scale"]["init"]
    d_k = init["d_k"]
    with style():
        fig = Figure(figsize=(5.6, 11.0), layout="constrained")
        axes = fig.subplots(4, 1, sharex=True)
        for ax, key, ylabel, title in zip(axes[:3], ("entropy", "rows_below", "grad_W_Q"),
                                          ("entropy_axis", "rows_below", "grad"),
                                          ("entropy_title", "rows_below_title", "grad_title")):
            for scaled, kind in ((True, "scaled"), (False, "unscaled")):
                s = init[key][kind]
                ax.errorbar(d_k, s["mean"], yerr=s["std"], color=SCALE_COLORS[scaled],
                            marker="o" if scaled else "s", markersize=4, linewidth=2,
                            capsize=2, label=_label(lang, kind))
            ax.set_ylabel(_label(lang, ylabel))
            ax.set_title(_label(lang, title), fontsize=10, loc="left")
            ax.grid(True, alpha=0.3)
        ratio = init["query_ratio"]
        # the spread of a ratio: each seed's median, lowest to highest, around their mean
        axes[3].fill_between(d_k, ratio["min"], ratio["max"], color=COLORS["neutral"],
                             alpha=0.2, linewidth=0)
        axes[3].plot(d_k, ratio["mean"], color=COLORS["neutral"], marker="D", markersize=4,
                     linewidth=2)
        axes[3].axhline(1.0, color=COLORS["neutral"], linewidth=1, linestyle=(0, (4, 3)))
        axes[3].annotate(_label(lang, "equal"), (d_k[-1], 1.0), xytext=(0, 3),
                         textcoords="offset points", ha="right", va="bottom",
                         color=COLORS["neutral"])
        axes[3].set_yscale("log")
        axes[3].set_ylabel(_label(lang, "query_ratio"))
        axes[3].set_title(_label(lang, "query_ratio_title"), fontsize=10, loc="left")
        axes[3].grid(True, alpha=0.3)
        axes[0].axhline(init["max_entropy"], color=COLORS["neutral"], linewidth=1,
                        linestyle=(0, (4, 3)))
        axes[0].annotate(_label(lang, "max_entropy", n=init["n"]),
                         (d_k[-1], init["max_entropy"]), xytext=(0, 3),
                         textcoords="offset points", ha="right", va="bottom",
                         color=COLORS["neutral"])
        axes[0].set_ylim(0, init["max_entropy"] * 1.15)
        axes[0].legend(frameon=False, loc="lower left")
        fig.suptitle(_label(lang, "init_title", n=init["n"]), fontsize=12)
        axes[1].set_ylim(-0.02, 1.0)
        axes[2].set_yscale("log")
        axes[3].set_xscale("log", base=2)
        axes[3].set_xticks(d_k, [str(d) for d in d_k])
        axes[3].set_xlabel(_label(lang, "d_k"))
    return fig


def plot_scale_curves(run: dict, lang: str) -> Figure:
    """Training loss of the three arms (`mha.site.training.SCALE_ARMS`) on the same task,
    every seed and the mean."""
    tr = run["scale"]["training"]
    steps = tr["steps"]
    with style():
        fig = Figure(figsize=(5.6, 4.8), layout="constrained")
        ax = fig.subplots()
        for s in tr["settings"]:
            _seed_lines(ax, steps, [r["loss"] for r in s["runs"]], ARM_COLORS[s["arm"]],
                        _label(lang, s["arm"]))
        ax.set_yscale("log")
        ax.set_xlim(steps[0], steps[-1])
        ax.set_xlabel(_label(lang, "step"))
        ax.set_ylabel(_label(lang, "scale_loss"))
        ax.set_title(_label(lang, "scale_title", d_k=tr["config"]["d_k"],
                            seeds=len(tr["settings"][0]["runs"])))
        ax.legend(frameon=False, loc="lower left", fontsize=9)
        ax.grid(True, alpha=0.3)
    return fig


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

TABLE_WORDS = {
    "zh": {
        "scores": ("层", "头", "前一词元分（训练前 → 后）", "诱导分（训练前 → 后）", "按分数命名（≥ 0.5）"),
        "scores_note": "种子 {seed}；分数是 {eval_batch} 条评估序列上的平均注意力权重。",
        "heads": ("h", "d_k", "参数个数", "每个读出的准确率", "两个都对", "{loss}"),
        "scale": ("", "训练结束时的{loss}", "准确率"),
        "init_entropy": "初始化时每行的{entropy}，d_k = {d}",
        "scaled": "除以 √d_k", "unscaled": "不缩放",
        "unscaled_slow_W_Q": "不缩放，W^Q 的学习率 ÷ √d_k",
        "note": "均值 ± 标准差（{seeds} 个种子），括号里是最小值–最大值。",
        "scale_note": "熵的几列取自初始化时的测量（一个头，d_model = d_k），按组填入，对照组的起点和不缩放时相同；三组训练本身都用 d_k = 64。",
    },
    "en": {
        "scores": ("layer", "head", "previous-token score (before → after)",
                   "induction score (before → after)", "named by score (≥ 0.5)"),
        "scores_note": "Seed {seed}; each score is a mean attention weight over {eval_batch} "
                       "evaluation sequences.",
        "heads": ("h", "d_k", "parameters", "accuracy per readout", "both right", "{loss}"),
        "scale": ("", "{loss} at the end", "accuracy"),
        "init_entropy": "{entropy} of a row at init, d_k = {d}",
        "scaled": "divided by √d_k", "unscaled": "not scaled",
        "unscaled_slow_W_Q": "not scaled, W^Q's learning rate ÷ √d_k",
        "note": "Mean ± standard deviation over {seeds} seeds; min–max in brackets.",
        "scale_note": ("The entropy columns come from the measurement at initialisation (one head, "
                       "d_model = d_k), filled in by arm, the control starting as the unscaled "
                       "model; the three arms were all trained at d_k = 64."),
    },
}


def _words(lang: str) -> dict:
    return {"loss": term("loss", lang), "entropy": term("entropy", lang)}


def _stat(s: dict, digits: int = 3, sci: bool = False) -> str:
    f = (lambda v: f"{v:.2g}") if sci else (lambda v: f"{v:.{digits}f}")
    return f"{f(s['mean'])} ± {f(s['std'])} ({f(s['min'])}–{f(s['max'])})"


def head_scores_table(run: dict, lang: str) -> str:
    """Per layer and head of the example's seed: both scores before and after training."""
    ind = run["induction"]
    seed = ind["example"]["seed"]
    r = next(r for r in ind["runs"] if r["seed"] == seed)
    w = TABLE_WORDS[lang]
    rows = ["| " + " | ".join(w["scores"]) + " |", "|---|---|---|---|---|"]
    for layer, prev_after in enumerate(r["scores_after"]["previous_token"]):
        for head in range(len(prev_after)):
            b, a = r["scores_before"], r["scores_after"]
            rows.append(f"| {layer + 1} | {head + 1} | "
                        f"{b['previous_token'][layer][head]:.2f} → "
                        f"{a['previous_token'][layer][head]:.2f} | "
                        f"{b['induction'][layer][head]:.2f} → {a['induction'][layer][head]:.2f} | "
                        f"{_role(r, layer, head, lang)} |")
    note = w["scores_note"].format(seed=seed, eval_batch=ind["config"]["eval_batch"])
    return "\n".join(rows) + "\n\n" + note


def heads_table(run: dict, lang: str) -> str:
    """Per h: accuracy per readout, both right, and the loss at the end, over seeds."""
    heads = run["heads"]
    w = TABLE_WORDS[lang]
    header = [c.format(**_words(lang)) for c in w["heads"]]
    rows = ["| " + " | ".join(header) + " |", "|---|---|---|---|---|---|"]
    for s in heads["settings"]:
        f = s["final"]
        rows.append(f"| {s['h']} | {s['d_k']} | {s['parameters']} | {_stat(f['accuracy'])} | "
                    f"{_stat(f['both_accuracy'])} | {_stat(f['loss'], sci=True)} |")
    note = w["note"].format(seeds=len(heads["settings"][0]["runs"]))
    return "\n".join(rows) + "\n\n" + note


#: The d_k at which the scale table shows the initial entropy.
TABLE_D_K = (16, 64, 256, 1024)


def scale_table(run: dict, lang: str) -> str:
    """Per arm of Measurement 3b: the final loss and accuracy of the training runs, and the
    initial row entropy at a few d_k (the control starts as the unscaled model does)."""
    tr, init = run["scale"]["training"], run["scale"]["init"]
    w = TABLE_WORDS[lang]
    dks = [d for d in TABLE_D_K if d in init["d_k"]]
    header = [c.format(**_words(lang)) for c in w["scale"]]
    header += [w["init_entropy"].format(**_words(lang), d=d) for d in dks]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in tr["settings"]:
        e = init["entropy"]["scaled" if s["scaled"] else "unscaled"]
        cells = [f"{e['mean'][init['d_k'].index(d)]:.2f}" for d in dks]
        rows.append(f"| {w[s['arm']]} | {_stat(s['final']['loss'], sci=True)} | "
                    f"{_stat(s['final']['accuracy'])} | " + " | ".join(cells) + " |")
    note = w["note"].format(seeds=len(tr["settings"][0]["runs"]))
    note += ("" if lang == "zh" else " ") + w["scale_note"]
    return "\n".join(rows) + "\n\n" + note
