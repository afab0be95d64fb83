"""The built site in a real browser (Debian's Chromium through Playwright), in both languages.

The site is the session's one build (``built_site`` in tests/conftest.py, shared with
tests/test_site.py), made strict for the address it is served at, and served gzipped as GitHub
Pages serves it, by ``scripts/serve_site.py``. The tests check what a reader gets: the pages load
without console errors, KaTeX typeset every formula, the figures load and have alt text, the
language switcher keeps the page, search finds the chapter in Chinese and in English, the copy
button copies the code, no request leaves 127.0.0.1, and no page scrolls sideways on a phone.
Material's script waits for the reader's first interaction (overrides/main.html): before it the
page is complete (palette, search box, tables in their scrolling boxes), it arrives on the first
pointer move without moving anything on the page, and a palette toggled before it stays toggled.

With ``SCREENSHOT_DIR`` set, the chapter is also photographed in both languages, light and
dark, and at phone width, into that folder.
"""

from __future__ import annotations

import html.parser
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PHONE = dict(viewport={"width": 390, "height": 844}, device_scale_factor=3, is_mobile=True,
             has_touch=True)
#: Per language: the home page and the chapter (paths under the site root), a search word.
LANGUAGES = {
    "zh": {"home": "", "chapter": "scores/", "query": "缩放"},
    "en": {"home": "en/", "chapter": "en/scores/", "query": "scaling"},
}
#: Display formulas ($$ … $$) the chapter has at least, in each language.
MIN_DISPLAY_FORMULAS = 4
#: Material 9.8 draws the copy button as .md-code__button; earlier versions as .md-clipboard.
COPY_BUTTON = ".md-clipboard, .md-code__button[data-md-type=copy]"
#: Every request URL that any page made, across all tests (checked by the last test).
REQUESTS: list[str] = []
KATEX_DONE = "() => !document.querySelector('.arithmatex:not([data-katex])')"
#: Material's bundle has run (it sets window.component$) and mounted the page (copy buttons).
MATERIAL_READY = "() => window.component$ !== undefined && !document.querySelector('html.no-js')"
#: Every layout shift the page has had, recorded from the start (buffered).
RECORD_SHIFTS = """() => { window.__shifts = [];
    new PerformanceObserver(list => list.getEntries().forEach(e => window.__shifts.push(
        {value: e.value, sources: (e.sources || []).map(s => s.node ? s.node.nodeName + '.' +
         (s.node.className || '') : '?')}))).observe({type: 'layout-shift', buffered: true}); }"""


# --- Fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing (Debian/Ubuntu: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def site(browser, built_site):
    """(base URL, site directory): the session's site, served gzipped at the URL it was built
    for. (After ``browser``: without Chromium the tests are skipped before any build.)"""
    with built_site.serve() as base_url:
        assert base_url == built_site.url
        yield base_url, built_site.dir


@pytest.fixture(scope="module")
def base_url(site):
    return site[0]


def open_context(browser, **options):
    """A browser context that records every request it makes."""
    context = browser.new_context(**options)
    context.set_default_timeout(15_000)
    context.on("request", lambda request: REQUESTS.append(request.url))
    return context


@pytest.fixture
def new_context(browser):
    """Factory of recording contexts, all closed after the test."""
    contexts = []

    def make(**options):
        contexts.append(open_context(browser, **options))
        return contexts[-1]

    yield make
    for context in contexts:
        context.close()


class Visit:
    """A page opened at a URL, with the console errors, page errors and HTTP errors it met."""

    def __init__(self, context, url: str, settle: bool = False):
        self.errors: list[str] = []
        self.page = page = context.new_page()
        page.on("console", lambda message: message.type == "error" and self.errors.append(
            f"console.error: {message.text}"))
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on("response", lambda response: response.status >= 400 and self.errors.append(
            f"HTTP {response.status}: {response.url}"))
        self.response = page.goto(url, wait_until="load")
        page.wait_for_function(KATEX_DONE)  # typeset at build time: no script needed
        if settle:  # a reader's first move: Material's script runs and fetches the search index
            interact(page)
            page.wait_for_load_state("networkidle")


def interact(page) -> None:
    """Move the pointer over the page, as a reader does first, and wait for Material's script."""
    page.mouse.move(200, 300)
    page.wait_for_function(MATERIAL_READY)


@pytest.fixture(scope="module")
def visits(browser, base_url):
    """The home pages and chapters, each opened once (in light mode) and shared by the tests
    that only look at them. The context may use the clipboard, for the copy-button test."""
    context = open_context(browser, permissions=["clipboard-read", "clipboard-write"])
    opened: dict[str, Visit] = {}

    def visit(lang: str, which: str) -> Visit:
        path = LANGUAGES[lang][which]
        if path not in opened:
            opened[path] = Visit(context, base_url + path, settle=True)
        return opened[path]

    yield visit
    context.close()


def screenshot(page, name: str) -> None:
    """Save a full-page PNG into $SCREENSHOT_DIR, when it is set."""
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def site_pages(site_dir: Path) -> list[str]:
    """Every HTML page of the built site, as a path under its root ("" is the home page)."""
    pages = []
    for index in sorted(site_dir.rglob("index.html")):
        relative = index.parent.relative_to(site_dir).as_posix()
        if {"assets", "search"} & set(relative.split("/")):
            continue
        pages.append("" if relative == "." else relative + "/")
    return pages


# --- Tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("which", ["home", "chapter"])
def test_page_loads_without_errors(visits, lang, which):
    visit = visits(lang, which)
    assert visit.response.status == 200
    assert visit.errors == []
    assert visit.page.locator("html").get_attribute("lang") == lang


@pytest.mark.parametrize("lang", LANGUAGES)
def test_katex_typeset_every_formula(visits, lang):
    page = visits(lang, "chapter").page
    screenshot(page, f"scores-{lang}-light")
    assert page.locator("article .katex").count() > 0
    displays = page.locator("article .katex-display").count()
    assert displays >= MIN_DISPLAY_FORMULAS
    assert displays == page.locator("article div.arithmatex").count()
    assert page.locator(".katex-error, [data-katex=error]").count() == 0
    # The prose (code aside) keeps no TeX delimiters: no $$, \[ \] or \( \) left untypeset.
    prose = page.evaluate("""() => {
        const article = document.querySelector('article').cloneNode(true);
        article.querySelectorAll('pre, code, .katex-mathml').forEach(e => e.remove());
        return article.textContent;
    }""")
    assert re.findall(r".{0,30}(?:\$\$|\\\[|\\\]|\\\(|\\\)).{0,30}", prose) == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_image_loads_and_has_alt_text(visits, lang):
    page = visits(lang, "chapter").page
    images = page.evaluate("""async () => {
        const images = [...document.querySelectorAll('article img')];
        await Promise.all(images.map(img => {
            img.loading = 'eager';                  // lazy images below the fold load too
            return img.decode().catch(() => null);
        }));
        return images.map(img => ({src: img.currentSrc || img.src, complete: img.complete,
                                   width: img.naturalWidth,
                                   alt: (img.getAttribute('alt') || '').trim()}));
    }""")
    assert images, "the chapter should have at least one figure"
    assert [i["src"] for i in images if not (i["complete"] and i["width"] > 0)] == []
    assert [i["src"] for i in images if not i["alt"]] == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_copy_button_copies_the_code_block(visits, lang):
    page = visits(lang, "chapter").page
    page.bring_to_front()  # the clipboard needs a focused page
    page.evaluate("() => navigator.clipboard.writeText('nothing copied yet')")
    button = page.locator(f"article :is({COPY_BUTTON})").first
    expected = button.evaluate("""button => {
        const code = button.closest('pre').querySelector('code').cloneNode(true);
        code.querySelectorAll('.md-annotation').forEach(e => e.remove());
        return code.textContent;
    }""")
    button.click()
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert "import numpy" in expected
    assert copied.strip() == expected.strip()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_search_finds_the_chapter(visits, base_url, lang):
    page = visits(lang, "home").page
    search = page.locator("input.md-search__input")
    if not search.is_visible():  # narrow screens: the search field opens from an icon
        page.locator('label.md-header__button[for="__search"]').click()
    search.click()
    search.fill(LANGUAGES[lang]["query"])
    search.press("End")  # Material searches on keyup, which fill() alone does not send
    results = page.locator(".md-search-result__item a")
    results.first.wait_for()
    hrefs = [urljoin(page.url, href) for href in
             results.evaluate_all("links => links.map(a => a.getAttribute('href'))")]
    chapter = base_url + LANGUAGES[lang]["chapter"]
    assert chapter in [href.split("#")[0] for href in hrefs], hrefs
    # Each language searches its own pages (hooks/search_language.py).
    english = [href.startswith(base_url + "en/") for href in hrefs]
    assert all(english) if lang == "en" else not any(english), hrefs


def test_language_switcher_keeps_the_page(new_context, base_url):
    visit = Visit(new_context(), base_url + LANGUAGES["zh"]["chapter"])
    page = visit.page
    for lang in ("en", "zh"):
        page.locator(".md-header .md-select").hover()  # the list opens on hover
        page.locator(f'.md-header .md-select a[hreflang="{lang}"]').click()
        page.wait_for_load_state("load")
        assert page.url == base_url + LANGUAGES[lang]["chapter"]
        assert page.locator("html").get_attribute("lang") == lang
    assert visit.errors == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_dark_palette_follows_the_system(new_context, base_url, lang):
    """Before any script of Material's (no interaction yet): the page is dark, and the one toggle
    shown is the one that switches to light."""
    visit = Visit(new_context(color_scheme="dark"), base_url + LANGUAGES[lang]["chapter"])
    page = visit.page
    assert page.evaluate("window.component$ === undefined")  # Material's script has not run
    assert page.locator("body").get_attribute("data-md-color-scheme") == "slate"
    toggles = page.locator("form[data-md-component=palette] label:not([hidden])")
    assert toggles.count() == 1
    assert toggles.get_attribute("for") == "__palette_0"  # to the light palette
    screenshot(page, f"scores-{lang}-dark")


#: Where every element of the page's frame and article is (document coordinates).
BOXES = """() => [...document.querySelectorAll(
        '.md-header__inner > *, article > *, article table, .md-footer *')].map(e => {
    const r = e.getBoundingClientRect();
    return [e.tagName, e.className, Math.round(r.left), Math.round(r.top + scrollY),
            Math.round(r.width), Math.round(r.height)];
})"""


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("which", ["chapter", "glossary"])
@pytest.mark.parametrize("device", ["phone", "desktop"])
def test_material_waits_for_the_reader_and_moves_nothing(new_context, base_url, lang, which,
                                                         device):
    """Until the reader's first move Material's script is not even requested, yet the page is
    complete (search box, tables in their scrolling boxes); when it arrives nothing on the page
    moves, and every table is wrapped exactly once."""
    path = {"chapter": LANGUAGES[lang]["chapter"],
            "glossary": ("en/" if lang == "en" else "") + "glossary/"}[which]
    context = new_context(**(PHONE if device == "phone" else {}))
    visit = Visit(context, base_url + path)
    page = visit.page
    page.evaluate(RECORD_SHIFTS)
    page.wait_for_timeout(300)
    requested = page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert [url for url in requested if "/javascripts/" in url] == []
    assert page.evaluate("window.component$ === undefined")
    search = ("label.md-header__button[for=__search]" if device == "phone"
              else "input.md-search__input")
    assert page.locator(search).is_visible()
    tables = page.locator("article table:not([class])").count()
    assert page.locator(".md-typeset__scrollwrap > .md-typeset__table > table").count() == tables
    if which == "glossary":
        assert tables >= 1
    before = page.evaluate(BOXES)
    shifts_before = len(page.evaluate("window.__shifts"))

    interact(page)
    page.wait_for_timeout(300)
    assert page.evaluate(BOXES) == before
    assert page.evaluate("window.__shifts")[shifts_before:] == []
    assert page.locator(".md-typeset__table .md-typeset__table").count() == 0
    assert page.locator(".md-typeset__scrollwrap > .md-typeset__table > table").count() == tables
    if which == "chapter":  # the glossary has no code
        assert page.locator(f"article :is({COPY_BUTTON})").count() > 0
    assert visit.errors == []


def test_palette_toggled_before_material_stays_toggled(new_context, base_url):
    """A click on the palette toggle that comes before Material's script switches the palette
    and stores it as Material does: Material keeps it when it arrives, and so does the next page."""
    context = new_context()
    # The click focuses the toggle's input, and focus is a first interaction: it sends for
    # Material's script. Hold that script at the network so the check below always meets the
    # page before it (without the hold, a fast machine could run it in between).
    held = []
    context.route("**/assets/javascripts/**", lambda route: held.append(route))
    visit = Visit(context, base_url + LANGUAGES["zh"]["chapter"])
    page = visit.page
    assert page.locator("body").get_attribute("data-md-color-scheme") == "default"
    page.locator("form[data-md-component=palette] label:not([hidden])").dispatch_event("click")
    assert page.evaluate("window.component$ === undefined")
    assert page.locator("body").get_attribute("data-md-color-scheme") == "slate"
    assert page.locator("form[data-md-component=palette] label:not([hidden])").get_attribute(
        "for") == "__palette_0"
    # Let Material's script through: it must keep the palette the fallback chose.
    for route in held:
        route.continue_()
    context.unroute("**/assets/javascripts/**")
    interact(page)
    page.wait_for_timeout(300)
    assert page.locator("body").get_attribute("data-md-color-scheme") == "slate"
    page.goto(base_url + LANGUAGES["zh"]["home"], wait_until="load")
    assert page.locator("body").get_attribute("data-md-color-scheme") == "slate"
    assert visit.errors == []


def test_a_shortcut_pressed_before_material_still_works(new_context, base_url):
    """The reader's first key brings Material's script and is handed to it: "s" opens search."""
    visit = Visit(new_context(), base_url + LANGUAGES["en"]["chapter"])
    page = visit.page
    assert page.evaluate("window.component$ === undefined")
    page.keyboard.press("s")
    page.wait_for_function(MATERIAL_READY)
    page.wait_for_function("() => document.getElementById('__search').checked")
    assert visit.errors == []


def test_no_request_left_the_machine(new_context, base_url):
    """Runs last: every request of every page above (and of the home page, so that it never
    checks nothing) went to the local server."""
    Visit(new_context(), base_url + LANGUAGES["zh"]["home"])
    assert any(url.startswith(base_url + "assets/") for url in REQUESTS), REQUESTS[:20]
    host = urlsplit(base_url).hostname
    foreign = sorted({url for url in REQUESTS if not url.startswith("data:")
                      and urlsplit(url.removeprefix("blob:")).hostname != host})
    assert foreign == []


class _Links(html.parser.HTMLParser):
    """Every href and src of a page, and every id it defines."""

    def __init__(self):
        super().__init__()
        self.links, self.ids, self.alternates = [], set(), {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name):
                self.links.append(attrs[name])
        if tag == "a" and attrs.get("hreflang") and "md-select__link" in (attrs.get("class") or ""):
            self.alternates[attrs["hreflang"]] = attrs["href"]


def _fetch(url: str) -> tuple[int, str]:
    request = urllib.request.Request(url)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, ""


def test_every_link_and_anchor_resolves_under_the_subpath(site):
    """The site served under its project subpath, as GitHub Pages serves it: every same-origin
    link of every page (both languages, notebooks included) answers 200, every #anchor exists on
    its target, nothing points outside the subpath, and the language switcher leads to the same
    page in the other language."""
    base_url, site_dir = site
    origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(base_url))
    assert urllib.parse.urlsplit(base_url).path != "/"  # really under a subpath
    assert _fetch(origin + "/scores/")[0] == 404        # the site lives only under it
    pages, status, broken, anchors_checked = {}, {}, [], 0

    def parsed(url: str) -> _Links:
        if url not in pages:
            code, text = _fetch(url)
            status[url] = code
            pages[url] = _Links()
            if url.endswith("/") or url.endswith(".html"):
                pages[url].feed(text)
        return pages[url]

    for path in site_pages(site_dir):
        page_url = base_url + path
        links = parsed(page_url)
        assert status[page_url] == 200, page_url
        for link in links.links:
            url = urllib.parse.urljoin(page_url, link)
            if not url.startswith(origin):
                continue  # off-origin requests are the business of another test
            target, _, anchor = url.partition("#")
            if not target.startswith(base_url):
                broken.append(f"{path}: {link} leaves the subpath")
                continue
            if target.endswith(("/search/search_index.json",)):
                continue
            if target.endswith("/") or target.endswith(".html") or anchor:
                parsed(target)
            elif target not in status:
                status[target] = _fetch(target)[0]
            if status[target] != 200:
                broken.append(f"{path}: {link} -> {status[target]}")
            elif anchor:
                anchors_checked += 1
                if anchor not in pages[target].ids:
                    broken.append(f"{path}: {link}: no #{anchor}")
        # The switcher: the same page in each language (zh at the root, en under en/).
        same = path[3:] if path.startswith("en/") else path
        for lang, href in links.alternates.items():
            expected = base_url + ("en/" if lang == "en" else "") + same
            if urllib.parse.urljoin(page_url, href) != expected:
                broken.append(f"{path}: switcher to {lang} -> {href}")
        assert set(links.alternates) == {"zh", "en"}, path
    assert broken == []
    assert len(site_pages(site_dir)) >= 36 and anchors_checked > 500, anchors_checked
