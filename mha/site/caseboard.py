"""The case board's data: what the page's scripts draw, computed by `mha` at build time (the
real heads' files: kept, see below).

The case board (案情板, ``docs/<lang>/caseboard.md``) has three parts, each drawn in the browser
by the site's own scripts from static files that `files` makes (``hooks/draw_figures.py``
writes them into ``docs/assets/caseboard/``):

1. **Real heads** (``real-<lang>.json``, ``real/<model>-<id>.json``): every head of
   multilingual-e5-small (4-bit, `mha.models.e5`) and all-MiniLM-L6-v2 (`mha.models.minilm`)
   on `SENTENCES`, six Chinese and six English. Each sentence's weights are one file, loaded
   on demand, quantised to one byte each (`quantise`). The build copies these files from the
   kept run (``mha/site/data/caseboard/``, `mha.site.model_runs`), so it needs no model, and
   adds each head's pattern on the sentence (`real_roles`, the board's labels).
2. **The lab** and 3. **the forward pass, live** (``lab-<lang>.json``): the case's eight tokens
   with their embeddings and the weights of the walkthrough's two layers
   (`mha.site.experiments.walkthrough`), in full float64. The browser recomputes every stage
   from them; `lab_trace` is what it must get, computed by `mha.MultiHeadAttention`.

The lab's controls (`lab_trace`'s arguments): the number of heads ``h`` (1, 2 or 4), the
temperature factor τ (argument ``temperature``; zh 温度倍数 τ): the real temperature, the divisor
``T`` of ``softmax(s / T)``, is ``τ sqrt(d_k)``, so the scale is ``1 / (τ sqrt(d_k))`` and
``τ = 1`` is the usual scaling (the scores chapter defines ``T``); and a mask: none, causal,
a sliding window of ``width`` earlier keys, or padding after the first ``length`` tokens.

Dimension names: ``n`` tokens (8 in the lab), ``d_model`` (16 in the lab), ``h`` heads,
``d_k = d_model / h``, ``layers``.
"""

from __future__ import annotations

import base64
import functools
import json
import math
from dataclasses import dataclass

import numpy as np

from .. import MultiHeadAttention, causal_mask, padding_mask, sliding_window_mask
from .experiments import walkthrough, walkthrough_layers
from .plots.case import CASE_ORDER, CAST, case_tokens
from .terms import LANGUAGES, term

__all__ = ["Sentence", "SENTENCES", "MODELS", "BUDGET", "LAB_HEADS", "LAB_D_MODEL", "LAB_LAYERS",
           "LAB_SEED", "TEMPERATURES", "MASKS", "quantise", "dequantise", "real_heads",
           "lab_scale", "lab_layers", "lab_mask", "lab_trace", "lab_scales", "lab_data",
           "real_index",
           "lab_files", "real_files", "fresh_real_files", "files", "WORDS",
           "REAL_WORDS", "real_roles"]


@dataclass(frozen=True)
class Sentence:
    """One sentence of the real-heads part: an id (its file's name), its language and text,
    and the models it is run through (keys of `MODELS`)."""

    id: str
    lang: str
    text: str
    models: tuple[str, ...]


#: The models of the real-heads part: key -> (name shown, layers, heads).
MODELS = {
    "e5": ("multilingual-e5-small (4-bit)", 12, 12),
    "minilm": ("all-MiniLM-L6-v2", 6, 12),
}

#: The curated sentences: the case first in each language, then sentences of the head-role
#: study sets (`mha.site.head_roles`) and one with a pronoun. Chinese goes through
#: multilingual-e5-small; English through both models, so that the two can be compared on the
#: same sentence. Short ones: a sentence's files (both models) stay within `BUDGET` gzipped.
SENTENCES: tuple[Sentence, ...] = (
    Sentence("zh-case", "zh", "侦探在桌子下面找到了钥匙。", ("e5",)),
    Sentence("zh-window", "zh", "昨天晚上是谁把窗户打开的？", ("e5",)),
    Sentence("zh-butler", "zh", "管家说他整晚都待在厨房里。", ("e5",)),
    Sentence("zh-letter", "zh", "她把那封信读了两遍，然后扔进了壁炉。", ("e5",)),
    Sentence("zh-knife", "zh", "“我从来没有碰过那把刀，”园丁低声说。", ("e5",)),
    Sentence("zh-rain", "zh", "雨水冲掉了大门附近的大部分脚印。", ("e5",)),
    Sentence("en-case", "en", "The detective found the key under the desk.", ("e5", "minilm")),
    Sentence("en-because", "en", "She hid the key because it was small.", ("e5", "minilm")),
    Sentence("en-window", "en", "Who left the window open last night?", ("e5", "minilm")),
    Sentence("en-butler", "en", "The butler did it, of course.", ("e5", "minilm")),
    Sentence("en-safe", "en", "The safe was open and completely empty.", ("e5", "minilm")),
    Sentence("en-diary", "en", "Someone had torn the last page out of the diary.",
             ("e5", "minilm")),
)

#: The most a sentence's files may weigh together, gzipped (bytes): the tests check it.
BUDGET = 40 * 1024

#: The lab: the walkthrough's case (`mha.site.experiments.walkthrough` with its defaults).
LAB_D_MODEL, LAB_LAYERS, LAB_SEED = 16, 2, 0
#: The numbers of heads the lab offers (each divides `LAB_D_MODEL`).
LAB_HEADS = (1, 2, 4)
#: The temperature factors τ the lab's slider offers, from sharp to flat: 2^(k/2) for
#: k = -6 .. 6 (the real temperature is τ sqrt(d_k); τ = 1 is the usual scaling).
TEMPERATURES = tuple(2.0 ** (k / 2) for k in range(-6, 7))
#: The masks the lab offers, with the range of their parameter (None: no parameter).
MASKS = {"none": None, "causal": None, "window": (0, 7), "padding": (1, 8)}

#: Reader-facing words of the board's scripts, besides the terms of `mha.site.terms`. (What a
#: board says when its data does not arrive cannot come with the data: each page's board holds
#: it, in its ``data-load-failed`` attribute.)
WORDS = {
    "zh": {
        "sentence": "句子", "sentences_zh": "中文句子", "sentences_en": "英文句子", "model": "模型", "layer": "层", "all_heads": "这一层的全部注意力头",
        "one_head": "单个注意力头", "view": "视图",
        "token_hint": "把指针移到词元上、轻点或用 Tab 键选中它，看它在看谁。",
        "looks_at": "{token} 在看：", "loading": "正在加载……",
        "cell_hint": "把指针移到格子上、轻点它，或用 Tab 和方向键选中它，就能读出它的数值。",
        "thumbnail": "第 {layer} 层 · 注意力头 {head}",
        "temperature": "温度倍数 τ", "scale": "缩放 = 1 / (τ·√d_k) = {value}",
        "mask_none": "不加", "mask_causal": "因果", "mask_window": "滑动窗口",
        "mask_padding": "填充", "width": "窗口宽度", "length": "真实长度",
        "padding_token": "（填充）",
        "output": "输出", "layer_n": "第 {layer} 层",
        "stage": "第 {index} / {count} 步", "previous": "上一步", "next": "下一步",
        "play": "播放", "pause": "暂停",
        "stages": ["输入 X", "查询 Q、键 K、值 V", "注意力分数", "注意力权重", "各头输出",
                   "拼接", "输出 = 拼接 × W_O", "第 2 层"],
        "hidden": "被掩码遮住",
    },
    "en": {
        "sentence": "Sentence", "sentences_zh": "Chinese sentences",
        "sentences_en": "English sentences", "model": "Model", "layer": "Layer", "all_heads":
        "All heads of this layer", "one_head": "One head", "view": "View",
        "token_hint": "Point at a token, tap it or reach it with Tab to see where it looks.",
        "looks_at": "{token} looks at:", "loading": "Loading…",
        "cell_hint": "Point at a cell, tap it, or reach it with Tab and the arrow keys to read "
        "its value.",
        "thumbnail": "Layer {layer} · head {head}",
        "temperature": "Temperature factor τ", "scale": "scale = 1 / (τ·√d_k) = {value}",
        "mask_none": "none", "mask_causal": "causal", "mask_window": "sliding window",
        "mask_padding": "padding", "width": "window width", "length": "true length",
        "padding_token": "(padding)",
        "output": "Output", "layer_n": "Layer {layer}",
        "stage": "Step {index} of {count}", "previous": "Previous", "next": "Next",
        "play": "Play", "pause": "Pause",
        "stages": ["Input X", "Queries Q, keys K, values V", "Attention scores",
                   "Attention weights", "Each head's output", "Concatenation",
                   "Output = concatenation × W_O", "Layer 2"],
        "hidden": "hidden by the mask",
    },
}

#: Words of the real-heads part added for issue #29 (caseboard-real.js), by the same rules as
#: `WORDS`; `_words` merges them in.
REAL_WORDS: dict[str, dict] = {
    "zh": {
        "all_layers": "全部层", "overlay": "叠加注意力头", "show_all": "显示全部",
        "real_hint": "把指针移到左边的词元（查询）上、轻点它，或用 Tab 键和方向键选中它，"
        "看它在看谁；右边的词元（键）则告诉你谁在看它。再点一次、按“显示全部”或 Esc 键，"
        "就回到全部连线。",
        "overlay_hint": "最多同时叠加 {count} 个注意力头，每个一种颜色。",
        "read_by": "谁在看 {token}：", "word_start": "词首",
        "legend": "权重", "legend_note": "颜色越浓，权重越大。浓度取权重的平方根，"
        "所以 0.25 已经画到一半浓。",
        "head_name": "L{layer}-H{head}", "head_role": "{name}：{role}",
        "table": "用表格显示",
        "table_caption": "{name} 的注意力权重：每行是一个查询，每列是一个键",
        "grid": "每一层的每个注意力头",
        "clamped": "{model} 只有 {layers} 层，现在显示第 {layer} 层。",
        "now_one": "单个注意力头 {name}", "now_all": "第 {layer} 层的全部注意力头",
        "now_all_layers": "全部层，共 {count} 个注意力头",
        "most_read": "平均被看得最多的键是 {token}（{value}）",
        "top_key": "{token} 看得最多的是 {key}（{value}）",
        "top_query": "看 {token} 最多的是 {query}（{value}）",
        "overlaid": "叠加了 {names}", "not_overlaid": "不再叠加",
        "roles": {
            "previous": ["前一个词元", "前一词"], "next": ["后一个词元", "后一词"],
            "self": ["自己", "自身"], "cls": ["{token}", "{token}"],
            "sep": ["{token}", "{token}"],
            "punctuation": ["标点", "标点"], "broad": ["分散", "分散"],
            "none": ["无单一模式", "混合"],
        },
        # Issue #30: the reader's own sentence (addOwn) and the weights / contributions toggle.
        "own_group": "你的句子", "own_sentence": "你的句子",
        "own_switched": "你的句子只交给 {model} 读过，所以换到了这个模型。",
        "quantity": "数值", "quantity_weights": "权重", "quantity_contrib": "实际贡献",
        "quantity_help": "权重只说明注意力头把多少注意力分给了每个键；实际贡献还要乘上这个键的"
        "值向量经 W_O 投影后的长度（Kobayashi 等，2020），再让每行加起来为 1。权重大的键，"
        "实际贡献不一定大。",
        "quantity_link": "注意力图说明不了什么", "quantity_href": "real-heads/#caveats",
        "quantity_showing_weights": "现在显示的是注意力权重",
        "quantity_showing_contrib": "现在显示的是实际贡献",
        "quantity_names": {"weights": "注意力权重", "contrib": "实际贡献"},
        "legend_contrib": "实际贡献", "legend_note_contrib": "颜色越浓，贡献越大。浓度取贡献的"
        "平方根，所以 0.25 已经画到一半浓。每行的贡献加起来为 1。",
        "table_caption_contrib": "{name} 的实际贡献：每行是一个查询，每列是一个键，每行加起来为 1",
        "table_caption_top": "{name} 的{quantity}：句子太长，每行只列出一个查询最大的 {count} 个键",
        "table_top": "第 {rank} 位",
        "long_hint": "这句话很长，词元列表在框里上下滚动。没有选中词元时，只画出数值不小于 "
        "{value} 的连线：更淡的线太多，只会糊成一片灰。选中一个词元，它的连线就全部画出来。",
    },
    "en": {
        "all_layers": "All layers", "overlay": "Overlay heads", "show_all": "Show all",
        "real_hint": "Point at a token on the left (a query), tap it, or reach it with Tab and "
        "the arrow keys to see where it looks; a token on the right (a key) shows who reads it. "
        "Tap it again, press Show all or Esc to see every line again.",
        "overlay_hint": "Up to {count} heads at once, each in its own colour.",
        "read_by": "Who reads {token}:", "word_start": "word start",
        "legend": "Weight", "legend_note": "The stronger the colour, the larger the weight. "
        "Strength is the square root of the weight, so 0.25 is already drawn at half strength.",
        "head_name": "L{layer}-H{head}", "head_role": "{name}: {role}",
        "table": "Show as a table",
        "table_caption": "{name}'s attention weights: one row per query, one column per key",
        "grid": "Every head of every layer",
        "clamped": "{model} has {layers} layers: showing layer {layer}.",
        "now_one": "One head, {name}", "now_all": "All heads of layer {layer}",
        "now_all_layers": "All layers, {count} heads",
        "most_read": "the key read most on average is {token} ({value})",
        "top_key": "{token} looks most at {key} ({value})",
        "top_query": "{token} is read most by {query} ({value})",
        "overlaid": "overlaid: {names}", "not_overlaid": "no heads overlaid",
        "roles": {
            "previous": ["previous token", "prev"], "next": ["next token", "next"],
            "self": ["itself", "self"], "cls": ["{token}", "{token}"],
            "sep": ["{token}", "{token}"], "punctuation": ["punctuation", "punct"],
            "broad": ["spread", "spread"], "none": ["mixed", "mixed"],
        },
        # Issue #30: the reader's own sentence (addOwn) and the weights / contributions toggle.
        "own_group": "Your sentence", "own_sentence": "Your sentence",
        "own_switched": "Your sentence was read by {model} only: switched to it.",
        "quantity": "Show", "quantity_weights": "Weights", "quantity_contrib": "Contribution",
        "quantity_help": "A weight says how much attention a head gives each key. A "
        "contribution also multiplies it by the length of that key's value vector after W_O "
        "(Kobayashi et al. 2020), each row again summing to 1: a key can get a large weight and "
        "still contribute little.",
        "quantity_link": "What attention maps do not tell you",
        "quantity_href": "real-heads/#caveats",
        "quantity_showing_weights": "Showing attention weights",
        "quantity_showing_contrib": "Showing contributions",
        "quantity_names": {"weights": "attention weights", "contrib": "contributions"},
        "legend_contrib": "Contribution", "legend_note_contrib": "The stronger the colour, the "
        "larger the contribution. Strength is the square root of the contribution, so 0.25 is "
        "already drawn at half strength. Each row's contributions sum to 1.",
        "table_caption_contrib": "{name}'s contributions: one row per query, one column per key, "
        "each row summing to 1",
        "table_caption_top": "{name}'s {quantity}: the sentence is long, so each row lists one "
        "query's {count} strongest keys",
        "table_top": "Rank {rank}",
        "long_hint": "A long sentence: the token lists scroll in their box. With no token "
        "chosen, only lines of {value} and more are drawn, as the many fainter ones would only "
        "blur into grey; choose a token to see all of its lines.",
    },
}

#: Words of the lab and the forward pass added for issue #29 (caseboard-lab.js).
LAB_WORDS: dict[str, dict] = {
    "zh": {
        "lab_look_back": "往前看的词元数", "lab_pad_token": "（填充）",
        "lab_scale_dk": "d_k = {dk} · 缩放 = 1 / (τ·√d_k) = {value}",
        "lab_compare": "和默认设置比",
        "lab_compare_caption": "输出减去默认设置（τ = 1，不加掩码）下的输出",
        "lab_stage_step": "第 {index} / {count} 步：{name}",
        "lab_repeated": "“{token}”出现了 {count} 次，它的几行在每一步都一模一样：X 里没有位置信息，"
        "同一个词元就得到同一行。",
        "lab_legend": "颜色怎么读", "lab_legend_weight": "权重",
        "lab_legend_weight_note": "颜色的浓度是权重的平方根，所以 0.25 已经画到一半浓。",
        "lab_legend_signed": "数值（X、Q、K、V、输出）",
        "lab_legend_scores": "注意力分数",
        "lab_legend_difference": "和默认设置的差",
        "lab_legend_sign": "紫色为正，橄榄绿为负。",
        "lab_legend_clip": "每把色标在所有设置下都一样，超出两端的数值按端点的颜色画。",
        "lab_legend_pad": "（填充）：照常计算，随后丢弃",
        "lab_said_summary": "每行最大的权重平均是 {mean}（平均分配时是 {even}）。",
        "lab_said_hidden": "{count} 个格子被掩码遮住。",
        "lab_said_row": "{head}：{row} 看得最多的是 {key}（{value}）。",
    },
    "en": {
        "lab_look_back": "tokens looked back", "lab_pad_token": "[PAD]",
        "lab_scale_dk": "d_k = {dk} · scale = 1 / (τ·√d_k) = {value}",
        "lab_compare": "Compare with the default",
        "lab_compare_caption": "Output minus the output at the default (τ = 1, no mask)",
        "lab_stage_step": "Step {index} of {count}: {name}",
        "lab_repeated": "“{token}” appears {count} times, and its rows are the same at every "
        "stage: X carries no position, so the same token always gets the same row.",
        "lab_legend": "Reading the colours", "lab_legend_weight": "Weights",
        "lab_legend_weight_note": "Colour strength is the square root of the weight, so 0.25 "
        "is already drawn at half strength.",
        "lab_legend_signed": "Values (X, Q, K, V, outputs)",
        "lab_legend_scores": "Attention scores",
        "lab_legend_difference": "Difference from the default",
        "lab_legend_sign": "Purple is positive, olive negative.",
        "lab_legend_clip": "Each scale stays the same whatever the setting; values beyond "
        "its ends are drawn as its ends.",
        "lab_legend_pad": "[PAD]: computed, then ignored",
        "lab_said_summary": "The largest weight of a row is {mean} on average (an even spread "
        "gives {even}).",
        "lab_said_hidden": "{count} cells are hidden by the mask.",
        "lab_said_row": "{head}: {row} looks most at {key} ({value}).",
    },
}

#: What each of the forward pass's eight stages computes (caseboard-lab.js shows it under the
#: stage's title): per language, one entry per stage of ``WORDS[lang]["stages"]``.
#: Each note is {"text", "href", "link"}: ``text`` says what the stage computes, its formula
#: and shapes and what changed since the stage before, with the placeholders {n} (tokens),
#: {d} (d_model), {h} (heads) and {dk} (d_model / h) that the script fills in; ``href`` is the
#: chapter that teaches it, relative to the language's root (page and anchor exist in both
#: languages), ``link`` the link's words. Plain Unicode, no TeX: the script shows it as text.
STAGE_NOTES: dict[str, list] = {
    "zh": [
        {"text": "卷宗进入这一层时的样子：X 是 {n}×{d} 的矩阵，每个词元一行，是它的 {d} 个嵌入数。"
                 "这里没有加位置信息，哪个词元排在第几，X 里看不出来；后面每一站都从这几行算起。",
         "href": "walkthrough/#the-setup", "link": "实验设定"},
        {"text": "三个 {d}×{d} 的矩阵分别去乘 X：Q = X·W_Q，K = X·W_K，V = X·W_V，"
                 "各是 {n}×{d}。再按列切开，每 {dk} 列一块，一个头一块（h = {h}），"
                 "每个头各得一份 {n}×{dk} 的 Q_j、K_j、V_j。和上一站比，每个词元从一行变成了三份："
                 "拿去提问的查询、供人比对的键、等着被取走的值。",
         "href": "projections/#three-projections", "link": "一份输入，三次投影"},
        {"text": "每个头拿每个查询和每个键做点积：S_j = Q_j·K_jᵀ / (τ·√{dk})，"
                 "每个头一张 {n}×{n} 的分数图，第 i 行是正在读的词元，第 j 列是被看的词元。"
                 "分数可正可负，加起来也不等于什么；被掩码遮住的格子记作 −∞。",
         "href": "scores/#why-scale", "link": "为什么要除以 √d_k"},
        {"text": "softmax 把每一行分数变成权重：A_j = softmax(S_j)，每个头仍是 {n}×{n}，"
                 "每个数都不小于 0，每行加起来正好是 1，被遮住的格子正好是 0。"
                 "大小顺序不变：一行里分数最高的键，权重也最高。",
         "href": "scores/#softmax", "link": "softmax：把分数变成权重"},
        {"text": "每个头用自己的权重给值取加权平均：H_j = A_j·V_j，{n}×{dk}，"
                 "第 i 行就是这个头对第 i 个词元的报告。各行开始变得相像，"
                 "因为它们都是同样 {n} 行值的平均。",
         "href": "multihead/#split-attend-concat", "link": "拆分、各自计算、拼接"},
        {"text": "把 {h} 个头的报告并排摆好：拼接 = [H_1 … H_h]，又回到 {n}×{d}"
                 "（{h}×{dk} = {d} 列）。这一步什么也没有混合：每 {dk} 列仍只属于一个头，"
                 "数值和上一站一模一样，颜色也一样。",
         "href": "multihead/#split-attend-concat", "link": "拆分、各自计算、拼接"},
        {"text": "输出 = 拼接·W_O，W_O 是 {d}×{d}：结果是 {n}×{d}，和 X 同形，"
                 "而每一列都用上了所有的头。这等于把每个头的贡献 H_j·W_O,j"
                 "（W_O 里属于第 j 个头的 {dk} 行）加起来。",
         "href": "multihead/#concat-equals-sum", "link": "拼接再投影，就是把报告相加"},
        {"text": "第 2 层用自己的一组权重把上面几步再走一遍，读的不是 X，而是第 1 层的输出；"
                 "这里是它每个头的权重（{n}×{n}）和它的输出（{n}×{d}）。输出的各行几乎一样："
                 "每一层都在对各行取平均，而这块板上只有注意力，没有残差连接把每个词元自己那一行"
                 "带下去，也没有层归一化和前馈网络。",
         "href": "walkthrough/#step-by-step", "link": "逐层对比"},
    ],
    "en": [
        {"text": "The case file as the layer receives it: X is {n}×{d}, one row per token, its "
                 "{d} embedding numbers. Nothing in X says where a token stands; every stage "
                 "after this one is computed from these rows.",
         "href": "walkthrough/#the-setup", "link": "What goes in"},
        {"text": "Three {d}×{d} matrices each multiply X: Q = X·W_Q, K = X·W_K, V = X·W_V, each "
                 "{n}×{d}. Their columns are cut into blocks of {dk}, one per head (h = {h}), "
                 "so every head has its own {n}×{dk} Q_j, K_j and V_j. New since X: each token "
                 "now has a question to ask, a label to be matched and a content to hand over.",
         "href": "projections/#three-projections", "link": "One input, three projections"},
        {"text": "Each head holds every query against every key: S_j = Q_j·K_jᵀ / (τ·√{dk}), "
                 "one {n}×{n} map per head, the token reading in row i, the token read in "
                 "column j. Scores can have either sign and add up to nothing in particular; "
                 "a cell hidden by the mask becomes −∞.",
         "href": "scores/#why-scale", "link": "Why the scores are scaled"},
        {"text": "Softmax turns each row of scores into weights: A_j = softmax(S_j), still "
                 "{n}×{n} per head, none negative, each row summing to exactly 1, and a hidden "
                 "cell exactly 0. The order survives: a row's highest score is its largest "
                 "weight.",
         "href": "scores/#softmax", "link": "Softmax: from scores to weights"},
        {"text": "Each head averages the values with its weights: H_j = A_j·V_j, {n}×{dk}; row i "
                 "is that head's report on token i. The rows start to look alike, because every "
                 "one is an average of the same {n} value rows.",
         "href": "multihead/#split-attend-concat", "link": "Split, attend, concatenate"},
        {"text": "The {h} reports are laid side by side: concatenation = [H_1 … H_h], {n}×{d} "
                 "again ({h}×{dk} = {d} columns). Nothing is mixed yet: each block of {dk} "
                 "columns is one head's alone, with the same numbers, and colours, as the stage "
                 "before.",
         "href": "multihead/#split-attend-concat", "link": "Split, attend, concatenate"},
        {"text": "Output = concatenation·W_O, with W_O {d}×{d}: {n}×{d}, the shape of X, and "
                 "every column now draws on all the heads. It is the sum of each head's "
                 "contribution H_j·W_O,j, where W_O,j is that head's {dk} rows of W_O.",
         "href": "multihead/#concat-equals-sum", "link": "Concatenating and projecting"},
        {"text": "Layer 2 repeats all of the above with weights of its own, reading layer 1's "
                 "output instead of X: here are its weights ({n}×{n} per head) and its output "
                 "({n}×{d}). The output's rows are nearly all alike: every layer averages rows, "
                 "and this board has attention alone, with no residual connection to carry each "
                 "token's own row forward, no LayerNorm and no feed-forward network.",
         "href": "walkthrough/#step-by-step", "link": "Layer by layer"},
    ],
}

#: The glossary terms the scripts show (`mha.site.terms`), by the key the scripts use.
_TERMS = ("query", "key", "value", "head", "number_of_heads", "mask", "concatenation")


# --- Real heads --------------------------------------------------------------------------------

def quantise(weights: np.ndarray) -> np.ndarray:
    """Attention weights in [0, 1] as bytes: ``round(255 w)``, at most 1/510 from ``w``.

    Parameters
    ----------
    weights : ndarray of float, any shape
        Values in [0, 1] (attention probabilities).

    Returns
    -------
    ndarray of uint8, the same shape

    Raises
    ------
    ValueError
        If a value is NaN or outside [0, 1] (beyond rounding: by more than 1e-6).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if not np.isfinite(weights).all() or weights.min(initial=0) < -1e-6 \
            or weights.max(initial=0) > 1 + 1e-6:
        raise ValueError("quantise needs attention weights in [0, 1], got values from "
                         f"{np.nanmin(weights)} to {np.nanmax(weights)} (or NaN)")
    return np.rint(np.clip(weights, 0.0, 1.0) * 255).astype(np.uint8)


def dequantise(data: np.ndarray) -> np.ndarray:
    """The inverse of `quantise` (up to its rounding): ``data / 255`` as float64."""
    return np.asarray(data, dtype=np.float64) / 255


@functools.lru_cache(maxsize=None)
def _model(key: str):
    from ..models import load_e5, load_minilm

    return {"e5": load_e5, "minilm": load_minilm}[key]()


def real_heads(sentence: Sentence, model: str) -> dict:
    """One sentence through one model, as the page loads it (``real/<model>-<id>.json``).

    Returns
    -------
    dict
        ``model``, ``sentence`` (its id), ``text``, ``tokens`` (the model's own tokens, special
        tokens included), ``layers``, ``heads``, ``n`` and ``weights``: every head's attention
        weights, shape ``(layers, heads, n, n)`` in C order, `quantise`d and base64-encoded.
    """
    if model not in sentence.models:
        raise ValueError(f"sentence {sentence.id!r} is not run through {model!r} "
                         f"(its models: {sentence.models})")
    out = _model(model).forward(sentence.text)
    layers, heads, n, _ = out.attentions.shape  # (layers, h, n, n)
    return {"model": model, "sentence": sentence.id, "text": sentence.text,
            "tokens": list(out.tokens), "layers": layers, "heads": heads, "n": n,
            "weights": base64.b64encode(quantise(out.attentions).tobytes()).decode("ascii")}


def real_roles(tokens: list[str], weights: np.ndarray) -> list[list[str | None]]:
    """Each head's pattern on one sentence, the label the board writes under its map.

    The rule is `mha.site.head_roles`' (`role_scores` and `THRESHOLDS`), on this one sentence:
    of the roles that reach their threshold, the share roles (``previous``, ``next``, ``self``,
    ``cls``, ``sep``, ``punctuation``) first, the one with the largest share; else ``broad`` if
    it reaches its threshold; else None (no single pattern).

    Parameters
    ----------
    tokens : list of str, length ``n``
    weights : ndarray of shape ``(layers, heads, n, n)``
        The weights as the page has them (`dequantise`d bytes); each row is divided by its sum
        first (rounding leaves it within ``n / 510`` of 1, and `role_scores` wants 1).

    Returns
    -------
    list (layers) of lists (heads) of a key of `mha.site.head_roles.ROLES`, or None
    """
    from .head_roles import ROLES, THRESHOLDS, role_scores

    w = np.asarray(weights, dtype=np.float64)
    scores = role_scores(w / w.sum(axis=-1, keepdims=True), tokens)  # role -> (layers, heads)
    shares = [role for role in ROLES if role != "broad"]
    layers, heads = scores["broad"].shape
    out: list[list[str | None]] = []
    for layer in range(layers):
        row: list[str | None] = []
        for head in range(heads):
            played = [r for r in shares if scores[r][layer, head] >= THRESHOLDS[r]]
            if played:
                row.append(max(played, key=lambda r: scores[r][layer, head]))
            elif scores["broad"][layer, head] >= THRESHOLDS["broad"]:
                row.append("broad")
            else:
                row.append(None)
        out.append(row)
    return out


def _with_roles(data: bytes) -> bytes:
    """A kept sentence file with its heads' `real_roles` added (``roles``)."""
    file = json.loads(data)
    n = file["n"]
    raw = np.frombuffer(base64.b64decode(file["weights"]), dtype=np.uint8)
    weights = dequantise(raw.reshape(file["layers"], file["heads"], n, n))
    return _json({**file, "roles": real_roles(file["tokens"], weights)})


def real_index(lang: str) -> dict:
    """The real-heads part's index in ``lang`` (``real-<lang>.json``): the models, the
    sentences (each with its files) and the words of the part."""
    return {
        "models": {key: {"name": name, "layers": layers, "heads": heads}
                   for key, (name, layers, heads) in MODELS.items()},
        "sentences": [{"id": s.id, "lang": s.lang, "text": s.text,
                       "files": {m: f"real/{m}-{s.id}.json" for m in s.models}}
                      for s in SENTENCES],
        "words": _words(lang),
    }


# --- The lab -----------------------------------------------------------------------------------

def lab_scale(h: int, temperature: float = 1.0) -> float:
    """The score factor of the lab's layers with ``h`` heads at the temperature factor
    ``temperature`` (τ): ``1 / (τ sqrt(d_k))``, ``d_k = d_model / h``; the real temperature,
    the divisor of the scores, is ``τ sqrt(d_k)``."""
    if h not in LAB_HEADS:
        raise ValueError(f"the lab has {LAB_HEADS} heads, got h={h!r}")
    temperature = float(temperature)
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    return 1.0 / (temperature * math.sqrt(LAB_D_MODEL // h))


def lab_layers(h: int, temperature: float = 1.0) -> list[MultiHeadAttention]:
    """The lab's two layers with ``h`` heads at the temperature factor ``temperature``: the
    walkthrough's (`mha.site.experiments.walkthrough_layers`) at `lab_scale`.

    The weights are drawn as one ``(d_model, h, d_k)`` array per projection from the same seeds
    whatever ``h`` is, so every ``h`` shares one ``(d_model, d_model)`` matrix per projection,
    cut into ``h`` blocks of ``d_k`` columns (``lab_data`` exports it once; the tests check it).
    """
    return walkthrough_layers(LAB_D_MODEL, h, LAB_LAYERS, LAB_SEED,
                              scale=lab_scale(h, temperature))


def lab_mask(kind: str, n: int, value: int | None = None) -> np.ndarray | None:
    """The lab's mask ``kind`` (a key of `MASKS`) for ``n`` tokens, as `mha.masks` makes it:
    None, ``causal_mask(n)``, ``sliding_window_mask(n, value)`` or the padding mask of one
    sentence of true length ``value``, shape ``(1, n)``."""
    if kind not in MASKS:
        raise ValueError(f"mask must be one of {list(MASKS)}, got {kind!r}")
    if kind == "none":
        return None
    if kind == "causal":
        return causal_mask(n)
    if value is None:
        raise ValueError(f"the {kind} mask needs its {'width' if kind == 'window' else 'length'}")
    if kind == "window":
        return sliding_window_mask(n, value)
    return padding_mask([value], n)[0]  # (1, n): hides the keys after the first `value`


def lab_trace(lang: str, h: int = 4, mask: str = "none", value: int | None = None,
              temperature: float = 1.0) -> list[dict]:
    """What the lab shows for one setting of its controls: `mha.site.experiments.walkthrough`
    of the case in ``lang`` with ``h`` heads, the mask and `lab_scale`.

    With the defaults it is the walkthrough itself (the tests check it).
    """
    order = CASE_ORDER[lang]
    return walkthrough(order, LAB_D_MODEL, h, LAB_LAYERS, LAB_SEED,
                       mask=lab_mask(mask, len(order), value), scale=lab_scale(h, temperature))


def lab_scales(lang: str) -> dict:
    """The lab's fixed colour scales in ``lang`` (``lab-<lang>.json``'s ``scales``): one per
    quantity, the same for every stage and every setting of the controls, so that a change of
    a knob shows as a change of colour.

    - ``weight``: weights on ``[0, 1]`` (drawn at opacity ``sqrt(w)``), ticks at 0, 0.25, 1;
    - ``signed``: X, Q/K/V, head outputs, concatenation and outputs, on ``[-S, S]`` with ``S``
      the largest ``|value|`` of layer 1's X, Q, K and V (which no control changes), rounded up
      to a tenth; what lies beyond is drawn as ``±S``;
    - ``scores``: the scores on ``[-S, S]`` with ``S`` the largest ``|score|`` of layer 1 at
      ``τ = 1`` without a mask, over every number of heads, rounded up to a tenth;
    - ``difference``: what "compare with the default" shows, layer 1's output minus its output
      at the default (``τ = 1``, no mask, the same heads), on ``[-S, S]`` with ``S`` the median,
      over every setting of the controls, of the largest ``|difference|``, rounded up to a
      tenth: a typical change shows at full colour, which the values' scale would draw faintly.
    """
    def up(value: float) -> float:
        return math.ceil(round(value * 10, 9)) / 10

    first = lab_trace(lang)[0]
    signed = max(float(np.abs(first[name]).max()) for name in ("x", "q", "k", "v"))
    scores = max(float(np.abs(lab_trace(lang, h)[0]["scores"]).max()) for h in LAB_HEADS)
    largest = []
    for h in LAB_HEADS:
        base = lab_trace(lang, h)[0]["output"]
        for kind, span in MASKS.items():
            for value in [None] if span is None else range(span[0], span[1] + 1):
                for tau in TEMPERATURES:
                    output = lab_trace(lang, h, kind, value, tau)[0]["output"]
                    largest.append(float(np.abs(output - base).max()))
    difference = float(np.median(largest))
    return {"weight": {"range": [0.0, 1.0], "ticks": [0.0, 0.25, 1.0]},
            "signed": {"range": [-up(signed), up(signed)]},
            "scores": {"range": [-up(scores), up(scores)]},
            "difference": {"range": [-up(difference), up(difference)]}}


def lab_data(lang: str) -> dict:
    """The lab's inputs in ``lang`` (``lab-<lang>.json``): tokens, embeddings ``x`` (n, d_model),
    each layer's ``W_Q``, ``W_K``, ``W_V`` (d_model, d_model: head ``j`` is columns
    ``j d_k .. (j + 1) d_k``) and ``W_O`` (d_model, d_model: head ``j``'s rows likewise), in
    float64 (JSON keeps every digit); the controls' choices, the cast and the words."""
    layers = lab_layers(max(LAB_HEADS))
    return {
        "tokens": case_tokens(lang),
        "x": lab_trace(lang)[0]["x"].tolist(),                       # (n, d_model)
        "layers": [{"W_Q": layer.W_Q.reshape(LAB_D_MODEL, -1).tolist(),
                    "W_K": layer.W_K.reshape(LAB_D_MODEL, -1).tolist(),
                    "W_V": layer.W_V.reshape(LAB_D_MODEL, -1).tolist(),
                    "W_O": layer.W_O.tolist()} for layer in layers],
        "heads": list(LAB_HEADS),
        "temperatures": list(TEMPERATURES),
        "masks": {kind: (None if span is None else list(span)) for kind, span in MASKS.items()},
        "cast": [{"name": getattr(d, lang), "color": d.color} for d in CAST],
        "scales": lab_scales(lang),
        "words": _words(lang),
    }


def _words(lang: str) -> dict:
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES}, got {lang!r}")
    return {**WORDS[lang], **REAL_WORDS[lang], **LAB_WORDS[lang],
            "stage_notes": STAGE_NOTES[lang],
            "terms": {key: term(key, lang) for key in _TERMS}}


# --- The files ---------------------------------------------------------------------------------

def _json(value) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def lab_files() -> dict[str, bytes]:
    """The lab's files (``lab-<lang>.json``), by their path under ``assets/caseboard/``."""
    return {f"lab-{lang}.json": _json(lab_data(lang)) for lang in LANGUAGES}


def fresh_real_files(models=tuple(MODELS)) -> dict[str, bytes]:
    """Every sentence's file of the real-heads part (``real/<model>-<id>.json``) for the
    ``models``, made now by running them (`real_heads`): they must be installed. The repository
    keeps what this returns (``python -m mha.site.model_runs --save``), and `real_files` reads
    that."""
    return {f"real/{model}-{sentence.id}.json": _json(real_heads(sentence, model))
            for sentence in SENTENCES for model in sentence.models if model in models}


def real_files() -> dict[str, bytes]:
    """The real-heads part's files: the index in each language (``real-<lang>.json``) and each
    sentence's file, read from the kept run (`mha.site.model_runs.KEPT_CASEBOARD`; no model is
    loaded), with each head's pattern added (``roles``: `real_roles`).

    Raises
    ------
    mha.site.model_runs.StaleRunError
        If a kept file is missing, or holds another text than its sentence's today.
    """
    from .model_runs import COMMAND, KEPT_CASEBOARD, StaleRunError

    out = {f"real-{lang}.json": _json(real_index(lang)) for lang in LANGUAGES}
    for sentence in SENTENCES:
        for model in sentence.models:
            name = f"real/{model}-{sentence.id}.json"
            path = KEPT_CASEBOARD / name
            data = path.read_bytes() if path.is_file() else None
            if data is None or json.loads(data)["text"] != sentence.text:
                raise StaleRunError(f"the case board's kept file {name} is missing or holds "
                                    f"another sentence: remake it where the model is "
                                    f"installed: {COMMAND} --model {model}")
            out[name] = _with_roles(data)
    return out


def files() -> dict[str, bytes]:
    """Every file of the case board's data, by its path under ``assets/caseboard/``."""
    return {**lab_files(), **real_files()}
