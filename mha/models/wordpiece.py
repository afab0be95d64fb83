"""BERT's WordPiece tokenizer: text -> lower-cased words and punctuation -> vocabulary pieces.

Used by `mha.models.minilm`; readable on its own. Known differences from Hugging Face
``tokenizers`` are listed in `WordPieceTokenizer`'s Notes.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import numpy as np

__all__ = ["WordPieceTokenizer", "SPECIAL_TOKENS", "is_cjk", "is_punctuation"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""BERT's special tokens.

Written in the text, each one that the vocabulary holds stays one token."""


def is_cjk(char: str) -> bool:
    """True for a CJK ideograph (the Unicode blocks BERT splits one character per token)."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in (
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))


def is_punctuation(char: str) -> bool:
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
    special_tokens : tuple of str
        The `SPECIAL_TOKENS` that ``vocab`` holds (``[MASK]`` may be missing from a small one).

    Notes
    -----
    First the special tokens written in the text are cut out, then each stretch of text between
    them goes through the two stages of BERT:

    0. Special tokens: ``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]`` and ``[MASK]`` in the text
       stay one token each, as in Hugging Face ``transformers``: matched exactly (upper case,
       nothing inside the brackets), on the raw text, wherever they are, even inside a word
       (``x[SEP]y`` -> ``x [SEP] y``). A word after one starts afresh (``[MASK]s`` ->
       ``[MASK] s``, not ``##s``). ``[mask]``, ``[ MASK ]`` or a ``[MASK]`` with an invisible
       character inside it is ordinary text (``[ mask ]``).
    1. Basic tokenisation: drop control, format and private-use characters, turn any
       whitespace into a space, put spaces around each CJK ideograph (so each is a word of its
       own), strip accents (Unicode NFD, then drop the nonspacing marks, category Mn:
       ``café`` -> ``cafe``), lower-case, split on whitespace and split each punctuation
       character off as a word.
    2. WordPiece: split each word greedily into the longest vocabulary entries from its start;
       a piece that does not start the word is looked up with ``##`` in front
       (``fingerprints`` stays whole, ``undetectable`` -> ``und ##ete ##ctable``). A word that
       cannot be split this way, or longer than ``max_chars_per_word``, becomes one ``[UNK]``.

    **Agreement with Hugging Face.** The special tokens are cut out as ``transformers``' fast
    tokenizer does (built from the model's ``tokenizer.json``; its Python tokenizer,
    ``BertTokenizerLegacy`` in version 5, cleans the text first, so it also keeps
    ``[MA\u200bSK]`` whole). Stages 1 and 2 were
    compared with ``tokenizers`` 0.23.3 reading ``tokenizer.json``, on every code point, alone
    and between two letters (``a?b``), under Python 3.11 (``unicodedata.unidata_version``
    14.0.0): the tokens are the same for all but 759 code points.

    - 256 CJK ideographs U+2B820 to U+2B91F (Extension E): words of their own here, as in
      BERT's original code; ``tokenizers``' range starts at U+2B920, so it keeps them inside
      the word (``a?b`` -> ``[UNK]``).
    - 503 characters that Unicode added or re-classified after the tables ``tokenizers`` uses:
      383 nonspacing marks (Mn) and 13 format characters (Cf) dropped here, kept there
      (``?`` alone -> nothing here, ``[UNK]`` there); 104 punctuation marks (94 Po, 4 Ps,
      4 Pe, 2 Pd) split off here, kept inside the word there; and three that ``tokenizers``
      classes differently: U+1734 (Mc here, so kept; dropped there as a mark), U+166D (So
      here) and U+111C9 (Mn here), both split off there as punctuation.

    Python's Unicode tables decide these classes, so the differences depend on the Python
    version: a later one (Unicode 15 from Python 3.12) knows more characters that
    ``tokenizers`` does not. Unassigned code points (category Cn) are kept, as ``tokenizers``
    keeps them. On every assigned code point (alone and between two letters), the tokens equal
    those of ``transformers``' Python tokenizer, which reads Python's tables too.

    Examples
    --------
    >>> from mha.models.wordpiece import WordPieceTokenizer
    >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe",
    ...                           "un", "##lock", "##ed", ".", "子", "[", "]", "mask"])
    >>> tok.tokenize("The café, UNLOCKED. 桌子")
    ['the', 'cafe', '[UNK]', 'un', '##lock', '##ed', '.', '[UNK]', '子']
    >>> tok.tokenize("The [MASK]. the [mask]")
    ['the', '[MASK]', '.', 'the', '[', 'mask', ']']
    >>> tok.encode("the cafe")
    (['[CLS]', 'the', 'cafe', '[SEP]'], array([2, 5, 6, 3]))
    """

    def __init__(self, vocab: list[str], max_chars_per_word: int = 100):
        self.vocab = list(vocab)
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        missing = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]") if t not in self.ids]
        if missing:
            raise ValueError(f"vocab lacks the special tokens {missing} (it has {len(vocab)} "
                             "entries)")
        self.max_chars_per_word = max_chars_per_word
        self.special_tokens = tuple(t for t in SPECIAL_TOKENS if t in self.ids)
        self._special = re.compile("(" + "|".join(map(re.escape, self.special_tokens)) + ")")

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
            chars.append(f" {char} " if is_cjk(char) else " " if char.isspace() else char)
        text = unicodedata.normalize("NFD", "".join(chars))
        # Drop the accents, then lower-case one character at a time (str.lower() would turn a
        # word-final capital sigma into the final form, which BERT's tokenizer does not).
        text = "".join(c.lower() for c in text if unicodedata.category(c) != "Mn")
        words = []
        for chunk in text.split():
            word = ""
            for char in chunk:
                if is_punctuation(char):
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
        """The WordPieces of ``text`` (special tokens kept whole), without the added ``[CLS]``
        and ``[SEP]``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        pieces = []
        # The split keeps the special tokens at the odd positions, the text around them at the
        # even ones. No special token starts another, so the first match is the longest.
        for i, part in enumerate(self._special.split(text)):
            if i % 2:
                pieces.append(part)
            else:
                pieces += [piece for word in self.basic_words(part)
                           for piece in self.wordpieces(word)]
        return pieces

    def encode(self, text: str) -> tuple[list[str], np.ndarray]:
        """``[CLS]``, the WordPieces of ``text``, ``[SEP]``: the tokens and their ids ``(n,)``."""
        tokens = ["[CLS]", *self.tokenize(text), "[SEP]"]
        return tokens, np.array([self.ids[t] for t in tokens])
