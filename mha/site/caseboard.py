"""The case board's data: what the page's scripts draw, computed by `mha` at build time (the
real heads' files: kept, see below).

The case board (案情板, ``docs/<lang>/caseboard.md``) has three parts, each drawn in the browser
by the site's own scripts from static files that `files` makes (``hooks/draw_figures.py``
writes them into ``docs/assets/caseboard/``):

1. **Real heads** (``real-<lang>.json``, ``real/<model>-<id>.json``): every head of
   multilingual-e5-small (4-bit, `mha.models.e5`) and all-MiniLM-L6-v2 (`mha.models.minilm`)
   on `SENTENCES`, six Chinese and six English. Each sentence's weights are one file, loaded
   on demand, quantised to one byte each (`quantise`). The build copies these files from the
   kept run (``mha/site/data/caseboard/``, `mha.site.model_runs`), so it needs no model.
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
           "lab_scale", "lab_layers", "lab_mask", "lab_trace", "lab_data", "real_index",
           "lab_files", "real_files", "fresh_real_files", "files", "WORDS"]


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
REAL_WORDS: dict[str, dict] = {"zh": {}, "en": {}}

#: Words of the lab and the forward pass added for issue #29 (caseboard-lab.js).
LAB_WORDS: dict[str, dict] = {"zh": {}, "en": {}}

#: What each of the forward pass's eight stages computes (caseboard-lab.js shows it under the
#: stage's title): per language, one entry per stage of ``WORDS[lang]["stages"]``.
STAGE_NOTES: dict[str, list] = {"zh": [], "en": []}

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
    loaded).

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
            out[name] = data
    return out


def files() -> dict[str, bytes]:
    """Every file of the case board's data, by its path under ``assets/caseboard/``."""
    return {**lab_files(), **real_files()}
