"""The whole-Transformer figure (mha/site/plots/transformer.py, "transformer-stack"): drawn in both
languages with every part, labelled from mha/site/terms.py, shown on both applications pages with
alt text, and built; its data description is the layer mha runs (the encoder's against
`mha.models.encoder.bert_layer`) and lets each decoder position see what it may see."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mha import MultiHeadAttention, causal_mask, padding_mask
from mha.models.encoder import bert_layer, gelu, layer_norm
from mha.site import terms
from mha.site.plots import DEPENDS, FIGURES, LANGUAGES, term
from mha.site.plots.transformer import (DECODER_LAYER, ENCODER_LAYER, POST_LN, STACK_DEPTH,
                                        WORDS, concept_labels, plot_transformer,
                                        sublayer_label)
from helpers import random_bert_layer
from tolerance import assert_within, gamma

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
NAME = "transformer-stack"
CJK = re.compile(r"[\u4e00-\u9fff]")


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))
            if t.get_text().strip()]


def test_registered_with_its_module():
    assert NAME in FIGURES and DEPENDS[NAME] == ("site/plots/transformer.py",)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_figure_has_every_part_of_both_stacks(lang):
    drawn = texts(FIGURES[NAME](lang))
    boxes = [sublayer_label(s, lang) for s in ENCODER_LAYER + DECODER_LAYER]
    for box in boxes:  # one box per sublayer of the description, with its mask
        assert drawn.count(box) == boxes.count(box), (box, drawn)
    # Self-attention in both stacks (padding hidden, causal), cross-attention in the decoder.
    assert sorted(boxes) == sorted([
        f"{term('self_attention', lang)}\n{term('padding_mask', lang)}",
        f"{term('self_attention', lang)}\n{term('causal_mask', lang)}",
        f"{term('cross_attention', lang)}\n{term('padding_mask', lang)}",
        term("feed_forward_network", lang), term("feed_forward_network", lang)])
    # A LayerNorm after every sublayer; embeddings and positions for both inputs; one softmax.
    assert drawn.count(term("layer_norm", lang)) == len(ENCODER_LAYER) + len(DECODER_LAYER)
    assert drawn.count(term("embedding", lang)) == 2
    assert drawn.count(term("positional_encoding", lang)) == 2
    assert drawn.count(term("softmax", lang)) == 1
    assert drawn.count("K, V") == 1  # the encoder's output feeds the cross-attention
    for word in ("title", "encoder", "decoder", "linear", "probabilities", "target_in"):
        assert drawn.count(WORDS[lang][word]) == 1, word
    # Each stack says it is repeated, and how often in the paper's base model.
    repeat = f"{WORDS[lang]['repeat']}\n{WORDS[lang]['depth'].format(n=STACK_DEPTH)}"
    assert drawn.count(repeat) == 2 and STACK_DEPTH == 6
    assert any(t.startswith(term("residual_connection", lang)) for t in drawn)
    assert bool(CJK.search("\n".join(drawn))) == (lang == "zh")


def test_the_boxes_follow_the_description():
    """The drawing walks the lists: a decoder without cross-attention (GPT's layer) loses that
    box, its LayerNorm and the encoder's arrow; the depth drawn is the one given."""
    gpt_layer = tuple(s for s in DECODER_LAYER if s.kind != "cross_attention")
    drawn = texts(plot_transformer(ENCODER_LAYER, gpt_layer, "en", depth=12))
    assert drawn.count(term("layer_norm", "en")) == len(ENCODER_LAYER) + len(gpt_layer) == 4
    assert not any(term("cross_attention", "en") in t for t in drawn)
    assert "K, V" not in drawn
    assert drawn.count(f"{WORDS['en']['repeat']}\n{WORDS['en']['depth'].format(n=12)}") == 2


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_label_is_a_term_or_one_of_the_figures_own_words(lang):
    allowed = concept_labels(lang) | {line for word in WORDS[lang].values()
                                      for line in word.format(n=STACK_DEPTH).split("\n")}
    allowed |= {"+", "K, V", f"{term('residual_connection', lang)}  x + f(x)"}
    for text in texts(FIGURES[NAME](lang)):
        for line in text.split("\n"):
            assert line in allowed, line


def test_labels_follow_the_terms_file(monkeypatch):
    """Change a translation in mha/site/terms.py and the figure changes with it."""
    for key in ("layer_norm", "cross_attention", "feed_forward_network"):
        monkeypatch.setitem(terms.TERMS, key, replace(terms.TERMS[key], zh=f"〔{key}〕",
                                                      en=f"<{key}>"))
    for lang, wrap in (("zh", "〔{}〕"), ("en", "<{}>")):
        drawn = "\n".join(texts(FIGURES[NAME](lang)))
        for key in ("layer_norm", "cross_attention", "feed_forward_network"):
            assert wrap.format(key) in drawn, (lang, key)


def run_layer(description, x, *, attention, ffn, norms, masks, context=None):
    """Run one layer as ``description`` lists it: each sublayer inside a residual connection,
    LayerNorm after the addition (Post-LN). ``attention[i]`` is a MultiHeadAttention."""
    assert POST_LN
    for i, sub in enumerate(description):
        if sub.kind == "feed_forward_network":
            y = ffn(x)
        else:
            source = context if sub.kind == "cross_attention" else None
            y = attention[i](x, mask=masks.get(sub.mask), context=source)
        x = norms[i](x + y)
    return x


def test_the_encoders_description_is_the_layer_mha_runs_for_bert():
    """Run ENCODER_LAYER with mha's MultiHeadAttention, GELU and LayerNorm, and it gives what
    mha.models.encoder.bert_layer (the real models' layer) gives on the same weights."""
    rng = np.random.default_rng(0)
    b, n, d_model, d_ff, h, eps = 2, 6, 16, 32, 4, 1e-12
    w = random_bert_layer(rng, d_model, d_ff, bias_std=0.0, norm_std=0.1)  # mha's layer: no biases
    x = rng.normal(size=(b, n, d_model))
    lengths = [6, 4]
    valid = padding_mask(lengths, n)                                  # (b, 1, n)
    expected, _ = bert_layer(x, (valid[:, :, None, :] & valid[:, :, :, None]), w, "L", h, eps)

    mha_layer = MultiHeadAttention(d_model, h)
    d_k = d_model // h  # bert_layer's head i takes columns i*d_k ... (i+1)*d_k of each product
    mha_layer.W_Q, mha_layer.W_K, mha_layer.W_V = (
        w[f"L.attention.self.{p}.weight"].T.reshape(d_model, h, d_k)
        for p in ("query", "key", "value"))
    mha_layer.W_O = w["L.attention.output.dense.weight"].T

    def ffn(v):
        return gelu(v @ w["L.intermediate.dense.weight"].T) @ w["L.output.dense.weight"].T

    norms = [lambda v, p=p: layer_norm(v, w[f"L.{p}.weight"], w[f"L.{p}.bias"], eps)
             for p in ("attention.output.LayerNorm", "output.LayerNorm")]
    got = run_layer(ENCODER_LAYER, x, attention=[mha_layer, None], ffn=ffn, norms=norms,
                    masks={"padding_mask": padding_mask(lengths, n)})
    real = np.asarray(valid[:, 0, :])                     # bert_layer's padded rows see nothing
    # Rule 2 of tests/tolerance.py for a chain: float64 products of at most d_ff = 32 terms on
    # values of order 1 (attention's projections and W_O, the FFN's two), through softmax and two
    # LayerNorms; each step's gamma(32) times a stated factor of 1000 for the chain (the two
    # paths sum attention's projections in different code; measured: equal to the last bit here).
    bound = 1000 * gamma(d_ff) * np.abs(expected[real]).max()
    assert_within(got[real], expected[real], bound, "description vs bert_layer")
    # The other order (FFN first) is not the layer mha runs.
    swapped = run_layer(ENCODER_LAYER[::-1], x, attention=[None, mha_layer], ffn=ffn,
                        norms=norms, masks={"padding_mask": padding_mask(lengths, n)})
    assert not np.allclose(swapped[real], expected[real])


def test_the_decoders_description_sees_the_past_and_the_whole_source():
    """Run DECODER_LAYER with mha: a target position's output does not change when a later
    target token does (causal self-attention), and every position changes with the source
    (cross-attention); the cross-attention weights are (h, n_target, n_source)."""
    rng = np.random.default_rng(1)
    d_model, h, n_t, n_s = 16, 4, 5, 7
    layers = [MultiHeadAttention(d_model, h, seed=s) for s in (1, 2, 3)]
    w1, w2 = rng.normal(size=(d_model, 32)) / 4, rng.normal(size=(32, d_model)) / 6

    def norm(v):
        return layer_norm(v, np.ones(d_model), np.zeros(d_model), 1e-5)

    def run(target, source):
        return run_layer(DECODER_LAYER, target, attention=layers,
                         ffn=lambda v: np.maximum(v @ w1, 0) @ w2, norms=[norm] * 3,
                         masks={"causal_mask": causal_mask(n_t)}, context=source)

    target, source = rng.normal(size=(n_t, d_model)), rng.normal(size=(n_s, d_model))
    out = run(target, source)
    later = target.copy()
    later[3:] = rng.normal(size=(2, d_model))
    assert (run(later, source)[:3] == out[:3]).all()      # positions 0-2 never see 3 and 4
    moved = np.abs(run(target, source + 1.0) - out).max(axis=-1)
    assert (moved > 0).all()                              # every position reads the source
    cross = [i for i, s in enumerate(DECODER_LAYER) if s.kind == "cross_attention"]
    _, weights = layers[cross[0]](target, context=source, return_weights=True)
    assert weights.shape == (h, n_t, n_s)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_applications_page_shows_it_with_alt_text_and_training_links_to_it(lang):
    page = (ROOT / "docs" / lang / "applications.md").read_text(encoding="utf-8")
    (alt,) = re.findall(r"!\[([^\]]+)\]\(figures/transformer-stack\.svg\)", page)
    assert bool(CJK.search(alt)) == (lang == "zh")
    for key in ("self_attention", "cross_attention", "layer_norm", "feed_forward_network",
                "residual_connection"):
        assert term(key, lang).lower() in alt.lower(), key
    translation = page[page.index("{ #translation }"):page.index("{ #bert }")]
    assert "figures/transformer-stack.svg" in translation
    training = (ROOT / "docs" / lang / "training.md").read_text(encoding="utf-8")
    block = training[training.index("{ #block }"):training.index("{ #backward }")]
    assert "applications.md#translation" in block


def test_the_build_draws_it_in_both_languages(built_site):
    for prefix in ("", "en/"):
        svg = Path(built_site.dir) / prefix / "figures" / f"{NAME}.svg"
        assert svg.read_bytes().startswith(b"<?xml"), svg
