"""The one home of every technical term in both languages.

This table feeds the glossary page, the labels of every figure and the Chinese search
dictionary (so that jieba keeps a term such as 注意力头 in one piece). Each language uses
exactly one word for one idea: change a translation here and it changes everywhere.

It also holds the detective story (`STORY`: each prop of the story, a row of `TERMS`, and the
term of the model it stands for; the home page's mapping table and the glossary are drawn from
it) and the words the pages no longer use (`RETIRED`: a retired prop word, a word the story gives
to something else, or another book's name for one of our terms, each with the contexts where it
may stay and why). ``tests/test_story.py`` holds every page to both.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GLOSSES", "LANGUAGES", "MENTIONS", "RETIRED", "Retired", "STORY", "Term", "TERMS",
           "term"]

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
                      "矩阵 X 的第 i 行 x_i 就是 i 号词元的嵌入。",
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
                  "i 号词元在一个注意力头里的查询：i 号页在找什么。每一页在每位侦探那里都有"
                  "自己的查询。",
                  "Token i's query in one head: what page i is looking for. Every page has a "
                  "query for every detective."),
    "key": Term("键", "key", r"k_j = x_j W^K",
                "j 号词元在一个注意力头里的键：j 号页能提供什么，像贴在这一页上的标签。",
                "Token j's key in one head: what page j has to offer, like a label on the page."),
    "value": Term("值", "value", r"v_j = x_j W^V",
                  "j 号词元在一个注意力头里的值：j 号页实际说了什么。",
                  "Token j's value in one head: what page j actually says."),
    "projection": Term("投影", "projection", "W",
                       "乘一个可学习的矩阵，把向量换到另一个空间。这是机器学习里的习惯叫法，并不是线性代数里的"
                       "投影（那要求 P² = P）：学到的矩阵往往连方阵都不是。",
                       "Multiplying by a learned matrix to move vectors into another space. The "
                       "name is machine learning's habit, not linear algebra's projection (which "
                       "needs P² = P): a learned matrix is often not even square."),
    "dot_product": Term("点积", "dot product", r"q \cdot k",
                        "两个向量对应分量相乘再求和。长度固定时，方向越一致越大；方向不变时，向量越长，"
                        "它的绝对值越大。",
                        "Multiply matching components and add them up. For fixed lengths it is "
                        "larger when the two vectors point the same way; for fixed directions it "
                        "grows with their lengths."),
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
    "temperature": Term("温度", "temperature", "T",
                        "softmax(s/T) 里的除数 T：越大权重越平，趋于 0 时成了 argmax，趋于无穷时成了"
                        "不看查询的平均。缩放点积注意力取 T = √d_k。",
                        "The divisor T in softmax(s/T): the larger, the flatter the weights; as it "
                        "goes to 0 softmax becomes argmax, and as it grows without bound, the "
                        "query-blind mean. "
                        "Scaled dot-product attention takes T = √d_k."),
    "temperature_factor": Term("温度倍数", "temperature factor", r"\tau",
                               "案情板上的旋钮：真正的温度是 τ·√d_k，τ = 1 就是通常的缩放点积注意力。",
                               "The case board's knob: the real temperature is τ·√d_k, and τ = 1 is "
                               "the usual scaled dot-product attention."),
    "attention_weight": Term("注意力权重", "attention weight", r"a_{ij}",
                             "softmax 之后的数：侦探读 i 号页时分给 j 号页的那份注意力，每行和为 1。",
                             "The number after softmax: the share of attention a detective, "
                             "working on page i, gives page j; each row sums to 1."),
    "weighted_sum": Term("加权和", "weighted sum", r"\sum_j a_{ij} v_j",
                         "按注意力权重把各词元的值加起来，得到一个注意力头在 i 号词元上的输出；"
                         "比喻里是这位侦探对 i 号页的报告。d2l 中文版叫“注意力汇聚”。",
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
        "（旋转位置编码）；没有它（或因果掩码这类结构），自注意力分不出词序。比喻里，前者像给每一页"
        "盖上页码（绝对位置），后者像只在乎两页隔了多远的侦探（相对位置）。",
        "Information about where each token stands, either added to the embeddings (sinusoidal "
        "or learned) or used to rotate the queries and keys (RoPE); without it, or a structure "
        "such as a causal mask, self-attention cannot tell word order. In the story: a page "
        "number stamped on every page (absolute position), or detectives who only care how "
        "far apart two pages are (relative position)."),
    "sinusoidal_encoding": Term(
        "正余弦位置编码", "sinusoidal positional encoding", "PE_p",
        "原版 Transformer 的固定位置表：第 p 行由 p 乘上一组由快到慢的频率后取 sin、cos 得到，"
        "加进 p 号词元的嵌入；两行的点积只取决于它们相隔多远。",
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
        "词元在序列里的序号，从 0 数起；比喻里是盖在每一页上的页码。正余弦位置编码和可学习的位置嵌入"
        "都把它加进嵌入。",
        "A token's index in the sequence, counted from 0; in the story, the page number stamped "
        "on each page. The sinusoidal table and learned position embeddings add it "
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
                 "A widely used optimiser (Kingma and Ba, 2015): each weight's step is set from "
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
                       "把每个词元的向量在它自己的各分量上调成均值 0、方差 1，再乘可学习的缩放、加可学习的平移。"
                       "英文名 LayerNorm，一页里至多注一次：“层归一化（LayerNorm）”；d2l 中文版叫“层规范化”。",
                       "Rescales each token's vector over its own components to mean 0 and "
                       "variance 1, then applies a learned scale and shift. Also written layer "
                       "normalisation."),
    "feed_forward_network": Term("前馈网络", "feed-forward network", r"\operatorname{FFN}",
                                 "Transformer 块里注意力之后的第二个子层：两层全连接，对每个词元单独作用。"
                                 "d2l 中文版叫“基于位置的前馈网络”（原论文的 position-wise）。",
                                 "The second sub-layer of a Transformer block, after attention: "
                                 "two fully connected layers applied to each token on its own "
                                 "(the paper's and d2l's position-wise feed-forward network)."),
    "induction_head": Term("诱导头", "induction head", "",
                           "一种注意力头：当前词元以前出现过时，它看向上次出现处的后一个词元，好把那个词接着抄下来"
                           "（… A B … A → B）。也常译作“归纳头”；本站只用“诱导头”。",
                           "A head that, when the current token appeared earlier, attends to the "
                           "token that came after it last time, so as to copy it "
                           "(… A B … A → B)."),
    "layer": Term("层", "layer", "",
                  "Transformer 的一层：一个注意力子层加一个前馈子层，各带残差连接和层归一化；每层有自己的"
                  "权重。比喻里，一层的注意力是一班侦探。",
                  "One layer of a Transformer: an attention sub-layer and a feed-forward "
                  "sub-layer, each with its residual connection and LayerNorm; every layer has "
                  "weights of its own. In the story, a layer's attention is one shift."),
    "sub_layer": Term("子层", "sub-layer", "",
                      "Transformer 一层里的一个部件：注意力子层或前馈子层，外面包着残差连接和层归一化。"
                      "本站不叫“子块”。",
                      "One part of a Transformer layer, the attention or the feed-forward "
                      "sub-layer, wrapped in a residual connection and LayerNorm; not a "
                      "\"sub-block\"."),
    "activation": Term("激活值", "activation", "",
                       "前向传播时一层算出的中间结果（每个词元的向量），随输入而变；权重则不同，训练完就固定了。",
                       "What a layer computes on the way forward (each token's vectors); it "
                       "changes with the input, unlike the weights, which training fixes."),
    "batch_size": Term("批大小", "batch size", "b",
                       "一次一起计算（训练时一起算损失和梯度）的样本个数。d2l 中文版叫“批量大小”。",
                       "How many examples are computed together (in training, the examples whose "
                       "loss and gradient are taken together)."),
    "hidden_state": Term("隐藏状态", "hidden state", "h_t",
                         "循环神经网络读到第 t 步时带着的向量：把读过的内容压进一个定长向量，一步步往后传。"
                         "d2l 中文版叫“隐状态”。比喻里是一路带着的小抄。",
                         "The vector a recurrent network carries after step t: what it has read "
                         "so far, squeezed into one fixed-size vector and passed on step by "
                         "step. In the story, the running note."),
    "teacher_forcing": Term("强制教学", "teacher forcing", "",
                            "训练生成模型时，每一步的输入是正确答案的前一个词元，而不是模型自己生成的词元；"
                            "配合因果掩码，整句一次就能算完。英文名 teacher forcing，一页里至多注一次。"
                            "d2l 中文版也叫“强制教学”。",
                            "Training a generative model on the right answer's previous token at "
                            "each step, not on the token it generated itself; with a causal "
                            "mask, a whole sentence is computed in one pass."),
    "contraction": Term("缩并", "contraction", "",
                        "对两个数组共同的下标，把对应元素相乘再求和（张量缩并）；矩阵乘法就是最简单的一种。"
                        "NumPy 的 einsum 写的就是缩并。",
                        "Multiplying two arrays' elements along an index they share and summing "
                        "over it (tensor contraction); a matrix product is the simplest case. "
                        "NumPy's einsum writes contractions."),
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
    "kv_head": Term("键值头", "key/value head", "",
                    "一组键和值的投影；分组查询注意力里几个查询头共用一个键值头。本站不说“K/V 头”；"
                    "只有分开说键和值时才说键头、值头。",
                    "One set of key and value projections; in grouped-query attention several "
                    "query heads share one key/value head. Not a \"K/V head\"."),
    "kv_heads": Term("键值头数", "key/value heads", r"h_{kv}",
                     "一层里键和值各有几组，这个数能整除头数 h。等于 h 时就是普通的多头注意力，等于 1 时是多查询注意力。",
                     "How many sets of keys and values a layer has; it divides the number of "
                     "heads h. Equal to h, it is plain multi-head attention; equal to "
                     "1, multi-query attention."),
    "multi_query_attention": Term("多查询注意力", "multi-query attention", "",
                                  "MQA（Shazeer，2019）：所有查询头共用同一组键和值，KV 缓存只剩普通多头注意力的 1/h。",
                                  "MQA (Shazeer, 2019): every query head shares one set of keys and "
                                  "values, so the KV cache is 1/h of plain multi-head "
                                  "attention's."),
    "grouped_query_attention": Term("分组查询注意力", "grouped-query attention", "",
                                    "GQA（Ainslie 等，2023）：查询头分成 h_kv 组，每组共用一组键和值；"
                                    "介于多头注意力和多查询注意力之间。",
                                    "GQA (Ainslie et al., 2023): the query heads are split into "
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
                         "Limited by how fast data can be read from memory, not by arithmetic, as "
                         "any computation of low arithmetic intensity is; decoding one token at "
                         "a time is an example."),
})

# The detective story: every prop, in the order of the home page's table (#the-case). Each note
# says what the prop stands for in the model; the home page's table shows the same words, notes
# and symbols (`mha.site.plots.tables.story_table`), and the glossary ends with these rows.
TERMS.update({
    "case_file": Term("卷宗", "case file", "X",
                      r"输入序列，形状 $(n, d_{\text{model}})$：本站的卷宗是一句话，每个词元是其中一页。",
                      r"The input sequence, of shape $(n, d_\text{model})$: here one sentence, "
                      "each token a page."),
    "page": Term("页", "page", "x_i",
                 "一个词元，$i$ 号页的嵌入 $x_i$ 是 $X$ 的一行。页和词元一样从 0 号数起。",
                 "A token: the embedding of page $i$, $x_i$, is a row of $X$. Pages count from "
                 "0, like tokens."),
    "detective": Term("侦探", "detective", r"\text{head}_i",
                      "一个注意力头，按自己的办案手册读卷宗；一班有 $h$ 位。红、蓝、绿、黄只是 0～3 号头的"
                      "名字，不代表分工。",
                      "One attention head, reading the file by its own handbook; a shift has $h$ "
                      "of them. Red, blue, green and yellow only name heads 0 to 3; they are not "
                      "jobs."),
    "handbook": Term("办案手册", "handbook", "W^Q, W^K, W^V",
                     "一位侦探的三个投影矩阵，也就是训练学到的权重；训练之前，每位侦探拿的是一本随机的手册。",
                     "A detective's three projection matrices, the weights that training learns; "
                     "before training, every detective holds a random handbook."),
    "question": Term("问题", "question", "q_i = x_i W^Q",
                     "查询，即 $i$ 号页在找什么；每一页在每位侦探那里各有一个问题。",
                     "The query: what page $i$ is looking for. Every page has a question for "
                     "every detective."),
    "label": Term("标签", "label", "k_j = x_j W^K",
                  "键，即 $j$ 号页能提供什么；每位侦探按自己的手册给每一页贴标签。",
                  "The key: what page $j$ has to offer. Every detective labels every page by "
                  "its own handbook."),
    "content": Term("内容", "content", "v_j = x_j W^V",
                    "值，即 $j$ 号页实际说了什么（是内容，不是“摘要”）。",
                    "The value: what page $j$ actually says (its content, not a summary of it)."),
    "margin_notes": Term("页边批注", "margin notes", r"a_{i\cdot}",
                         "注意力权重的一行，即侦探读 $i$ 号页时在页边记下的：每一页分到多少注意力，加起来等于 1。",
                         "One row of attention weights: what a detective jots beside page $i$, "
                         "how much attention each page gets; they sum to 1."),
    "report": Term("报告", "report", r"\sum_j a_{ij} v_j",
                   "一个注意力头输出的一行，即侦探照页边批注把各页的内容加权求和，交给队长。模型生成的文字"
                   "叫“生成的文本”，不叫“报告”。",
                   "One row of a head's output: the detective's sum of the pages' contents, "
                   "weighted by its margin notes, handed to the captain. The text a model "
                   "generates is the generated text, never a report."),
    "captain": Term("队长", "captain", r"W^O",
                    "一层的输出投影，把每一页的 $h$ 份报告并排（拼接），改写成一份综合报告；每一班有自己的队长。",
                    "A layer's output projection: puts each page's $h$ reports side by side "
                    "(concatenation) and rewrites them into one combined report. Every shift has "
                    "its own captain."),
    "combined_report": Term("综合报告", "combined report", r"\text{Concat} \cdot W^O",
                            r"队长的输出，即多头注意力输出的一行：每页 $d_{\text{model}}$ 个数，加进案情记录。",
                            r"The captain's output, one row of the multi-head attention's "
                            r"output: $d_\text{model}$ numbers per page, added to the case "
                            "record."),
    "shift": Term("一班", "shift", "",
                  "一层的注意力，即 $h$ 位侦探加上他们的队长（真实模型的一层还有前馈网络）；下一班读的是"
                  "案情记录。BERT-base 这样的模型有 12 班，每班 12 位侦探和一位队长。",
                  "A layer's attention: $h$ detectives and their captain (a real layer adds a "
                  "feed-forward network); the next shift reads the case record. A model like "
                  "BERT-base has 12 shifts of 12 detectives, each shift with its captain."),
    "case_record": Term("案情记录", "case record", "",
                        "残差流，即每一页一路穿过各层的那个向量：每一班读它，再把综合报告加上去（前馈网络的"
                        "输出也加在这里）。",
                        "The residual stream, each page's vector on its way through the layers: "
                        "every shift reads it and adds its combined report to it (and the "
                        "feed-forward network adds its output too)."),
    "filing_cabinet": Term("档案柜", "filing cabinet", "",
                           "KV 缓存，即已经读过的页的标签和内容：每一班存一份，留给后面的页查，不用重抄。",
                           "The KV cache: the labels and contents of the pages already read, kept "
                           "by every shift for the pages still to come, so that nobody has to "
                           "write them out again."),
    "page_number": Term("页码", "page number", "p",
                        "位置，即一页在卷宗里的序号，从 0 数起；正余弦位置编码和可学习的位置嵌入把它盖在每一页上。",
                        "A position: a page's index in the case file, counted from 0; sinusoidal "
                        "encoding and learned position embeddings stamp it on every page."),
    "running_note": Term("小抄", "running note", "",
                         "循环神经网络的隐藏状态，一页一页往下带。自注意力用不着它：每一页一步就能和其他所有页比对。",
                         "A recurrent network's hidden state, carried from page to page. "
                         "Self-attention needs none: every page is compared with every other in "
                         "one step."),
    "jupyter_notebook": Term("Jupyter 笔记本", "Jupyter notebook", "",
                             "不在故事里：本站的配套笔记本 python-demo.ipynb。全站说到“笔记本”，都指这种文件，"
                             "而且总写成“Jupyter 笔记本”或“配套笔记本”。",
                             "Not part of the story: the site's companion notebook, "
                             "python-demo.ipynb. The story has no \"notebook\": on this site the "
                             "word means only this kind of file, always as the Jupyter or the "
                             "companion notebook."),
    "source_document": Term("原讲稿", "source document", "",
                            "不在故事里：本站改写、扩充时依据的那份中文讲稿，侦探团的比喻和一段多头注意力的 Python "
                            "演示都出自它。“原论文”则指 Vaswani 等（2017）。",
                            "Not part of the story: the Chinese lecture notes this site was "
                            "rewritten and expanded from; the detective story and a Python demo "
                            "of multi-head attention both come from it. *The paper* is Vaswani et "
                            "al. (2017)."),
})

#: The story: each prop (its row of `TERMS`: its words, symbol, and what it stands for), in the
#: home page's order, and the term of the model it stands for (None: not part of the model).
STORY: dict[str, str | None] = {
    "case_file": "embedding",
    "page": "token",
    "detective": "head",
    "handbook": "projection",
    "question": "query",
    "label": "key",
    "content": "value",
    "margin_notes": "attention_weight",
    "report": "weighted_sum",
    "captain": "output_projection",
    "combined_report": "multi_head_attention",
    "shift": "layer",
    "case_record": "residual_stream",
    "filing_cabinet": "kv_cache",
    "page_number": "absolute_position",
    "running_note": "hidden_state",
    "jupyter_notebook": None,
    "source_document": None,
}


@dataclass(frozen=True)
class Retired:
    """A word the pages of one language do not use, and where it may stay.

    ``word`` is a regular expression: a retired word (笔记 left the story: it meant five
    things), a word in a sense the story gives to something else (报告 for generated text), or
    another book's name for one of our terms (``alias``: the glossary note of ``instead`` names
    it, and a page does not use it). ``instead`` is the key of the term to use. ``allowed`` lists
    the contexts where the word stays, each a regular expression matching the word with its
    context and the reason; `MENTIONS` apply to every word.
    """

    lang: str
    word: str
    instead: str
    why: str
    allowed: tuple[tuple[str, str], ...] = ()
    alias: bool = False


#: Contexts in which any retired word stays: a word in quotation marks is named, not used ("the
#: story does not say “笔记”"). ``{word}`` stands for the word's expression (the patterns are
#: `str.format` templates, so their own braces are doubled).
MENTIONS: tuple[tuple[str, str], ...] = (
    (r"“[^“”\n]{{0,8}}(?:{word})[^“”\n]{{0,8}}”", "named in quotation marks, not used"),
    (r"\"[^\"\n]{{0,12}}(?:{word})[^\"\n]{{0,12}}\"", "named in quotation marks, not used"),
)

#: A page naming d2l's word for something: after "d2l" or one of its section numbers ("10.7 ").
_D2L_ZH = r"(?:d2l|动手学深度学习|\d+\.\d+ )[^。\n|]{0,40}"

#: Terms a Chinese page glosses with their English name, at most once per page (plain text: no
#: regular-expression metacharacters, so each is its own pattern in `RETIRED`).
GLOSSES: dict[str, tuple[str, ...]] = {
    "zh": ("层归一化（LayerNorm）", "强制教学（teacher forcing）"),
    "en": (),
}

RETIRED: tuple[Retired, ...] = (
    # The story's retired words (the lecturer's review, finding 1: 笔记 meant five things).
    Retired("zh", r"笔记", "jupyter_notebook",
            "retired from the story: the captain writes a 综合报告, the RNN carries a 小抄, the "
            "weights are an 办案手册, the KV cache is the 档案柜; 笔记 is only a Jupyter notebook",
            ((r"Jupyter ?笔记本", "the Jupyter notebook"),
             (r"配套笔记本", "the companion notebook"),
             (r"(?:这份|这个|本)笔记本", "the notebook naming itself"),
             (r"笔记本[^。|\n]{0,10}Jupyter", "Jupyter in the same phrase"))),
    Retired("zh", r"本子", "handbook", "retired from the story (it meant the weights)",
            ((r"[样版基文]本子", "本 ending another word: 样本子集, 版本子…"),)),
    Retired("zh", r"证物|[每一](?:页|件|份)证据|证据上", "page",
            "a token is a 页 of the case file, not a piece of evidence (证据 for a claim is fine)"),
    Retired("zh", r"封面", "page", "a special token is a 页 too (0 号页), not a cover"),
    Retired("zh", r"书记员", "detective", "a head is a 侦探; 书记员 left the story"),
    Retired("zh", r"(?<!论)原文", "source_document",
            "the lecture notes are the 原讲稿; 原文 reads as the paper's own text"),
    Retired("zh", r"摘要（值）|值（摘要）|写摘要|给出[^。，]{0,8}摘要", "content",
            "a value is a page's 内容, not a summary"),
    Retired("zh", r"写报告[^。]{0,12}(?:一个词|逐个|词元)|(?:一个词一个词|逐个词元)[^。]{0,12}写报告",
            "report", "a 报告 is a head's output row; a model writes 生成的文本"),
    Retired("zh", r"normal\([^\n#]*\)[^\n]*#[^\n]*卷宗", "case_file",
            "卷宗 is the walkthrough's case file; a random input is 一份随机输入",
            ((r"normal\([^\n#]*\)[^\n]*#[^\n]*不是[^\n]{0,6}卷宗", "says it is not the case file"),)),
    Retired("en", r"normal\([^\n#]*\)[^\n]*#[^\n]*case file", "case_file",
            "the case file is the walkthrough's input; a random input is a random input",
            ((r"normal\([^\n#]*\)[^\n]*#[^\n]*not[^\n]{0,6}case file",
              "says it is not the case file"),)),
    Retired("en", r"\bnotebooks?\b", "jupyter_notebook",
            "retired from the story (weights, cache, the captain's output); the notebook is "
            "always the Jupyter or the companion notebook",
            ((r"Jupyter notebooks?", "the Jupyter notebook"),
             (r"[Cc]ompanion notebooks?", "the companion notebook"),
             (r"[Tt]his notebook", "the notebook naming itself"),
             (r"Jupyter[^.|\n]{0,30}notebooks?", "Jupyter in the same phrase"))),
    Retired("en", r"\bnotes\b", "combined_report",
            "retired from the story: the captain writes a combined report, the RNN carries a "
            "running note, the weights are a handbook, the KV cache is the filing cabinet",
            ((r"margin notes", "the attention weights' prop"),
             (r"lecture notes", "the source document, described"),
             (r"\bnotes (?:column|give|say)|in (?:its|the) notes\b", "the glossary's notes"))),
    Retired("en", r"\b(?:a|one|the|its|their) note\b(?! that| how| the| on| in)",
            "combined_report", "the captain writes a combined report, the RNN a running note",
            ((r"running note", "the RNN's prop"),
             (r"\w+ note (?:under|below|above) the",
              "a note on the page, under a table or figure"))),
    Retired("en", r"\bclerks?\b", "detective", "a head is a detective"),
    Retired("en", r"\b(?:piece|pieces) of evidence\b", "page", "a token is a page"),
    Retired("en", r"summar(?:y|ies)\W{1,3}(?:the )?values?\b|\bvalues?\W{1,3}(?:its |the )?summar",
            "content", "a value is a page's content, not a summary"),
    Retired("en", r"writes? (?:its|the|a) reports? (?:one|a|word|token)", "report",
            "a report is a head's output row; a model writes the generated text"),
    # Numbering (the home page states it): real models' heads are L1-H3, 1-based, hyphenated.
    *(Retired(lang, r"(?<![A-Za-z0-9-])L\d+H\d+(?![0-9])", "head",
              "a real model's head is written L1-H3") for lang in LANGUAGES),
    Retired("zh", r"第 ?0 ?(?:页|号|个词元|个头)", "page",
            "0-based indices are X 号 (0 号页); 第 N 页 counts from 1"),
    # One word per idea: the words our terms replaced.
    Retired("zh", r"子块", "sub_layer", "the glossary's word is 子层"),
    Retired("en", r"sub-?blocks?", "sub_layer", "the glossary's word is sub-layer"),
    Retired("zh", r"K/V ?头|键头和值头|键头与值头", "kv_head", "the glossary's word is 键值头"),
    Retired("en", r"K/V heads?", "kv_head", "the glossary's word is key/value head"),
    Retired("zh", r"头部|注意头", "head", "the glossary's word is 注意力头"),
    # Other books' names: listed in the glossary, not used on the pages.
    Retired("zh", r"LayerNorm", "layer_norm", "层归一化, glossed in English once per page",
            ((GLOSSES["zh"][0], "the gloss (GLOSSES)"),), alias=True),
    Retired("zh", r"层规范化", "layer_norm", "d2l's name; ours is 层归一化",
            ((_D2L_ZH + r"层规范化", "naming d2l's word"),), alias=True),
    Retired("zh", r"批量大小", "batch_size", "d2l's name; ours is 批大小",
            ((_D2L_ZH + r"批量大小", "naming d2l's word"),), alias=True),
    Retired("zh", r"隐状态", "hidden_state", "d2l's name; ours is 隐藏状态",
            ((_D2L_ZH + r"隐状态", "naming d2l's word"),), alias=True),
    Retired("zh", r"基于位置的前馈网络", "feed_forward_network", "d2l's name; ours is 前馈网络",
            ((_D2L_ZH + r"基于位置的前馈网络", "naming d2l's word"),), alias=True),
    Retired("zh", r"归纳头", "induction_head", "another common name; ours is 诱导头",
            alias=True),
    Retired("zh", r"teacher forcing", "teacher_forcing", "强制教学, glossed in English once",
            ((GLOSSES["zh"][1], "the gloss (GLOSSES)"),), alias=True),
)


def term(key: str, lang: str) -> str:
    """The word for ``key`` in ``lang`` (``"zh"`` or ``"en"``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES}, got {lang!r}")
    try:
        entry = TERMS[key]
    except KeyError:
        raise KeyError(f"unknown term {key!r}; add it to mha/site/terms.py") from None
    return getattr(entry, lang)
