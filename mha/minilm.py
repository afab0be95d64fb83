"""Kept so that ``from mha.minilm import load_minilm`` keeps working: the code lives in
`mha.models.minilm` (the tokenizer in `mha.models.wordpiece`, the shared layers in
`mha.models.encoder`)."""

from .models.minilm import *  # noqa: F401,F403
from .models.minilm import __all__  # noqa: F401
