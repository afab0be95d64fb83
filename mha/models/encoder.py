"""Parts shared by the encoder models of `mha.models`: LayerNorm, GELU, the linear map, BERT's
encoder layer and the result type.

`bert_layer` is one post-LayerNorm Transformer encoder layer, its attention computed by
`mha.scaled_dot_product_attention`; the weights are looked up by their ``transformers`` names.
``tests/test_minilm.py`` checks it against a slow loop over heads and queries, and, through
`mha.models.minilm.MiniLM`, against PyTorch ``transformers``.

Dimension names: ``b`` sentences, ``n`` tokens, ``d_model``, ``h`` heads, ``d_k = d_model / h``,
``d_ff`` (the feed-forward width), ``layers``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..attention import scaled_dot_product_attention
from ..multihead import merge_heads, split_heads

__all__ = ["layer_norm", "gelu", "linear", "bert_layer", "EncoderOutput"]


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


@dataclass(frozen=True, eq=False)
class EncoderOutput:
    """What an encoder's ``forward`` returns (`mha.models.minilm.MiniLM.forward`): the tokens,
    every layer's output and every attention map.

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
