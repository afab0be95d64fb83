"""The case board's guided tasks and stage notes (docs/<lang>/caseboard.md, #try-this, and
`mha.site.caseboard.STAGE_NOTES`), in both languages.

The notes: one per stage of the forward pass, the same placeholders in both languages, each
linking to a page and an anchor that exist in both. The tasks: five or six per board, each with
its answer collapsed and a Python block that computes it. Then a few tasks done in Chromium as a
learner does them (the controls set through the page, what the board shows read back), checked
against what the page's own Python computes with the same functions: the real heads' files
(`real_files`, `dequantise`) and `lab_trace`.

The browser tests reuse the session's one build and tests/test_browser.py's browser and
fixtures, with one page per language for all three boards.
"""

from __future__ import annotations

import base64
import json
import re
import string
from pathlib import Path

import numpy as np
import pytest
from test_browser import (  # noqa: F401  (fixtures, used by name)
    Visit,
    base_url,
    browser,
    open_context,
    site,
)

from mha.site.caseboard import (LAB_D_MODEL, LAB_HEADS, SENTENCES, STAGE_NOTES, TEMPERATURES,
                                WORDS, dequantise, lab_trace, real_files)
from mha.site.terms import LANGUAGES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = {"zh": "caseboard/", "en": "en/caseboard/"}
#: Each board's tasks: the anchor of its sub-heading under #try-this.
BOARDS = ("try-real", "try-lab", "try-forward")
ANSWER = {"zh": '??? success "答案"', "en": '??? success "Answer"'}
STATE = "() => window.caseBoardLab.state()"
RESULT = "() => window.caseBoardLab.result()"
REAL = "#caseboard-real"
LAB = "#caseboard-lab"
FORWARD = "#caseboard-forward"


def page_text(lang: str) -> str:
    return (DOCS / lang / "caseboard.md").read_text(encoding="utf-8")


def anchors(path: Path) -> set[str]:
    """The ``{ #anchor }`` attributes of a page of the docs."""
    return set(re.findall(r"\{ #([\w-]+) \}", path.read_text(encoding="utf-8")))


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def formatted(note: dict, h: int) -> str:
    """A note as the board shows it with ``h`` heads (the lab: n = 8 tokens, d_model = 16)."""
    return note["text"].format(n=8, d=LAB_D_MODEL, h=h, dk=LAB_D_MODEL // h)


# --- The stage notes ---------------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_stage_has_a_note_with_its_shapes_and_a_link(lang):
    notes = STAGE_NOTES[lang]
    assert len(notes) == len(WORDS[lang]["stages"]) == 8
    for index, note in enumerate(notes):
        assert set(note) == {"text", "href", "link"}, index
        assert note["link"].strip() and note["text"].strip()
        assert fields(note["text"]) <= {"n", "d", "h", "dk"}, index
        for h in LAB_HEADS:
            text = formatted(note, h)
            # Plain Unicode, shown as text: no TeX, no placeholder left over.
            assert not re.search(r"[$\\{}]", text), (index, text)
    # Every note past the input gives a shape, so it changes with the heads where it should.
    assert all(fields(note["text"]) & {"n", "d", "dk"} for note in notes)
    assert formatted(notes[1], 1) != formatted(notes[1], 4)


def test_the_notes_have_the_same_placeholders_in_both_languages():
    for zh, en in zip(STAGE_NOTES["zh"], STAGE_NOTES["en"], strict=True):
        assert fields(zh["text"]) == fields(en["text"])
        assert zh["href"] == en["href"]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_note_links_to_a_page_and_anchor_of_both_languages(lang):
    for note in STAGE_NOTES[lang]:
        page, _, anchor = note["href"].partition("/#")
        assert anchor and "/" not in page, note["href"]
        for other in LANGUAGES:
            path = DOCS / other / f"{page}.md"
            assert path.is_file(), (other, note["href"])
            assert anchor in anchors(path), (other, note["href"])


# --- The tasks on the page ---------------------------------------------------------------------

def tasks(lang: str) -> dict[str, list[str]]:
    """Each board's tasks: the text of each, from its bold number to the next."""
    text = page_text(lang)
    section = text[text.index("{ #try-this }") + 1:text.index("{ #sources }")]
    parts = re.split(r"\{ #(try-\w+) \}", section)
    return {name: re.split(r"^\*\*\d+\. ", body, flags=re.M)[1:]
            for name, body in zip(parts[1::2], parts[2::2], strict=True)}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_each_board_has_five_or_six_tasks_with_a_computed_answer(lang):
    found = tasks(lang)
    assert tuple(found) == BOARDS
    for board, items in found.items():
        assert 5 <= len(items) <= 6, (board, len(items))
        for item in items:
            assert item.count(ANSWER[lang]) == 1, item[:60]
            answer = item[item.index(ANSWER[lang]):]
            assert "    ```python\n" in answer and "    ```output\n" in answer, item[:60]


def test_both_languages_keep_the_same_anchors():
    assert anchors(DOCS / "zh" / "caseboard.md") == anchors(DOCS / "en" / "caseboard.md")
    assert {"case-board", "real-heads", "lab", "forward-pass", "try-this", *BOARDS,
            "sources"} <= anchors(DOCS / "en" / "caseboard.md")


def test_the_tasks_use_the_words_the_board_shows():
    """The pages name the controls and the padding as the board does (the shared words)."""
    for lang, words in [("zh", ["单个注意力头", "这一层的全部注意力头", "全部层", "叠加注意力头",
                                "显示全部", "往前看的词元数", "和默认设置比", "（填充）"]),
                        ("en", ["One head", "All heads of this layer", "All layers",
                                "Overlay heads", "Show all", "tokens looked back",
                                "Compare with the default", "[PAD]"])]:
        text = page_text(lang)
        assert [w for w in words if w not in text] == [], lang
        # The colour of a large number is strong, not dark: the dark palette brightens it.
        assert not re.search("the darker the|越深", text), lang


# --- In the browser ----------------------------------------------------------------------------

def real_weights(name: str) -> tuple[list[str], np.ndarray]:
    """A real-heads file as the page's Python reads it: tokens, weights (layers, h, n, n)."""
    data = json.loads(real_files()[f"real/{name}.json"])
    w = dequantise(np.frombuffer(base64.b64decode(data["weights"]), np.uint8))
    return data["tokens"], w.reshape(data["layers"], data["heads"], data["n"], data["n"])


def previous_share(w: np.ndarray) -> np.ndarray:
    """The share of weight on the token before each query, as the page's task computes it."""
    return np.diagonal(w, offset=-1, axis1=-2, axis2=-1).mean(axis=-1)


def spread(rows: np.ndarray) -> float:
    """The page's measure of how far rows lie from their mean row, over the rows' length."""
    rows = np.asarray(rows)
    return float(np.linalg.norm(rows - rows.mean(axis=0), axis=1).mean()
                 / np.linalg.norm(rows, axis=1).mean())


@pytest.fixture(scope="module")
def pages(browser, base_url):
    """Each language's page, opened once on a desktop with all three boards live."""
    context = open_context(browser, viewport={"width": 1280, "height": 900},
                           reduced_motion="reduce")
    opened = {}

    def page(lang: str):
        if lang not in opened:
            visit = Visit(context, base_url + PAGES[lang])
            for part in (FORWARD, LAB, REAL):
                visit.page.locator(part).scroll_into_view_if_needed()
                visit.page.wait_for_selector(f"{part}.caseboard--live")
            opened[lang] = visit
        opened[lang].page.bring_to_front()
        return opened[lang]

    yield page
    context.close()


@pytest.mark.browser
@pytest.mark.parametrize("lang", LANGUAGES)
def test_real_heads_task_the_previous_token_head(pages, lang):
    """Task 1 of the real heads: go through layer 1's heads on the case sentence, in each model
    that reads it, and find the head that looks at the previous token."""
    visit = pages(lang)
    page = visit.page
    cases = [(s.id, model) for s in SENTENCES if s.id.endswith("-case") for model in s.models]
    assert len(cases) == 3
    for sentence, model in cases:
        page.select_option(f"{REAL}-sentence", value=sentence)
        page.select_option(f"{REAL}-model", value=model)
        page.wait_for_function(
            "([s, m]) => { const st = window.caseBoardReal.state(); "
            "return st.sentence === s && st.model === m && window.caseBoardReal.current(); }",
            arg=[sentence, model])
        page.select_option(f"{REAL}-layer", value="1")
        shown = []
        for head in range(1, 13):
            page.select_option(f"{REAL}-head", value=str(head))
            assert page.evaluate("() => window.caseBoardReal.state()")["head"] == head
            shown.append(page.evaluate("() => window.caseBoardReal.current().weights"))
        on_board = previous_share(np.array(shown))                     # (heads,)
        tokens, w = real_weights(f"{model}-{sentence}")
        on_page = previous_share(w)                                     # (layers, h)
        # The learner's pick in layer 1 is the page's answer over every layer and head.
        layer, head = np.unravel_index(on_page.argmax(), on_page.shape)
        assert (layer, on_board.argmax()) == (0, head), (sentence, model)
        assert abs(on_board.max() - on_page.max()) < 1e-12
    assert visit.errors == []


@pytest.mark.browser
@pytest.mark.parametrize("lang", LANGUAGES)
def test_lab_tasks_temperature_down_and_a_window_of_nothing(pages, lang):
    """Tasks 1 and 5 of the lab: τ all the way down (the slider's left end); then the sliding
    window with no token looked back."""
    visit = pages(lang)
    page = visit.page
    lab = page.locator(LAB)
    lab.scroll_into_view_if_needed()
    lab.locator("input[type=radio][value='4']").check()
    lab.locator("select").select_option("none")
    slider = lab.locator("input[type=range]").first
    slider.focus()
    page.keyboard.press("Home")                                        # the coldest factor
    state = page.evaluate(STATE)
    assert state["temperature"] == TEMPERATURES[0]
    weights = np.array(page.evaluate(RESULT)["layers"][0]["weights"])  # (h, n, n)
    expected = lab_trace(lang, h=4, temperature=TEMPERATURES[0])[0]
    top = weights.max(axis=-1)
    assert abs(top.mean() - expected["weights"].max(axis=-1).mean()) < 1e-9
    assert (weights.argmax(axis=-1) == expected["scores"].argmax(axis=-1)).all()
    # The window, k = 0: each token sees only itself, even this cold.
    lab.locator("select").select_option("window")
    lab.locator("input[type=range]").nth(1).fill("0")
    state = page.evaluate(STATE)
    assert (state["mask"], state["value"]) == ("window", 0)
    weights = np.array(page.evaluate(RESULT)["layers"][0]["weights"])
    assert np.array_equal(weights, lab_trace(lang, mask="window", value=0,
                                             temperature=TEMPERATURES[0])[0]["weights"])
    assert (weights == np.eye(8)).all()
    # Back to the defaults for the next task.
    lab.locator("select").select_option("none")
    slider.fill(str(TEMPERATURES.index(1.0)))
    assert visit.errors == []


@pytest.mark.browser
@pytest.mark.parametrize("lang", LANGUAGES)
def test_forward_tasks_shapes_in_the_note_and_layer_two_rows(pages, lang):
    """Tasks 1 and 4 of the forward pass: stage 2's note with 1 and 4 heads; then stage 8,
    whose rows are as alike as the page's Python says."""
    visit = pages(lang)
    page = visit.page
    forward = page.locator(FORWARD)
    lab = page.locator(LAB)
    buttons = forward.locator(".cblab-stage-button")
    for h in (1, 4):
        lab.locator(f"input[type=radio][value='{h}']").check()
        forward.scroll_into_view_if_needed()
        buttons.nth(1).click()
        assert page.evaluate(STATE)["stage"] == 1
        page.wait_for_function(
            "text => document.querySelector('#caseboard-forward').innerText.includes(text)",
            arg=formatted(STAGE_NOTES[lang][1], h))
        link = forward.locator(f"a[href$='{STAGE_NOTES[lang][1]['href'].split('/#')[1]}']")
        assert link.first.text_content().strip() == STAGE_NOTES[lang][1]["link"]
    buttons.nth(7).click()
    assert page.evaluate(STATE)["stage"] == 7
    layers = page.evaluate(RESULT)["layers"]
    first, second = lab_trace(lang)                                    # the defaults
    assert round(spread(layers[1]["output"]), 2) == round(spread(second["output"]), 2)
    assert spread(layers[1]["output"]) < spread(layers[0]["output"]) < spread(first["x"])
    assert visit.errors == []
