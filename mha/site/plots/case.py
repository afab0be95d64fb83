"""The case and the cast that every chapter and figure shares.

The case file is one sentence, 侦探在桌子下面找到了钥匙。 / "The detective found the key under
the desk", eight tokens in each language. As in a real model's embedding table, a word has one
embedding wherever it stands: the English *the* is one word at three positions, so its three
rows of the input are the same row. The five content words that translate each other (侦探 and
detective, 找到 and found, 钥匙 and key, 下面 and under, 桌子 and desk) share their embedding
across the two languages; every other word (the; 在, 了, 。) has its own. The Chinese and the
English figures therefore show different numbers.

The cast: four detectives, one per attention head, each named by one colour. The colours only
name the heads; they are not specialties.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CASE_TOKENS", "CASE_ORDER", "CASE_SENTENCE", "CAST", "EMBEDDING_ROWS", "Detective",
           "case_tokens"]

#: The case's vocabulary: row ``r`` of `mha.site.experiments.case_embeddings` is the embedding
#: of word ``r``, given as (Chinese word, English word); ``None`` where the word belongs to one
#: language only. A translated pair shares one row.
EMBEDDING_ROWS = [(None, "the"), ("侦探", "detective"), ("找到", "found"), ("了", None),
                  ("钥匙", "key"), ("下面", "under"), ("。", None), ("桌子", "desk"),
                  ("在", None)]

#: The sentence in each language as rows of `EMBEDDING_ROWS`, in reading order.
CASE_ORDER = {"en": [0, 1, 2, 0, 4, 5, 0, 7], "zh": [1, 8, 7, 5, 2, 3, 4, 6]}

#: The tokens of the sentence, per language, in reading order.
CASE_TOKENS = {
    lang: [EMBEDDING_ROWS[r][0 if lang == "zh" else 1] for r in order]
    for lang, order in CASE_ORDER.items()
}
# The English sentence starts with a capital; the tokens are lower-case like a tokenizer's.
CASE_SENTENCE = {"zh": "侦探在桌子下面找到了钥匙。", "en": "The detective found the key under the desk"}


@dataclass(frozen=True)
class Detective:
    """One attention head of the running example, named by a colour."""

    zh: str
    en: str
    color: str


#: One detective per head, in head order (head 0 first). The colours name the heads so that
#: figures are readable; nobody assigns a head a job. Colours stay apart for colour-blind
#: readers (Okabe-Ito); the "yellow" one is drawn in a darker amber so it reads on white.
CAST = (
    Detective("红色侦探", "red detective", "#D55E00"),
    Detective("蓝色侦探", "blue detective", "#0072B2"),
    Detective("绿色侦探", "green detective", "#009E73"),
    Detective("黄色侦探", "yellow detective", "#E69F00"),
)


def case_tokens(lang: str) -> list[str]:
    """The case sentence's tokens in ``lang`` (``"zh"`` or ``"en"``)."""
    return list(CASE_TOKENS[lang])
