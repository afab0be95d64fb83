"""What the heads of all-MiniLM-L6-v2 do, measured over a set of sentences rather than one.

A head that looks like it links a pronoun to its noun on one sentence may do nothing of the
kind on the next. This module measures a few simple, checkable roles on every sentence of a
fixed study set (`SENTENCES`) and reports, for each head, the role it plays on average and on
how many sentences it actually plays it.

The roles (`ROLES`), each a score in [0, 1] for every head of every layer:

``previous``, ``next``, ``self``
    The share of attention weight a token puts on the token just before it, just after it, or
    on itself.
``cls``, ``sep``
    The share on the special tokens the tokenizer adds: ``[CLS]`` at the start, ``[SEP]`` at
    the end.
``punctuation``
    The share on punctuation tokens (``.``, ``,``, ``?``, quotes, ...).
``broad``
    The normalised entropy of a token's attention weights, ``H / log n``: 1 when it spreads
    its weight evenly over all ``n`` tokens, 0 when it puts all of it on one token.

A head *plays* a role in a sentence when its score there reaches the role's threshold in
`THRESHOLDS`: half of its attention weight on that kind of target (0.5), or a normalised
entropy of at least 0.85 for ``broad``. A head *has a clear role* when two things hold:

1. its mean score across the sentences reaches the threshold (that role is its role), and
2. it plays that role in at least `STABLE_FRACTION` (90 %) of the sentences.

A role that passes on average but fails the second test is *unstable*: a pattern of some
sentences, not a job the head does. See `HeadRoleStudy` for the details, and
`pronoun_attention` for the test of a pattern that is often read into one sentence: a pronoun
attending to the noun it refers to.

Layers and heads are counted from 1 in what `HeadRoleStudy.clearest` returns (it is what the
pages print) and from 0 in every array, as in `mha.minilm`.

Dimension names: ``s`` sentences, ``n`` tokens, ``layers`` = 6, ``h`` = 12 heads, ``roles`` = 7.
Imports NumPy, the standard library and `mha.minilm` only.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..models.minilm import load_minilm
from ..models.wordpiece import is_punctuation

__all__ = ["SENTENCES", "ROLES", "THRESHOLDS", "STABLE_FRACTION", "role_scores", "HeadRole",
           "HeadRoleStudy", "study", "PRONOUNS", "pronoun_attention"]

#: The study set: varied English sentences (the model's vocabulary is nearly all English), 6 to
#: 27 words, with commas, quotes, questions, pronouns and subordinate clauses. Fixed, so numbers
#: are repeatable.
SENTENCES: tuple[str, ...] = (
    "The detective found the key because it was hidden under the desk.",
    "Who left the window open last night?",
    "The butler did it, of course.",
    "She read the letter twice, then burned it in the fireplace.",
    "\"I never touched the knife,\" the gardener said quietly.",
    "Rain had washed away most of the footprints near the gate.",
    "When the clock struck midnight, the lights in the library went out.",
    "The inspector asked the maid where she had been at nine o'clock.",
    "Nobody noticed that the painting had been replaced with a clever copy.",
    "Holmes lit his pipe and stared at the ceiling for a long time.",
    "The cook swore she heard footsteps on the stairs, but the hallway was empty.",
    "Why would anyone steal a broken watch?",
    "A single red thread was caught on the nail beside the door.",
    "The twins told the same story, word for word, which made the detective suspicious.",
    "He locked the drawer, pocketed the key, and walked out without a word.",
    "The poison, the doctor explained, acts slowly and leaves almost no trace.",
    "Mrs. Hudson brought tea while the two men studied the map.",
    "If the train left at six, the alibi cannot be true.",
    "The dog did not bark, so the thief must have been someone it knew.",
    "Someone had torn the last page out of the diary.",
    "\"Look at the mud on his boots,\" she whispered; \"he walked here from the marsh.\"",
    "The heiress inherited the house, the horses and all of her uncle's debts.",
    "Did the captain see the stranger on the deck before the storm?",
    "The police found no weapon, no witness and no motive.",
    "After the funeral, the lawyer read the will to the silent family.",
    "The candle had burned down to a stub, so the room must have been empty for hours.",
    "Her brother claimed he was in London, yet his ticket was for Paris.",
    "The safe was open and completely empty.",
    "Watson wrote everything down in a small black notebook.",
    "The guests gathered in the drawing room while the detective explained how the crime "
    "was done.",
    "Every clock in the house had stopped at a quarter past three.",
    "Was the gardener lying, or had the maid simply misheard him?",
    "The ransom note was written in green ink on expensive paper.",
    "Because the snow had fallen after midnight, the tracks leading to the cottage told a "
    "simple story.",
    "The professor smiled, but his hands were shaking.",
    "In the end, the quiet neighbour who fed the cats had seen everything from her window.",
    "Although the door was locked from the inside and the only key lay on the table, the "
    "detective was sure that the victim had not been alone.",
    "The maid said that she had seen the butler, who was carrying a lamp, hurry across the "
    "lawn towards the old boathouse just before the shot.",
)

#: The roles measured, in the order of the ``roles`` axis of every array here.
ROLES: tuple[str, ...] = ("previous", "next", "self", "cls", "sep", "punctuation", "broad")

#: The score a head must reach to play a role: a share of attention weight for the first six
#: roles, a normalised entropy for ``broad``.
THRESHOLDS: dict[str, float] = {role: 0.5 for role in ROLES[:-1]} | {"broad": 0.85}

#: The share of the sentences in which a head must play its role for the role to be clear.
STABLE_FRACTION = 0.9


def role_scores(attentions: np.ndarray, tokens: list[str]) -> dict[str, np.ndarray]:
    r"""Score every head on every role, on one sentence.

    Parameters
    ----------
    attentions : ndarray of shape ``(layers, h, n, n)``
        Attention weights of one sentence without padding, as in `mha.minilm.MiniLMOutput`:
        ``attentions[l, j, q, k]`` is how much token ``q`` attends to token ``k``. Each row
        sums to 1. Any number of leading axes works, ``(h, n, n)`` for one layer say.
    tokens : list of str, length ``n``
        The sentence's tokens, ``[CLS]`` and ``[SEP]`` included.

    Returns
    -------
    dict of str to ndarray of shape ``(layers, h)``
        One entry per role of `ROLES`, in that order, each in [0, 1]:

        - ``previous``: mean over the queries ``q = 1 .. n-1`` of ``attentions[..., q, q-1]``
          (the first token has no previous token and is left out);
        - ``next``: mean over ``q = 0 .. n-2`` of ``attentions[..., q, q+1]`` (the last token
          has no next token);
        - ``self``: mean over all queries of ``attentions[..., q, q]``;
        - ``cls``, ``sep``, ``punctuation``: mean over all queries of the summed weight on the
          tokens ``[CLS]``, ``[SEP]``, or single punctuation characters (0 if the sentence has
          none);
        - ``broad``: mean over all queries of the normalised entropy of the row (below).

    Raises
    ------
    ValueError
        If ``attentions`` is not ``(..., n, n)`` with ``n >= 2`` matching ``len(tokens)``, or
        a row does not sum to 1 (a padded map, say).

    Notes
    -----
    With $a_{qk}$ the weight query $q$ gives key $k$ and $T$ a set of target tokens, the share
    on the targets and the normalised entropy, each averaged over the $n$ queries, are

    $$
    \text{share}_T = \frac{1}{n} \sum_{q=1}^{n} \sum_{k \in T} a_{qk}, \qquad
    \text{broad} = \frac{1}{n} \sum_{q=1}^{n} \frac{-\sum_k a_{qk} \log a_{qk}}{\log n},
    $$

    with $0 \log 0 = 0$. ``self``, ``previous`` and ``next`` use a target that depends on the
    query, $T = \{q\}, \{q - 1\}, \{q + 1\}$, over the queries where it exists. Roles overlap:
    a full stop attending to itself counts for ``self`` and ``punctuation``; token 1 attending
    to token 0 counts for ``previous`` and ``cls``.

    Examples
    --------
    >>> import numpy as np
    >>> from mha.site.head_roles import role_scores
    >>> tokens = ["[CLS]", "who", "did", "it", "?", "[SEP]"]
    >>> previous = np.eye(6, k=-1)            # each token looks at the one before it
    >>> previous[0, 0] = 1.0                  # except [CLS], which has none
    >>> uniform = np.full((6, 6), 1 / 6)      # every token looks at all of them evenly
    >>> scores = role_scores(np.stack([previous, uniform])[None], tokens)  # (layers=1, h=2)
    >>> scores["previous"].round(3)
    array([[1.   , 0.167]])
    >>> scores["broad"].round(3)
    array([[0., 1.]])
    """
    a = np.asarray(attentions, dtype=np.float64)         # (layers, h, n, n)
    n = len(tokens)
    if a.ndim < 2 or a.shape[-2:] != (n, n) or n < 2:
        raise ValueError(f"attentions must have shape (..., n, n) with n = len(tokens) = {n} "
                         f">= 2, got shape {a.shape}")
    if not np.allclose(a.sum(axis=-1), 1, atol=1e-4):
        raise ValueError(f"every row of attentions {a.shape} must sum to 1 (strip the padding "
                         "of a batched output first)")
    tokens = np.asarray(tokens)                          # (n,)
    punctuation = np.array([len(t) == 1 and is_punctuation(t) for t in tokens])  # (n,)

    def share(targets: np.ndarray) -> np.ndarray:        # targets (n,) bool -> (layers, h)
        return a[..., targets].sum(axis=-1).mean(axis=-1)

    logs = np.log(a, out=np.zeros_like(a), where=a > 0)  # (layers, h, n, n), log 0 -> 0
    entropy = -(a * logs).sum(axis=-1) / math.log(n)     # (layers, h, n)
    return {
        "previous": np.diagonal(a, offset=-1, axis1=-2, axis2=-1).mean(axis=-1),  # a[q, q-1]
        "next": np.diagonal(a, offset=1, axis1=-2, axis2=-1).mean(axis=-1),       # a[q, q+1]
        "self": np.diagonal(a, axis1=-2, axis2=-1).mean(axis=-1),                 # a[q, q]
        "cls": share(tokens == "[CLS]"),
        "sep": share(tokens == "[SEP]"),
        "punctuation": share(punctuation),
        "broad": entropy.mean(axis=-1),
    }


class HeadRole(NamedTuple):
    """One row of `HeadRoleStudy.clearest`: a head, its role, and how steadily it plays it.

    ``layer`` and ``head`` are counted from 1; ``mean``, ``std``, ``min`` and ``p10`` are the
    head's score on ``role`` across the sentences (mean, standard deviation, lowest value and
    10th percentile); it plays the role (reaches the threshold) in ``stable`` of ``sentences``.
    """

    layer: int
    head: int
    role: str
    mean: float
    std: float
    min: float
    p10: float
    stable: int
    sentences: int


@dataclass(frozen=True, eq=False)
class HeadRoleStudy:
    """The role scores of every head on every sentence of a study set, and their summary.

    Build it with `study` (which runs the model) or `HeadRoleStudy.from_scores`. Arrays are
    indexed from 0: ``role[0, 2]`` is layer 1, head 3.

    Attributes
    ----------
    sentences : tuple of str, length ``s``
    tokens : tuple of tuple of str
        Each sentence's tokens.
    scores : ndarray of shape ``(s, roles, layers, h)``
        `role_scores` of each sentence, roles in the order of `ROLES`.
    mean, std, min, p10 : ndarray of shape ``(roles, layers, h)``
        Across the sentences: the mean, the standard deviation, the lowest score and the 10th
        percentile (linear interpolation, NumPy's default).
    plays : ndarray of bool, shape ``(s, roles, layers, h)``
        ``scores >= THRESHOLDS[role]``: the head plays the role in that sentence.
    role : ndarray of int, shape ``(layers, h)``
        Each head's role, an index into `ROLES`, or -1 for none: the first of the six share
        roles whose mean score reaches 0.5, else ``broad`` if the mean normalised entropy
        reaches 0.85, else none. (Two shares can pass 0.5 together only where their targets
        overlap, such as ``self`` and ``punctuation`` on a full stop; none do in practice.)
    stable : ndarray of int, shape ``(layers, h)``
        In how many sentences the head plays its role (0 where it has none).
    clear : ndarray of bool, shape ``(layers, h)``
        The head has a clear role: it has a role and plays it in at least
        ``STABLE_FRACTION * s`` sentences.
    """

    sentences: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    scores: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    p10: np.ndarray
    plays: np.ndarray
    role: np.ndarray
    stable: np.ndarray
    clear: np.ndarray

    @classmethod
    def from_scores(cls, sentences, tokens, scores: np.ndarray) -> HeadRoleStudy:
        """Summarise per-sentence scores ``(s, roles, layers, h)`` into a `HeadRoleStudy`."""
        scores = np.asarray(scores, dtype=np.float64)
        s = len(sentences)
        if scores.ndim != 4 or scores.shape[:2] != (s, len(ROLES)) or len(tokens) != s:
            raise ValueError(f"scores must have shape (s={s}, roles={len(ROLES)}, layers, h) "
                             f"and tokens length s, got {scores.shape} and {len(tokens)}")
        threshold = np.array([THRESHOLDS[r] for r in ROLES])[:, None, None]  # (roles, 1, 1)
        mean = scores.mean(axis=0)                                  # (roles, layers, h)
        passes = mean >= threshold                                  # (roles, layers, h)
        shares = passes[:-1]                                        # (roles - 1, layers, h)
        role = np.where(shares.any(axis=0), np.argmax(shares, axis=0),
                        np.where(passes[-1], len(ROLES) - 1, -1))   # (layers, h)
        plays = scores >= threshold                                 # (s, roles, layers, h)
        own = np.take_along_axis(plays, np.maximum(role, 0)[None, None], axis=1)[:, 0]
        stable = np.where(role >= 0, own.sum(axis=0), 0)            # (layers, h)
        clear = (role >= 0) & (stable >= STABLE_FRACTION * s)       # (layers, h)
        return cls(tuple(sentences), tuple(tuple(t) for t in tokens), scores, mean,
                   scores.std(axis=0), scores.min(axis=0), np.percentile(scores, 10, axis=0),
                   plays, role, stable, clear)

    def strength(self) -> np.ndarray:
        """Each head's mean score on its own role, ``(layers, h)``; NaN where it has none."""
        own = np.take_along_axis(self.mean, np.maximum(self.role, 0)[None], axis=0)[0]
        return np.where(self.role >= 0, own, np.nan)

    def clarity(self) -> np.ndarray:
        """How far each head's mean score is past its role's threshold, ``(layers, h)``.

        ``(mean - threshold) / (1 - threshold)``: 0 at the threshold, 1 for a perfect score
        (all the weight on the target, or perfectly even weights for ``broad``); NaN for a head
        with no role. Puts shares and entropies on one scale for ranking.
        """
        threshold = np.array([THRESHOLDS[r] for r in ROLES])[np.maximum(self.role, 0)]
        return (self.strength() - threshold) / (1 - threshold)

    def clearest(self, k: int | None = None) -> list[HeadRole]:
        """The ``k`` heads with the clearest roles; by default every head with a clear role.

        Only heads with a clear role (`clear`) are candidates, ranked by `clarity`, most
        clear first (ties: more sentences played, then lower layer and head). Layers and heads
        in the rows are counted from 1.

        Examples
        --------
        >>> from mha.site.head_roles import study
        >>> for row in study().clearest(2):
        ...     print(row.layer, row.head, row.role, f"{row.mean:.2f}", row.stable)
        1 3 previous 1.00 38
        5 6 cls 0.86 38
        """
        clarity = self.clarity()
        heads = sorted(zip(*np.nonzero(self.clear)),
                       key=lambda lh: (-clarity[lh], -self.stable[lh], lh))
        rows = []
        for l, j in heads[:k]:
            r = self.role[l, j]
            rows.append(HeadRole(int(l) + 1, int(j) + 1, ROLES[r], float(self.mean[r, l, j]),
                                 float(self.std[r, l, j]), float(self.min[r, l, j]),
                                 float(self.p10[r, l, j]), int(self.stable[l, j]),
                                 len(self.sentences)))
        return rows


def study(sentences=SENTENCES, model=None) -> HeadRoleStudy:
    """Run all-MiniLM-L6-v2 on ``sentences`` and score every head on every role.

    Parameters
    ----------
    sentences : sequence of str, default `SENTENCES`
    model : mha.minilm.MiniLM, optional
        Defaults to `mha.minilm.load_minilm()`.

    Returns
    -------
    HeadRoleStudy
        The same object for the same sentences and model, within one process: the model runs
        once (on all the sentences as one padded batch, about a second for `SENTENCES`).

    Examples
    --------
    >>> from mha.site.head_roles import study
    >>> result = study()
    >>> result.scores.shape                 # (s, roles, layers, h)
    (38, 7, 6, 12)
    >>> int(result.clear.sum())             # heads with a clear role, of 72
    21
    """
    return _study(tuple(sentences), load_minilm() if model is None else model)


@functools.lru_cache(maxsize=4)
def _study(sentences: tuple[str, ...], model) -> HeadRoleStudy:
    if not sentences:
        raise ValueError("sentences is empty: give at least one sentence")
    out = model.forward(list(sentences))  # attentions (s, layers, h, n_max, n_max), padded
    scores = [np.stack(list(role_scores(attentions[..., :n, :n], tokens).values()))
              for attentions, tokens, n in zip(out.attentions, out.tokens, out.lengths)]
    return HeadRoleStudy.from_scores(sentences, out.tokens, np.stack(scores))


# ----------------------------------------------------------------------------------------------
# Does any head link a pronoun to its noun? Tested on many sentences, not one.

#: Sentences with a pronoun and the noun it refers to (each a single WordPiece, and the first
#: token of its spelling in the sentence): (sentence, pronoun, noun).
PRONOUNS: tuple[tuple[str, str, str], ...] = (
    ("The detective found the key because it was hidden under the desk.", "it", "key"),
    ("She read the letter twice, then burned it in the fireplace.", "it", "letter"),
    ("The dog did not bark, so the thief must have been someone it knew.", "it", "dog"),
    ("The professor smiled, but his hands were shaking.", "his", "professor"),
    ("Holmes lit his pipe and stared at the ceiling for a long time.", "his", "holmes"),
    ("Her brother claimed he was in London, yet his ticket was for Paris.", "he", "brother"),
    ("The cook swore she heard footsteps on the stairs, but the hallway was empty.", "she",
     "cook"),
    ("The inspector asked the maid where she had been at nine o'clock.", "she", "maid"),
    ("The lawyer opened the box and found that it was empty.", "it", "box"),
    ("The captain lost his map, so he asked the sailor for directions.", "he", "captain"),
)


def pronoun_attention(pronouns=PRONOUNS, model=None) -> np.ndarray:
    """How much each pronoun attends to the noun it refers to, in every head.

    Parameters
    ----------
    pronouns : sequence of (str, str, str), default `PRONOUNS`
        ``(sentence, pronoun, noun)``; the pronoun and the noun are tokens of the sentence (the
        first occurrence of each is used).
    model : mha.minilm.MiniLM, optional
        Defaults to `mha.minilm.load_minilm()`.

    Returns
    -------
    ndarray of shape ``(p, layers, h)``
        ``attentions[l, j, pronoun, noun]`` for each of the ``p`` sentences.

    Raises
    ------
    ValueError
        If a pronoun or noun is not a token of its sentence.

    Examples
    --------
    >>> from mha.site.head_roles import pronoun_attention
    >>> links = pronoun_attention()         # (p, layers, h)
    >>> round(float(links[0, 4, 11]), 2)    # layer 5 head 12, "it" -> "key": looks like one...
    0.6
    >>> int((links[:, 4, 11] >= 0.5).sum()) # ...but on 1 of the 10 sentences only
    1
    """
    model = load_minilm() if model is None else model
    out = model.forward([sentence for sentence, _, _ in pronouns])
    links = []
    for (sentence, pronoun, noun), tokens, attentions in zip(pronouns, out.tokens,
                                                             out.attentions):
        missing = [w for w in (pronoun, noun) if w not in tokens]
        if missing:
            raise ValueError(f"{missing} not among the tokens {tokens} of {sentence!r}")
        links.append(attentions[:, :, tokens.index(pronoun), tokens.index(noun)])  # (layers, h)
    return np.stack(links)
