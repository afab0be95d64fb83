"""The one home of every technical term in both languages.

This table feeds the glossary page, the labels of every figure and the Chinese search
dictionary (so that jieba keeps a term such as 注意力头 in one piece). Each language uses
exactly one word for one idea: change a translation here and it changes everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LANGUAGES", "Term", "TERMS", "term"]

LANGUAGES = ("zh", "en")


@dataclass(frozen=True)
class Term:
    """One idea, named in each language, with a one-line explanation in each."""

    zh: str
    en: str
    symbol: str
    zh_note: str
    en_note: str


TERMS: dict[str, Term] = {
    "token": Term("词元", "token", "", "输入序列里的一个单位（一个词或词的一部分），卷宗里的一页证词。",
                  "One unit of the input sequence (a word or part of one): one page of the case file."),
    "embedding": Term("嵌入", "embedding", "X", "把词元表示成向量；矩阵 X 的每一行是一个词元的嵌入。",
                      "A token represented as a vector; each row of X is one token's embedding."),
    "self_attention": Term("自注意力", "self-attention", "",
                           "查询、键、值都来自同一个序列：每个词元向序列里所有词元打听消息。",
                           "Queries, keys and values all come from one sequence: every token asks every other."),
    "query": Term("查询", "query", "Q", "侦探手里的问题：“我在找什么？”",
                  "The question a detective carries: what am I looking for?"),
    "key": Term("键", "key", "K", "证据上贴的标签：“我这里有什么？”",
                "The label on a piece of evidence: what do I have?"),
    "value": Term("值", "value", "V", "证据本身的内容，按权重汇总进输出。",
                  "What the evidence actually says; mixed into the output by weight."),
    "projection": Term("投影", "projection", "W", "乘一个可学习的矩阵，把向量换到另一个空间。",
                       "Multiplying by a learned matrix to move vectors into another space."),
    "dot_product": Term("点积", "dot product", "q·k", "两个向量对应分量相乘再求和，方向越一致越大。",
                        "Multiply matching components and add them up: larger when two vectors point the same way."),
    "attention_score": Term("注意力分数", "attention score", "QKᵀ/√d_k",
                            "查询与键的匹配程度，softmax 之前的数。",
                            "How well a query matches a key: the number before softmax."),
    "scaling_factor": Term("缩放因子", "scaling factor", "1/√d_k",
                           "乘在分数上的 1/√d_k，让分数的方差不随维度增长。",
                           "The 1/√d_k applied to the scores so their variance does not grow with the dimension."),
    "scaled_dot_product_attention": Term(
        "缩放点积注意力", "scaled dot-product attention", "",
        "softmax(QKᵀ/√d_k)V：先打分，再归一化，再加权求和。",
        "softmax(QKᵀ/√d_k)V: score, normalise, then take the weighted sum."),
    "softmax": Term("softmax", "softmax", "", "把一行分数变成非负、和为 1 的权重。",
                    "Turns a row of scores into non-negative weights that sum to 1."),
    "attention_weight": Term("注意力权重", "attention weight", "A",
                             "softmax 之后的数：每个查询分给每个键的注意力，每行和为 1。",
                             "The numbers after softmax: how much each query attends to each key; each row sums to 1."),
    "dimension": Term("维度", "dimension", "d_k", "向量的分量个数；d_k 是每个头里查询和键的维度。",
                      "How many components a vector has; d_k is the size of a query or key in one head."),
    "head": Term("注意力头", "head", "h", "一套独立的查询、键、值投影，相当于一位专攻某个方向的侦探。",
                 "One independent set of query, key and value projections: one detective with one specialty."),
    "multi_head_attention": Term("多头注意力", "multi-head attention", "",
                                 "h 个注意力头并行计算，结果拼接后再做输出投影。",
                                 "h heads computed side by side, concatenated, then projected."),
    "concatenation": Term("拼接", "concatenation", "Concat",
                          "把各个注意力头的输出按列并排，接成一个 h·d_v 维的向量。",
                          "Placing the heads' outputs side by side into one vector of h·d_v numbers."),
    "output_projection": Term("输出投影", "output projection", "W_O",
                              "把拼接后的各头结果映射回 d_model 维。",
                              "Maps the concatenated heads back to d_model dimensions."),
    "permutation_equivariance": Term(
        "置换等变", "permutation equivariance", "",
        "打乱输入词元的顺序，输出只是跟着同样打乱，数值不变：自注意力本身不知道词序。",
        "Shuffle the input tokens and the outputs are shuffled the same way, values unchanged: "
        "self-attention alone does not know word order."),
    "mask": Term("掩码", "mask", "M", "规定哪些键对某个查询不可见；被遮住的位置权重为 0。",
                 "Says which keys a query may not see; hidden positions get weight 0."),
    "causal_mask": Term("因果掩码", "causal mask", "", "每个词元只能看见自己和前面的词元。",
                        "Each token may see only itself and the tokens before it."),
    "padding_mask": Term("填充掩码", "padding mask", "", "遮住为凑齐长度而补上的位置。",
                         "Hides the positions added only to make sequences the same length."),
    "variance": Term("方差", "variance", "Var", "数值偏离平均值的程度的平方的平均。",
                     "The average squared distance of the numbers from their mean."),
    "entropy": Term("熵", "entropy", "H", "衡量一行权重有多分散：越大越平均，越小越集中。",
                    "How spread out a row of weights is: high is even, low is concentrated."),
    # The roles a head of a real model can play (mha.site.head_roles): a head plays one when, over
    # the study sentences, it puts at least half of its weight on that target (entropy for
    # the broad head).
    "previous_token_head": Term("前一词元头", "previous-token head", "",
                                "平均而言，词元把至少一半注意力放在紧挨着的前一个词元上的注意力头。",
                                "A head in which tokens put, on average, at least half of their "
                                "attention on the token just before them."),
    "next_token_head": Term("后一词元头", "next-token head", "",
                            "平均而言，词元把至少一半注意力放在紧挨着的后一个词元上的注意力头。",
                            "A head in which tokens put, on average, at least half of their "
                            "attention on the token just after them."),
    "current_token_head": Term("当前词元头", "current-token head", "",
                               "平均而言，词元把至少一半注意力放在自己身上的注意力头。",
                               "A head in which tokens put, on average, at least half of their "
                               "attention on themselves."),
    "cls_head": Term("[CLS] 头", "[CLS] head", "",
                     "把至少一半注意力放在 [CLS] 上的注意力头；[CLS] 是分词器加在句首的特殊词元。",
                     "A head that puts at least half of its attention on [CLS], the special token "
                     "the tokenizer adds at the start."),
    "sep_head": Term("[SEP] 头", "[SEP] head", "",
                     "把至少一半注意力放在 [SEP] 上的注意力头；[SEP] 是分词器加在句末的特殊词元。",
                     "A head that puts at least half of its attention on [SEP], the special token "
                     "the tokenizer adds at the end."),
    "punctuation_head": Term("标点头", "punctuation head", "",
                             "把至少一半注意力放在标点符号（句号、逗号、问号……）上的注意力头。",
                             "A head that puts at least half of its attention on punctuation "
                             "(full stops, commas, question marks...)."),
    "broad_head": Term("广角头", "broad head", "",
                       "注意力铺得很开的注意力头：平均而言，熵至少是最大值 log n 的 0.85。",
                       "A head whose attention is spread wide: on average, its entropy is at "
                       "least 0.85 of the largest possible, log n."),
}


def term(key: str, lang: str) -> str:
    """The word for ``key`` in ``lang`` (``"zh"`` or ``"en"``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES}, got {lang!r}")
    try:
        entry = TERMS[key]
    except KeyError:
        raise KeyError(f"unknown term {key!r}; add it to mha/site/terms.py") from None
    return getattr(entry, lang)
