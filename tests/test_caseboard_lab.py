"""The case board's lab and forward pass (docs/assets/javascripts/caseboard-lab.js) in Chromium,
in both languages: the page recomputes both layers as `mha` does.

Each language's board is opened once on a desktop and shared by the tests, which set the lab's
controls only through the page (radio buttons, the mask's select, the sliders, the keyboard, a
finger) and read `window.caseBoardLab` (the controls' state and both layers' weights and
outputs), comparing them with `mha.site.caseboard.lab_trace`. The phone, the dark palette, a
browser without JavaScript and data that do not arrive each get a page of their own.

A heatmap is a table of transparent cells over canvases the script paints: what a cell shows is
read from the pixels (an element screenshot), what it says from its aria-label.

Reuses the session's one build (served gzipped under a subpath) and tests/test_browser.py's
browser and fixtures.
"""

from __future__ import annotations

import io
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

from mha.site.caseboard import (
    LAB_HEADS,
    LAB_WORDS,
    MASKS,
    STAGE_NOTES,
    TEMPERATURES,
    WORDS,
    lab_data,
    lab_scales,
    lab_trace,
)
from mha.site.plots.case import CAST, case_tokens

pytestmark = pytest.mark.browser  # Chromium on the built site (tests/ is otherwise the core)

PAGES = {"zh": "caseboard/", "en": "en/caseboard/"}
LAB = "#caseboard-lab"
FORWARD = "#caseboard-forward"
STATE = "() => window.caseBoardLab.state()"
RESULT = "() => window.caseBoardLab.result()"
#: The heatmaps the lab shows now (one set per number of heads; the others are folded away).
LAB_MAPS = f"{LAB} .cblab-maps:not([data-cblab-away]) table"
#: The heatmaps of the forward pass's stage shown now.
STAGE_MAPS = f"{FORWARD} .cblab-stage > :not([data-cblab-away]) table"
#: The grid of the issue: every mask kind (the window and the padding with two values each),
#: 1, 2 and 4 heads, three temperature factors (the sharpest, τ = 1, the flattest).
GRID_MASKS = [("none", None), ("causal", None), ("window", 1), ("window", 4), ("padding", 3),
              ("padding", 6)]
GRID_HEADS = [1, 2, 4]
GRID_TEMPERATURES = [0, 6, 12]
TOLERANCE = 1e-6
#: Every console message of the phone pages: (type, text).
CONSOLE: list[tuple[str, str]] = []
#: Runs in each phone page before its scripts: records in window.cblabAwayReads every layout
#: read (a box, a size, innerText) that a script of the page makes inside a folded part of the
#: board ([data-cblab-away], content-visibility: hidden), which makes the browser lay out what
#: it was told to skip (review finding 24: ResizeObserver -> Heatmap.measure did it).
AWAY_READS = """(() => {
    window.cblabAwayReads = [];
    const check = (name, node) => {
        if (node.closest && node.closest('[data-cblab-away]')) window.cblabAwayReads.push(name);
    };
    const box = Element.prototype.getBoundingClientRect;
    Element.prototype.getBoundingClientRect = function () {
        check('getBoundingClientRect', this);
        return box.call(this);
    };
    for (const name of ['offsetHeight', 'offsetWidth', 'offsetTop', 'offsetLeft', 'scrollHeight',
                        'scrollWidth', 'clientHeight', 'clientWidth', 'innerText']) {
        const owner = [HTMLElement.prototype, Element.prototype].find(
            o => Object.getOwnPropertyDescriptor(o, name));
        const property = Object.getOwnPropertyDescriptor(owner, name);
        Object.defineProperty(owner, name, {configurable: true, set: property.set,
            get() { check(name, this); return property.get.call(this); }});
    }
})()"""


# --- Fixtures and helpers ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def boards(browser, base_url):
    """Each language's board, opened once on a desktop: (Visit, its state and result on load)."""
    context = open_context(browser, viewport={"width": 1280, "height": 900})
    opened = {}

    def board(lang: str):
        if lang not in opened:
            visit = Visit(context, base_url + PAGES[lang])
            live(visit.page)
            opened[lang] = (visit, visit.page.evaluate(STATE), visit.page.evaluate(RESULT))
        # The page in front: a page behind another gets no frames, so no observer reports
        # what is on its screen and the board waits to draw it.
        opened[lang][0].page.bring_to_front()
        return opened[lang]

    yield board
    context.close()


#: Runs in the page: for each setting [heads, mask, value, temperature index], sets the lab's
#: controls as the browser does when a reader moves them (the radio button checked, the select's
#: and the sliders' values, each with its input and change events), then reads the board.
SWEEP = """settings => {
    const lab = document.getElementById('caseboard-lab');
    const [temperature, parameter] = lab.querySelectorAll('input[type=range]');
    const mask = lab.querySelector('select');
    const fire = control => ['input', 'change'].forEach(type =>
        control.dispatchEvent(new Event(type, {bubbles: true})));
    return settings.map(([heads, kind, value, index]) => {
        const radio = lab.querySelector(`input[type=radio][value="${heads}"]`);
        if (!radio.checked) { radio.checked = true; fire(radio); }
        if (mask.value !== kind) { mask.value = kind; fire(mask); }
        if (value !== null) { parameter.value = String(value); fire(parameter); }
        temperature.value = String(index);
        fire(temperature);
        return [window.caseBoardLab.state(), window.caseBoardLab.result()];
    });
}"""


def live(page) -> None:
    """Brings the lab and the forward pass near the screen: each is built then."""
    for part in (FORWARD, LAB):
        page.locator(part).scroll_into_view_if_needed()
        page.wait_for_selector(f"{part}.caseboard--live")


def set_controls(page, heads=None, mask=None, value=None, temperature=None) -> None:
    """Sets the lab's controls as a reader does: a radio button, the select, the sliders."""
    lab = page.locator(LAB)
    if heads is not None:
        lab.locator(f"input[type=radio][value='{heads}']").check()
    if mask is not None:
        lab.locator("select").select_option(mask)
    if value is not None:
        lab.locator("input[type=range]").nth(1).fill(str(value))
    if temperature is not None:
        lab.locator("input[type=range]").first.fill(str(temperature))


def assert_equals_mha(result: dict, lang: str, h: int, mask: str, value, temperature: float):
    expected = lab_trace(lang, h, mask, value, temperature)
    for layer, (got, want) in enumerate(zip(result["layers"], expected, strict=True), start=1):
        for name in ("weights", "output"):
            error = np.abs(np.array(got[name]) - want[name]).max()
            assert error <= TOLERANCE, (f"layer {layer} {name} differs from mha by {error} (h={h}, "
                                        f"mask={mask} {value}, T={temperature})")


def labels(page, selector: str) -> list[list[str]]:
    """Every cell's aria-label of each table matched, once the labels are written: the board
    writes them in idle time, so after the next idle callback."""
    page.evaluate("() => new Promise(done => requestIdleCallback(done, {timeout: 3000}))")
    return page.eval_on_selector_all(selector, """tables => tables.map(t =>
        [...t.querySelectorAll('td.cblab-cell')].map(c => c.getAttribute('aria-label')))""")


def pixel(cell) -> tuple[int, int, int]:
    """The colour at the middle of a cell, as the screen shows it."""
    image = Image.open(io.BytesIO(cell.screenshot())).convert("RGB")
    return image.getpixel((image.width // 2, image.height // 2))


def background(page) -> tuple[int, int, int]:
    return tuple(page.evaluate("""() => getComputedStyle(document.body).backgroundColor
        .match(/[\\d.]+/g).slice(0, 3).map(Number)"""))


def luminance(rgb) -> float:
    def linear(c):
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def visible_stage_maps(page) -> int:
    page.locator(FORWARD).scroll_into_view_if_needed()
    return page.locator(STAGE_MAPS).count()


# --- The lab -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", PAGES)
def test_the_board_opens_on_the_walkthrough_without_errors(boards, lang):
    visit, state, result = boards(lang)
    assert state == {"heads": 4, "temperatureIndex": 6, "temperature": 1.0, "mask": "none",
                     "value": None, "stage": 0, "compare": False}
    assert_equals_mha(result, lang, 4, "none", None, 1.0)
    page = visit.page
    assert page.locator(f"{LAB} .caseboard__fallback").is_hidden()
    # The knob is the temperature factor τ (the real temperature is τ·√d_k), never "T".
    field = page.locator(f"{LAB} .cblab-temperature")
    assert field.locator("label").inner_text() == WORDS[lang]["temperature"]
    assert WORDS[lang]["temperature"].endswith(" τ")
    assert field.locator(".cblab-value").inner_text() == "τ = 1"
    assert field.locator(".cblab-scale").inner_text().endswith("1 / (τ·√d_k) = 0.5")
    # d_k is shown, and the slider's ends (review finding 25): d_k = d_model / h.
    d_model = len(lab_data(lang)["x"][0])
    assert field.locator(".cblab-scale").inner_text().startswith(f"d_k = {d_model // 4} · ")
    assert field.locator(".cblab-end").all_inner_texts() == [
        f"{TEMPERATURES[0]:g}", f"{TEMPERATURES[-1]:g}"]
    # Four heatmaps, titled by the detectives, with the tokens as row and column headers.
    data = lab_data(lang)
    captions = page.locator(f"{LAB_MAPS} caption").all_inner_texts()
    assert [c.strip() for c in captions] == [d["name"][0].upper() + d["name"][1:]
                                            for d in data["cast"]]
    first = page.locator(LAB_MAPS).first
    assert first.locator("th[scope=row]").all_inner_texts() == data["tokens"]
    assert first.locator("th[scope=col]").all_inner_texts() == data["tokens"]
    assert visit.errors == []


@pytest.mark.parametrize("lang", PAGES)
def test_every_setting_of_the_grid_computes_what_mha_computes(boards, lang):
    visit = boards(lang)[0]
    page = visit.page
    grid = [[h, mask, value, index] for h in GRID_HEADS for mask, value in GRID_MASKS
            for index in GRID_TEMPERATURES]
    assert len(grid) == 54
    for (h, mask, value, index), (state, result) in zip(grid, page.evaluate(SWEEP, grid),
                                                         strict=True):
        assert (state["heads"], state["mask"], state["value"], state["temperatureIndex"],
                state["temperature"]) == (h, mask, value, index, TEMPERATURES[index])
        assert_equals_mha(result, lang, h, mask, value, TEMPERATURES[index])
    # The lab draws as many heatmaps as there are heads, and the parameter's slider only for
    # the masks that have one, with their range.
    assert page.locator(LAB_MAPS).count() == 4
    parameter = page.locator(f"{LAB} input[type=range]").nth(1)
    assert (parameter.get_attribute("min"), parameter.get_attribute("max")) == tuple(
        str(v) for v in MASKS["padding"])
    set_controls(page, mask="causal")
    assert parameter.is_hidden()
    set_controls(page, heads=2)
    assert page.locator(LAB_MAPS).count() == 2
    assert visit.errors == []


@pytest.mark.parametrize("lang", PAGES)
def test_a_hidden_cell_is_drawn_and_read_as_hidden(boards, lang):
    page = boards(lang)[0].page
    page.locator(LAB).scroll_into_view_if_needed()  # drawn at once when on the screen
    set_controls(page, heads=4, mask="causal", temperature=6)
    table = page.locator(LAB_MAPS).first
    cells = labels(page, LAB_MAPS)[0]  # row-major, 8 x 8
    hidden = WORDS[lang]["hidden"]
    weights = np.array(page.evaluate(RESULT)["layers"][0]["weights"][0])
    for q in range(8):
        for k in range(8):
            if k > q:
                assert cells[q * 8 + k] == hidden
            else:
                assert cells[q * 8 + k] == f"{weights[q, k]:.2f}"
    # Drawn: the first query sees only itself (weight 1: the hue at full strength); the cell
    # after it is hatched with a dash, neither the page nor the hue.
    td = table.locator("td.cblab-cell")
    full, blank = pixel(td.nth(0)), pixel(td.nth(1))
    page_colour = background(page)
    hatch = Image.open(io.BytesIO(td.nth(1).screenshot())).convert("RGB")
    assert len(hatch.getcolors(maxcolors=4096)) > 2  # lines, a dash and the page between
    assert blank != full
    assert max(abs(a - b) for a, b in zip(full, page_colour)) > 60


#: Runs in the page: waits for ``count`` idle callbacks, one after the other (the board's
#: rehearsals, caseboard-lab.js rehearseSoon, run in idle callbacks of their own).
IDLE = """async count => {
    for (let i = 0; i < count; i++) {
        await new Promise(done => requestIdleCallback(done, {timeout: 3000}));
    }
}"""


@pytest.mark.parametrize("lang", PAGES)
def test_the_rehearsal_leaves_the_board_as_the_reader_set_it(browser, base_url, lang):
    # In idle time after each part is built, the board goes through other settings and back
    # (so that the reader's first change runs compiled code). A reader who moves the controls
    # before it has run must find them, the numbers, the labels and the colours as they set them.
    context = open_context(browser, viewport={"width": 1280, "height": 900})
    visit = Visit(context, base_url + PAGES[lang])
    page = visit.page
    page.locator(LAB).scroll_into_view_if_needed()
    page.wait_for_selector(f"{LAB}.caseboard--live")
    set_controls(page, heads=2, mask="window", value=1, temperature=3)
    page.locator(FORWARD).scroll_into_view_if_needed()  # its part is built: rehearsed too
    page.wait_for_selector(f"{FORWARD}.caseboard--live")
    page.locator(LAB).scroll_into_view_if_needed()
    page.evaluate(IDLE, 40)
    state = page.evaluate(STATE)
    assert (state["heads"], state["mask"], state["value"], state["temperatureIndex"]) == (
        2, "window", 1, 3)
    result = page.evaluate(RESULT)
    assert_equals_mha(result, lang, 2, "window", 1, TEMPERATURES[3])
    assert page.locator(LAB_MAPS).count() == 2
    weights = np.array(result["layers"][0]["weights"][1])
    hidden = WORDS[lang]["hidden"]
    assert labels(page, LAB_MAPS)[1] == [
        f"{weights[q, k]:.2f}" if q - 1 <= k <= q else hidden for q in range(8) for k in range(8)]
    summary = page.locator(f"{FORWARD} .cblab-summary").inner_text()  # the forward pass's
    assert " = 2 · " in summary and WORDS[lang]["mask_window"] in summary
    assert " · τ = 0.354 · " in summary  # TEMPERATURES[3] = 2^(-3/2)
    assert summary.endswith(" = 1")
    # The colours are those a change to these settings draws: away and back again.
    maps = page.locator(f"{LAB} .cblab-maps:not([data-cblab-away])")
    rehearsed = maps.screenshot()
    set_controls(page, temperature=4)
    assert maps.screenshot() != rehearsed
    set_controls(page, temperature=3)
    assert maps.screenshot() == rehearsed
    assert visit.errors == []
    context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_the_keyboard_reaches_the_controls_and_moves_the_temperature(boards, lang):
    page = boards(lang)[0].page
    set_controls(page, heads=4, mask="none", temperature=6)
    # From the lab's heading (a click on it starts the keyboard there), Tab reaches the first
    # control: the heads' radio buttons.
    page.locator("h2#lab").click(position={"x": 5, "y": 5})
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.type === 'radio'"):
            break
    assert page.evaluate("() => document.activeElement.closest('#caseboard-lab') !== null")
    assert page.evaluate("() => document.activeElement.type") == "radio"
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.type") == "range"
    # The focus shows: an outline that is drawn.
    outline = page.evaluate("""() => { const s = getComputedStyle(document.activeElement);
        return [document.activeElement.matches(':focus-visible'), s.outlineStyle,
                parseFloat(s.outlineWidth)]; }""")
    assert outline[0] and outline[1] != "none" and outline[2] > 0
    before = page.evaluate(RESULT)["layers"][0]["weights"]
    page.keyboard.press("ArrowRight")
    state = page.evaluate(STATE)
    assert state["temperatureIndex"] == 7
    after = page.evaluate(RESULT)
    assert np.abs(np.array(after["layers"][0]["weights"]) - np.array(before)).max() > 1e-3
    assert_equals_mha(after, lang, 4, "none", None, TEMPERATURES[7])
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(STATE)["temperatureIndex"] == 5
    # A heatmap's cells are reached with Tab, then the arrow keys; the value is read out.
    cell = page.locator(LAB_MAPS).first.locator("td[tabindex='0']")
    cell.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    focused = page.evaluate("""() => { const c = document.activeElement;
        return [c.parentElement.rowIndex, c.cellIndex, getComputedStyle(c).outlineStyle]; }""")
    header_rows = page.locator(LAB_MAPS).first.locator("thead tr").count()
    assert focused[:2] == [header_rows + 1, 2] and focused[2] != "none"
    weight = page.evaluate(RESULT)["layers"][0]["weights"][0][1][1]
    assert f"= {weight:.3f}" in page.locator(f"{LAB} .cblab-readout").inner_text()


# --- The forward pass --------------------------------------------------------------------------

@pytest.mark.parametrize("lang", PAGES)
def test_the_forward_pass_steps_jumps_plays_and_follows_the_lab(boards, lang):
    page = boards(lang)[0].page
    words = WORDS[lang]
    count = len(words["stages"])
    set_controls(page, heads=4, mask="none", temperature=6)
    forward = page.locator(FORWARD)
    forward.scroll_into_view_if_needed()
    indicator = forward.locator(".cblab-step")
    assert indicator.get_attribute("aria-live") == "polite"
    # Two polite live regions: the step (its name too), and the lab's summary of a change.
    regions = page.locator("#caseboard-lab [aria-live], #caseboard-forward [aria-live]")
    assert regions.count() == 2
    assert {regions.nth(i).get_attribute("aria-live") for i in range(2)} == {"polite"}
    stage_buttons = forward.locator(".cblab-stage-button")
    assert [b.strip() for b in stage_buttons.all_inner_texts()] == [
        f"{i + 1} {name}" for i, name in enumerate(words["stages"])]

    def stage():
        return page.evaluate(STATE)["stage"]

    def expect(index):
        assert stage() == index
        # The step's name with its number (review finding 21).
        assert indicator.inner_text() == LAB_WORDS[lang]["lab_stage_step"].format(
            index=index + 1, count=count, name=words["stages"][index])
        assert forward.locator("h3.cblab-title").inner_text() == words["stages"][index]
        assert stage_buttons.nth(index).get_attribute("aria-current") == "step"
        assert forward.locator("[aria-current]").count() == 1

    page.evaluate("() => document.querySelectorAll('#caseboard-forward .cblab-stage-button')[0]"
                  ".click()")
    expect(0)
    forward.get_by_role("button", name=words["next"], exact=True).click()
    expect(1)
    # Queries, keys and values: one table per head, its Q, K and V side by side.
    assert page.locator(STAGE_MAPS).count() == 4
    assert page.locator(STAGE_MAPS).first.locator("th[scope=colgroup]").count() == 3
    forward.get_by_role("button", name=words["previous"], exact=True).click()
    expect(0)
    stage_buttons.nth(3).click()
    expect(3)
    # The arrow keys step while the focus is in the stepper, and the focus follows.
    page.keyboard.press("ArrowRight")
    expect(4)
    assert page.evaluate("() => document.activeElement.getAttribute('aria-current')") == "step"
    page.keyboard.press("ArrowLeft")
    expect(3)
    # A lab control changes the forward pass: as many weight heatmaps as heads.
    assert visible_stage_maps(page) == 4
    set_controls(page, heads=2)  # (the radio button is scrolled into view to be checked)
    # Back to the forward pass, which redraws as it comes near the screen.
    page.locator(FORWARD).scroll_into_view_if_needed()
    page.wait_for_function(f"() => document.querySelectorAll({STAGE_MAPS!r}).length === 2")
    weights = page.evaluate(RESULT)["layers"][0]["weights"]
    assert labels(page, STAGE_MAPS)[1][:8] == [f"{w:.2f}" for w in weights[1][0]]
    set_controls(page, heads=4)
    # Play advances on its own, says Pause while it plays, and stops at the last stage.
    stage_buttons.nth(count - 2).click()
    play = forward.locator(".cblab-play")
    play.click()
    assert play.inner_text() == words["pause"]
    page.wait_for_function(f"() => window.caseBoardLab.state().stage === {count - 1}",
                           timeout=5000)
    page.wait_for_function(
        f"() => document.querySelector('{FORWARD} .cblab-play').textContent === "
        f"{words['play']!r}", timeout=5000)
    expect(count - 1)
    # Pressing play at the end starts again from the first stage.
    play.click()
    expect(0)
    play.click()
    assert play.inner_text() == words["play"]


# --- Issue #29: a legend, one scale, the controls in reach, every stage explained -------------

def lch_hue(rgb) -> float:
    """The CIELCh hue (degrees) of an sRGB colour (0..255 each), D65."""
    def linear(c):
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in rgb)
    xyz = (np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                     [0.0193, 0.1192, 0.9505]]) @ [r, g, b]) / [0.95047, 1.0, 1.08883]
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    a, b_ = 500 * (f[0] - f[1]), 200 * (f[1] - f[2])
    return float(np.degrees(np.arctan2(b_, a)) % 360)


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))


#: Runs in the page: a CSS colour of the lab (a custom property) as the canvas paints it.
PAINTED = """name => {
    const value = getComputedStyle(document.querySelector('#caseboard-lab .cblab-live'))
        .getPropertyValue(name).trim();
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.fillStyle = value;
    ctx.fillRect(0, 0, 1, 1);
    return [...ctx.getImageData(0, 0, 1, 1).data.slice(0, 3)];
}"""


#: Runs in the page: the forward pass's fade between stages finished, and a frame painted.
SETTLED = """() => {
    document.querySelector('#caseboard-forward .cblab-stage').getAnimations()
        .forEach(a => a.finish());
    return new Promise(done => requestAnimationFrame(() => setTimeout(done)));
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_sign_colours_are_no_detectives_hue_and_read_on_the_page(browser, base_url, scheme):
    # Review finding 6: + and − were the red and the blue detectives' colours.
    context = open_context(browser, color_scheme=scheme)
    try:
        visit = Visit(context, base_url + PAGES["en"])
        page = visit.page
        live(page)
        page_colour = background(page)
        cast = [lch_hue(hex_rgb(d.color)) for d in CAST]
        for name in ("--cblab-pos", "--cblab-neg"):
            colour = page.evaluate(PAINTED, name)
            hue = lch_hue(colour)
            distance = min(min(abs(hue - h), 360 - abs(hue - h)) for h in cast)
            assert distance >= 30, (scheme, name, colour, hue)
            assert contrast(colour, page_colour) >= 3, (scheme, name)  # a graphic's contrast
        assert visit.errors == []
    finally:
        context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_one_scale_per_quantity_the_legend_says_it_and_a_value_keeps_its_colour(
        browser, base_url, lang):
    # Review findings 3 and 5: every map had its own scale and no legend. The legend's numbers
    # are mha.site.caseboard.lab_scales'; the same value is painted alike on two stages.
    scales = lab_scales(lang)
    context = open_context(browser, viewport={"width": 1280, "height": 900})
    try:
        visit = Visit(context, base_url + PAGES[lang])
        page = visit.page
        live(page)
        legends = {part: page.locator(f"{part} .cblab-legend") for part in (LAB, FORWARD)}
        for part, kinds in ((LAB, ["weight", "signed", "difference"]),
                            (FORWARD, ["weight", "signed", "scores"])):
            legend = legends[part]
            assert legend.get_attribute("role") == "group"
            assert legend.locator(".cblab-key[data-kind]").evaluate_all(
                "keys => keys.map(k => k.dataset.kind)") == kinds
            for kind in kinds:
                ticks = legend.locator(f".cblab-key--{kind} .cblab-tick")
                numbers = [float(t.replace("\u2212", "-")) for t in ticks.all_inner_texts()]
                want = (scales[kind]["ticks"] if kind == "weight"
                        else [scales[kind]["range"][0], 0.0, scales[kind]["range"][1]])
                assert numbers == pytest.approx(want), (part, kind)
            # The difference's scale only while "compare with the default" is on.
            assert legend.locator(".cblab-key--difference").count() == 0 or \
                legend.locator(".cblab-key--difference").is_hidden()
            text = legend.inner_text()
            assert WORDS[lang]["hidden"] in text and LAB_WORDS[lang]["lab_pad_token"] in text
        # Stage 5 (each head's output) and stage 6 (their concatenation) hold the same numbers:
        # the same colours. The largest |value| of the yellow head's output, within the scale.
        page.mouse.move(0, 0)
        forward = page.locator(FORWARD)
        forward.locator(".cblab-stage-button").nth(4).click()
        page.mouse.move(0, 0)
        heads = np.array(lab_trace(lang)[0]["heads"])        # (h, n, d_k)
        h, n, dk = heads.shape
        j, r, c = np.unravel_index(np.argmax(np.abs(heads)), heads.shape)
        limit = scales["signed"]["range"][1]
        assert 0.3 * limit < abs(heads[j, r, c]) < limit
        cell = page.locator(STAGE_MAPS).nth(j).locator("td.cblab-cell").nth(int(r * dk + c))
        cell.scroll_into_view_if_needed()
        page.evaluate(SETTLED)
        in_head = pixel(cell)
        forward.locator(".cblab-stage-button").nth(5).click()
        page.mouse.move(0, 0)
        cells = page.locator(STAGE_MAPS).first.locator("td.cblab-cell")
        cell = cells.nth(int(r * h * dk + j * dk + c))
        cell.scroll_into_view_if_needed()
        page.evaluate(SETTLED)
        assert max(abs(a - b) for a, b in zip(pixel(cell), in_head)) <= 2
        assert max(abs(a - b) for a, b in zip(in_head, background(page))) > 25
        assert visit.errors == []
    finally:
        context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_the_readout_follows_the_cell_or_goes_back_to_the_hint(boards, lang):
    # Review finding 1: the readout kept describing a map that was no longer shown.
    page = boards(lang)[0].page
    words = WORDS[lang]
    set_controls(page, heads=4, mask="none", temperature=6)
    page.mouse.move(0, 0)
    page.locator(LAB_MAPS).nth(1).locator("td.cblab-cell").nth(10).focus()  # query 2, key 3
    readout = page.locator(f"{LAB} .cblab-readout")
    assert readout.inner_text().startswith(lab_data(lang)["cast"][1]["name"][:1].upper())
    # Two heads: the second head's map takes the second detective's place, its value now.
    page.evaluate(SWEEP, [[2, "none", None, 0]])  # no pointer passes over another map
    weight = page.evaluate(RESULT)["layers"][0]["weights"][1][1][2]
    text = readout.inner_text()
    assert text.startswith(page.locator(LAB_MAPS).nth(1).locator("caption").inner_text().strip())
    assert text.endswith(f"= {weight:.3f}") and lab_data(lang)["cast"][1]["name"] not in text
    # One head: no second map, so no stale words: the hint again.
    page.evaluate(SWEEP, [[1, "none", None, 0]])
    assert readout.inner_text() == words["cell_hint"]
    # The forward pass: a weight read on stage 4, then stage 6, which has no such map.
    set_controls(page, heads=4, temperature=6)
    forward = page.locator(FORWARD)
    forward.locator(".cblab-stage-button").nth(3).click()
    page.mouse.move(0, 0)
    page.locator(STAGE_MAPS).first.locator("td.cblab-cell").nth(3).focus()
    assert "=" in forward.locator(".cblab-readout").inner_text()
    forward.locator(".cblab-stage-button").nth(5).evaluate("b => b.click()")
    concat = page.locator(STAGE_MAPS).first
    text = forward.locator(".cblab-readout").inner_text()
    # Now the same cell of the map shown (the concatenation, query 1, dimension 4), or the hint.
    assert text == words["cell_hint"] or text.startswith(
        concat.locator("caption").inner_text().strip())


@pytest.mark.parametrize("lang", PAGES)
def test_a_change_made_off_screen_moves_nothing_when_the_lab_comes_back(boards, lang):
    """The controls change while the lab is off screen (from the forward pass's stuck toolbar,
    say): the maps shown and so the layout change at once, only their painting waits. They
    used to fold when the lab came into view, moving the output and its compare toggle by the
    maps' height (about 300 px) between a reader's press and release: a click lost. This is
    what made test_compare_with_the_default... fail under a full run's load."""
    page = boards(lang)[0].page
    set_controls(page, heads=4, mask="none", temperature=6)
    page.locator(FORWARD).scroll_into_view_if_needed()
    page.evaluate("() => window.scrollTo(0, 0)")
    page.evaluate(SETTLED)
    where = """() => { const i = document.querySelector('#caseboard-lab .cblab-compare input');
        return Math.round(i.getBoundingClientRect().top + window.scrollY); }"""
    page.evaluate(SWEEP, [[2, "causal", None, 3]])               # off screen: the lab is not seen
    before = page.evaluate(where)
    page.locator(f"{LAB} .cblab-compare").scroll_into_view_if_needed()
    page.evaluate(SETTLED)
    page.evaluate("() => new Promise(done => requestIdleCallback(done, {timeout: 3000}))")
    assert page.evaluate(where) == before
    assert page.evaluate(STATE)["heads"] == 2


@pytest.mark.parametrize("lang", PAGES)
def test_compare_with_the_default_shows_the_difference_mha_computes(boards, lang):
    # Review finding 32 and the before/after: output(setting) − output(default).
    page = boards(lang)[0].page
    set_controls(page, heads=2, mask="causal", temperature=3)
    toggle = page.locator(f"{LAB} .cblab-compare")
    assert toggle.inner_text().strip() == LAB_WORDS[lang]["lab_compare"]
    key = page.locator(f"{LAB} .cblab-key--difference")
    toggle.locator("input").check()
    try:
        # A difference has a scale of its own, printed while it is shown: the median over every
        # setting of the largest change, so a typical change shows at full colour.
        scales = lab_scales(lang)
        assert key.is_visible()
        assert page.evaluate(RESULT)["shownLimit"] == scales["difference"]["range"][1]
        assert scales["difference"]["range"][1] < scales["signed"]["range"][1]
        shown = np.array(page.evaluate(RESULT)["shown"])
        want = (lab_trace(lang, 2, "causal", None, TEMPERATURES[3])[0]["output"]
                - lab_trace(lang, 2)[0]["output"])
        assert np.abs(shown - want).max() <= TOLERANCE
        assert page.evaluate(STATE)["compare"] is True
        set_controls(page, mask="none", temperature=6)  # the default itself: no difference
        assert np.abs(np.array(page.evaluate(RESULT)["shown"])).max() <= TOLERANCE
    finally:
        toggle.locator("input").uncheck()
    assert key.is_hidden()
    assert page.evaluate(RESULT)["shownLimit"] == lab_scales(lang)["signed"]["range"][1]
    shown = np.array(page.evaluate(RESULT)["shown"])
    assert np.abs(shown - lab_trace(lang, 2)[0]["output"]).max() <= TOLERANCE


@pytest.mark.parametrize("lang", PAGES)
def test_padding_looks_back_and_repeated_tokens_are_named(boards, lang):
    page = boards(lang)[0].page
    words = LAB_WORDS[lang]
    # Review finding 9: padded positions are [PAD] filler, not the sentence's last words.
    set_controls(page, heads=4, mask="padding", value=6)
    rows = page.locator(LAB_MAPS).first.locator("th[scope=row]").all_inner_texts()
    tokens = case_tokens(lang)
    assert rows == tokens[:6] + [words["lab_pad_token"]] * (len(tokens) - 6)
    # Review finding 10: the window's knob counts the tokens looked back.
    set_controls(page, mask="window", value=2)
    label = words["lab_look_back"]
    assert page.locator(f"{LAB} .cblab-param-label").inner_text() == label[0].upper() + label[1:]
    rows = page.locator(LAB_MAPS).first.locator("th[scope=row]").all_inner_texts()
    assert rows == tokens
    set_controls(page, mask="none")
    # Review finding 26: a token that occurs more than once is named on stages 1 and 4.
    counts = {t: tokens.count(t) for t in tokens}
    repeated = [words["lab_repeated"].format(token=t, count=k) for t, k in counts.items() if k > 1]
    forward = page.locator(FORWARD)
    for stage in range(len(WORDS[lang]["stages"])):
        forward.locator(".cblab-stage-button").nth(stage).click()
        note = forward.locator(".cblab-explain-note:not([data-cblab-off])")
        text = note.inner_text() if note.count() else ""
        for sentence in repeated:
            assert (sentence in text) == (stage in (0, 3)), stage
    assert bool(repeated) == (lang == "en")  # the case: "the" three times in English only


@pytest.mark.parametrize("lang", PAGES)
def test_each_stage_says_what_it_computes_and_links_its_chapter(boards, lang, base_url):
    page = boards(lang)[0].page
    notes = STAGE_NOTES[lang]
    forward = page.locator(FORWARD)
    set_controls(page, heads=2)
    d_model = len(lab_data(lang)["x"][0])
    for stage in range(len(WORDS[lang]["stages"])):
        forward.locator(".cblab-stage-button").nth(stage).click()
        shown = forward.locator(".cblab-explain-note:not([data-cblab-off])")
        assert forward.locator(".cblab-explain-note:not([data-cblab-off])").count() == 1
        if not notes:
            continue
        note = notes[stage]
        text = note["text"].format(n=len(case_tokens(lang)), d=d_model, h=2, dk=d_model // 2)
        assert shown.locator(".cblab-explain-text").inner_text() == text
        link = shown.locator("a")
        assert link.inner_text() == note["link"]
        root = base_url + ("en/" if lang == "en" else "")
        assert link.get_attribute("href") == root + note["href"]
    set_controls(page, heads=4)


@pytest.mark.parametrize("lang", PAGES)
def test_a_change_is_said_in_words_once_the_controls_rest(boards, lang):
    # Review finding 20: the lab had no live region.
    page = boards(lang)[0].page
    set_controls(page, heads=4, mask="causal", temperature=6)
    set_controls(page, temperature=2)
    say = page.locator(f"{LAB} [aria-live]")
    weights = lab_trace(lang, 4, "causal", None, TEMPERATURES[2])[0]["weights"]
    n = weights.shape[-1]
    summary = LAB_WORDS[lang]["lab_said_summary"].format(
        mean=f"{weights.max(axis=-1).mean():.2f}", even=f"{1 / n:g}")
    hidden = LAB_WORDS[lang]["lab_said_hidden"].format(count=n * (n - 1) // 2)
    page.wait_for_function("([node, text]) => node.textContent.includes(text)",
                           arg=[say.element_handle(), summary], timeout=5000)
    text = say.inner_text()
    assert text.startswith(f"τ = {TEMPERATURES[2]:.3g}") and hidden in text
    set_controls(page, mask="none", temperature=6)


def test_the_forward_pass_keeps_its_height_the_keys_step_and_play_keeps_the_focus(boards):
    page = boards("en")[0].page
    forward = page.locator(FORWARD)
    set_controls(page, heads=4, mask="none", temperature=6)
    forward.scroll_into_view_if_needed()
    page.evaluate(IDLE, 60)  # every stage measured (ForwardView.sizeSoon)
    # Review finding 15: what lies below the stage does not move from stage to stage.
    below = []
    for stage in range(len(WORDS["en"]["stages"])):
        forward.locator(".cblab-stage-button").nth(stage).click()
        below.append(forward.locator(".cblab-readout").evaluate(
            "(r, f) => r.getBoundingClientRect().top - f.getBoundingClientRect().top",
            forward.element_handle()))
    assert max(below) - min(below) < 1, below
    # Review finding 19: the arrow keys step from anywhere on the board but the tables.
    forward.locator(".cblab-stage-button").nth(2).click()
    forward.locator("h3.cblab-title").click()
    page.keyboard.press("ArrowRight")
    assert page.evaluate(STATE)["stage"] == 3
    # Review finding 17: a cell keeps the focus while Play steps.
    forward.locator(".cblab-play").click()
    page.locator(STAGE_MAPS).first.locator("td.cblab-cell").first.focus()
    page.wait_for_function("() => window.caseBoardLab.state().stage === 4", timeout=5000)
    focused = page.evaluate("""() => document.activeElement.matches(
        '#caseboard-forward .cblab-stage td.cblab-cell')""")
    assert focused
    # ... and Play holds while the pointer rests on the stage, going on when it leaves.
    forward.locator(".cblab-stage").hover()
    held = page.evaluate(STATE)["stage"]
    page.wait_for_timeout(3500)  # longer than a step (3 s)
    assert page.evaluate(STATE)["stage"] == held
    forward.locator(".cblab-play").hover()
    page.wait_for_function(f"() => window.caseBoardLab.state().stage > {held}", timeout=5000)
    forward.locator(".cblab-play").click()  # pause


def test_a_wide_matrix_shows_it_scrolls(boards):
    # Review finding 14: the scrolling boxes fade out at an edge where more lies beyond.
    page = boards("en")[0].page
    names = page.locator(f"{FORWARD} .cblab-scroll, {LAB} .cblab-scroll").evaluate_all(
        "boxes => boxes.map(b => getComputedStyle(b).animationName)")
    assert names and set(names) == {"cblab-edges"}


# --- Phone, dark palette, no JavaScript, no data -----------------------------------------------

@pytest.fixture(scope="module")
def phones(browser, base_url):
    """Each language's board on a 390 px phone, in the dark palette (the system's), with
    reduced motion."""
    context = open_context(browser, color_scheme="dark", reduced_motion="reduce", **PHONE)
    context.on("console", lambda message: CONSOLE.append((message.type, message.text)))
    context.add_init_script(AWAY_READS)
    opened = {}

    def phone(lang: str):
        if lang not in opened:
            opened[lang] = Visit(context, base_url + PAGES[lang])
            live(opened[lang].page)
        opened[lang].page.bring_to_front()
        return opened[lang]

    yield phone
    context.close()


@pytest.mark.parametrize("lang", PAGES)
def test_on_a_phone_nothing_scrolls_sideways_and_a_finger_works_it(phones, lang):
    visit = phones(lang)
    page = visit.page
    page.locator(f"{LAB} label", has_text="1").tap()
    assert page.evaluate(STATE)["heads"] == 1
    page.locator(f"{LAB} select").select_option("window")
    assert page.evaluate(STATE)["mask"] == "window"
    # The widest stage: one head's Q, K and V side by side (48 columns), in a box of its own.
    forward = page.locator(FORWARD)
    forward.scroll_into_view_if_needed()
    forward.locator(".cblab-stage-button").nth(1).tap()
    page.wait_for_function(f"() => document.querySelectorAll({STAGE_MAPS!r}).length === 1")
    # Reduced motion: the stage changed without a fade, and nothing has a transition.
    assert page.evaluate("() => document.getAnimations().length") == 0
    assert forward.locator(".cblab-button").first.evaluate(
        "b => getComputedStyle(b).transitionDuration") == "0s"
    widths = page.evaluate("""() => [document.documentElement.scrollWidth,
                                      document.documentElement.clientWidth]""")
    assert widths[0] <= widths[1], widths
    # The lab's weights: cells a finger can hit, 24 px at least (review finding 13), each map
    # within the screen; a tap on a cell reads its value out.
    page.locator(f"{LAB} label", has_text="2").tap()
    maps = page.locator(LAB_MAPS)
    maps.first.scroll_into_view_if_needed()
    boxes = [maps.nth(j).bounding_box() for j in range(2)]
    assert all(box["x"] + box["width"] <= widths[1] for box in boxes)
    cell = maps.first.locator("td.cblab-cell").nth(9).bounding_box()
    assert cell["width"] >= 24 and cell["height"] >= 24
    maps.first.locator("td.cblab-cell").nth(9).tap()  # query 2, key 2
    weight = page.evaluate(RESULT)["layers"][0]["weights"][0][1][1]
    assert f"= {weight:.3f}" in page.locator(f"{LAB} .cblab-readout").inner_text()
    assert page.evaluate("""() => document.documentElement.scrollWidth
                            <= document.documentElement.clientWidth""")
    assert visit.errors == []


@pytest.mark.parametrize("lang", PAGES)
def test_dark_palette_draws_empty_cells_dark_and_text_readable(phones, lang):
    page = phones(lang).page
    page.locator(LAB).scroll_into_view_if_needed()
    set_controls(page, heads=4, mask="none", temperature=0)  # the sharpest: weights all but 0
    page_colour = background(page)
    assert luminance(page_colour) < 0.05  # the dark palette is on
    weights = np.array(page.evaluate(RESULT)["layers"][0]["weights"][0])
    empty, strong = int(np.argmin(weights)), int(np.argmax(weights))
    assert weights.flat[empty] < 1e-3 and weights.flat[strong] > 0.5
    cells = page.locator(LAB_MAPS).first.locator("td.cblab-cell")
    empty_colour, strong_colour = pixel(cells.nth(empty)), pixel(cells.nth(strong))
    assert max(abs(a - b) for a, b in zip(empty_colour, page_colour)) <= 12, empty_colour
    assert luminance(empty_colour) < 0.05  # not white: the page's own dark
    assert contrast(strong_colour, page_colour) > 2
    # The tokens and the controls' words read at 4.5:1 at least.
    for selector in (f"{LAB_MAPS} th[scope=row]", f"{LAB} label", f"{LAB} .cblab-readout",
                     f"{FORWARD} .cblab-step"):
        colour = page.locator(selector).first.evaluate(
            "e => getComputedStyle(e).color.match(/[\\d.]+/g).map(Number)")
        rgb, alpha = colour[:3], (colour[3] if len(colour) > 3 else 1)
        shown = [alpha * c + (1 - alpha) * b for c, b in zip(rgb, page_colour)]
        assert contrast(shown, page_colour) >= 4.5, selector


#: Runs in the page: for each of the lab's controls (the radio buttons' labels, the sliders,
#: the select), is its middle on the screen and is what lies there the control itself (no
#: Material pill, no header above it)?
REACHABLE = """() => [...document.querySelectorAll(
        '#caseboard-lab .cblab-toolbar :is(label.cblab-choice, input[type=range], select)')]
    .filter(c => c.offsetParent !== null && !c.closest('[hidden]'))
    .map(c => {
        const box = c.getBoundingClientRect(), x = box.left + box.width / 2,
              y = box.top + box.height / 2;
        const onScreen = y > 0 && y < innerHeight && x > 0 && x < innerWidth;
        const there = onScreen ? document.elementFromPoint(x, y) : null;
        return [c.tagName, onScreen, !!there && (c === there || c.contains(there)
                                                  || there.contains(c))];
    })"""


def check_the_controls_stay_in_reach(page) -> None:
    """The lab's controls stick under the header while the forward pass is on the screen, each
    one on the screen and not covered; and only then (review findings 2 and 4)."""
    toolbar = page.locator(f"{LAB} .cblab-toolbar")
    page.locator(f"{FORWARD} .cblab-stage-button").nth(3).evaluate("b => b.click()")  # weights
    page.locator(f"{FORWARD} .cblab-stage").scroll_into_view_if_needed()
    page.wait_for_function("t => t.hasAttribute('data-cblab-stuck')",
                           arg=toolbar.element_handle())
    header = page.locator(".md-header").bounding_box()
    box = toolbar.bounding_box()
    assert abs(box["y"] - (header["y"] + header["height"])) <= 1
    assert page.evaluate(REACHABLE) and all(r[1] and r[2] for r in page.evaluate(REACHABLE))
    # A knob moved there changes the forward pass's stage under it.
    set_controls(page, heads=1)
    page.wait_for_function(f"() => document.querySelectorAll({STAGE_MAPS!r}).length === 1")
    set_controls(page, heads=4)
    # Back above the lab: in its place again.
    page.evaluate("() => window.scrollTo(0, 0)")
    page.wait_for_function("t => !t.hasAttribute('data-cblab-stuck')",
                           arg=toolbar.element_handle())
    # Material's back-to-top pill never shows on this page (it covered the radios).
    assert page.locator(".md-top").evaluate("b => getComputedStyle(b).display") == "none"


def test_the_controls_stay_in_reach_on_a_desktop(boards):
    check_the_controls_stay_in_reach(boards("zh")[0].page)


@pytest.mark.parametrize("lang", PAGES)
def test_the_controls_stay_in_reach_on_a_phone_and_nothing_warns(phones, lang):
    visit = phones(lang)
    page = visit.page
    # As a reader does on a phone: down to the lab's output, and up a little (the pill came then).
    page.locator(f"{LAB} .cblab-lab-output").scroll_into_view_if_needed()
    page.mouse.wheel(0, -300)
    check_the_controls_stay_in_reach(page)
    # No warning (nor error) in the console; and (review finding 24) the board never reads the
    # layout of what it folded away.
    assert visit.errors == []
    assert [m for m in CONSOLE if m[0] in ("warning", "error")] == []
    assert page.evaluate("() => window.cblabAwayReads") == []


def test_without_javascript_the_static_figures_show(browser, base_url):
    context = open_context(browser, java_script_enabled=False)
    try:
        for lang in PAGES:
            page = context.new_page()
            page.goto(base_url + PAGES[lang], wait_until="load")
            for part in (LAB, FORWARD):
                figure = page.locator(f"{part} .caseboard__fallback img")
                figure.scroll_into_view_if_needed()  # loading=lazy
                assert figure.is_visible()
                page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                                       arg=figure.element_handle())
                assert page.locator(f"{part} .cblab-live").count() == 0
            assert page.locator("input[type=range], .cblab-stage-button").count() == 0
    finally:
        context.close()


def test_without_its_data_the_board_keeps_its_figures_and_says_so(browser, base_url):
    context = open_context(browser)
    try:
        context.route("**/assets/caseboard/lab-*.json", lambda route: route.fulfill(status=404))
        page = context.new_page()
        page.goto(base_url + PAGES["en"], wait_until="load")
        page.locator(LAB).scroll_into_view_if_needed()  # the data is asked for then
        for part in (LAB, FORWARD):
            status = page.locator(f"{part} .caseboard__status")
            status.wait_for()
            assert status.inner_text() == "The data did not load."  # the page's own words
            assert page.locator(f"{part} .caseboard__fallback img").is_visible()
            assert "caseboard--live" not in page.locator(part).get_attribute("class")
        assert page.evaluate("() => window.caseBoardLab") is None
    finally:
        context.close()


def test_the_board_asked_nothing_of_another_host(boards, base_url):
    """Runs after the tests above: every request of their pages went to the local server."""
    boards("zh"), boards("en")
    host = urlsplit(base_url).hostname
    data = [url for url in REQUESTS if "/assets/caseboard/lab-" in url]
    assert any(url.endswith("lab-zh.json") for url in data)
    assert any(url.endswith("lab-en.json") for url in data)
    foreign = sorted({url for url in REQUESTS if not url.startswith("data:")
                      and urlsplit(url.removeprefix("blob:")).hostname != host})
    assert foreign == []
