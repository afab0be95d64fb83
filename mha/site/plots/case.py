"""The case and the cast that every chapter and figure shares.

The case file is one sentence, 侦探在桌子下面找到了钥匙。 / "The detective found the key under
the desk", eight tokens in each language. Both sentences hold the same eight *concepts* in a
different order. Each concept gets one embedding, so the Chinese and the English figures show the
same numbers for the same pair of concepts: without positional information attention is
permutation-equivariant, and reordering the tokens only reorders the rows and columns.

The cast: four detectives, one per attention head, each with a notebook of one colour.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CASE_TOKENS", "CASE_ORDER", "CASE_SENTENCE", "CAST", "Detective", "case_tokens"]

#: The eight concepts, in the English sentence's order: (Chinese token, English token).
_CONCEPTS = [("在", "the"), ("侦探", "detective"), ("找到", "found"), ("了", "the"),
             ("钥匙", "key"), ("下面", "under"), ("。", "the"), ("桌子", "desk")]

#: Which concept stands at each position of the sentence, per language.
CASE_ORDER = {"en": [0, 1, 2, 3, 4, 5, 6, 7], "zh": [1, 0, 7, 5, 2, 3, 4, 6]}

#: The tokens of the sentence, per language, in reading order.
CASE_TOKENS = {
    lang: [_CONCEPTS[c][0 if lang == "zh" else 1] for c in order]
    for lang, order in CASE_ORDER.items()
}
# The English sentence starts with a capital; the tokens are lower-case like a tokenizer's.
CASE_SENTENCE = {"zh": "侦探在桌子下面找到了钥匙。", "en": "The detective found the key under the desk"}


@dataclass(frozen=True)
class Detective:
    """One attention head of the running example, as a member of the team."""

    zh: str
    en: str
    color: str
    zh_clue: str
    en_clue: str


#: One detective per head, in head order (head 0 first). Colours stay apart for colour-blind
#: readers (Okabe-Ito); the "yellow" one is drawn in a darker amber so it reads on white.
CAST = (
    Detective("红色侦探", "red detective", "#D55E00", "时间线", "the timeline"),
    Detective("蓝色侦探", "blue detective", "#0072B2", "人物关系", "who relates to whom"),
    Detective("绿色侦探", "green detective", "#009E73", "地点", "places"),
    Detective("黄色侦探", "yellow detective", "#E69F00", "物证", "objects"),
)


def case_tokens(lang: str) -> list[str]:
    """The case sentence's tokens in ``lang`` (``"zh"`` or ``"en"``)."""
    return list(CASE_TOKENS[lang])
