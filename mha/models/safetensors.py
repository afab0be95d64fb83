"""A reader for the safetensors format, in NumPy: how pretrained weights are stored.

A ``.safetensors`` file is three parts, one after the other:

1. 8 bytes: the length ``N`` of the header, an unsigned little-endian 64-bit integer;
2. ``N`` bytes: the header, a JSON object that maps each tensor's name to its ``dtype``
   (``"F32"``, ...), ``shape`` and ``data_offsets`` ``[begin, end)`` (byte offsets into part 3),
   plus an optional ``"__metadata__"`` object of strings;
3. the tensors' raw bytes, little-endian, row-major, packed one after the other.

`read_safetensors` maps the file into memory and returns a read-only NumPy view of each tensor,
so nothing is copied until it is used.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

__all__ = ["read_safetensors", "DTYPES"]

DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
"""The safetensors dtypes NumPy can hold, and their NumPy dtypes (little-endian).

Others (``BF16`` and the 8-bit float formats) are refused."""


def read_safetensors(path) -> dict[str, np.ndarray]:
    """Read every tensor of a ``.safetensors`` file.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    dict of str to ndarray
        Tensor name -> read-only array of the stored dtype and ``shape``, viewing the file
        through a memory map, in the order of the header. ``"__metadata__"`` is not a tensor
        and is left out.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the file is not valid safetensors: too short, a header length past the end of the
        file, a header that is not a JSON object, an entry without a valid ``dtype``, ``shape``
        or ``data_offsets``, an unknown dtype, a byte range that does not fit the shape, or
        tensors that do not tile the data part exactly (a gap or an overlap).

    Examples
    --------
    >>> import json, struct, tempfile, numpy as np
    >>> from pathlib import Path
    >>> from mha.models.safetensors import read_safetensors
    >>> header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})
    >>> data = np.array([[1, 2], [3, 4]], dtype="<f4").tobytes()
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "tiny.safetensors"
    ...     _ = path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + data)
    ...     print(read_safetensors(path)["w"])
    [[1. 2.]
     [3. 4.]]
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no safetensors file at {path}")
    if path.stat().st_size < 8:
        raise ValueError(f"{path} is not safetensors: {path.stat().st_size} bytes, shorter than "
                         "the 8-byte header length")
    raw = np.memmap(path, dtype=np.uint8, mode="r")                # (file size,) bytes
    header_length = int(raw[:8].view("<u8")[0])
    start = 8 + header_length                                      # where the tensors' bytes begin
    if start > raw.size:
        raise ValueError(f"{path} is not safetensors: its header length {header_length} runs past "
                         f"the end of the file ({raw.size} bytes)")
    try:
        header = json.loads(bytes(raw[8:start]))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        message = f"{path} is not safetensors: its header is not valid JSON ({error})"
        raise ValueError(message) from None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not safetensors: its header is a JSON "
                         f"{type(header).__name__}, not an object")
    header.pop("__metadata__", None)
    tensors, ranges = {}, []
    for name, entry in header.items():
        dtype, shape, (begin, end) = _check_entry(path, name, entry)
        expected = math.prod(shape) * dtype.itemsize
        if not 0 <= begin <= end <= raw.size - start or end - begin != expected:
            raise ValueError(
                f"{path}: tensor {name!r} of dtype {entry['dtype']} and shape {tuple(shape)} needs "
                f"{expected} bytes, but its data_offsets are [{begin}, {end}) in a data part of "
                f"{raw.size - start} bytes"
            )
        count = expected // dtype.itemsize
        tensors[name] = np.frombuffer(raw, dtype, count, start + begin).reshape(shape)
        ranges.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(ranges):
        if begin != position:
            raise ValueError(f"{path}: the tensors do not tile the data part: {name!r} starts at "
                             f"byte {begin}, expected {position} (a gap or an overlap)")
        position = end
    if position != raw.size - start:
        raise ValueError(f"{path}: the tensors end at byte {position} of a data part of "
                         f"{raw.size - start} bytes")
    return tensors


def _check_entry(path: Path, name: str, entry) -> tuple[np.dtype, list[int], list[int]]:
    """One header entry's NumPy dtype, shape and ``[begin, end)``; ValueError if malformed."""
    def is_ints(value, length=None):
        return (isinstance(value, list) and (length is None or len(value) == length)
                and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value))

    if not (isinstance(entry, dict) and isinstance(entry.get("dtype"), str)
            and is_ints(entry.get("shape")) and is_ints(entry.get("data_offsets"), 2)):
        raise ValueError(
            f"{path}: header entry {name!r} must be an object with a string 'dtype', a 'shape' "
            f"list of non-negative integers and 'data_offsets' [begin, end], got {entry!r}"
        )
    if entry["dtype"] not in DTYPES:
        raise ValueError(f"{path}: tensor {name!r} has dtype {entry['dtype']!r}, which this reader "
                         f"does not know; known: {', '.join(DTYPES)}")
    return DTYPES[entry["dtype"]], entry["shape"], entry["data_offsets"]
