"""The site on a 390 px phone (docs/assets/stylesheets/phone.css), in both languages.

A display formula or a table wider than the column scrolls inside its own box, and shows that it
does: wherever such a box's content is wider than the box (scrollWidth > clientWidth), the box
scrolls (overflow-x auto or scroll, never hidden) and an edge cue (phone.css: a shadow) shows on
the side where more lies, and only there. Phones hide scrollbars until they are touched, so the
cue is looked for in the pixels: with the box's content made invisible, the strip along its
right edge must differ from the page where more content lies to the right, and be the page's
own colour once the box is scrolled to its end. The glossary reads as a list on a phone (no row
wider than the screen, the meaning as wide as the column) and stays a table on a desktop.

The same sweep checks that no page scrolls sideways at that width, and that no figure loaded
lazily (hooks/figures.py) is on a page's first screen.

Reuses the session's one build and tests/test_browser.py's browser and fixtures. With
``SCREENSHOT_DIR`` set, the multi-head page and the glossary are photographed at phone width in
both languages, light and dark.
"""

from __future__ import annotations

import io
import os

import pytest
from PIL import Image, ImageChops
from test_browser import (  # noqa: F401  (fixtures, used by name)
    KATEX_DONE,
    LANGUAGES,
    MATERIAL_READY,
    PHONE,
    base_url,
    browser,
    new_context,
    screenshot,
    site,
    site_pages,
)

#: Layout is that of PHONE; one device pixel per CSS pixel keeps the pixel checks quick.
PHONE_1X = dict(PHONE, device_scale_factor=1)
#: Width (CSS px) of the strip along a box's edge where the cue is looked for.
STRIP = 3
#: A strip "shows a cue" when some pixel differs from the page by more than this (0–255, per
#: channel); "shows nothing" when none differs by more than QUIET.
CUE, QUIET = 24, 8
#: Pages where the cue is also checked in the dark palette: display formulas and tables.
DARK_PAGES = ["multihead/", "speed/"]

#: Every element wider than the phone's column, and the page's widths. Not window.innerWidth:
#: on a phone (is_mobile) Chromium widens the layout viewport to whatever overflows, so
#: innerWidth grows with the page; clientWidth stays 390. Should a stylesheet ever lay out
#: off-screen blocks lazily (content-visibility: auto), that would also clip what sticks out of
#: them: everything is drawn first, so overflow shows.
SIDEWAYS = """() => {
    const style = document.createElement('style');
    style.textContent = '* { content-visibility: visible !important; }';
    document.head.append(style);
    const limit = document.documentElement.clientWidth;
    const wide = [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > limit + 1)
        .slice(0, 5)
        .map(e => e.tagName.toLowerCase() + '.' + (e.getAttribute('class') || ''));
    const found = {scroll: document.documentElement.scrollWidth, limit, wide};
    style.remove();
    return found;
}"""


#: Marks (data-mha-box) every box that clips a display formula or a table whose content is
#: wider than it, and describes each. The boxes: each div.arithmatex with KaTeX's wrappers in it
#: (not KaTeX's own glyph clipping deeper down, nor .katex-mathml, the MathML copy for screen
#: readers that KaTeX clips to 1 px on purpose), each table, and every ancestor of either up
#: to the article.
MARK_BOXES = """() => {
    const article = document.querySelector('article');
    const boxes = new Set();
    const withAncestors = e => {
        boxes.add(e);
        for (let a = e.parentElement; a && a !== article.parentElement; a = a.parentElement)
            boxes.add(a);
    };
    for (const formula of article.querySelectorAll('div.arithmatex')) {
        withAncestors(formula);
        formula.querySelectorAll(':scope > .katex-display, :scope > .katex-display > .katex, '
            + ':scope > .katex-display > .katex > .katex-html').forEach(e => boxes.add(e));
    }
    article.querySelectorAll('table').forEach(withAncestors);
    const found = [];
    for (const box of boxes) {
        const overflow = getComputedStyle(box).overflowX;
        if (overflow === 'visible' || box.scrollWidth <= box.clientWidth + 1) continue;
        box.setAttribute('data-mha-box', String(found.length));
        const tex = box.querySelector('annotation');
        const cell = box.querySelector('th, td');
        found.push({index: found.length, overflow, scroll: box.scrollWidth,
                    client: box.clientWidth,
                    what: box.tagName.toLowerCase() + '.' + (box.getAttribute('class') || '')
                          + ': ' + ((tex || cell || box).textContent || '').trim().slice(0, 50)});
    }
    return found;
}"""
#: While a box is looked at: its content invisible (what is left is the box's own painting),
#: and the page's fixed header out of the way.
#: Blocks laid out lazily (content-visibility: auto, "layout: long" pages) are laid out here:
#: a full-page photograph draws every block, and one that got its real height only then would
#: move the boxes below it away from the rectangles measured before.
PROBE_STYLE = """[data-mha-probe] * { visibility: hidden !important; }
.md-header, .md-tabs { visibility: hidden !important; }
.md-typeset > * { content-visibility: visible !important; }"""


def strip_difference(image: Image.Image, left: int, right: int, plain) -> int:
    """The largest difference (0–255, any channel) from ``plain`` in columns [left, right)."""
    strip = image.crop((max(left, 0), 0, min(right, image.width), image.height))
    difference = ImageChops.difference(strip, Image.new("RGB", strip.size, plain))
    return max(high for _, high in difference.getextrema())


#: Each marked box's rectangle in the document (CSS px), with its content hidden and scrolled
#: to ``where`` ("start" or "end").
PROBE_BOXES = """where => [...document.querySelectorAll('[data-mha-box]')].map(box => {
    box.setAttribute('data-mha-probe', '');
    box.scrollLeft = where === 'start' ? 0 : box.scrollWidth;
    const r = box.getBoundingClientRect();
    return {index: Number(box.dataset.mhaBox), left: Math.round(r.left),
            right: Math.round(r.right), top: Math.round(r.top + scrollY),
            bottom: Math.round(r.bottom + scrollY)};
})"""


#: Up to this many boxes on a page, each is photographed on its own.
FEW_BOXES = 8
#: Scrolls a marked box to the top of the window and returns its visible rectangle (CSS px).
CLIP_BOX = """index => {
    const box = document.querySelector(`[data-mha-box="${index}"]`);
    box.scrollIntoView({block: 'start', inline: 'nearest'});
    const r = box.getBoundingClientRect();
    const top = Math.max(r.top, 0), bottom = Math.min(r.bottom, innerHeight);
    return {x: Math.round(r.left), y: Math.round(top), width: Math.max(Math.round(r.width), 1),
            height: Math.max(Math.round(bottom - top), 3)};
}"""


def look_at_boxes(page) -> dict[int, dict[str, int]]:
    """For every marked box, how much its right and left edges differ from the page with its
    content hidden: scrolled to the start ("right", "left") and to the end ("right_at_end").

    A page with few boxes has each box photographed on its own, scrolled to the top of the
    window; a page with many is photographed whole, twice. Whichever is
    cheaper: a photograph of a whole long page takes seconds, and so do dozens of scrolls of it."""
    shots = {}
    for where in ("start", "end"):
        rects = page.evaluate(PROBE_BOXES, where)
        if len(rects) > FEW_BOXES:
            image = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
            shots[where] = {r["index"]: image.crop((r["left"], r["top"] + 1, r["right"],
                                                    max(r["bottom"] - 1, r["top"] + 2)))
                            for r in rects}
            continue
        shots[where] = {}
        for r in rects:
            clip = page.evaluate(CLIP_BOX, r["index"])   # the box's rectangle in the window
            image = Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("RGB")
            shots[where][r["index"]] = image.crop((0, 1, image.width,
                                                   max(image.height - 1, 2)))
    page.evaluate("""() => document.querySelectorAll('[data-mha-probe]').forEach(box => {
        box.removeAttribute('data-mha-probe'); box.scrollLeft = 0; })""")
    edges = {}
    for index, start in shots["start"].items():
        end, width = shots["end"][index], start.width
        plain = start.getpixel((width // 2, start.height // 2))  # the middle: the page's colour
        edges[index] = {"right": strip_difference(start, width - STRIP, width, plain),
                        "left": strip_difference(start, 0, STRIP, plain),
                        "right_at_end": strip_difference(end, width - STRIP, width, plain)}
    return edges


def problem_with(box: dict, edges: dict[str, int]) -> str | None:
    """What is wrong with a box whose content is wider than it, or None."""
    if box["overflow"] not in ("auto", "scroll"):
        return f"overflow-x: {box['overflow']} cuts it off"
    if edges["right"] <= CUE:
        return f"no cue at the right edge while more lies there {edges}"
    if edges["left"] > QUIET:
        return f"a cue at the left edge while nothing lies there {edges}"
    if edges["right_at_end"] > QUIET:
        return f"a cue at the right edge once scrolled to the end {edges}"
    return None


#: Edges that pass the pixel checks: for a page whose boxes are checked for scrolling only.
UNSEEN = {"right": CUE + 1, "left": 0, "right_at_end": 0}


def cut_off_boxes(page, look: bool = True) -> dict[str, str]:
    """Every box of a display formula or table on the page that is cut off without showing it.
    With ``look=False`` the boxes are checked for scrolling only, not photographed for their
    cue (the API reference: its ~70 boxes took ~28 s to photograph, and its cue is the same
    phone.css the other pages' boxes are photographed with)."""
    page.add_style_tag(content=PROBE_STYLE)
    boxes = page.evaluate(MARK_BOXES)
    edges = look_at_boxes(page) if boxes and look else {box["index"]: UNSEEN for box in boxes}
    problems = {}
    for box in boxes:
        problem = problem_with(box, edges[box["index"]])
        if problem:
            problems[f"{box['what']} ({box['scroll']} px in {box['client']} px)"] = problem
    return problems


#: How long a page may take to be ready (ms): a wait, not a measurement. Playwright's default of
#: 15 s ran out once on a 2-core machine busy with other work, halfway through the ~40 pages.
READY_TIMEOUT = 60_000


def open_page(page, url: str) -> None:
    """Open a page as a reader has it once they touch it: its fonts loaded (they set the
    formulas' widths) and Material's script run (it arrives on the first interaction, scrolling
    included, and then wraps the tables again)."""
    response = page.goto(url, wait_until="load")
    assert response.status == 200, url
    page.wait_for_function(KATEX_DONE, timeout=READY_TIMEOUT)
    page.evaluate("document.fonts.ready.then(() => true)")
    # As tests/test_browser.py's interact(), from elsewhere first: a page opened in the same tab
    # with the pointer already there would get no pointermove.
    page.mouse.move(20, 500)
    page.mouse.move(200, 300)
    page.wait_for_function(MATERIAL_READY, timeout=READY_TIMEOUT)


@pytest.fixture
def phone(new_context):
    """A phone's page; the search index blocked (layout only: spare the 2-core machine the index
    that Material's worker would rebuild on every page)."""
    def make(**options):
        context = new_context(**PHONE_1X, **options)
        context.route("**/search/search_index.json", lambda route: route.abort())
        return context.new_page()

    return make


def has_boxes(site_dir, path: str) -> bool:
    """Whether the built page has a box `MARK_BOXES` looks at: a table, or a display formula.
    The English twin of a page whose only boxes are display formulas is left out: its formulas
    are the Chinese page's, typeset the same (tests/test_site.py checks the twins' formulas)."""
    html = (site_dir / path / "index.html").read_text(encoding="utf-8")
    article = html.split("<article", 1)[-1]
    if "<table" in article:
        return True
    return '<div class="arithmatex"' in article and not path.startswith("en/")


#: Lazy images on the first screen of a page opened at its top (one in a tab not shown has no
#: box, and loads when its tab is chosen).
LAZY_SEEN = """() => scrollY === 0 ? [...document.querySelectorAll('img[loading=lazy]')]
    .filter(img => img.getClientRects().length && img.getBoundingClientRect().top < innerHeight)
    .map(img => img.getAttribute('src')) : ['the page did not open at its top']"""


def test_no_page_scrolls_sideways_and_no_box_is_cut_off_without_a_visible_scroll(phone, site):
    """One sweep of every page at phone width, for three checks: the page never scrolls
    sideways, a display formula or table wider than the column scrolls in its own box with a
    cue, and no lazily loaded figure is on the first screen."""
    base_url, site_dir = site
    pages = site_pages(site_dir)
    assert {"", "scores/", "multihead/", "glossary/", "en/", "en/scores/", "en/multihead/",
            "en/glossary/"} <= set(pages)
    chapters = {LANGUAGES[lang]["chapter"]: lang for lang in LANGUAGES}
    page = phone()
    cut_off, scrolling, sideways, lazy_on_first_screen = {}, 0, {}, []
    boxed = {path for path in pages if has_boxes(site_dir, path)}
    assert {"scores/", "multihead/", "glossary/", "en/glossary/"} <= boxed
    for path in pages:
        if path.startswith("en/api/") or path not in boxed:
            # The API reference is the same docstrings, the same markup and the same CSS in
            # both languages (its twin check is tests/test_site.py's): its pages' ~70 boxes
            # are looked at once, in Chinese. A page with no table and no display formula has no
            # box to look at, and the formulas of an English page are its Chinese twin's (see
            # has_boxes). Here only their width, as they first arrive.
            response = page.goto(base_url + path, wait_until="domcontentloaded")
            assert response.status == 200, path
            page.wait_for_function(KATEX_DONE, timeout=READY_TIMEOUT)
        else:
            open_page(page, base_url + path)
        width = page.evaluate(SIDEWAYS)
        assert width["limit"] == PHONE["viewport"]["width"], path
        if width["scroll"] > width["limit"] + 1:
            sideways["/" + path] = width
        lazy_on_first_screen += [f"/{path} {src}" for src in page.evaluate(LAZY_SEEN)]
        if path in chapters:
            screenshot(page, f"scores-{chapters[path]}-phone")
        if path.startswith("en/api/") or path not in boxed:
            continue
        problems = cut_off_boxes(page, look=not path.startswith("api/"))
        scrolling += page.locator("[data-mha-box]").count()
        cut_off.update({f"/{path} {what}": problem for what, problem in problems.items()})
    assert sideways == {}
    # hooks/figures.py loads figures lazily from the first <h2> on; none may be on the first
    # screen, where a lazy image arrives late.
    assert lazy_on_first_screen == []
    assert cut_off == {}
    assert scrolling > 0  # the multi-head formula, at least, is wider than a phone


@pytest.mark.parametrize("path", DARK_PAGES)
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_scroll_cue_shows_in_the_dark_palette(phone, base_url, lang, path):
    page = phone(color_scheme="dark")
    open_page(page, base_url + ("en/" if lang == "en" else "") + path)
    assert page.locator("body").get_attribute("data-md-color-scheme") == "slate"
    assert cut_off_boxes(page) == {}
    assert page.locator("[data-mha-box]").count() > 0


def test_the_check_finds_a_box_cut_off_without_a_cue(phone, base_url):
    """The check above is not vacuous: of three boxes too narrow for their content, the one that
    hides the overflow and the one that scrolls with no cue are caught; the one with phone.css's
    cue (a table's scrolling box) passes."""
    page = phone()
    open_page(page, base_url + "en/")
    page.add_style_tag(content=PROBE_STYLE)
    boxes = page.evaluate("""() => {
        const article = document.querySelector('article');
        return [['hidden', 'overflow-x: hidden'], ['bare', 'overflow-x: auto'],
                ['cued', '']].map(([name, style], index) => {
            const box = document.createElement('div');
            if (name === 'cued') box.className = 'md-typeset__scrollwrap';
            box.style.cssText = style;
            box.innerHTML = '<div style="width: 900px; height: 3rem">wide</div>';
            box.setAttribute('data-mha-box', String(index));
            article.prepend(box);
            return {index, overflow: getComputedStyle(box).overflowX, name,
                    scroll: box.scrollWidth, client: box.clientWidth};
        });
    }""")
    assert all(box["scroll"] > box["client"] for box in boxes)
    edges = look_at_boxes(page)
    found = {box["name"]: problem_with(box, edges[box["index"]]) for box in boxes}
    assert found["hidden"] == "overflow-x: hidden cuts it off"
    assert found["bare"].startswith("no cue at the right edge")
    assert found["cued"] is None


#: The glossary's table, its rows and its cells (the fourth is the meaning), in CSS px.
GLOSSARY = """() => {
    const table = document.querySelector('article table');
    const box = e => { const r = e.getBoundingClientRect();
                       return {left: r.left, right: r.right, top: r.top, width: r.width}; };
    return {column: document.querySelector('article').clientWidth,
            rows: [...table.querySelectorAll('tbody tr')].map(row => ({
                row: box(row), cells: [...row.children].map(box),
                term: row.children[0].textContent.trim()})),
            scroller: (s => ({scroll: s.scrollWidth, client: s.clientWidth}))(
                table.closest('.md-typeset__scrollwrap') || table)};
}"""


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_glossary_reads_as_a_list_on_a_phone(phone, base_url, lang):
    from mha.site.plots import TERMS

    page = phone()
    open_page(page, base_url + ("en/" if lang == "en" else "") + "glossary/")
    glossary = page.evaluate(GLOSSARY)
    width = PHONE["viewport"]["width"]
    assert len(glossary["rows"]) == len(TERMS)
    assert glossary["scroller"]["scroll"] <= glossary["scroller"]["client"] + 1  # no scrolling
    wider = [row["term"] for row in glossary["rows"]
             if row["row"]["left"] < 0 or row["row"]["right"] > width + 0.5
             or any(cell["right"] > width + 0.5 for cell in row["cells"])]
    assert wider == []
    # The meaning takes the column's width, under the term, not a narrow fourth column.
    narrow = [row["term"] for row in glossary["rows"]
              if row["cells"][3]["width"] < 0.9 * glossary["column"]
              or row["cells"][3]["top"] <= row["cells"][0]["top"]]
    assert narrow == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_glossary_stays_a_table_on_a_desktop(new_context, base_url, lang):
    context = new_context(viewport={"width": 1280, "height": 900})
    context.route("**/search/search_index.json", lambda route: route.abort())
    page = context.new_page()
    open_page(page, base_url + ("en/" if lang == "en" else "") + "glossary/")
    glossary = page.evaluate(GLOSSARY)
    assert page.locator("article table thead th").first.is_visible()
    for row in glossary["rows"]:  # four cells side by side
        tops = {round(cell["top"]) for cell in row["cells"]}
        lefts = [cell["left"] for cell in row["cells"]]
        assert len(tops) == 1 and lefts == sorted(lefts), row["term"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_photographs_at_phone_width(new_context, base_url, lang, scheme):
    """The multi-head page's formulas and the glossary on a phone in each palette: the palette
    is the one asked for; with SCREENSHOT_DIR set, photographed to look at."""
    context = new_context(**PHONE, color_scheme=scheme)
    context.route("**/search/search_index.json", lambda route: route.abort())
    page = context.new_page()
    prefix = "en/" if lang == "en" else ""
    # The palette is the site's, not a page's: the glossary is opened only to be photographed.
    photographing = bool(os.environ.get("SCREENSHOT_DIR"))
    for path in ("multihead/", "glossary/") if photographing else ("multihead/",):
        open_page(page, base_url + prefix + path)
        assert page.locator("body").get_attribute("data-md-color-scheme") == (
            "slate" if scheme == "dark" else "default")
        screenshot(page, f"phone-{path.strip('/')}-{lang}-{scheme}")


#: A chapter's blocks: computed content-visibility of each direct child of the
#: article, and where its last second-level heading is.
LAZY_BLOCKS = """() => {
    const blocks = [...document.querySelector('article.md-typeset').children];
    const heads = [...document.querySelectorAll('article h2[id]')];
    return {visibility: blocks.map(b => getComputedStyle(b).contentVisibility),
            kinds: blocks.map(b => b.tagName.toLowerCase() + '.' + (b.className || '')),
            last: heads[heads.length - 1].id};
}"""


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_long_page_lays_out_far_blocks_lazily_and_its_anchors_still_land(phone, base_url, lang):
    """extra.css and hooks/long_pages.py: past their first eight blocks, the long chapters'
    ("layout: long": training, scores, positions) code, formulas, paragraphs and folded answers
    are laid out only near the screen (their 8,000-9,600 elements cost a phone's main thread
    over 200 ms otherwise); the first screens never are, tables, lists and output blocks (whose
    label a contained paint would cut off) never are, and a link
    to the training chapter's last section still lands on that section although the blocks
    above it were never drawn (their heights guessed). A page without the layout (the
    multi-head chapter) has no lazy block."""
    prefix = base_url + ("en/" if lang == "en" else "")
    url, last = prefix + "training/", None
    for chapter in ("training/", "scores/", "positions/"):
        page = phone()
        open_page(page, prefix + chapter)
        blocks = page.evaluate(LAZY_BLOCKS)
        last = last or blocks["last"]                  # the training chapter's last section
        first, rest = blocks["visibility"][:8], blocks["visibility"][8:]
        assert set(first) == {"visible"}, chapter
        lazy = [kind for kind, v in zip(blocks["kinds"][8:], rest) if v == "auto"]
        assert len(lazy) >= 0.5 * len(rest), (chapter, blocks["kinds"])
        assert any(k.startswith("div.language-") for k in lazy) and any(k == "p." for k in lazy)
        assert all(k.split(".")[0] not in ("ul", "ol", "h2", "h3") for k in lazy), chapter
        assert not any("scrollwrap" in k for k in lazy), chapter
        # An output block's label is drawn above its box: contained paint would cut it off.
        assert not any(k.startswith("div.language-output") for k in lazy), chapter
        assert any(k.startswith("div.language-output") for k in blocks["kinds"][8:]), chapter
        page.close()
    plain = phone()
    open_page(plain, base_url + ("en/" if lang == "en" else "") + "multihead/")
    assert set(plain.evaluate(LAZY_BLOCKS)["visibility"]) == {"visible"}
    linked = phone()                               # a link from elsewhere: a fresh load
    linked.goto(url + "#" + last, wait_until="load")
    linked.wait_for_function(KATEX_DONE, timeout=READY_TIMEOUT)
    linked.wait_for_timeout(500)
    top = linked.evaluate("id => document.getElementById(id).getBoundingClientRect().top",
                          last)
    assert 0 <= top <= 150, top                    # below the header bar, at the top of the screen
