"""Parts shared by the encoder models of `mha.models`: LayerNorm, GELU, the linear map, BERT's
encoder layer, the forward pass on a padded batch and the result type.

`bert_layer` is one post-LayerNorm Transformer encoder layer, its attention computed by
`mha.scaled_dot_product_attention`; the weights are looked up by their ``transformers`` names.
`Encoder` runs a whole BERT-style encoder on text (tokenizer, embeddings, layers), one sentence
or a padded batch, and returns an `EncoderOutput`; each model is a small subclass that says
where its weights, tokenizer and special tokens come from (`mha.models.minilm.MiniLM`,
`mha.models.e5.E5`). ``tests/test_minilm.py`` checks `bert_layer` against a slow loop over heads
and queries, and both models against PyTorch ``transformers``.

Dimension names: ``b`` sentences, ``n`` tokens, ``d_model``, ``h`` heads, ``d_k = d_model / h``,
``d_ff`` (the feed-forward width), ``layers``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..attention import scaled_dot_product_attention
from ..masks import padding_mask
from ..multihead import merge_heads, split_heads

__all__ = ["layer_norm", "gelu", "linear", "bert_layer", "Encoder", "EncoderOutput",
           "SpecialTokens"]


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
    >>> from mha.models.encoder import layer_norm
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
    >>> from mha.models.encoder import gelu
    >>> gelu(np.array([-3.0, 0.0, 1.0, 3.0])).round(4)
    array([-0.004 ,  0.    ,  0.8413,  2.996 ])
    """
    z = np.abs(x) * 2 ** -0.5                          # Python floats keep float32 float32
    t = 1 / (1 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                       + t * (-1.453152027 + t * 1.061405429))))
    erf = np.copysign(1 - poly * np.exp(-z * z), x)    # erf(x / sqrt(2)), odd in x
    return 0.5 * x * (1 + erf)


def linear(x: np.ndarray, weights, name: str) -> np.ndarray:
    """A linear layer stored the ``transformers`` way: ``x @ W.T + b``.

    Parameters
    ----------
    x : ndarray of shape ``(..., d_in)``
    weights : mapping of str to ndarray
        Holds ``{name}.weight`` ``(d_out, d_in)`` and ``{name}.bias`` ``(d_out,)``.
    name : str
        E.g. ``"encoder.layer.0.attention.self.query"``.

    Returns
    -------
    ndarray of shape ``(..., d_out)``
    """
    return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]


def bert_layer(x: np.ndarray, mask, weights, prefix: str, h: int, eps: float):
    r"""One post-LayerNorm encoder layer of BERT (and of models built like it, such as XLM-R).

    Parameters
    ----------
    x : ndarray of shape ``(b, n, d_model)``
        The token vectors entering the layer.
    mask : ndarray of bool broadcastable to ``(b, h, n, n)``, or None
        True where a query may attend to a key (`mha.scaled_dot_product_attention`); None lets
        every token attend to every token. A query that may attend to no key (a padding
        position) gets a row of zero weights.
    weights : mapping of str to ndarray
        The model's tensors by their ``transformers`` names; the layer's start with ``prefix``
        (``{prefix}.attention.self.query.weight``, ...).
    prefix : str
        E.g. ``"encoder.layer.0"``.
    h : int
        Number of heads; ``d_model`` must be divisible by it.
    eps : float
        LayerNorm's epsilon.

    Returns
    -------
    x : ndarray of shape ``(b, n, d_model)``
        The layer's output, in the dtype of ``x`` and the weights.
    attention : ndarray of shape ``(b, h, n, n)``
        The attention weights of every head.

    Raises
    ------
    ValueError
        If ``d_model`` is not divisible by ``h``.

    Notes
    -----
    $$
    \begin{aligned}
    A &= \operatorname{LayerNorm}\bigl(X + \operatorname{Concat}(\operatorname{head}_1, \dots,
         \operatorname{head}_h)\, W^O + b^O\bigr), \\
    \operatorname{head}_j &= \operatorname{Attention}(X W_j^Q + b_j^Q,\; X W_j^K + b_j^K,\;
         X W_j^V + b_j^V), \\
    X' &= \operatorname{LayerNorm}\bigl(A + \operatorname{GELU}(A W_1 + b_1) W_2 + b_2\bigr)
    \end{aligned}
    $$

    with $\operatorname{Attention}(Q, K, V) = \operatorname{softmax}(Q K^\top / \sqrt{d_k} + M)\,V$,
    $M$ being $-\infty$ where ``mask`` is False, and $W_j^Q$ the columns of $W^Q$ that belong to
    head $j$ (`mha.multihead.split_heads`). Each matrix is stored ``(out, in)``, so $X W$ is
    ``x @ weight.T`` (`linear`).
    """
    p, w = prefix, weights
    q = split_heads(linear(x, w, f"{p}.attention.self.query"), h)   # (b, h, n, d_k)
    k = split_heads(linear(x, w, f"{p}.attention.self.key"), h)     # (b, h, n, d_k)
    v = split_heads(linear(x, w, f"{p}.attention.self.value"), h)   # (b, h, n, d_k)
    heads, attention = scaled_dot_product_attention(q, k, v, mask)  # (b, h, n, d_k), (b, h, n, n)
    a = linear(merge_heads(heads), w, f"{p}.attention.output.dense")  # (b, n, d_model)
    x = layer_norm(x + a, w[f"{p}.attention.output.LayerNorm.weight"],
                   w[f"{p}.attention.output.LayerNorm.bias"], eps)   # (b, n, d_model)
    f = gelu(linear(x, w, f"{p}.intermediate.dense"))               # (b, n, d_ff)
    f = linear(f, w, f"{p}.output.dense")                           # (b, n, d_model)
    x = layer_norm(x + f, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"],
                   eps)                                             # (b, n, d_model)
    return x, attention


@dataclass(frozen=True)
class SpecialTokens:
    """The tokens a model's tokenizer adds around each sentence, and the one that pads a batch.

    BERT's vocabulary and XLM-R's name and number them differently: all-MiniLM-L6-v2 writes
    ``[CLS] ... [SEP]`` and pads with ``[PAD]`` (ids 101, 102 and 0); multilingual-e5-small,
    with XLM-R's SentencePiece vocabulary, writes ``<s> ... </s>`` and pads with ``<pad>``
    (ids 0, 2 and 1). Code that looks for them (a head that attends to the first token, say)
    reads them from here rather than spelling out one model's.

    Attributes
    ----------
    start, end, pad : str
        The token before the first piece, the one after the last, and the padding token.
    start_id, end_id, pad_id : int
        Their ids.

    Examples
    --------
    >>> from mha.models.encoder import SpecialTokens
    >>> SpecialTokens("<s>", "</s>", "<pad>", start_id=0, end_id=2, pad_id=1)
    SpecialTokens(start='<s>', end='</s>', pad='<pad>', start_id=0, end_id=2, pad_id=1)
    """

    start: str
    end: str
    pad: str
    start_id: int
    end_id: int
    pad_id: int


@dataclass(frozen=True, eq=False)
class EncoderOutput:
    """What an encoder's ``forward`` returns (`Encoder.forward`, for all-MiniLM-L6-v2 and
    multilingual-e5-small alike): the tokens, every layer's output and every attention map.

    For one sentence (``text`` a string) the arrays have the shapes below; for a list of ``b``
    sentences each gains a leading axis ``b``, the sentences are padded on the right to the
    longest one's ``n`` tokens, and ``lengths`` tells each one's own length.

    Attributes
    ----------
    token_ids : ndarray of int, shape ``(n,)`` or ``(b, n)``
        Token ids, ``special_tokens.start`` first and ``special_tokens.end`` last (``[CLS]`` and
        ``[SEP]`` for a BERT vocabulary, ``<s>`` and ``</s>`` for XLM-R's); padding is
        ``special_tokens.pad_id`` (0, ``[PAD]``, in BERT's; 1, ``<pad>``, in XLM-R's).
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
    special_tokens : SpecialTokens or None
        The model's start, end and padding tokens (always set by `Encoder.forward`).
    """

    token_ids: np.ndarray
    tokens: list
    hidden_states: np.ndarray
    attentions: np.ndarray
    lengths: np.ndarray | None = None
    special_tokens: SpecialTokens | None = None


class Encoder:
    r"""A BERT-style encoder run on text: tokenizer, embeddings, then ``layers`` x `bert_layer`.

    The models of `mha.models` are subclasses (`mha.models.minilm.MiniLM`,
    `mha.models.e5.E5`); each says where its tensors, tokenizer and special tokens come from,
    and may override `word_embeddings` (multilingual-e5-small looks its rows up in a 4-bit
    table).

    Parameters
    ----------
    weights : mapping of str to ndarray
        The tensors by their ``transformers`` ``BertModel`` names, float32:
        ``embeddings.position_embeddings.weight`` ``(max_tokens, d_model)``,
        ``embeddings.token_type_embeddings.weight``, ``embeddings.LayerNorm.*`` and every
        ``encoder.layer.{l}.*`` (`bert_layer`); ``embeddings.word_embeddings.weight``
        ``(vocabulary, d_model)`` unless `word_embeddings` is overridden.
    config : dict
        Sizes under ``transformers``' ``BertConfig`` names: ``num_hidden_layers``,
        ``num_attention_heads``, ``hidden_size``, ``layer_norm_eps``,
        ``max_position_embeddings``.
    tokenizer
        Has ``encode(text) -> (tokens, ids)``, the ids ``(n,)`` with the start and end tokens.
    special_tokens : SpecialTokens

    Attributes
    ----------
    weights, config, tokenizer, special_tokens
        As given.
    layers, h, d_model, d_k : int
        Sizes.
    eps : float
        LayerNorm's epsilon.
    max_tokens : int
        The number of positions the model has embeddings for, start and end tokens included.
    piece_name : str
        What the tokenizer's pieces are called, in error messages (``"WordPieces"``, ...).

    Notes
    -----
    Token $i$ of a sentence (counted from 0 at the start token) enters layer 1 as

    $$
    X_i = \operatorname{LayerNorm}\bigl(E_{\text{word}}[t_i] + E_{\text{pos}}[i]
          + E_{\text{type}}[0]\bigr),
    $$

    and every layer is `bert_layer`. In a padded batch a padding token is neither a query nor
    a key: the mask lets real queries attend to real keys only, so each sentence's values are
    those it gets alone (up to rounding), and padding positions are zeroed in the output.
    """

    piece_name = "pieces"

    def __init__(self, weights, config: dict, tokenizer, special_tokens: SpecialTokens):
        self.weights, self.config, self.tokenizer = weights, config, tokenizer
        self.special_tokens = special_tokens
        self.layers = config["num_hidden_layers"]
        self.h = config["num_attention_heads"]
        self.d_model = config["hidden_size"]
        self.d_k = self.d_model // self.h
        self.eps = config["layer_norm_eps"]
        self.max_tokens = config["max_position_embeddings"]

    def word_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """The word-embedding rows of the token ids ``ids`` ``(...)``: ``(..., d_model)``."""
        return self.weights["embeddings.word_embeddings.weight"][ids]

    def forward(self, text: str | list[str]) -> EncoderOutput:
        """Run the model on one sentence or a batch of sentences.

        Parameters
        ----------
        text : str, or list or tuple of str
            A sentence, or ``b >= 1`` sentences run as one padded batch. Each may have up to
            ``max_tokens`` tokens, the start and end tokens included.

        Returns
        -------
        EncoderOutput
            Tokens, hidden states ``(layers + 1, n, d_model)`` and attention weights
            ``(layers, h, n, n)``; with a leading ``b`` axis and ``lengths`` for a list.

        Raises
        ------
        TypeError
            If ``text`` is neither a string nor a list or tuple, or an element of it is not a
            string (the message names its index and type).
        ValueError
            If the list is empty, or a sentence has more than ``max_tokens`` tokens (the
            message names it).
        """
        if isinstance(text, str):
            single, texts = True, [text]
        elif isinstance(text, (list, tuple)):
            single, texts = False, list(text)
            for i, t in enumerate(texts):
                if not isinstance(t, str):
                    raise TypeError(f"text[{i}] is {type(t).__name__}, not str: text must be a "
                                    f"str or a list of str")
        else:
            hint = " (a NumPy array: pass array.tolist())" if isinstance(text, np.ndarray) else ""
            raise TypeError(f"text must be a str or a list of str, got {type(text).__name__}"
                            + hint)
        if not texts:
            raise ValueError("text is an empty list: give at least one sentence")
        encoded = [self.tokenizer.encode(t) for t in texts]
        lengths = np.array([len(ids) for _, ids in encoded])
        if lengths.max() > self.max_tokens:
            i = int(np.argmax(lengths > self.max_tokens))      # the first one too long
            name = "text" if single else f"text[{i}]"
            st = self.special_tokens
            raise ValueError(f"{name} has {lengths[i]} tokens ({lengths[i] - 2} "
                             f"{self.piece_name} plus {st.start} and {st.end}), more than the "
                             f"model's {self.max_tokens} positions")
        token_ids = np.full((len(texts), lengths.max()), self.special_tokens.pad_id,
                            dtype=np.int64)                    # (b, n), padded
        for row, (_, ids) in zip(token_ids, encoded):
            row[:len(ids)] = ids
        hidden_states, attentions = self._encode(token_ids, lengths)
        tokens = [t for t, _ in encoded]
        if single:
            return EncoderOutput(token_ids[0], tokens[0], hidden_states[0], attentions[0],
                                 special_tokens=self.special_tokens)
        return EncoderOutput(token_ids, tokens, hidden_states, attentions, lengths,
                             self.special_tokens)

    __call__ = forward

    def _encode(self, token_ids: np.ndarray, lengths: np.ndarray):
        """The forward pass on padded ids ``(b, n)``: hidden states and attention weights."""
        b, n = token_ids.shape
        w = self.weights
        valid = padding_mask(lengths, n)                           # (b, 1, n): the real tokens
        mask = valid[:, :, None, :] & valid[:, :, :, None]         # (b, 1, n, n): real q, real k

        x = self.word_embeddings(token_ids)                        # (b, n, d_model)
        x = x + w["embeddings.position_embeddings.weight"][:n]     # (b, n, d_model)
        x = x + w["embeddings.token_type_embeddings.weight"][0]    # (b, n, d_model), segment 0
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                       self.eps)                                   # (b, n, d_model)
        hidden_states, attentions = [x], []
        for layer in range(self.layers):
            x, weights = bert_layer(x, mask, w, f"encoder.layer.{layer}", self.h, self.eps)
            hidden_states.append(x)                                # (b, n, d_model)
            attentions.append(weights)                             # (b, h, n, n)
        hidden_states = np.stack(hidden_states, axis=1)  # (b, layers + 1, n, d_model)
        hidden_states *= valid[:, :, :, None]            # zeros at the padding positions
        return hidden_states, np.stack(attentions, axis=1)  # ..., (b, layers, h, n, n)
