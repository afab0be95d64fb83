"""The case board's real heads (docs/assets/javascripts/caseboard-real.js) in Chromium, in both
languages: what the board shows is the built data, chosen through its controls.

Each language's board is opened once on a desktop (reduced motion) and once on a phone in the
dark palette; the tests share those pages and drive them only through the board's controls
(selects, buttons, the pointer, the keyboard, a finger). They read `window.caseBoardReal`
(the controls' state and the head shown) and compare it with the built files, decoded here in
Python (``assets/caseboard/real/<model>-<id>.json``: base64 of bytes, shape
``(layers, heads, n, n)``, weight = byte / 255).

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
STATE = "() => window.caseBoardReal.state()"
CURRENT = "() => window.caseBoardReal.current()"
#: Every stroke-opacity of the faint lines of every query: lines[q][k].
LINES = """() => [...document.querySelectorAll('#caseboard-real .caseboard-real__every > g')]
    .map(g => [...g.children].map(line => Number(line.getAttribute('stroke-opacity'))))"""
#: What the lines show: whether the faint lines of every query show (computed opacity above 0),
#: and the chosen query's lines, if they show: the query and each line's two ends and opacity.
SHOWN = """() => {
    const svg = document.querySelector('#caseboard-real .caseboard-real__lines');
    const shows = e => Number(getComputedStyle(e).opacity) > 0;
    const chosen = svg.querySelector('.caseboard-real__chosen');
    return {every: shows(svg.querySelector('.caseboard-real__every')),
            query: shows(chosen) ? Number(chosen.dataset.q) : null,
            lines: [...chosen.children].map(line => ['y1', 'y2', 'stroke-opacity']
                .map(name => Number(line.getAttribute(name))))};
}"""
#: A colour of Material's palette as the page computes it, as [r, g, b].
COLOUR = """variable => {
    const probe = document.createElement('span');
    probe.style.color = `var(${variable})`;
    document.querySelector('#caseboard-real').append(probe);
    const rgb = getComputedStyle(probe).color.match(/[\\d.]+/g).slice(0, 3).map(Number);
    probe.remove();
    return rgb;
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
        self.page.locator(".caseboard-real__switch > button").nth(
            0 if which == "one" else 1).click()
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


def shown(page, q: int | None, weights: np.ndarray | None = None) -> None:
    """Check that the lines show query q's weights (``weights`` is the head's, (n, n)), or every
    query's faintly (q None). Waits for a fade (150 ms without reduced motion) first."""
    try:
        page.wait_for_function(f"""q => {{ const lines = ({SHOWN})();
            return lines.query === q && lines.every === (q === null); }}""", arg=q, timeout=3000)
    except Exception:  # Playwright's TimeoutError: the asserts below say what shows instead
        pass
    lines = page.evaluate(SHOWN)
    assert (lines["query"], lines["every"]) == (q, q is None)
    if q is not None:
        n = len(weights)
        ends = np.array(lines["lines"])  # (n, 3): y1, y2, opacity of the line to each key
        np.testing.assert_array_equal(ends[:, 0], np.full(n, q + 0.5))
        np.testing.assert_array_equal(ends[:, 1], np.arange(n) + 0.5)
        # byte / 255 on both sides (one correctly rounded division), the attribute written
        # and read back as the shortest decimal that round-trips: exact
        np.testing.assert_array_equal(ends[:, 2], weights[q])


def looks_at(words: dict, tokens: list[str], row: np.ndarray, q: int) -> str:
    """The start of what the live region says for query q: its words and its top key."""
    top = int(np.argmax(row))  # the first of equals, as the board orders them
    return (words["looks_at"].replace("{token}", tokens[q]) + " " + tokens[top] + " "
            + f"{row[top]:.2f}")


# --- Tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", PAGES)
def test_board_opens_on_the_case_in_the_pages_language(desk, site, lang):
    board = desk(lang)
    site_dir = site[1]
    assert board.state() == {"sentence": DEFAULT[lang], "model": "e5", "layer": 1, "head": 3,
                             "view": "one", "token": None}
    tokens, weights = sentence_file(site_dir, "e5", DEFAULT[lang])
    assert board.page.locator(QUERIES).all_text_contents() == tokens
    assert board.page.locator(f"{BOARD} .caseboard-real__keys > span").all_text_contents() \
        == tokens
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
                np.testing.assert_array_equal(board.page.evaluate(LINES),    # exact, as in
                                              weights[layer - 1, head - 1])  # shown()
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
            '#caseboard-real .caseboard-real__bar')].map(b => b.getBoundingClientRect().width)""")
        full = page.locator(f"{BOARD} .caseboard-real__bar").first.evaluate("b => b.offsetWidth")
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
    page.locator(".caseboard-real__switch > button").nth(1).focus()  # the last control
    page.keyboard.press("Tab")
    assert board.state()["token"] == 0
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    focused = page.evaluate("""() => { const e = document.activeElement, s = getComputedStyle(e);
        return {q: e.dataset.q, outline: s.outlineStyle, width: parseFloat(s.outlineWidth),
                color: s.outlineColor}; }""")
    assert focused["q"] == "3"
    assert focused["outline"] == "solid" and focused["width"] >= 2
    assert board.state()["token"] == 3
    shown(page, 3, weights[0, 2])
    assert board.readout().startswith(looks_at(words, tokens, weights[0, 2, 3], 3))
    page.keyboard.press("End")
    assert board.state()["token"] == len(tokens) - 1
    page.keyboard.press("Escape")
    assert board.state()["token"] is None
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
    assert thumbs.evaluate_all("ts => ts.map(t => t.getAttribute('aria-label'))") == [
        words["thumbnail"].replace("{layer}", "2").replace("{head}", str(j + 1))
        for j in range(heads)]
    # Each heatmap: n x n pixels, from the page's background (weight 0) to the accent (1);
    # the canvas keeps whole numbers (a Uint8ClampedArray rounds to the nearest): half a unit.
    pixel = 0.5 + ulps(255)
    paper = np.array(page.evaluate(COLOUR, "--md-default-bg-color"))
    ink = np.array(page.evaluate(COLOUR, "--md-accent-fg-color"))
    for j in (0, 2, heads - 1):
        rgb = canvas_pixels(thumbs.nth(j).locator("canvas"))
        assert rgb.shape == (n, n, 3)
        assert_within(rgb, paper + (ink - paper) * weights[1, j][..., None], pixel)
    # The reader switches to the dark palette (the header's toggle): the heatmaps follow it.
    palette = page.locator("form[data-md-component=palette] label:visible")
    palette.click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    dark = np.array(page.evaluate(COLOUR, "--md-default-bg-color"))
    assert contrast(dark, paper) > 10
    for j in (0, heads - 1):
        assert_within(canvas_pixels(thumbs.nth(j).locator("canvas")),
                      dark + (ink - dark) * weights[1, j][..., None], pixel)
    palette.click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'default'")
    assert_within(canvas_pixels(thumbs.nth(0).locator("canvas")),
                  paper + (ink - paper) * weights[1, 0][..., None], pixel)
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
    ink = page.evaluate(COLOUR, "--md-accent-fg-color")
    assert contrast(paper, ink) >= 3
    board.view("one")


@pytest.mark.parametrize("lang", PAGES)
def test_motion_is_on_where_the_reader_has_not_asked_for_less(phone, lang):
    """The counterpart of the reduced-motion check: the phone's page (no preference) moves."""
    durations = phone(lang).page.evaluate("""() => [...document.querySelectorAll(
        '#caseboard-real .caseboard-real__bar, #caseboard-real .caseboard-real__every')]
        .map(e => getComputedStyle(e).transitionDuration)""")
    assert set(durations) == {"0.15s"}


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


@pytest.mark.parametrize("lang", PAGES)
def test_the_boards_scripts_are_asked_for_after_the_page_is_parsed(browser, base_url, lang):
    """overrides/caseboard.html: the boards' scripts are asked for in a frame after the page has
    been parsed (DOMContentLoaded), so the page is laid out and painted with its static figures
    first; as deferred scripts they were asked for while it was parsed, and ran in the task
    that first laid it out, which then waited for them. Both scripts still run."""
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
                .filter(r => /caseboard-(real|lab)\\.js$/.test(r.name))
                .map(r => r.startTime)})""")
        assert len(timing["scripts"]) == 2
        assert min(timing["scripts"]) >= timing["parsed"] > 0
        assert page.locator("script[src*='caseboard-']").count() == 2  # added by the loader
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
