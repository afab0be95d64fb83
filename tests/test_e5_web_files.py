"""The browser's multilingual-e5-small files (`mha.site.e5web`, written by hooks/e5_web.py):
read back here with NumPy, they hold exactly the model `mha.models.e5` runs, and the build puts
them, and the button's download size, on the site.

- ``manifest.json`` + ``layers.bin``: every tensor but the word embeddings; dequantised with
  `mha.models.e5bin.dequantize_q4_0`, each equals `E5Weights.tensors` bit for bit.
- ``vocab.bin``: the tokenizer's pieces and scores, equal to `E5Weights.tokenizer`'s.
- ``emb/<k>.bin``: the word-embedding rows; any row, dequantised, equals
  `E5Weights.word_embeddings`.
- The hook: with the files, the board's container gets ``data-download`` and loses the
  paragraph that says the model is not in this build; without them, the page keeps it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha.models.e5bin import Q4_0, dequantize_q4_0


@pytest.fixture(scope="module")
def files(e5_weights):
    from mha.site import e5web

    return e5web.web_files(e5_weights.path)


def read_vocab(data: bytes) -> tuple[list[str], np.ndarray]:
    """vocab.bin: u32 count, f32 scores, u8 byte lengths (padded to 4), UTF-8 text."""
    (count,) = np.frombuffer(data, "<u4", 1)
    count = int(count)
    scores = np.frombuffer(data, "<f4", count, 4)
    lengths = np.frombuffer(data, "u1", count, 4 + 4 * count).astype(np.int64)
    start = 4 + 4 * count + count + (-count % 4)
    ends = start + np.cumsum(lengths)
    pieces = [data[e - n:e].decode("utf-8") for e, n in zip(ends, lengths)]
    assert ends[-1] == len(data)
    return pieces, scores


@pytest.mark.model
def test_layers_hold_the_tensors_mha_runs(files, e5_weights):
    from mha.models.e5 import transformers_name

    manifest = json.loads(files["manifest.json"])
    layers = files["layers.bin"]
    assert manifest["format"] == 1
    assert manifest["sizes"]["d_model"] == e5_weights.d_model == 384
    assert manifest["special"] == {"bos": e5_weights.bos_id, "eos": e5_weights.eos_id,
                                   "pad": e5_weights.pad_id, "unk": e5_weights.unk_id}
    names = set(manifest["tensors"])
    assert "emb.word" not in names and len(names) == len(e5_weights.tensors) == 196
    for name, entry in manifest["tensors"].items():
        assert entry["offset"] % 4 == 0, name             # Float32Array views need it
        raw = layers[entry["offset"]:entry["offset"] + entry["bytes"]]
        shape = tuple(entry["shape"])
        if entry["kind"] == "q4_0":
            values = dequantize_q4_0(np.frombuffer(raw, Q4_0).reshape(shape[0], -1))
        else:
            values = np.frombuffer(raw, "<f4").reshape(shape)
        expected = e5_weights.tensors[transformers_name(name)]
        assert values.shape == expected.shape, name
        assert np.array_equal(values, expected), name
    assert manifest["files"]["layers.bin"]["bytes"] == len(layers)
    assert manifest["files"]["vocab.bin"]["bytes"] == len(files["vocab.bin"])


@pytest.mark.model
def test_vocabulary_and_normaliser_are_the_tokenizers(files, e5_weights):
    tokenizer = e5_weights.tokenizer
    pieces, scores = read_vocab(files["vocab.bin"])
    assert pieces == tokenizer.pieces
    assert np.array_equal(scores, tokenizer.scores)
    manifest = json.loads(files["manifest.json"])
    table = {int(cp): text for cp, text in manifest["normalization"].items()}
    assert table == {cp: text for cp, text in tokenizer.normalization.items()}


@pytest.mark.model
def test_embedding_shards_hold_every_row(files, e5_weights):
    manifest = json.loads(files["manifest.json"])
    emb = manifest["embeddings"]
    per, row_bytes = emb["rows_per_shard"], emb["row_bytes"]
    assert emb["rows"] == e5_weights.vocab_size
    assert emb["shards"] == -(-e5_weights.vocab_size // per)
    shards = [name for name in files if name.startswith("emb/")]
    assert len(shards) == emb["shards"]
    assert sum(len(files[name]) for name in shards) == e5_weights.vocab_size * row_bytes
    # The first, the last and a spread of ids in between, the last shard's short tail among them.
    ids = np.unique(np.r_[0, 1, 2, 3, per - 1, per, np.linspace(0, e5_weights.vocab_size - 1,
                                                                 200).astype(int)])
    for i in ids:
        shard = files[emb["path"].format(k=i // per)]
        row = np.frombuffer(shard, Q4_0, row_bytes // Q4_0.itemsize,
                            (i % per) * row_bytes)
        assert np.array_equal(dequantize_q4_0(row), e5_weights.word_embeddings([i])[0]), i


@pytest.mark.model
def test_download_size_is_what_the_first_run_fetches(files):
    manifest = json.loads(files["manifest.json"])
    once = len(files["manifest.json"]) + len(files["layers.bin"]) + len(files["vocab.bin"])
    # The manifest states its own size before it is written: within a few bytes of it.
    assert abs(manifest["download_bytes"] - once) <= 64
    assert once < 20_000_000                                  # the budget, uncompressed


def _hook():
    from pathlib import Path

    from helpers import load_file

    return load_file(Path(__file__).resolve().parents[1] / "hooks" / "e5_web.py", "e5_web_hook")


PAGE = ('<h2 id="your-case">x</h2><div id="own-case" class="own-case">'
        '<p class="own-case__absent">not in this build</p>\n<p>rest</p></div>')


@pytest.mark.site
def test_hook_without_the_model_keeps_the_message(monkeypatch):
    hook = _hook()
    monkeypatch.setattr(hook, "_files", None)
    assert hook.on_page_content(PAGE, None, None, None) == PAGE


@pytest.mark.site
def test_hook_with_the_model_gives_the_size_and_drops_the_message(monkeypatch):
    hook = _hook()
    manifest = {"download_bytes": 16_890_176}
    monkeypatch.setattr(hook, "_files", {"manifest.json": json.dumps(manifest).encode()})
    html = hook.on_page_content(PAGE, None, None, None)
    assert '<div data-download="16890176" id="own-case" class="own-case">' in html
    assert "own-case__absent" not in html and "<p>rest</p>" in html


@pytest.mark.site
def test_the_built_site_serves_the_model_and_names_its_size(built_site):
    folder = built_site.dir / "assets" / "e5"
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    for name in ("layers.bin", "vocab.bin"):
        assert (folder / name).stat().st_size == manifest["files"][name]["bytes"]
    assert len(list((folder / "emb").iterdir())) == manifest["embeddings"]["shards"]
    for page in ("caseboard/index.html", "en/caseboard/index.html"):
        html = (built_site.dir / page).read_text(encoding="utf-8")
        assert f'data-download="{manifest["download_bytes"]}"' in html, page
        assert "own-case__absent" not in html, page
