"""BERT's WordPiece tokenizer: text -> lower-cased words and punctuation -> vocabulary pieces.

Used by `mha.models.minilm`; readable on its own. Known differences from Hugging Face
``tokenizers`` are listed in `WordPieceTokenizer`'s Notes.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np

__all__ = ["WordPieceTokenizer", "is_cjk", "is_punctuation"]


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
    >>> from mha.models.wordpiece import WordPieceTokenizer
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
        """The WordPieces of ``text``, without ``[CLS]`` and ``[SEP]``."""
        return [piece for word in self.basic_words(text) for piece in self.wordpieces(word)]

    def encode(self, text: str) -> tuple[list[str], np.ndarray]:
        """``[CLS]``, the WordPieces of ``text``, ``[SEP]``: the tokens and their ids ``(n,)``."""
        tokens = ["[CLS]", *self.tokenize(text), "[SEP]"]
        return tokens, np.array([self.ids[t] for t in tokens])
