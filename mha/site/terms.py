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
    "token": Term("词元", "token", "",
                  "输入序列里的一个单位（一个词或词的一部分）；比喻里是卷宗的一页。",
                  "One unit of the input sequence (a word or part of one); in the story, one "
                  "page of the case file."),
    "embedding": Term("嵌入", "embedding", "X",
                      "把词元表示成一个向量：同一个词不管出现在哪儿，查到的都是同一个嵌入。"
                      "矩阵 X 的第 i 行 x_i 是第 i 个词元的嵌入。",
                      "A token represented as a vector: the same word gets the same embedding "
                      "wherever it stands. Row i of X, x_i, is the embedding of token i."),
    "self_attention": Term("自注意力", "self-attention", "",
                           "查询、键、值都来自同一个序列：每个词元都和序列里所有词元（包括自己）比一遍。",
                           "Queries, keys and values all come from one sequence: every token is "
                           "compared with every token, itself included."),
    "cross_attention": Term("交叉注意力", "cross-attention", "",
                            "查询来自一个序列，键和值来自另一个序列，例如翻译时译文向源句发问。",
                            "Queries come from one sequence, keys and values from another, as "
                            "when the translation being written queries the source sentence."),
    "source_sentence": Term("源句", "source sentence", "",
                            "翻译时待译的那句话；它的词元在交叉注意力里提供键和值。",
                            "In translation, the sentence being translated; its tokens supply "
                            "the keys and values of cross-attention."),
    "query": Term("查询", "query", r"q_i = x_i W^Q",
                  "第 i 个词元在一个注意力头里的查询：第 i 页在找什么。每一页在每位侦探那里都有"
                  "自己的查询。",
                  "Token i's query in one head: what page i is looking for. Every page has a "
                  "query for every detective."),
    "key": Term("键", "key", r"k_j = x_j W^K",
                "第 j 个词元在一个注意力头里的键：第 j 页能提供什么，像贴在这一页上的标签。",
                "Token j's key in one head: what page j has to offer, like a label on the page."),
    "value": Term("值", "value", r"v_j = x_j W^V",
                  "第 j 个词元在一个注意力头里的值：第 j 页实际说了什么。",
                  "Token j's value in one head: what page j actually says."),
    "projection": Term("投影", "projection", "W",
                       "乘一个可学习的矩阵，把向量换到另一个空间。",
                       "Multiplying by a learned matrix to move vectors into another space."),
    "dot_product": Term("点积", "dot product", r"q \cdot k", "两个向量对应分量相乘再求和，方向越一致越大。",
                        "Multiply matching components and add them up: larger when two vectors point the same way."),
    "attention_score": Term("注意力分数", "attention score", r"QK^\top / \sqrt{d_k}",
                            "查询与键的匹配程度，softmax 之前的数。d2l 中文版把用查询和键算分数的函数"
                            "叫“评分函数”（注意力评分函数）。",
                            "How well a query matches a key: the number before softmax. The "
                            "function that computes it is what d2l calls the (attention) "
                            "scoring function."),
    "scaling_factor": Term("缩放因子", "scaling factor", r"1 / \sqrt{d_k}",
                           "乘在分数上的 1/√d_k：查询和键的分量方差为 1 时，它让分数的方差保持在 1 左右，不随维度增长。",
                           "The 1/√d_k applied to the scores: when the components of queries and "
                           "keys have variance 1, it keeps the scores' variance near 1 whatever "
                           "the dimension."),
    "scaled_dot_product_attention": Term(
        "缩放点积注意力", "scaled dot-product attention", "",
        "softmax(QKᵀ/√d_k)V：先打分，再归一化，再加权求和。",
        "softmax(QKᵀ/√d_k)V: score, normalise, then take the weighted sum."),
    "additive_attention": Term(
        "加性注意力", "additive attention", "",
        "另一种评分函数（Bahdanau 等，2015）：查询和键各乘一个矩阵后相加，经过 tanh，再与一个向量"
        "做点积得到分数。",
        "Another scoring function (Bahdanau et al., 2015): query and key are each multiplied by "
        "a matrix, added, passed through tanh and dotted with a vector to give the score."),
    "softmax": Term("softmax", "softmax", "", "把一行分数变成非负、和为 1 的权重。",
                    "Turns a row of scores into non-negative weights that sum to 1."),
    "attention_weight": Term("注意力权重", "attention weight", r"a_{ij}",
                             "softmax 之后的数：侦探读第 i 页时分给第 j 页的那份注意力，每行和为 1。",
                             "The number after softmax: the share of attention a detective, "
                             "working on page i, gives page j; each row sums to 1."),
    "weighted_sum": Term("加权和", "weighted sum", r"\sum_j a_{ij} v_j",
                         "按注意力权重把各词元的值加起来，得到一个注意力头在第 i 个词元上的输出；"
                         "比喻里是这位侦探对第 i 页的报告。d2l 中文版叫“注意力汇聚”。",
                         "The values added up, each multiplied by its attention weight: one "
                         "head's output for token i; in the story, that detective's report on page i. d2l calls it "
                         "attention pooling."),
    "axis": Term("轴", "axis", "",
                 "数组的一个方向：形状 (4, 8, 8) 的数组有三个轴；NumPy 的 axis=-1 是最后一个轴。",
                 "One direction of an array: an array of shape (4, 8, 8) has three axes; "
                 "NumPy's axis=-1 is the last one."),
    "dimension": Term("维度", "dimension", "d_k",
                      "向量的分量个数；d_k 是每个头里查询和键的维度。别和“轴”混淆：形状 (8, 16) 的"
                      "数组有两个轴，每一行是一个 16 维的向量。",
                      "How many components a vector has; d_k is the size of a query or key in "
                      "one head. Not the same as an axis: an array of shape (8, 16) has two "
                      "axes, and each row is a 16-dimensional vector."),
    "head": Term("注意力头", "head", r"\text{head}_i",
                 "多头注意力里的一路注意力，用自己的查询、键、值投影矩阵计算；比喻里的一位侦探。"
                 "各头一起训练，没有谁给它们分派任务；训练好的头有没有分工，要事后测量才知道。",
                 "One of the h attention computations a multi-head layer runs side by side, "
                 "with its own query, key and value projections; in the story, one "
                 "detective. The heads are trained together and nobody assigns them jobs; "
                 "whether a trained head has a role is found by measuring it."),
    "number_of_heads": Term("头数", "number of heads", "h",
                            "多头注意力里注意力头的个数，也就是侦探的人数；本站的例子里 h = 4。",
                            "How many heads a multi-head attention layer has: the number of "
                            "detectives; h = 4 in this site's examples."),
    "multi_head_attention": Term("多头注意力", "multi-head attention", "",
                                 "h 个注意力头并行计算，各头的输出拼接后乘输出投影 $W^O$。",
                                 "h heads computed side by side, their outputs concatenated and "
                                 "multiplied by the output projection $W^O$."),
    "concatenation": Term("拼接", "concatenation", r"\text{Concat}",
                          "把各个注意力头的输出按列并排，接成一个 h·d_v 维的向量。",
                          "Placing the heads' outputs side by side into one vector of h·d_v numbers."),
    "output_projection": Term("输出投影", "output projection", r"W^O",
                              "把拼接后的各头结果改写回 d_model 维；比喻里的队长。",
                              "Rewrites the concatenated head outputs back to d_model "
                              "dimensions; in the story, the captain."),
    "permutation_equivariance": Term(
        "置换等变", "permutation equivariance", "",
        "打乱输入词元的顺序，输出只是跟着同样打乱，数值不变：自注意力本身不知道词序。",
        "Shuffle the input tokens and the outputs are shuffled the same way, values unchanged: "
        "self-attention alone does not know word order."),
    "positional_encoding": Term(
        "位置编码", "positional encoding", "",
        "告诉模型每个词元在哪儿：或者加进嵌入（正余弦位置编码、可学习的位置嵌入），或者按位置旋转查询和键"
        "（旋转位置编码）；没有它（或因果掩码这类结构），自注意力分不出词序。比喻里，前者像在每页证据上"
        "盖页码（绝对位置），后者像只在乎两页隔了多远的侦探（相对位置）。",
        "Information about where each token stands, either added to the embeddings (sinusoidal "
        "or learned) or used to rotate the queries and keys (RoPE); without it, or a structure "
        "such as a causal mask, self-attention cannot tell word order. In the story: page "
        "numbers stamped on the evidence (absolute position), or detectives who only care how "
        "far apart two pages are (relative position)."),
    "sinusoidal_encoding": Term(
        "正余弦位置编码", "sinusoidal positional encoding", "PE_p",
        "原版 Transformer 的固定位置表：第 p 行由 p 乘上一组由快到慢的频率后取 sin、cos 得到，"
        "加进第 p 个词元的嵌入；两行的点积只取决于它们相隔多远。",
        "The original Transformer's fixed table: row p holds the sines and cosines of p times a "
        "series of ever lower frequencies and is added to the embedding of token p; the dot "
        "product of two rows depends only on how far apart they are."),
    "learned_position_embedding": Term(
        "可学习的位置嵌入", "learned position embedding", "",
        "每个位置一行、和模型一起训练出来的向量表，加进嵌入（BERT、GPT-2 都这么做）；表有多少行，"
        "模型就只认得多少个位置。",
        "A table of one trained vector per position, added to the embeddings (as in BERT and "
        "GPT-2); the model knows no position past the table's last row."),
    "rope": Term(
        "旋转位置编码", "rotary position embedding (RoPE)", r"R^d_{\Theta,m}",
        "不动嵌入，而是在每个注意力头里把查询和键按位置成对旋转：位置 m 的第 i 对转 mθ_i。这样查询"
        "和键的点积只取决于两者的距离 m − n（Su 等，2021）。",
        "Leaves the embeddings alone and rotates each head's queries and keys pair by pair: pair "
        "i of position m turns by mθ_i. Their dot product then depends only on the distance "
        "m − n (Su et al., 2021)."),
    "absolute_position": Term(
        "绝对位置", "absolute position", "p",
        "词元在序列里的序号，从 0 数起；比喻里是盖在每页证据上的页码。正余弦位置编码和可学习的位置嵌入"
        "都把它加进嵌入。",
        "A token's index in the sequence, counted from 0; in the story, the page number stamped "
        "on each piece of evidence. The sinusoidal table and learned position embeddings add it "
        "to the embeddings."),
    "relative_position": Term(
        "相对位置", "relative position", "m - n",
        "两个词元相隔多远：查询在 m、键在 n 时是 m − n；比喻里是只在乎两页隔了几页的侦探。旋转位置编码"
        "算出的分数只取决于它。",
        "How far apart two tokens are: m − n for a query at m and a key at n; in the story, "
        "the detectives who only care how many pages lie between two pages. The scores RoPE "
        "gives depend on it alone."),
    "mask": Term("掩码", "mask", "M",
                 "规定哪些键对某个查询不可见；被遮住的位置权重为 0。d2l 中文版把这种遮挡叫“掩蔽”"
                 "（如“掩蔽 softmax”）。",
                 "Says which keys a query may not see; hidden positions get weight 0. d2l calls "
                 "the operation masking (as in masked softmax)."),
    "causal_mask": Term("因果掩码", "causal mask", "", "每个词元只能看见自己和前面的词元。",
                        "Each token may see only itself and the tokens before it."),
    "padding_mask": Term("填充掩码", "padding mask", "",
                         "遮住为凑齐长度而补上的位置。d2l 中文版用“有效长度”（valid_lens）表达同一件事。",
                         "Hides the positions added only to make sequences the same length. d2l "
                         "expresses the same thing with valid lengths (valid_lens)."),
    "variance": Term("方差", "variance", r"\operatorname{Var}", "各个数与平均值之差的平方，再取平均。",
                     "The average squared distance of the numbers from their mean."),
    "entropy": Term("熵", "entropy", "H", "衡量一行权重有多分散：越大越平均，越小越集中。",
                    "How spread out a row of weights is: high is even, low is concentrated."),
    # The roles a head of a real model can play (mha.site.head_roles): a head plays one when, over
    # the study sentences, it puts at least half of its weight on that target (entropy for
    # the broad head).
    "previous_token_head": Term("前一词元头", "previous-token head", "",
                                "一种注意力头：平均而言，词元把至少一半注意力放在紧挨着的前一个词元上。",
                                "A head in which tokens put, on average, at least half of their "
                                "attention on the token just before them."),
    "next_token_head": Term("后一词元头", "next-token head", "",
                            "一种注意力头：平均而言，词元把至少一半注意力放在紧挨着的后一个词元上。",
                            "A head in which tokens put, on average, at least half of their "
                            "attention on the token just after them."),
    "current_token_head": Term("当前词元头", "current-token head", "",
                               "一种注意力头：平均而言，词元把至少一半注意力放在自己身上。",
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
    "within_word_head": Term("词内头", "within-word head", "",
                             "一种注意力头：分词器把一个词切成几个词元时，后面的词元平均把至少一半注意力放在"
                             "同一个词里紧挨着的前一个词元上，跨过词与词的分界时则不到一半。",
                             "A head in which, when the tokenizer cuts a word into several tokens, "
                             "each later piece puts on average at least half of its attention on "
                             "the piece just before it in the same word, and less than half on the "
                             "token before it across a word boundary."),
    "broad_head": Term("广角头", "broad head", "",
                       "注意力铺得很开的注意力头：平均而言，熵至少是最大值 log n 的 0.85。",
                       "A head whose attention is spread wide: on average, its entropy is at "
                       "least 0.85 of the largest possible, log n."),
}


# Training (the chapter training.md): the block around attention, the backward pass and the
# optimiser, and the head found in trained models that copies what came next last time.
TERMS.update({
    "loss": Term("损失", "loss", "L",
                 "一个数，衡量模型在一批样本上错得有多厉害；训练就是一步步改权重，让它变小。",
                 "One number that says how badly the model did on a batch; training changes the "
                 "weights, step by step, to make it smaller."),
    "cross_entropy": Term("交叉熵", "cross-entropy", r"-\log p_{\text{target}}",
                          "分类任务常用的损失：模型给正确答案的概率取对数再取负，答对且有把握时接近 0。",
                          "The usual loss for choosing one answer out of many: minus the log of "
                          "the probability the model gave the right one; near 0 when it is right "
                          "and sure."),
    "gradient": Term("梯度", "gradient", r"\partial L / \partial W",
                     "损失对每个权重的偏导数，和权重形状相同：指出往哪个方向改权重，损失涨得最快。",
                     "The partial derivative of the loss with respect to each weight, in the "
                     "weight's shape: the direction in which the loss grows fastest."),
    "backward_pass": Term("反向传播", "backward pass", "",
                          "用链式法则从损失倒推回输入，逐层算出梯度（backpropagation）；每一步把“对输出的梯度”"
                          "变成“对输入的梯度”。",
                          "Computing the gradients from the loss back towards the input with the "
                          "chain rule (backpropagation): each step turns the gradient with "
                          "respect to its output into gradients with respect to its inputs."),
    "jacobian": Term("雅可比矩阵", "Jacobian", r"\partial p_i / \partial s_j",
                     "一个函数每个输出对每个输入的偏导数排成的矩阵；softmax 的是 p_i(δ_ij − p_j)。",
                     "The matrix of partial derivatives of every output of a function with respect "
                     "to every input; softmax's is p_i(δ_ij − p_j)."),
    "finite_difference": Term("有限差分", "finite difference", "",
                              "把输入往两边各挪一小步，看输出变了多少，以此估计导数；用来核对手推的梯度。",
                              "Estimating a derivative by nudging an input a tiny step each way and "
                              "measuring how the output moves; used to check gradients derived by "
                              "hand."),
    "learning_rate": Term("学习率", "learning rate", r"\eta",
                          "每一步改权重时迈多大的步子。",
                          "How big a step each update takes when it changes the weights."),
    "adam": Term("Adam", "Adam", "",
                 "一种常用的优化器（Kingma 与 Ba，2015）：按每个权重梯度的滑动平均及其平方的滑动平均，"
                 "给每个权重定各自的步长。",
                 "A widely used optimiser (Kingma and Ba 2015): each weight's step is set from "
                 "running averages of its gradient and of its squared gradient."),
    "residual_connection": Term("残差连接", "residual connection", "x + f(x)",
                                "把一个子层的输出加到它的输入上，而不是替换输入。",
                                "Adding a sub-layer's output to its input instead of replacing "
                                "the input."),
    "residual_stream": Term("残差流", "residual stream", "",
                            "每个词元一路穿过各层的那个向量：每层读它，再把自己的输出加上去。",
                            "The vector of each token as it passes through the layers: every "
                            "layer reads it and adds its output to it."),
    "layer_norm": Term("层归一化", "LayerNorm", r"\operatorname{LayerNorm}",
                       "把每个词元的向量在它自己的各分量上调成均值 0、方差 1，再乘可学习的缩放、加可学习的平移。",
                       "Rescales each token's vector over its own components to mean 0 and "
                       "variance 1, then applies a learned scale and shift."),
    "feed_forward_network": Term("前馈网络", "feed-forward network", r"\operatorname{FFN}",
                                 "Transformer 块里注意力之后的第二个子层：两层全连接，对每个词元单独作用。",
                                 "The second sub-layer of a Transformer block, after attention: "
                                 "two fully connected layers applied to each token on its own."),
    "induction_head": Term("诱导头", "induction head", "",
                           "一种注意力头：当前词元以前出现过时，它看向上次出现处的后一个词元，好把那个词接着抄下来"
                           "（… A B … A → B）。",
                           "A head that, when the current token appeared earlier, attends to the "
                           "token that came after it last time, so as to copy it "
                           "(… A B … A → B)."),
})


# Inference (the chapter inference.md): generating one token at a time, what it costs, and the
# keys and values shared between query heads.
TERMS.update({
    "prefill": Term("预填充", "prefill", "",
                    "生成开始前，把整段提示一次送进模型：所有词元一起算，顺便把它们的键和值存进 KV 缓存。",
                    "Before generation starts, the whole prompt goes through the model in one "
                    "pass: all its tokens at once, their keys and values stored in the KV cache."),
    "decoding": Term("解码", "decoding", "",
                     "逐个生成词元的阶段：每一步只把上一步生成的那个词元送进模型，得到下一个词元的预测。",
                     "The stage that generates tokens one by one: each step feeds the model only "
                     "the token the previous step produced and predicts the next one."),
    "kv_cache": Term("KV 缓存", "KV cache", "",
                     "解码时为每一层保存已读过的词元的键和值，新词元只需算自己的那一份；查询不用存，"
                     "过去的查询以后再也用不上。",
                     "Each layer keeps the keys and values of the tokens it has already read, so "
                     "a new token computes only its own; queries are not kept, since a past query "
                     "is never used again."),
    "kv_heads": Term("键值头数", "key/value heads", r"h_{kv}",
                     "一层里键和值各有几组；整除头数 h。等于 h 是普通的多头注意力，等于 1 是多查询注意力。",
                     "How many sets of keys and values a layer has; it divides the number of "
                     "heads h. Equal to h is plain multi-head attention, 1 is multi-query "
                     "attention."),
    "multi_query_attention": Term("多查询注意力", "multi-query attention", "",
                                  "MQA（Shazeer，2019）：所有查询头共用同一组键和值，KV 缓存只剩普通多头注意力的 1/h。",
                                  "MQA (Shazeer 2019): every query head shares one set of keys and "
                                  "values, so the KV cache is 1/h of plain multi-head attention's."),
    "grouped_query_attention": Term("分组查询注意力", "grouped-query attention", "",
                                    "GQA（Ainslie 等，2023）：查询头分成 h_kv 组，每组共用一组键和值；"
                                    "介于多头注意力和多查询注意力之间。",
                                    "GQA (Ainslie et al. 2023): the query heads are split into "
                                    "h_kv groups that each share one set of keys and values; "
                                    "between multi-head and multi-query attention."),
    "arithmetic_intensity": Term("算术强度", "arithmetic intensity", "",
                                 "一段计算每从内存读一个字节做多少次浮点运算。低于硬件能支撑的比值时，"
                                 "处理器就得等内存。",
                                 "How many floating-point operations a computation does for each "
                                 "byte it reads from memory. Below what the hardware can sustain, "
                                 "the processor waits for memory."),
    "memory_bound": Term("访存受限", "memory-bound", "",
                         "耗时由从内存读数据的速度决定，而不是由算力决定：算术强度太低的计算就是这样，"
                         "例如逐个词元解码。",
                         "Limited by how fast data can be read from memory, not by arithmetic: "
                         "what a computation of low arithmetic intensity is, such as decoding one "
                         "token at a time."),
})

# The story's cast and props (the mapping the home page's #the-case section spells out), and
# the text the site grew from.
TERMS.update({
    "case_file": Term("卷宗", "case file", "X",
                      "比喻里的输入序列：本站的卷宗是一句话，每个词元是其中一页。",
                      "In the story, the input sequence: here one sentence, each token a page."),
    "detective": Term("侦探", "detective", r"\text{head}_i",
                      "比喻里的一个注意力头，有自己的 $W^Q$、$W^K$、$W^V$。红、蓝、绿、黄只是 0～3 号头的名字，"
                      "不代表分工。",
                      "In the story, one head, with its own $W^Q$, $W^K$ and $W^V$. Red, blue, green "
                      "and yellow only name heads 0 to 3; they are not specialties."),
    "captain": Term("队长", "captain", r"W^O",
                    "比喻里的输出投影：把每一页的 h 份报告并排（拼接），改写成一份 d_model 维的笔记。",
                    "In the story, the output projection: puts each page's h reports side by "
                    "side (concatenation) and rewrites them into one note of d_model numbers."),
    "source_document": Term("原文", "source document", "",
                            "本站改写、扩充时依据的那份中文讲稿：侦探团的比喻和一段多头注意力的 Python "
                            "演示都出自它。",
                            "The Chinese lecture notes this site was rewritten and expanded "
                            "from: the detective story and a Python demo of multi-head "
                            "attention both come from it."),
})


def term(key: str, lang: str) -> str:
    """The word for ``key`` in ``lang`` (``"zh"`` or ``"en"``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES}, got {lang!r}")
    try:
        entry = TERMS[key]
    except KeyError:
        raise KeyError(f"unknown term {key!r}; add it to mha/site/terms.py") from None
    return getattr(entry, lang)
