"""The case board's real heads (docs/assets/javascripts/caseboard-real.js) in Chromium, in both
languages: what the board shows is the built data, chosen through its controls.

Each language's board is opened once on a desktop (reduced motion) and once on a phone in the
dark palette; the tests share those pages and drive them only through the board's controls
(selects, buttons, check-boxes, the pointer, the keyboard, a finger). They read
`window.caseBoardReal` (the controls' state and the head shown), the lines, bars, canvases,
table and live region, and compare them with the built files, decoded here in Python
(``assets/caseboard/real/<model>-<id>.json``: base64 of bytes, shape ``(layers, heads, n, n)``,
weight = byte / 255; ``roles``, each head's pattern: tests/test_caseboard_data.py holds them to
`mha.site.head_roles`). Colours are drawn at strength sqrt(weight), as the lab draws them.

Reuses the session's one build (served gzipped under a subpath) and tests/test_browser.py's
browser and fixtures.
"""

from __future__ import annotations

import base64
import io
import json
from urllib.parse import urlsplit

import numpy as np
import pytest
from PIL import Image
from test_browser import (  # noqa: F401  (fixtures, used by name)
    PHONE,
    REQUESTS,
    Visit,
    base_url,
    browser,
    open_context,
    site,
)
from tolerance import assert_within, ulps

pytestmark = pytest.mark.browser  # Chromium on the built site (tests/ is otherwise the core)

#: The board's page in each language, and the sentence it opens on.
PAGES = {"zh": "caseboard/", "en": "en/caseboard/"}
DEFAULT = {"zh": "zh-case", "en": "en-case"}
BOARD = "#caseboard-real"
LIVE = "#caseboard-real.caseboard--live"
QUERIES = "#caseboard-real .caseboard-real__queries > button"
THUMBS = "#caseboard-real .caseboard-real__thumb"
MARK = "\u2581"  # SentencePiece's word-start mark
STATE = "() => window.caseBoardReal.state()"
CURRENT = "() => window.caseBoardReal.current()"
KEYS = "#caseboard-real .caseboard-real__keys > button"
MAPS = "#caseboard-real .caseboard-real__map"
#: Every stroke-opacity of the lines of every query of the head drawn in slot s (0: the chosen
#: head, then the overlaid ones): lines[q][k].
LINES = """s => [...document.querySelectorAll(
    `#caseboard-real .caseboard-real__every.caseboard-real__slot--${s || 0} > g`)]
    .map(g => [...g.children].map(line => Number(line.getAttribute('stroke-opacity'))))"""
#: What the lines of slot s show: whether the lines of every query show (computed opacity above
#: 0), and the chosen token's lines, if they show: its side ("q" or "k"), its index and each
#: line's two ends and opacity.
SHOWN = """(s) => { s = s || 0;
    const svg = document.querySelector('#caseboard-real .caseboard-real__lines');
    const shows = e => Number(getComputedStyle(e).opacity) > 0;
    const chosen = svg.querySelector(`.caseboard-real__chosen.caseboard-real__slot--${s}`);
    const on = shows(chosen);
    return {every: shows(svg.querySelector(`.caseboard-real__every.caseboard-real__slot--${s}`)),
            side: on ? chosen.dataset.side : null, query: on ? Number(chosen.dataset.i) : null,
            lines: [...chosen.children].map(line => ['y1', 'y2', 'stroke-opacity']
                .map(name => Number(line.getAttribute(name))))};
}"""
#: A colour of Material's palette as the page computes it, as [r, g, b] (laid over the page's
#: background if it is translucent, as Material's text colours are).
COLOUR = """variable => {
    const probe = document.createElement('span');
    document.querySelector('#caseboard-real .caseboard-real').append(probe);
    probe.style.color = 'var(--md-default-bg-color)';
    const paper = getComputedStyle(probe).color.match(/[\\d.]+/g).map(Number);
    probe.style.color = `var(${variable})`;
    const rgba = getComputedStyle(probe).color.match(/[\\d.]+/g).map(Number);
    probe.remove();
    const alpha = rgba.length > 3 ? rgba[3] : 1;
    return rgba.slice(0, 3).map((c, i) => paper[i] + (c - paper[i]) * alpha);
}"""


# --- The built data ----------------------------------------------------------------------------

def index(site_dir, lang: str) -> dict:
    return json.loads((site_dir / "assets" / "caseboard" / f"real-{lang}.json").read_text(encoding="utf-8"))


def sentence_file(site_dir, model: str, sentence: str) -> tuple[list[str], np.ndarray]:
    """A built sentence file's tokens and weights, shape (layers, heads, n, n), byte / 255."""
    path = site_dir / "assets" / "caseboard" / "real" / f"{model}-{sentence}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    raw = np.frombuffer(base64.b64decode(data["weights"]), dtype=np.uint8)
    shape = (data["layers"], data["heads"], data["n"], data["n"])
    return data["tokens"], raw.reshape(shape) / 255  # (layers, heads, n, n)


def sentence_roles(site_dir, model: str, sentence: str) -> tuple[list[str], list[list]]:
    """A built sentence file's tokens and its heads' patterns (layers x heads)."""
    path = site_dir / "assets" / "caseboard" / "real" / f"{model}-{sentence}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["tokens"], data["roles"]


def role_words(words: dict, tokens: list[str], role: str | None) -> list[str]:
    """A pattern's words, [long, short]: the start (or end) token named for cls (sep)."""
    token = tokens[-1] if role == "sep" else tokens[0]
    return [text.replace("{token}", token) for text in words["roles"][role or "none"]]


def role_name(words: dict, tokens: list[str], roles: list[list], layer: int, head: int) -> str:
    """A map's accessible name (layer and head from 0): "L2-H1: <s>"."""
    name = words["head_name"].replace("{layer}", str(layer + 1)).replace("{head}", str(head + 1))
    return words["head_role"].replace("{name}", name).replace(
        "{role}", role_words(words, tokens, roles[layer][head])[0])


def luminance(rgb) -> np.ndarray:
    """WCAG's relative luminance of sRGB colours (0-255 channels, the last axis)."""
    c = np.asarray(rgb, dtype=np.float64) / 255
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def contrast(a, b) -> np.ndarray:
    """WCAG's contrast ratio of colours a and b (1 to 21), broadcast over leading axes."""
    la, lb = luminance(a), luminance(b)
    return (np.maximum(la, lb) + 0.05) / (np.minimum(la, lb) + 0.05)


# --- Pages -------------------------------------------------------------------------------------

class Board:
    """One language's page, its requests (URLs, in order) and the board's controls."""

    def __init__(self, browser, url: str, **options):
        self.requests: list[str] = []
        self.context = open_context(browser, **options)
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.warnings: list[str] = []
        self.visit = Visit(self.context, url)
        self.page = self.visit.page
        self.page.on("console", lambda message: message.type == "warning"
                     and self.warnings.append(message.text))
        self.page.wait_for_selector(LIVE)
        self.initial = list(self.requests)  # what the page loaded by itself

    def state(self) -> dict:
        return self.page.evaluate(STATE)

    def choose(self, sentence: str | None = None, model: str | None = None,
               layer: int | None = None, head: int | None = None) -> None:
        """Set the controls as a reader does (layer and head counted from 1), waiting for a
        sentence's file to load."""
        page = self.page
        if sentence is not None:
            page.select_option(f"{BOARD}-sentence", value=sentence)
            page.wait_for_function("id => window.caseBoardReal.state().sentence === id",
                                   arg=sentence)
        if model is not None:
            page.select_option(f"{BOARD}-model", value=model)
            page.wait_for_function("m => window.caseBoardReal.state().model === m", arg=model)
        if layer is not None:
            page.select_option(f"{BOARD}-layer", value=str(layer))
        if head is not None:
            page.select_option(f"{BOARD}-head", value=str(head))

    def view(self, which: str) -> None:
        self.page.select_option(f"{BOARD}-view", value=which)
        assert self.state()["view"] == which

    def readout(self) -> str:
        return self.page.locator(f"{BOARD} .caseboard-real__readout").text_content()


@pytest.fixture(scope="module")
def desk(browser, base_url):
    """Each language's board on a desktop, with reduced motion, opened once."""
    opened: dict[str, Board] = {}

    def board(lang: str) -> Board:
        if lang not in opened:
            opened[lang] = Board(browser, base_url + PAGES[lang], reduced_motion="reduce",
                                 viewport={"width": 1280, "height": 900})
        return opened[lang]

    yield board
    for board in opened.values():
        board.context.close()


@pytest.fixture(scope="module")
def phone(browser, base_url):
    """Each language's board on a 390 px phone in the dark palette, opened once."""
    opened: dict[str, Board] = {}

    def board(lang: str) -> Board:
        if lang not in opened:
            opened[lang] = Board(browser, base_url + PAGES[lang], color_scheme="dark", **PHONE)
        return opened[lang]

    yield board
    for board in opened.values():
        board.context.close()


def canvas_pixels(canvas) -> np.ndarray:
    """A canvas's pixels, (height, width, 3), read as a PNG (getImageData would make Chromium
    warn about repeated readbacks in the page's console)."""
    url = canvas.evaluate("c => c.toDataURL('image/png')")
    png = base64.b64decode(url.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.float64)


def shown(page, q: int | None, weights: np.ndarray | None = None, side: str = "q",
          slot: int = 0) -> None:
    """Check that the lines of slot ``slot`` show query q's weights (``weights`` is the head's,
    (n, n)), or key q's (``side`` "k": every query's line into it), or every query's lines
    (q None). Waits for a fade (150 ms without reduced motion) first. A line's opacity is
    sqrt(weight), the lab's mapping (review finding 12)."""
    try:
        page.wait_for_function(f"""([q, s]) => {{ const lines = ({SHOWN})(s);
            return lines.query === q && lines.every === (q === null); }}""", arg=[q, slot],
            timeout=3000)
    except Exception:  # Playwright's TimeoutError: the asserts below say what shows instead
        pass
    lines = page.evaluate(SHOWN, slot)
    assert (lines["query"], lines["every"]) == (q, q is None)
    if q is not None:
        assert lines["side"] == side
        n = len(weights)
        ends = np.array(lines["lines"])  # (n, 3): y1, y2, opacity of the line to each key
        others = np.arange(n) + 0.5
        np.testing.assert_array_equal(ends[:, 0], np.full(n, q + 0.5) if side == "q" else others)
        np.testing.assert_array_equal(ends[:, 1], others if side == "q" else np.full(n, q + 0.5))
        # sqrt(byte / 255) on both sides (correctly rounded operations), the attribute written
        # and read back as the shortest decimal that round-trips: exact
        np.testing.assert_array_equal(ends[:, 2], np.sqrt(weights[q] if side == "q"
                                                          else weights[:, q]))


def said(words: dict, token: str) -> str:
    """A token as the readout's text holds it: each word-start mark followed by its name for
    screen readers (visually hidden)."""
    return token.replace(MARK, MARK + words["word_start"] + " ")


def looks_at(words: dict, tokens: list[str], row: np.ndarray, q: int) -> str:
    """The start of what the readout says for query q: its words and its top key."""
    top = int(np.argmax(row))  # the first of equals, as the board orders them
    return (words["looks_at"].replace("{token}", said(words, tokens[q])) + " "
            + said(words, tokens[top]) + " " + f"{row[top]:.2f}")


# --- Tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", PAGES)
def test_board_opens_on_the_case_in_the_pages_language(desk, site, lang):
    board = desk(lang)
    site_dir = site[1]
    assert board.state() == {"sentence": DEFAULT[lang], "model": "e5", "layer": 1, "head": 3,
                             "view": "one", "token": None, "key": None, "pinned": None,
                             "overlay": [3]}
    tokens, weights = sentence_file(site_dir, "e5", DEFAULT[lang])
    assert board.page.locator(QUERIES).all_text_contents() == tokens
    assert board.page.locator(KEYS).all_text_contents() == tokens
    # The static figure is still in the page, hidden now that the board is live.
    assert board.page.locator(f"{BOARD} .caseboard__fallback").count() == 1
    assert not board.page.locator(f"{BOARD} .caseboard__fallback").is_visible()
    # It loaded the index of its language and the case's file, and no other real heads.
    data = [url.split("/assets/caseboard/", 1)[1] for url in board.initial
            if "/assets/caseboard/real" in url]
    assert data == [f"real-{lang}.json", f"real/e5-{DEFAULT[lang]}.json"]
    # Layer 1, head 3 of E5 reads the token before: the default is a clear first example.
    current = board.page.evaluate(CURRENT)
    assert current["tokens"] == tokens
    np.testing.assert_array_equal(current["weights"], weights[0, 2])
    previous = np.argmax(weights[0, 2, 3:-1], axis=1)
    assert (previous == np.arange(2, len(tokens) - 2)).mean() > 0.6


@pytest.mark.parametrize("lang", PAGES)
def test_sentence_list_groups_every_sentence_by_language(desk, site, lang):
    board = desk(lang)
    data = index(site[1], lang)
    groups = board.page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real-sentence optgroup')].map(g => [g.label,
        [...g.children].map(o => [o.value, o.textContent])])""")
    # The page's language first, each group labelled with the words of the page's language.
    order = [lang, "en" if lang == "zh" else "zh"]
    assert [label for label, _ in groups] == [data["words"][f"sentences_{g}"] for g in order]
    for (label, options), group_lang in zip(groups, order):
        expected = [[s["id"], s["text"]] for s in data["sentences"] if s["lang"] == group_lang]
        assert options == expected
        assert len(options) >= 6
    assert sum(len(options) for _, options in groups) == len(data["sentences"]) >= 12


@pytest.mark.parametrize("lang", PAGES)
def test_choosing_a_sentence_loads_its_file_once_and_shows_its_tokens(desk, site, lang):
    board = desk(lang)
    site_dir = site[1]
    data = index(site_dir, lang)
    other = {"zh": "zh-knife", "en": "en-diary"}[lang]
    before = len(board.requests)
    board.choose(sentence=other)
    loaded = [url for url in board.requests[before:] if "/assets/caseboard/real" in url]
    assert [urlsplit(url).path.rsplit("/assets/caseboard/", 1)[1] for url in loaded] \
        == [f"real/e5-{other}.json"]
    tokens, _ = sentence_file(site_dir, "e5", other)
    assert board.page.locator(QUERIES).all_text_contents() == tokens
    # The model list holds the sentence's models only, by their names.
    models = board.page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real-model option')].map(o => [o.value, o.textContent])""")
    sentence = next(s for s in data["sentences"] if s["id"] == other)
    assert models == [[key, data["models"][key]["name"]] for key in sentence["files"]]
    # Back to the case: its file is kept, not fetched again.
    before = len(board.requests)
    board.choose(sentence=DEFAULT[lang])
    assert [url for url in board.requests[before:] if "/assets/caseboard/real" in url] == []
    assert board.page.locator(QUERIES).all_text_contents() \
        == sentence_file(site_dir, "e5", DEFAULT[lang])[0]


@pytest.mark.parametrize("lang", PAGES)
def test_the_head_shown_is_the_built_files_bytes_over_255(desk, site, lang):
    """Two sentences x both their models x two heads (and a layer each model has): the weights
    the board holds and the lines it draws are the file's."""
    board = desk(lang)
    site_dir = site[1]
    for sentence in ("en-because", "en-window"):
        for model in ("e5", "minilm"):
            board.choose(sentence=sentence, model=model)
            tokens, weights = sentence_file(site_dir, model, sentence)
            layers = board.page.evaluate("""() => document.querySelectorAll(
                '#caseboard-real-layer option').length""")
            assert layers == weights.shape[0]
            for layer, head in ((2, 7), (weights.shape[0], 12)):
                board.choose(layer=layer, head=head)
                state = board.state()
                assert (state["sentence"], state["model"], state["layer"], state["head"]) \
                    == (sentence, model, layer, head)
                current = board.page.evaluate(CURRENT)
                assert current["tokens"] == tokens
                np.testing.assert_array_equal(current["weights"], weights[layer - 1, head - 1])
                np.testing.assert_array_equal(board.page.evaluate(LINES),  # exact, as in
                                              np.sqrt(weights[layer - 1, head - 1]))  # shown()
    board.choose(sentence=DEFAULT[lang], model="e5", layer=1, head=3)


@pytest.mark.parametrize("lang", PAGES)
def test_pointing_at_a_token_shows_its_lines_and_names_its_top_key(desk, site, lang):
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    tokens, weights = sentence_file(site[1], "e5", DEFAULT[lang])
    head = weights[0, 2]  # the default: layer 1, head 3
    shown(page, None)  # every query's lines, faintly
    assert board.readout() == ""
    for q in (4, len(tokens) - 2):
        page.locator(QUERIES).nth(q).hover()
        assert board.state()["token"] == q
        shown(page, q, head)
        assert board.readout().startswith(looks_at(words, tokens, head[q], q))
        # Each key's bar is as long as the weight the query gives it.
        bars = page.evaluate("""() => [...document.querySelectorAll(
            '#caseboard-real .caseboard-real__keys .caseboard-real__bar')]
            .map(b => b.getBoundingClientRect().width)""")
        full = page.locator(f"{KEYS} .caseboard-real__bar").first.evaluate("b => b.offsetWidth")
        # offsetWidth rounds the full bar's width to a whole pixel (half a pixel off at most),
        # and layout places edges to 1/64 of a pixel
        np.testing.assert_allclose(np.array(bars) / full, head[q], rtol=0,
                                   atol=(0.5 + 1 / 64) / full)
    page.mouse.move(5, 5)  # off the tokens: every line again
    assert board.state()["token"] is None
    shown(page, None)


@pytest.mark.parametrize("lang", PAGES)
def test_tokens_are_reached_with_tab_and_arrows_with_a_visible_focus(desk, site, lang):
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    tokens, weights = sentence_file(site[1], "e5", DEFAULT[lang])
    page.locator(f"{BOARD} .caseboard-real__tools > button").last.focus()  # before the tokens
    page.keyboard.press("Tab")
    assert board.state()["token"] == 0
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    focused = page.evaluate("""() => { const e = document.activeElement, s = getComputedStyle(e);
        return {q: e.dataset.i, outline: s.outlineStyle, width: parseFloat(s.outlineWidth),
                color: s.outlineColor}; }""")
    assert focused["q"] == "3"
    assert focused["outline"] == "solid" and focused["width"] >= 2
    assert board.state()["token"] == 3
    shown(page, 3, weights[0, 2])
    assert board.readout().startswith(looks_at(words, tokens, weights[0, 2, 3], 3))
    page.keyboard.press("End")
    assert board.state()["token"] == len(tokens) - 1
    # One Tab stop per token list (review finding 23): the queries', then the keys'.
    tabbable = """sel => [...document.querySelectorAll(sel)].filter(b => b.tabIndex === 0)
        .map(b => Number(b.dataset.i))"""
    assert page.evaluate(tabbable, QUERIES) == [len(tokens) - 1]
    assert page.evaluate(tabbable, KEYS) == [0]
    page.keyboard.press("Tab")
    assert board.state()["key"] == 0 and board.state()["token"] is None
    page.keyboard.press("ArrowDown")
    assert board.state()["key"] == 1
    shown(page, 1, weights[0, 2], side="k")
    page.keyboard.press("Shift+Tab")
    assert board.state()["token"] == len(tokens) - 1
    page.keyboard.press("Escape")
    assert board.state()["token"] is None and board.state()["pinned"] is None
    assert board.readout() == ""
    # Reduced motion: nothing of the board moves in transitions.
    durations = page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real .caseboard-real__bar, #caseboard-real .caseboard-real__every')]
        .map(e => getComputedStyle(e).transitionDuration)""")
    assert set(durations) == {"0s"}


@pytest.mark.parametrize("lang", PAGES)
def test_model_view_shows_each_head_of_the_layer_and_opens_one(desk, site, lang):
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    _, weights = sentence_file(site[1], "e5", DEFAULT[lang])
    layers, heads, n, _ = weights.shape
    board.choose(layer=2)
    board.view("all")
    thumbs = page.locator(THUMBS)
    assert page.locator(f"{THUMBS}:visible").count() == heads
    assert not page.locator(QUERIES).first.is_visible()
    # Each one's name and label: its head and its pattern on this sentence (the data's roles).
    tokens, roles = sentence_roles(site[1], "e5", DEFAULT[lang])
    assert thumbs.evaluate_all("ts => ts.map(t => t.getAttribute('aria-label'))") == [
        role_name(words, tokens, roles, 1, j) for j in range(heads)]
    assert thumbs.locator(".caseboard-real__role").all_text_contents() == [
        role_words(words, tokens, roles[1][j])[0] for j in range(heads)]
    # Each heatmap: n x n pixels, from the page's background (weight 0) to the weights' colour
    # (1) at strength sqrt(weight) (the lab's mapping, review finding 12); the canvas keeps
    # whole numbers (a Uint8ClampedArray rounds to the nearest): half a unit.
    pixel = 0.5 + ulps(255)
    paper = np.array(page.evaluate(COLOUR, "--md-default-bg-color"))
    ink = np.array(page.evaluate(COLOUR, "--cbreal-weight"))
    for j in (0, 2, heads - 1):
        rgb = canvas_pixels(thumbs.nth(j).locator("canvas"))
        assert rgb.shape == (n, n, 3)
        assert_within(rgb, paper + (ink - paper) * np.sqrt(weights[1, j])[..., None], pixel)
    # The reader switches to the dark palette (the header's toggle): the heatmaps follow it.
    palette = page.locator("form[data-md-component=palette] label:visible")
    palette.click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    dark = np.array(page.evaluate(COLOUR, "--md-default-bg-color"))
    light = np.array(page.evaluate(COLOUR, "--cbreal-weight"))
    assert contrast(dark, paper) > 10
    for j in (0, heads - 1):
        assert_within(canvas_pixels(thumbs.nth(j).locator("canvas")),
                      dark + (light - dark) * np.sqrt(weights[1, j])[..., None], pixel)
    palette.click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'default'")
    assert_within(canvas_pixels(thumbs.nth(0).locator("canvas")),
                  paper + (ink - paper) * np.sqrt(weights[1, 0])[..., None], pixel)
    # Enter on a thumbnail opens its head in the one-head view.
    thumbs.nth(6).focus()
    page.keyboard.press("Enter")
    state = board.state()
    assert (state["view"], state["layer"], state["head"]) == ("one", 2, 7)
    assert page.locator(QUERIES).first.is_visible()
    assert page.evaluate("() => document.activeElement.id") == "caseboard-real-head"
    np.testing.assert_array_equal(page.evaluate(CURRENT)["weights"], weights[1, 6])
    board.choose(layer=1, head=3)


@pytest.mark.parametrize("lang", PAGES)
def test_phone_in_the_dark_taps_a_token_and_nothing_scrolls_sideways(phone, site, lang):
    board = phone(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    assert page.evaluate("() => document.body.dataset.mdColorScheme") == "slate"
    sideways = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    # The longest sentence: every row fits, tokens stay readable and big enough to tap.
    board.choose(sentence="zh-knife")
    tokens, weights = sentence_file(site[1], "e5", "zh-knife")
    assert page.evaluate(sideways) == 0
    sizes = page.locator(QUERIES).evaluate_all("""bs => bs.map(b => [
        parseFloat(getComputedStyle(b).fontSize), b.getBoundingClientRect().height,
        b.getBoundingClientRect().right])""")
    assert min(size for size, _, _ in sizes) >= 12
    assert min(height for _, height, _ in sizes) >= 24
    q = 8
    page.locator(QUERIES).nth(q).tap()
    assert board.state()["token"] == q
    shown(page, q, weights[0, 2])
    assert board.readout().startswith(looks_at(words, tokens, weights[0, 2, q], q))
    # The strongest line is drawn in a colour that stands out on the dark background.
    paper = page.evaluate(COLOUR, "--md-default-bg-color")
    assert contrast(paper, (0, 0, 0)) < 2  # the page is dark
    box = page.locator(f"{BOARD} .caseboard-real__linebox")
    box.scroll_into_view_if_needed()
    pixels = np.asarray(Image.open(io.BytesIO(box.screenshot())).convert("RGB"))
    assert contrast(paper, pixels).max() >= 3
    # All heads: 3 or 4 columns, still nothing sideways, cells visible on the dark background.
    board.view("all")
    assert page.evaluate(sideways) == 0
    lefts = page.locator(THUMBS).evaluate_all(
        "ts => ts.filter(t => !t.hidden).map(t => Math.round(t.getBoundingClientRect().left))")
    assert len(set(lefts)) in (3, 4)
    ink = page.evaluate(COLOUR, "--cbreal-weight")
    assert contrast(paper, ink) >= 3
    board.view("one")


@pytest.mark.parametrize("lang", PAGES)
def test_motion_is_on_where_the_reader_has_not_asked_for_less(phone, lang):
    """The counterpart of the reduced-motion check: the phone's page (no preference) moves."""
    durations = phone(lang).page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real .caseboard-real__bar, #caseboard-real .caseboard-real__every')]
        .map(e => getComputedStyle(e).transitionDuration)""")
    assert set(durations) == {"0.15s"}


# --- Issue #29: legend, grid of every layer, keys, overlay, table, announcements ---------------

#: The detectives' colours (mha/site/plots/case.py: CAST), which no other colour may reuse.
def cast_colours() -> list[tuple[int, int, int]]:
    from mha.site.plots.case import CAST

    return [tuple(int(d.color[i:i + 2], 16) for i in (1, 3, 5)) for d in CAST]


def hue(rgb) -> tuple[float, float]:
    """An sRGB colour's CIELCh hue (degrees) and chroma (D65), as the lab's test measures it."""
    c = np.asarray(rgb, dtype=np.float64) / 255
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ linear / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    a, b = 500 * (f[0] - f[1]), 200 * (f[1] - f[2])
    return float(np.degrees(np.arctan2(b, a)) % 360), float(np.hypot(a, b))


def png_pixels(url: str) -> np.ndarray:
    png = base64.b64decode(url.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.float64)


@pytest.mark.parametrize("lang", PAGES)
def test_the_legend_gives_the_weights_numbers_on_the_lines_sqrt_scale(desk, site, lang):
    """Issue item 2, review finding 5: a legend with numbers, as text; its ticks 0, 0.25, 1 sit
    where sqrt puts them, and the bar there has the colour a line or a map cell of that weight
    has."""
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    legend = page.locator(f"{BOARD} .caseboard-real__legend")
    text = legend.text_content()
    assert text.startswith(words["legend"]) and words["legend_note"] in text
    ticks = legend.locator(".caseboard-real__tick")
    assert ticks.all_text_contents() == ["0", "0.25", "1"]
    ramp = legend.locator(".caseboard-real__ramp").bounding_box()
    edges = ticks.evaluate_all("""ts => ts.map(t => { const r = t.getBoundingClientRect();
        return [r.left, r.right]; })""")
    anchor = [edges[0][0], (edges[1][0] + edges[1][1]) / 2, edges[2][1]]  # left, centre, right
    np.testing.assert_allclose((np.array(anchor) - ramp["x"]) / ramp["width"],
                               np.sqrt([0, 0.25, 1]), atol=1.5 / ramp["width"])
    # The bar's colour at the 0.25 tick: half way from the page to the weights' colour.
    shot = np.asarray(Image.open(io.BytesIO(legend.locator(".caseboard-real__ramp")
                                            .screenshot())).convert("RGB"), dtype=np.float64)
    paper = np.array(page.evaluate(COLOUR, "--md-default-bg-color"))
    ink = np.array(page.evaluate(COLOUR, "--cbreal-weight"))
    middle = shot[shot.shape[0] // 2, shot.shape[1] // 2]
    assert_within(middle, paper + (ink - paper) * np.sqrt(0.25), 4)  # a gradient's dithering
    assert_within(shot[shot.shape[0] // 2, -2], ink, 6)


@pytest.mark.parametrize("lang", PAGES)
def test_all_layers_are_a_grid_of_maps_equal_to_the_data_that_opens_a_head(desk, site, lang):
    """Issue item 5a, review finding 28: every layer x head as small maps (sqrt(weight) from
    the page to the weights' colour), each labelled with its pattern (the data's roles), one
    Tab stop with arrow keys; Enter opens the head in the one-head view, the pinned token
    kept."""
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    board.choose(sentence="en-case", model="e5", layer=1, head=3)
    page.locator(QUERIES).nth(4).click()  # a pinned query, kept when a map is opened
    board.view("layers")
    pixel = 0.5 + ulps(255)
    for model in ("e5", "minilm"):
        board.choose(model=model)
        tokens, weights = sentence_file(site[1], model, "en-case")
        _, roles = sentence_roles(site[1], model, "en-case")
        layers, heads, n, _ = weights.shape
        maps = page.locator(f"{MAPS}:visible")
        assert maps.count() == layers * heads  # 12 x 12, then 6 x 12
        names = maps.evaluate_all("ms => ms.map(m => [Number(m.dataset.layer), "
                                  "Number(m.dataset.head), m.getAttribute('aria-label'), "
                                  "m.querySelector('.caseboard-real__role').textContent])")
        assert [(l, j) for l, j, _, _ in names] == [(l, j) for l in range(layers)
                                                   for j in range(heads)]
        assert [name for _, _, name, _ in names] == [
            role_name(words, tokens, roles, l, j) for l in range(layers) for j in range(heads)]
        assert [label for _, _, _, label in names] == [
            role_words(words, tokens, roles[l][j])[1] for l in range(layers) for j in range(heads)]
        paper = np.array(page.evaluate(COLOUR, "--md-default-bg-color"))
        ink = np.array(page.evaluate(COLOUR, "--cbreal-weight"))
        urls = maps.evaluate_all("ms => ms.map(m => m.querySelector('canvas').toDataURL())")
        drawn = np.stack([png_pixels(url) for url in urls]).reshape(layers, heads, n, n, 3)
        assert_within(drawn, paper + (ink - paper) * np.sqrt(weights)[..., None], pixel)
    # One Tab stop, on the head chosen; the arrow keys move it; Enter opens the head.
    tabbable = page.locator(f"{MAPS}[tabindex='0']")
    assert tabbable.count() == 1
    assert (tabbable.get_attribute("data-layer"), tabbable.get_attribute("data-head")) \
        == ("0", "2")
    tabbable.focus()
    for key in ("ArrowDown", "ArrowDown", "ArrowRight", "ArrowLeft", "ArrowRight"):
        page.keyboard.press(key)
    focused = page.evaluate("() => [document.activeElement.dataset.layer, "
                            "document.activeElement.dataset.head]")
    assert focused == ["2", "3"] and page.locator(f"{MAPS}[tabindex='0']").count() == 1
    current = page.locator(f"{MAPS}[aria-current=true]")  # still the head chosen
    assert (current.count(), current.get_attribute("data-layer"),
            current.get_attribute("data-head")) == (1, "0", "2")
    page.keyboard.press("Enter")
    state = board.state()
    assert (state["view"], state["layer"], state["head"], state["token"]) == ("one", 3, 4, 4)
    tokens, weights = sentence_file(site[1], "minilm", "en-case")
    np.testing.assert_array_equal(page.evaluate(CURRENT)["weights"], weights[2, 3])
    shown(page, 4, weights[2, 3])
    page.keyboard.press("Escape")  # focus is on the head select: the board's Escape is not
    page.locator(QUERIES).nth(4).click()  # a click on the pinned query unpins it
    page.mouse.move(5, 5)
    assert board.state()["pinned"] is None and board.state()["token"] is None
    board.choose(sentence=DEFAULT[lang], model="e5", layer=1, head=3)


@pytest.mark.parametrize("lang", PAGES)
def test_a_key_shows_who_reads_it(desk, site, lang):
    """Issue item 5c, review findings 13 and 34: pointing at a key shows every query's line
    into it, bars under the queries as long as the key's column of weights, and the readout
    names the queries that read it most."""
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    tokens, weights = sentence_file(site[1], "e5", DEFAULT[lang])
    head = weights[0, 2]
    k = len(tokens) - 2
    page.locator(KEYS).nth(k).hover()
    assert (board.state()["key"], board.state()["token"]) == (k, None)
    shown(page, k, head, side="k")
    bars = page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real .caseboard-real__queries .caseboard-real__bar')]
        .map(b => b.getBoundingClientRect().width)""")
    full = page.locator(f"{QUERIES} .caseboard-real__bar").first.evaluate("b => b.offsetWidth")
    np.testing.assert_allclose(np.array(bars) / full, head[:, k], rtol=0,
                               atol=(0.5 + 1 / 64) / full)
    top = int(np.argmax(head[:, k]))
    assert board.readout().startswith(
        words["read_by"].replace("{token}", said(words, tokens[k])) + " "
        + said(words, tokens[top]) + f" {head[top, k]:.2f}")
    page.mouse.move(5, 5)
    shown(page, None)


@pytest.mark.parametrize("lang", PAGES)
def test_overlaid_heads_each_draw_their_own_weights_in_their_own_colour(desk, site, lang):
    """Issue item 5b, review finding 34: up to three heads at once, each its own colour (none a
    detective's nor the lab's signed pair), with a key of the colours."""
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    tokens, weights = sentence_file(site[1], "e5", DEFAULT[lang])
    _, roles = sentence_roles(site[1], "e5", DEFAULT[lang])
    boxes = page.locator(f"{BOARD} .caseboard-real__check input")
    assert boxes.count() == weights.shape[1]
    assert boxes.nth(2).is_checked() and boxes.nth(2).is_disabled()  # the chosen head
    boxes.nth(4).check()
    boxes.nth(6).check()
    assert board.state()["overlay"] == [3, 5, 7]
    assert boxes.nth(7).is_disabled()  # three at most
    for slot, j in enumerate((2, 4, 6)):
        np.testing.assert_array_equal(page.evaluate(LINES, slot), np.sqrt(weights[0, j]))
    assert page.locator(f"{BOARD} .caseboard-real__key > li").all_text_contents() == [
        role_name(words, tokens, roles, 0, j) for j in (2, 4, 6)]
    page.locator(QUERIES).nth(3).hover()
    for slot, j in enumerate((2, 4, 6)):
        shown(page, 3, weights[0, j], slot=slot)
    page.mouse.move(5, 5)
    # Colours: three different ones, none near a detective's hue or the lab's signed pair, in
    # either palette (the header's toggle), each at least 3:1 on the page (a line, not text).
    stroke = """() => [0, 1, 2].map(s => getComputedStyle(document.querySelector(
        `#caseboard-real .caseboard-real__every.caseboard-real__slot--${s}`)).stroke
        .match(/[\\d.]+/g).slice(0, 3).map(Number))"""
    strokes = page.evaluate(stroke)
    paper = page.evaluate(COLOUR, "--md-default-bg-color")
    palette = page.locator("form[data-md-component=palette] label:visible")
    palette.click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    # The lab's signed pair, as its stylesheet sets it on a live lab (caseboard-lab.css).
    signed = """() => { const probe = document.createElement('div');
        probe.className = 'cblab-live'; probe.hidden = true; document.body.append(probe);
        const out = ['--cblab-pos', '--cblab-neg'].map(v => { probe.style.color = `var(${v})`;
            return getComputedStyle(probe).color.match(/[\\d.]+/g).slice(0, 3).map(Number); });
        probe.remove(); return out; }"""
    dark, lab = page.evaluate(stroke), page.evaluate(signed)
    slate = page.evaluate(COLOUR, "--md-default-bg-color")
    palette.click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'default'")
    lab += page.evaluate(signed)
    assert min(contrast(paper, strokes[1:]).min(), contrast(slate, dark[1:]).min()) >= 3
    others = cast_colours() + [tuple(c) for c in lab]
    assert len({hue(c)[0] for c in others}) == len(others) == 8
    for colour in strokes + dark:
        h, chroma = hue(colour)
        if chroma < 10:
            continue  # a neutral (the chosen head's ink): no hue to confuse
        for other in others:
            distance = abs((h - hue(other)[0] + 180) % 360 - 180)
            assert distance >= 30, (colour, other)
    assert len({tuple(c) for c in strokes}) == len({tuple(c) for c in dark}) == 3
    boxes.nth(4).uncheck()
    boxes.nth(6).uncheck()
    assert board.state()["overlay"] == [3]


@pytest.mark.parametrize("lang", PAGES)
def test_a_model_with_fewer_layers_says_so_and_the_toolbar_stays_put(desk, site, lang):
    """Review finding 16: the layer clamped on a model switch is said in the status line; the
    selects keep their widths."""
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    data = index(site[1], lang)
    board.choose(sentence="en-window", model="e5", layer=12)
    boxes = "() => [...document.querySelectorAll('#caseboard-real select')].map(s => { " \
            "const r = s.getBoundingClientRect(); return [r.left, r.top, r.width]; })"
    before = page.evaluate(boxes)
    board.choose(model="minilm")
    layers = data["models"]["minilm"]["layers"]
    assert board.state()["layer"] == layers
    assert page.locator(f"{BOARD} .caseboard__status").text_content() == (
        words["clamped"].replace("{model}", data["models"]["minilm"]["name"])
        .replace("{layers}", str(layers)).replace("{layer}", str(layers)))
    assert page.evaluate(boxes) == before
    board.choose(layer=2)
    assert page.locator(f"{BOARD} .caseboard__status").text_content() == ""
    board.choose(sentence=DEFAULT[lang], model="e5", layer=1, head=3)


@pytest.mark.parametrize("lang", PAGES)
def test_the_head_reads_as_a_table_and_every_change_is_announced(desk, site, lang):
    """Review findings 22 and 11, issue item 7: the head as a table (its values in the cells);
    a change said in the polite live region with the new strongest key, the word-start mark
    named in words."""
    board = desk(lang)
    page = board.page
    words = index(site[1], lang)["words"]
    tokens, weights = sentence_file(site[1], "e5", DEFAULT[lang])
    _, roles = sentence_roles(site[1], "e5", DEFAULT[lang])
    button = page.locator(f"{BOARD} .caseboard-real__tools > button").last
    button.click()
    assert button.get_attribute("aria-expanded") == "true"
    table = page.locator(f"{BOARD} .caseboard-real__table")
    cells = table.locator("tbody tr").evaluate_all(
        "rs => rs.map(r => [...r.querySelectorAll('td')].map(c => c.textContent))")
    assert cells == [[f"{w:.2f}" for w in row] for row in weights[0, 2]]
    assert table.locator("tbody th[scope=row]").count() == len(tokens)
    button.click()
    assert not table.is_visible()
    # The live region: the layer changed, the head and its pattern, the key read most.
    live = page.locator(f"{BOARD} [aria-live=polite]")
    assert live.count() == 1
    board.choose(layer=5)
    head = weights[4, 2]
    top = int(np.argmax(head.sum(axis=0)))
    spoken = lambda t: " ".join(t.replace(MARK, f" {words['word_start']} ").split())  # noqa: E731
    expected = [words["now_one"].replace("{name}", role_name(words, tokens, roles, 4, 2)),
                words["most_read"].replace("{token}", spoken(tokens[top]))
                .replace("{value}", f"{head[:, top].mean():.2f}")]
    assert live.text_content() == " · ".join(expected)
    # A query chosen: its strongest key; the word-start mark is named, never read as a glyph.
    q = next(i for i, t in enumerate(tokens) if MARK in t)
    page.locator(QUERIES).nth(q).focus()
    top = int(np.argmax(head[q]))
    assert live.text_content().endswith(
        words["top_key"].replace("{token}", spoken(tokens[q])).replace(
            "{key}", spoken(tokens[top])).replace("{value}", f"{head[q, top]:.2f}"))
    assert MARK not in live.text_content()
    query = page.locator(QUERIES).nth(q)
    assert query.get_attribute("aria-label") == spoken(tokens[q])
    mark = query.locator(".caseboard-real__mark")
    assert mark.get_attribute("aria-hidden") == "true"
    muted = mark.evaluate("m => getComputedStyle(m).color")
    assert muted != query.evaluate("b => getComputedStyle(b).color")
    page.keyboard.press("Escape")
    board.choose(layer=1)


@pytest.mark.parametrize("lang", PAGES)
def test_on_a_phone_a_second_tap_or_show_all_unpins_and_the_grid_scrolls_in_its_box(phone,
                                                                                   lang):
    """Review finding 7: a tapped token stays pinned until a second tap or "Show all"; the
    grid of every layer scrolls sideways inside its box, not the page."""
    board = phone(lang)
    page = board.page
    queries = page.locator(QUERIES)
    queries.nth(2).tap()
    assert board.state()["pinned"] == {"side": "q", "index": 2}
    queries.nth(2).tap()
    assert board.state()["pinned"] is None and board.state()["token"] is None
    page.locator(KEYS).nth(3).tap()
    assert board.state()["key"] == 3
    page.locator(f"{BOARD} .caseboard-real__tools > button").first.tap()
    assert board.state()["pinned"] is None and board.state()["key"] is None
    board.view("layers")
    sideways = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    assert page.evaluate(sideways) == 0
    box = page.locator(f"{BOARD} .caseboard-real__layers")
    assert box.evaluate("b => b.scrollWidth > b.clientWidth")
    assert min(page.locator(f"{MAPS}:visible").evaluate_all(
        "ms => ms.map(m => Math.min(m.offsetWidth, m.offsetHeight))")) >= 24
    board.view("one")


def test_without_its_data_the_board_keeps_the_figure_and_says_so(browser, base_url, site):
    """The index does not load: the static figure stays, with the page's words for that (its
    data-load-failed). A sentence's file does not load: the board keeps the sentence it shows
    and says so."""
    context = open_context(browser)
    try:
        context.route("**/assets/caseboard/real-zh.json", lambda route: route.abort())
        page = context.new_page()
        page.goto(base_url + PAGES["zh"])
        status = page.locator(f"{BOARD} .caseboard__status")
        status.filter(has_text="数据没有加载成功。").wait_for()
        assert page.locator(f"{BOARD} .caseboard__fallback").is_visible()
        assert page.locator(LIVE).count() == 0
        page.close()
        context.route("**/assets/caseboard/real/e5-en-safe.json", lambda route: route.abort())
        page = context.new_page()
        page.goto(base_url + PAGES["en"])
        page.wait_for_selector(LIVE)
        page.select_option(f"{BOARD}-sentence", value="en-safe")
        page.locator(f"{BOARD} .caseboard__status").filter(
            has_text="The data did not load.").wait_for()
        assert page.evaluate(STATE)["sentence"] == "en-case"
        assert page.locator(f"{BOARD}-sentence").input_value() == "en-case"
    finally:
        context.close()


def test_a_model_chosen_while_the_sentence_loads_is_shown_with_that_sentence(browser, base_url,
                                                                            site):
    """A sentence chosen, then a model before the sentence's file has come: the board shows
    the sentence chosen with the model chosen, and the model list is that sentence's at once.
    (It used to show the model with the sentence shown before: under a full test run the file
    came late and tests/test_caseboard_tasks.py timed out waiting for the sentence.)"""
    context = open_context(browser)
    held = []
    try:
        context.route("**/assets/caseboard/real/*-en-diary.json", lambda route: held.append(route))
        page = context.new_page()
        page.goto(base_url + PAGES["en"])
        page.wait_for_selector(LIVE)
        assert page.evaluate(STATE)["sentence"] == "en-case"
        page.select_option(f"{BOARD}-sentence", value="en-diary")
        models = page.eval_on_selector_all(f"{BOARD}-model option", "os => os.map(o => o.value)")
        assert models == list(next(s for s in index(site[1], "en")["sentences"]
                                   if s["id"] == "en-diary")["files"])
        page.select_option(f"{BOARD}-model", value="minilm")
        page.wait_for_timeout(300)                  # both requests made, neither answered
        assert page.evaluate(STATE)["sentence"] == "en-case"
        assert len(held) >= 1
        for route in held:
            route.continue_()
        page.wait_for_function("() => { const s = window.caseBoardReal.state(); "
                               "return s.sentence === 'en-diary' && s.model === 'minilm'; }")
        assert page.locator(QUERIES).all_text_contents() \
            == sentence_file(site[1], "minilm", "en-diary")[0]
        assert page.locator(f"{BOARD}-sentence").input_value() == "en-diary"
        assert page.locator(f"{BOARD}-model").input_value() == "minilm"
    finally:
        context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_the_boards_scripts_are_asked_for_after_the_page_is_parsed(browser, base_url, lang):
    """overrides/caseboard.html: the boards' scripts are asked for in a frame after the page has
    been parsed (DOMContentLoaded), so the page is laid out and painted with its static figures
    first; as deferred scripts they were asked for while it was parsed, and ran in the task
    that first laid it out, which then waited for them. All three (real heads, the lab, the
    reader's own sentence) still run."""
    context = open_context(browser)
    try:
        page = context.new_page()
        page.goto(base_url + PAGES[lang], wait_until="load")
        page.wait_for_selector(LIVE)  # caseboard-real.js ran
        page.wait_for_function("() => performance.getEntriesByType('resource').some("
                               "r => r.name.endsWith('caseboard-lab.js') && r.responseEnd > 0)")
        timing = page.evaluate("""() => ({
            parsed: performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,
            scripts: performance.getEntriesByType('resource')
                .filter(r => /caseboard-(real|lab|own)\\.js$/.test(r.name))
                .map(r => r.startTime)})""")
        assert len(timing["scripts"]) == 3
        assert min(timing["scripts"]) >= timing["parsed"] > 0
        assert page.locator("script[src*='caseboard-']").count() == 3  # added by the loader
        assert page.locator("script[defer][src*='caseboard-']").count() == 0
    finally:
        context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_no_console_errors_and_no_request_off_the_site(desk, phone, base_url, lang):
    for board in (desk(lang), phone(lang)):
        assert board.visit.errors == []
        assert board.warnings == []
    host = urlsplit(base_url).hostname
    assert [url for url in REQUESTS if not url.startswith("data:")
            and urlsplit(url.removeprefix("blob:")).hostname != host] == []
