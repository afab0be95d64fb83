"""What the heads of a real model do, measured over a set of sentences rather than one.

A head that looks like it links a pronoun to its noun on one sentence may do nothing of the
kind on the next. This module measures a few simple, checkable roles on every sentence of a
fixed study set and reports, for each head, the role it plays on average and on how many
sentences it actually plays it. The same code studies both models of `mha.models`:
all-MiniLM-L6-v2 on English (`SENTENCES`, the default) and multilingual-e5-small on Chinese
(`SENTENCES_ZH`, ``study(SENTENCES_ZH, load_e5())``).

The roles (`ROLES`), each a score in [0, 1] for every head of every layer:

``previous``, ``next``, ``self``
    The share of attention weight a token puts on the token just before it, just after it, or
    on itself.
``cls``, ``sep``
    The share on the special tokens the tokenizer adds at the start and at the end, read from
    the model (`mha.models.encoder.SpecialTokens`): ``[CLS]`` and ``[SEP]`` for
    all-MiniLM-L6-v2, ``<s>`` and ``</s>`` for multilingual-e5-small. The roles keep BERT's
    names; figures and tables name the model's own tokens.
``punctuation``
    The share on punctuation tokens: a token that is punctuation and nothing else (``.``,
    ``,``, ``?``, quotes; Chinese ``。、“”《》……``; SentencePiece's pieces such as ``:“`` or
    ``▁《``, whose space mark ``▁`` is ignored). The bare ``▁`` that starts many Chinese
    sentences (the space SentencePiece writes before the text, when no piece joins it to the
    first word: ``▁ 侦 探 ...`` but ``▁她 把 ...``) is a space, not punctuation: a token like
    any other for ``previous``, ``next`` and ``self``, and no role of its own (on
    `SENTENCES_ZH` no head gives it as much as 0.14 of its weight on average).
``broad``
    The normalised entropy of a token's attention weights, ``H / log n``: 1 when it spreads
    its weight evenly over all ``n`` tokens, 0 when it puts all of it on one token.

A head *plays* a role in a sentence when its score there reaches the role's threshold in
`THRESHOLDS`: half of its attention weight on that kind of target (0.5), or a normalised
entropy of at least 0.85 for ``broad``. A head *has a clear role* when two things hold:

1. its mean score across the sentences reaches the threshold (that role is its role), and
2. it plays that role in at least `STABLE_FRACTION` (90 %) of the sentences.

A role that passes on average but fails the second test is *unstable*: a pattern of some
sentences, not a job the head does. See `HeadRoleStudy` for the details;
`pronoun_attention` for the test of a pattern that is often read into one sentence, a pronoun
attending to the noun it refers to; and `word_links` for one that only Chinese text shows, the
pieces of a word the tokenizer split looking at each other.

Layers and heads are counted from 1 in what `HeadRoleStudy.clearest` and `WordLinks.heads`
return (it is what the pages print) and from 0 in every array, as in `mha.models`.

Dimension names: ``s`` sentences, ``n`` tokens, ``layers`` (6 in all-MiniLM-L6-v2, 12 in
multilingual-e5-small), ``h`` = 12 heads, ``roles`` = 7. Imports NumPy, the standard library and
`mha.models` only.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..models.e5 import load_e5
from ..models.encoder import SpecialTokens
from ..models.minilm import load_minilm
from ..models.sentencepiece import METASPACE
from ..models.wordpiece import is_cjk, is_punctuation

__all__ = ["SENTENCES", "WORDS_ZH", "SENTENCES_ZH", "ROLES", "THRESHOLDS", "STABLE_FRACTION",
           "is_punctuation_token", "role_scores", "HeadRole", "HeadRoleStudy", "study",
           "PRONOUNS", "pronoun_attention", "WordLink", "WordLinks", "word_links"]

#: The English study set, for all-MiniLM-L6-v2 (its vocabulary is nearly all English): 6 to
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

#: The Chinese study set for multilingual-e5-small, written for this site: 50 sentences of 8 to
#: 37 characters, statements, questions, quotations, lists with 、, clauses (因为, 虽然, 如果),
#: numbers, names, the case's world and everyday life; the case sentence first. Each is written
#: as its words, separated by spaces, by one hand-applied convention: compounds and set phrases
#: are one word (侦探, 图书馆, 脚步声, 空无一人), a person's name is one word (陈明, but 王 侦探);
#: particles and other function words stand alone (的, 了, 着, 在, 把, 被); a number and its
#: measure word are two (三 个, 十七 枚, 九 点钟); a verb and the result or direction after it are
#: two (扔 进, 撕 掉, 注意 到) unless the pair is a word of its own (找到, 打开, 留下, 听见); each
#: punctuation mark is one (…… too). `word_links` reads the words; `SENTENCES_ZH` is the text.
WORDS_ZH: tuple[str, ...] = (
    "侦探 在 桌子 下面 找到 了 钥匙 。",
    "昨天 晚上 是 谁 把 窗户 打开 的 ？",
    "管家 说 他 整晚 都 待 在 厨房 里 。",
    "她 把 那 封 信 读 了 两 遍 ， 然后 扔 进 了 壁炉 。",
    "“ 我 从来 没有 碰 过 那 把 刀 ， ” 园丁 低声 说 。",
    "雨水 冲 掉 了 大门 附近 的 大部分 脚印 。",
    "钟 敲响 十二 点 的 时候 ， 图书馆 的 灯 突然 灭 了 。",
    "警长 问 女仆 九 点钟 的 时候 她 在 哪里 。",
    "没有 人 注意 到 那 幅 画 已经 被 换 成 了 赝品 。",
    "王 侦探 点 起 烟斗 ， 盯 着 天花板 看 了 很 久 。",
    "厨师 说 她 听见 楼梯 上 有 脚步声 ， 可 走廊 里 空无一人 。",
    "谁 会 去 偷 一 块 坏 掉 的 手表 呢 ？",
    "门 边 的 钉子 上 挂 着 一 根 红色 的 线 。",
    "双胞胎 讲 的 故事 一字不差 ， 这 反而 让 侦探 起 了 疑心 。",
    "他 锁 上 抽屉 ， 把 钥匙 揣 进 口袋 ， 一 句 话 也 没 说 就 走 了 。",
    "医生 解释 说 ， 这 种 毒药 发作 很 慢 ， 几乎 不 留 痕迹 。",
    "如果 火车 六 点 就 开 走 了 ， 他 的 不在场 证明 就 不 成立 。",
    "狗 没有 叫 ， 所以 小偷 一定 是 它 认识 的 人 。",
    "日记 的 最后 一 页 被 人 撕 掉 了 。",
    "现场 只 留下 了 指纹 、 脚印 和 一 只 手套 。",
    "李 警官 在 笔记本 上 写 下 了 三 个 名字 ： 陈明 、 刘芳 和 赵磊 。",
    "保险箱 开 着 ， 里面 什么 都 没有 。",
    "《 东方 快车 谋杀案 》 是 我 最 喜欢 的 侦探 小说 。",
    "所有 的 钟 都 停 在 了 三 点 一 刻 。",
    "园丁 是 在 撒谎 ， 还是 女仆 听 错 了 ？",
    "勒索信 是 用 绿色 墨水 写 在 昂贵 的 纸 上 的 。",
    "因为 雪 是 半夜 以后 才 下 的 ， 通往 小屋 的 脚印 说明 了 一切 。",
    "教授 笑 了 笑 ， 但 他 的 手 一直 在 发抖 。",
    "虽然 门 从 里面 锁 着 ， 唯一 的 钥匙 也 放 在 桌 上 ， 侦探 还是 确信 死者 当时 并 不 是 一个 人 。",
    "今天 早上 我 在 地铁 上 遇到 了 一 位 老 同学 。",
    "这 家 面馆 的 牛肉面 只 要 十五 块 钱 。",
    "明天 下午 三 点 ， 我们 在 图书馆 门口 见面 吧 ！",
    "妈妈 让 我 去 超市 买 鸡蛋 、 牛奶 和 面包 。",
    "你 知道 最近 的 医院 怎么 走 吗 ？",
    "他 每天 早上 六 点 起床 ， 先 跑步 ， 再 吃 早饭 。",
    "这 本 书 我 读 了 三 遍 ， 每 一 遍 都 有 新 的 发现 。",
    "天气 预报 说 周末 会 下 大雨 ， 记得 带 伞 。",
    "老师 问 ： “ 谁 能 回答 这 道 题 ？ ”",
    "2023 年 ， 这 座 城市 新 开 了 两 条 地铁 线路 。",
    "小明 把 自行车 停 在 楼下 ， 结果 第二天 就 不见 了 。",
    "我们 一共 找到 了 十七 枚 硬币 ， 其中 三 枚 是 假 的 。",
    "这个 周末 你 打算 做 什么 ？",
    "他 一边 喝 咖啡 ， 一边 翻看 今天 的 报纸 。",
    "唉 …… 这 件 案子 恐怕 永远 也 破 不 了 了 。",
    "证人 说 凶手 穿 着 黑色 大衣 ； 可是 监控 里 的 人 穿 的 是 灰色 的 。",
    "奶奶 种 的 西红柿 今年 结 得 特别 多 。",
    "钥匙 到底 去 哪儿 了 ？",
    "她 笑 着 点 了 点 头 。",
    "警方 在 刀柄 上 发现 了 嫌疑人 的 DNA 。",
    "他 住 在 酒店 的 307 号 房间 ， 窗户 正 对 着 湖 。",
)

#: The sentences of `WORDS_ZH` as text (the words joined), in the same fixed order.
SENTENCES_ZH: tuple[str, ...] = tuple(words.replace(" ", "") for words in WORDS_ZH)

#: The roles measured, in the order of the ``roles`` axis of every array here.
ROLES: tuple[str, ...] = ("previous", "next", "self", "cls", "sep", "punctuation", "broad")

#: The score a head must reach to play a role: a share of attention weight for the first six
#: roles, a normalised entropy for ``broad``.
THRESHOLDS: dict[str, float] = {role: 0.5 for role in ROLES[:-1]} | {"broad": 0.85}

#: The share of the sentences in which a head must play its role for the role to be clear.
STABLE_FRACTION = 0.9


def is_punctuation_token(token: str) -> bool:
    """True for a token that is punctuation and nothing else, SentencePiece's ``▁`` aside.

    Every character must be punctuation (`mha.models.wordpiece.is_punctuation`: Unicode's P*
    categories and ASCII symbols), so Chinese marks count as well as ASCII ones. The space
    mark ``▁`` is left out first; the bare ``▁`` piece, a space and nothing else, is not
    punctuation.

    Examples
    --------
    >>> from mha.site.head_roles import is_punctuation_token
    >>> [is_punctuation_token(t) for t in ["。", ":“", "▁《", "......", "▁", "钥匙", "[SEP]"]]
    [True, True, True, True, False, False, False]
    """
    text = token.replace(METASPACE, "")
    return bool(text) and all(is_punctuation(c) for c in text)


def role_scores(attentions: np.ndarray, tokens: list[str], *, start: str | None = None,
                end: str | None = None) -> dict[str, np.ndarray]:
    r"""Score every head on every role, on one sentence.

    Parameters
    ----------
    attentions : ndarray of shape ``(layers, h, n, n)``
        Attention weights of one sentence without padding, as `mha.models` returns them
        (`mha.models.encoder.EncoderOutput`): ``attentions[l, j, q, k]`` is how much token
        ``q`` attends to token ``k``. Each row sums to 1. Any number of leading axes works,
        ``(h, n, n)`` for one layer say.
    tokens : list of str, length ``n``
        The sentence's tokens, the start and end tokens included.
    start, end : str, optional
        The model's start and end tokens (``EncoderOutput.special_tokens.start`` and ``.end``:
        ``[CLS]`` and ``[SEP]``, or ``<s>`` and ``</s>``), whose shares are the roles ``cls``
        and ``sep``. By default the first and the last of ``tokens``.

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
          tokens ``start``, ``end``, or punctuation (`is_punctuation_token`; 0 if the sentence
          has none);
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
    start = tokens[0] if start is None else start
    end = tokens[-1] if end is None else end
    tokens = np.asarray(tokens)                          # (n,)
    punctuation = np.array([is_punctuation_token(t) for t in tokens], dtype=bool)  # (n,)

    def share(targets: np.ndarray) -> np.ndarray:        # targets (n,) bool -> (layers, h)
        return a[..., targets].sum(axis=-1).mean(axis=-1)

    logs = np.log(a, out=np.zeros_like(a), where=a > 0)  # (layers, h, n, n), log 0 -> 0
    entropy = -(a * logs).sum(axis=-1) / math.log(n)     # (layers, h, n)
    return {
        "previous": np.diagonal(a, offset=-1, axis1=-2, axis2=-1).mean(axis=-1),  # a[q, q-1]
        "next": np.diagonal(a, offset=1, axis1=-2, axis2=-1).mean(axis=-1),       # a[q, q+1]
        "self": np.diagonal(a, axis1=-2, axis2=-1).mean(axis=-1),                 # a[q, q]
        "cls": share(tokens == start),
        "sep": share(tokens == end),
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
    special_tokens : mha.models.encoder.SpecialTokens or None
        The model's special tokens, whose shares the roles ``cls`` (``special_tokens.start``)
        and ``sep`` (``special_tokens.end``) measure; None when built from scores alone.
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
    special_tokens: SpecialTokens | None = None

    @classmethod
    def from_scores(cls, sentences, tokens, scores: np.ndarray,
                    special_tokens: SpecialTokens | None = None) -> HeadRoleStudy:
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
                   plays, role, stable, clear, special_tokens)

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
    """Run a model on ``sentences`` and score every head on every role.

    Parameters
    ----------
    sentences : sequence of str, default `SENTENCES`
    model : mha.models.minilm.MiniLM or mha.models.e5.E5, optional
        Any encoder of `mha.models`. Defaults to all-MiniLM-L6-v2 (`mha.models.load_minilm`);
        give `mha.models.load_e5` ``()`` for `SENTENCES_ZH`. The roles ``cls`` and ``sep``
        measure the model's own start and end tokens (``EncoderOutput.special_tokens``).

    Returns
    -------
    HeadRoleStudy
        The same object for the same sentences and model, within one process: the model runs
        once, on all the sentences as one padded batch (about a second for `SENTENCES` on
        all-MiniLM-L6-v2, two or three for `SENTENCES_ZH` on multilingual-e5-small, on one
        core).

    Examples
    --------
    >>> from mha.site.head_roles import study
    >>> result = study()
    >>> result.scores.shape                 # (s, roles, layers, h)
    (38, 7, 6, 12)
    >>> int(result.clear.sum())             # heads with a clear role, of 72
    21

    The Chinese study set, through multilingual-e5-small:

    >>> from mha.models.e5 import load_e5
    >>> from mha.site.head_roles import SENTENCES_ZH, study
    >>> zh = study(SENTENCES_ZH, load_e5())
    >>> zh.scores.shape                     # (s, roles, layers, h)
    (50, 7, 12, 12)
    >>> zh.special_tokens.start, zh.special_tokens.end
    ('<s>', '</s>')
    """
    return _study(tuple(sentences), load_minilm() if model is None else model)


@functools.lru_cache(maxsize=2)
def _forward(sentences: tuple[str, ...], model):
    """``model.forward`` on the sentences as one padded batch, kept for `study` and
    `word_links`, which read the same set."""
    if not sentences:
        raise ValueError("sentences is empty: give at least one sentence")
    return model.forward(list(sentences))  # attentions (s, layers, h, n_max, n_max), padded


@functools.lru_cache(maxsize=4)
def _study(sentences: tuple[str, ...], model) -> HeadRoleStudy:
    out = _forward(sentences, model)      # attentions (s, layers, h, n_max, n_max), padded
    special = out.special_tokens
    scores = [np.stack(list(role_scores(attentions[..., :n, :n], tokens, start=special.start,
                                        end=special.end).values()))
              for attentions, tokens, n in zip(out.attentions, out.tokens, out.lengths)]
    return HeadRoleStudy.from_scores(sentences, out.tokens, np.stack(scores), special)


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


# ----------------------------------------------------------------------------------------------
# Chinese has no spaces, and the tokenizer cuts many words into pieces (侦探 -> 侦 探). Does
# any head tie a word's pieces together?


class WordLink(NamedTuple):
    """One row of `WordLinks.heads`: a head that links the pieces of split words.

    ``layer`` and ``head`` are counted from 1. ``within`` is the mean, over the sentences with
    a split word, of the weight a later piece of a word puts on the piece just before it
    (``within_std`` its standard deviation); ``across`` the same weight between two
    single-character pieces on either side of a word boundary. The head reaches 0.5 inside
    words in ``stable`` of the ``sentences`` that have a split word.
    """

    layer: int
    head: int
    within: float
    within_std: float
    across: float
    stable: int
    sentences: int


@dataclass(frozen=True, eq=False)
class WordLinks:
    r"""How much each head links the pieces of the words the tokenizer split, sentence by
    sentence, against the same look back across a word boundary.

    Build it with `word_links`. Arrays are indexed from 0 (``within[:, 1, 10]`` is layer 2,
    head 11).

    Attributes
    ----------
    words : tuple of tuple of str, length ``s``
        Each sentence's words (`WORDS_ZH`).
    tokens : tuple of tuple of str
        Each sentence's tokens.
    pairs : tuple of (int, int, int)
        Every junction inside a word: ``(sentence, q, w)``, where token ``q`` and token
        ``q - 1`` are neighbouring pieces of ``words[sentence][w]`` (the earlier piece may also
        hold the end of the word before, as ``的手`` + ``表`` holds 手表).
    control : tuple of (int, int)
        Every junction at a word boundary between two pieces of one Chinese character each:
        ``(sentence, q)``, token ``q - 1`` ending one word and token ``q`` starting the next
        (``把`` + ``那`` in 她把那封信).
    within : ndarray of shape ``(s, layers, h)``
        For each sentence, the mean of ``attentions[l, j, q, q - 1]`` over its `pairs`; NaN
        for a sentence whose words the tokenizer left whole.
    across : ndarray of shape ``(s, layers, h)``
        The same over its `control` junctions; NaN where it has none.
    split : ndarray of bool, shape ``(s,)``
        The sentences with at least one split word.
    mean_within, std_within, mean_across : ndarray of shape ``(layers, h)``
        Across the sentences that have such junctions.
    stable : ndarray of int, shape ``(layers, h)``
        In how many `split` sentences the head's ``within`` reaches 0.5 (`THRESHOLDS`).
    clear : ndarray of bool, shape ``(layers, h)``
        The head links the pieces of words: its mean ``within`` reaches 0.5, it does so in at
        least `STABLE_FRACTION` of the `split` sentences (the rule of `HeadRoleStudy`), and its
        mean ``across`` stays below 0.5, so the pull is not a look at the previous token
        whatever it is (that is the ``previous`` role).

    Notes
    -----
    With $a_{qk}$ a head's weights in one sentence, $W$ its junctions inside a word and $C$ its
    control junctions,

    $$
    \text{within} = \frac{1}{|W|} \sum_{q \in W} a_{q,\,q-1}, \qquad
    \text{across} = \frac{1}{|C|} \sum_{q \in C} a_{q,\,q-1}.
    $$

    The control keeps to single characters because most split words are cut into single
    characters: a head that looks back from any lone character would score the same on both.
    """

    words: tuple[tuple[str, ...], ...]
    tokens: tuple[tuple[str, ...], ...]
    pairs: tuple[tuple[int, int, int], ...]
    control: tuple[tuple[int, int], ...]
    within: np.ndarray
    across: np.ndarray

    @property
    def split(self) -> np.ndarray:
        return ~np.isnan(self.within[:, 0, 0])

    @property
    def mean_within(self) -> np.ndarray:
        return self.within[self.split].mean(axis=0)

    @property
    def std_within(self) -> np.ndarray:
        return self.within[self.split].std(axis=0)

    @property
    def mean_across(self) -> np.ndarray:
        return self.across[~np.isnan(self.across[:, 0, 0])].mean(axis=0)

    @property
    def stable(self) -> np.ndarray:
        return (self.within[self.split] >= THRESHOLDS["previous"]).sum(axis=0)

    @property
    def clear(self) -> np.ndarray:
        threshold = THRESHOLDS["previous"]
        return ((self.mean_within >= threshold) & (self.mean_across < threshold)
                & (self.stable >= STABLE_FRACTION * self.split.sum()))

    def split_words(self) -> list[tuple[int, str, tuple[str, ...]]]:
        """Each word the tokenizer split: ``(sentence, word, the tokens it is in)``, in order."""
        rows: dict[tuple[int, int], list[str]] = {}
        for i, q, w in self.pairs:
            rows.setdefault((i, w), [self.tokens[i][q - 1]]).append(self.tokens[i][q])
        return [(i, self.words[i][w], tuple(pieces)) for (i, w), pieces in rows.items()]

    def heads(self) -> list[WordLink]:
        """The heads that link the pieces of words (`clear`), strongest first."""
        mean, heads = self.mean_within, zip(*np.nonzero(self.clear))
        return [WordLink(int(l) + 1, int(j) + 1, float(mean[l, j]),
                         float(self.std_within[l, j]), float(self.mean_across[l, j]),
                         int(self.stable[l, j]), int(self.split.sum()))
                for l, j in sorted(heads, key=lambda lj: -mean[lj])]


def _junctions(tokens: list[str], words: list[str], spell) -> tuple[list, list]:
    """The junctions of one sentence inside words, ``[(q, w)]`` (``w`` indexes ``words``), and
    the control junctions at word boundaries between two single characters, ``[q]``.
    ``spell(word)`` gives the characters the tokenizer's pieces spell for ``word``."""
    pieces = [t.replace(METASPACE, "") for t in tokens]           # the text each piece covers
    pieces[0] = pieces[-1] = ""                                  # <s> and </s> cover none
    spellings = [spell(w) for w in words]
    if "".join(pieces) != "".join(spellings):
        raise ValueError(f"the tokens {tokens} do not spell the words {words}: word_links "
                         "needs a tokenizer whose pieces spell the text (SentencePiece)")
    ends = np.cumsum([len(w) for w in spellings])                # where each word ends
    inside, control, start, previous = [], [], 0, None
    for q, piece in enumerate(pieces):
        if not piece:
            continue                                             # <s>, </s>, a bare ▁
        if previous is not None:                                 # a junction at char `start`
            w = int(np.searchsorted(ends, start))                # first word ending at or after
            if ends[w] > start:                                  # it: inside word w
                inside.append((q, w))
            elif len(piece) == len(pieces[previous]) == 1 and is_cjk(piece) and is_cjk(
                    pieces[previous]):                           # a boundary, one char each side
                control.append(q)
        start += len(piece)
        previous = q
    return inside, control


def word_links(words=WORDS_ZH, model=None) -> WordLinks:
    """Measure, in every head, how much a piece of a word the tokenizer split attends to the
    piece before it, and how much it does so across a word boundary.

    Parameters
    ----------
    words : sequence of str, default `WORDS_ZH`
        Sentences written as their words, separated by single spaces (``"侦探 在 桌子 ..."``).
        The model reads each without the spaces.
    model : mha.models.e5.E5, optional
        Defaults to `mha.models.load_e5` ``()``. Its tokenizer's pieces must spell the text
        (SentencePiece's do, ``▁`` aside; WordPiece's ``##`` pieces do not).

    Returns
    -------
    WordLinks
        The same object for the same words and model, within one process.

    Raises
    ------
    ValueError
        If the tokens do not spell the words.

    Examples
    --------
    >>> from mha.site.head_roles import word_links
    >>> links = word_links()
    >>> links.within.shape                  # (s, layers, h)
    (50, 12, 12)
    >>> links.split_words()[0]              # the case sentence: 侦探 is cut in two
    (0, '侦探', ('侦', '探'))
    >>> for row in links.heads():
    ...     print(row.layer, row.head, f"{row.within:.2f} {row.across:.2f}", row.stable,
    ...           row.sentences)
    2 11 0.76 0.48 36 39
    """
    return _word_links(tuple(words), load_e5() if model is None else model)


@functools.lru_cache(maxsize=2)
def _word_links(words: tuple[str, ...], model) -> WordLinks:
    split = [sentence.split(" ") for sentence in words]
    out = _forward(tuple("".join(w) for w in split), model)   # attentions (s, layers, h, n, n)

    def spell(word: str) -> str:
        return model.tokenizer.normalize(word).replace(METASPACE, "")

    def look_back(attentions: np.ndarray, junctions: list[int]) -> np.ndarray:
        """Mean of attentions[..., q, q - 1] over the junctions ``q``: (layers, h), NaN if
        there are none."""
        if not junctions:
            return np.full(attentions.shape[:2], np.nan)
        q = np.array(junctions)                                          # (m,)
        return attentions[..., q, q - 1].astype(np.float64).mean(axis=-1)

    pairs, control, within, across = [], [], [], []
    for i, (ws, tokens, attentions) in enumerate(zip(split, out.tokens, out.attentions)):
        inside, boundary = _junctions(tokens, ws, spell)                 # padding never reached
        pairs += [(i, q, w) for q, w in inside]
        control += [(i, q) for q in boundary]
        within.append(look_back(attentions, [q for q, _ in inside]))     # (layers, h)
        across.append(look_back(attentions, boundary))
    return WordLinks(tuple(tuple(w) for w in split), tuple(tuple(t) for t in out.tokens),
                     tuple(pairs), tuple(control), np.stack(within), np.stack(across))
