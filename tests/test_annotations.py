"""Code annotations without Material's script at load (issue #31), in both languages.

The Python walkthrough annotates its code ("# (1)!", Material's code annotations). Material's
script waits there, as on every page, for the reader's first interaction (overrides/main.html):
until then each marker is drawn as Material draws it (an <aside class="md-annotation"> with
``data-md-pending``) and the list after the block is hidden as Material hides it (extra.css), so
that nothing moves when Material mounts. The tap, click or key that loads Material opens the
annotation it was aimed at. Without scripts the annotations stay a numbered list.

The tests hold Material's scripts at the network until the reader's gesture is done (a slow
network, every time), so that the gesture always comes before Material: the case the loader
must handle. Reuses the session's one build and tests/test_browser.py's browser and fixtures.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_browser import (  # noqa: F401  (fixtures, used by name)
    MATERIAL_READY,
    PHONE,
    RECORD_SHIFTS,
    Visit,
    base_url,
    browser,
    new_context,
    site,
)

ROOT = Path(__file__).resolve().parents[1]
#: The pages with code annotations, per language (paths under the site root).
PAGES = {"zh": "python/", "en": "en/python/"}
#: Each marker's accessible name, per language (overrides/main.html).
WORD = {"zh": "注释", "en": "Annotation"}
#: Material's scripts (its bundle and the search worker).
SCRIPTS = "**/assets/javascripts/**"
#: The annotated code block and its list.
BLOCK = ".highlight:has(.md-annotation)"
#: Layout shift a reader would not notice (CLS "good" is below 0.1; one line moving is more).
SMALL_SHIFT = 0.01
#: The reader's gestures that open an annotation before Material is there.
WAYS = ["click", "tap", "keyboard"]


def source_markers(lang: str) -> list[str]:
    """The annotation numbers of the page's code, in order ("# (1)!" → "1")."""
    text = (ROOT / "docs" / lang / "python.md").read_text(encoding="utf-8")
    return re.findall(r"#\s*\((\d+)\)!", text)


def hold_scripts(context):
    """Hold Material's scripts at the network until the returned function lets them through."""
    held = []
    context.route(SCRIPTS, lambda route: held.append(route))

    def release():
        while held:
            held.pop(0).continue_()
        context.unroute(SCRIPTS)

    return held, release


def first_item_text(page) -> str:
    """The text of the list's first item (the annotation of marker 1), spaces folded."""
    return page.evaluate(f"""() => document.querySelector('{BLOCK}').nextElementSibling
        .querySelector(':scope > li').textContent.replace(/\\s+/g, ' ').trim()""")


def assert_first_annotation_open(page, expected: str) -> None:
    """Material's tooltip of marker 1 is open and shows the first item of the list."""
    tooltip = page.locator(f"{BLOCK} .md-tooltip--active")
    tooltip.wait_for(state="visible")
    page.wait_for_function("""() => { const t = document.querySelector('.md-tooltip--active');
        return t && getComputedStyle(t).opacity === '1'; }""")
    assert tooltip.count() == 1
    owner = tooltip.evaluate("""t => t.closest('.md-annotation')
        .querySelector('[data-md-annotation-id]').getAttribute('data-md-annotation-id')""")
    assert owner == "1"
    shown = tooltip.evaluate("t => t.textContent.replace(/\\s+/g, ' ').trim()")
    assert shown == expected
    box = tooltip.bounding_box()
    width = page.evaluate("innerWidth")
    assert box["width"] > 0 and box["x"] >= 0 and box["x"] + box["width"] <= width


def shifts(page) -> float:
    """The sum of every layout shift the page has had (RECORD_SHIFTS), input or not."""
    return page.evaluate("window.__shifts.reduce((sum, e) => sum + e.value, 0)")


# ---- the built pages ---------------------------------------------------------------------------


@pytest.mark.parametrize("lang", PAGES)
def test_markers_are_drawn_at_build_and_the_bundle_waits(built_site, lang):
    """Every "# (N)!" of the page's code is drawn as Material's marker, keeping its comment for
    Material and its accessible name; Material's bundle is a placeholder the loader fills."""
    html = (built_site.dir / PAGES[lang] / "index.html").read_text(encoding="utf-8")
    numbers = source_markers(lang)
    assert len(numbers) >= 9
    assert ")!</span>" not in html  # no comment left for Material to turn into a marker at once
    markers = re.findall(
        r'<span class="c1"><aside class="md-annotation" tabindex="0" aria-label="([^"]+)" '
        r'data-md-pending="# \((\d+)\)!"><span class="md-annotation__index" tabindex="-1">'
        r'<span data-md-annotation-id="(\d+)"></span></span></aside></span>', html)
    assert [(label, a, b) for label, a, b in markers] == [
        (f"{WORD[lang]} {n}", n, n) for n in numbers]
    bundle = re.findall(r"<script[^>]*javascripts/bundle\.[^>]*>", html)
    assert len(bundle) == 1 and 'type="text/plain" data-md-lazy' in bundle[0], bundle


# ---- in the browser ----------------------------------------------------------------------------


@pytest.mark.parametrize("lang", PAGES)
@pytest.mark.parametrize("where", ["below", "on screen"])
def test_material_has_not_run_at_load(new_context, base_url, lang, where):
    """Before any interaction Material's bundle is neither run nor fetched, whether the
    annotated block is below the first screen or on it; the markers and the hidden list stand
    in for what Material draws."""
    height = 480 if where == "below" else 1800
    visit = Visit(new_context(viewport={"width": 1280, "height": height}), base_url + PAGES[lang])
    page = visit.page
    page.wait_for_load_state("networkidle")
    top = page.evaluate(f"document.querySelector('{BLOCK}').getBoundingClientRect().top")
    assert (top > height) == (where == "below"), top
    assert page.evaluate("window.component$ === undefined")
    assert page.evaluate("""performance.getEntriesByType('resource')
        .filter(e => e.name.includes('/javascripts/bundle.')).length""") == 0
    assert page.locator(".md-annotation[data-md-pending]").count() == len(source_markers(lang))
    assert not page.locator(f"{BLOCK} + ol").is_visible()
    code = page.locator(f"{BLOCK} code").inner_text()  # what a reader selects and copies
    assert "import numpy as np" in code and "(1)!" not in code
    assert visit.errors == []


@pytest.mark.parametrize("lang", PAGES)
@pytest.mark.parametrize("way", WAYS)
def test_the_first_gesture_opens_the_annotation(new_context, base_url, lang, way):
    """A click (desktop), a tap (phone) or Tab then Enter on marker 1, before Material is there,
    loads Material and opens that annotation with its text; nothing moves meanwhile, and the
    markers Material draws have their names."""
    if way == "tap":
        context = new_context(**PHONE)
    else:  # the block on the first screen: the click is the page's first interaction
        context = new_context(viewport={"width": 1280, "height": 1800})
    held, release = hold_scripts(context)
    visit = Visit(context, base_url + PAGES[lang])
    page = visit.page
    page.evaluate(RECORD_SHIFTS)
    expected = first_item_text(page)
    assert expected
    marker = page.locator(".md-annotation[data-md-pending]").first
    if way == "click":
        marker.click()
    elif way == "tap":
        marker.scroll_into_view_if_needed()
        marker.tap()
    else:
        for _ in range(200):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.matches('.md-annotation')"):
                break
        assert page.evaluate("document.activeElement.matches('.md-annotation[data-md-pending]')")
        page.keyboard.press("Enter")
    assert held, "the gesture asked for Material's script"
    assert page.evaluate("window.component$ === undefined")  # the gesture came first
    release()
    page.wait_for_function(MATERIAL_READY)
    assert_first_annotation_open(page, expected)
    assert page.locator(".md-annotation[data-md-pending]").count() == 0
    assert not page.locator(f"{BLOCK} + ol").is_visible()
    labels = page.locator("a.md-annotation__index").evaluate_all(
        "links => links.map(a => a.getAttribute('aria-label'))")
    assert labels == [f"{WORD[lang]} {n}" for n in source_markers(lang)]
    assert shifts(page) < SMALL_SHIFT, page.evaluate("window.__shifts")
    assert visit.errors == []


@pytest.mark.parametrize("lang", PAGES)
def test_nothing_moves_when_material_mounts_beside_the_block(new_context, base_url, lang):
    """The annotated block on screen, Material loaded by a pointer move: the block, the markers
    and what follows the list stay where they were, and no layout shift is recorded."""
    visit = Visit(new_context(viewport={"width": 1280, "height": 1800}), base_url + PAGES[lang])
    page = visit.page
    page.evaluate(RECORD_SHIFTS)
    where = f"""() => {{ const block = document.querySelector('{BLOCK}');
        const after = block.nextElementSibling.nextElementSibling;
        const marker = block.querySelector('.md-annotation');
        return [block, after, marker].map(e => {{ const r = e.getBoundingClientRect();
            return [Math.round(r.left), Math.round(r.top), Math.round(r.height)]; }}); }}"""
    before = page.evaluate(where)
    assert before[1][1] < 1800  # what follows the list is on screen: it would be seen moving
    page.mouse.move(200, 300)
    page.wait_for_function(MATERIAL_READY)
    page.wait_for_function("() => !document.querySelector('.md-annotation[data-md-pending]')")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate(where) == before
    assert shifts(page) < SMALL_SHIFT, page.evaluate("window.__shifts")
    assert visit.errors == []


@pytest.mark.parametrize("lang", PAGES)
def test_without_scripts_the_annotations_are_a_numbered_list(new_context, base_url, lang):
    """Without JavaScript the list stays under the block and each marker shows its number."""
    context = new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(base_url + PAGES[lang], wait_until="load")
    numbers = source_markers(lang)
    items = page.locator(f"{BLOCK} + ol > li")
    assert items.count() == len(numbers) and items.first.is_visible()
    shown = page.locator(f"{BLOCK} [data-md-annotation-id]").evaluate_all(
        "ids => ids.map(e => getComputedStyle(e, '::after').content)")
    assert shown == [f'"{n}"' for n in numbers]


@pytest.mark.parametrize("lang", PAGES)
def test_a_bundle_that_fails_to_load_leaves_the_list(new_context, base_url, lang):
    """Material's bundle does not arrive (offline after the page): the page falls back to what
    it is without scripts, the annotations readable as a list."""
    context = new_context(viewport={"width": 1280, "height": 1800})
    context.route("**/assets/javascripts/bundle.*", lambda route: route.abort())
    page = context.new_page()
    page.goto(base_url + PAGES[lang], wait_until="load")
    assert not page.locator(f"{BLOCK} + ol").is_visible()
    page.mouse.move(200, 300)
    page.wait_for_function("() => !document.documentElement.classList.contains('md-js-deferred')")
    assert page.locator(f"{BLOCK} + ol > li").first.is_visible()
