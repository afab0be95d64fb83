"""The notebook pages (docs/<lang>/python-demo.ipynb, rendered by mkdocs-jupyter and made pages of
the bilingual site by hooks/notebooks.py), in both languages, on the session's one build.

In the built HTML (suite ``site``): the language switcher leads to the other language's
notebook, every heading has the English notebook's id (content, table of contents, skip link),
both notebooks are in sitemap.xml with the hreflang alternates a Markdown page has, and the copy
buttons speak the page's language in Material's words. In Chromium (suite ``browser``, with the
fixtures of tests/test_browser.py): the switcher keeps the page, the table of contents and the
skip link land on their headings, and on a 390 px phone the code takes the column's whole width
with the copy button off it (on a desktop too), and the button copies the cell.
"""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urljoin

import pytest
from markdown.extensions.toc import slugify

# The browser fixtures, shared with tests/test_browser.py (one Chromium per module, the session's
# build served as there).
from test_browser import PHONE, Visit, base_url, browser, new_context, site  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
#: Per language: the notebook page (its path under the site root), and a Markdown page to compare.
PAGES = {"zh": ("python-demo/", "scores/"), "en": ("en/python-demo/", "en/scores/")}
OTHER = {"zh": "en", "en": "zh"}
HEADING = re.compile(r'<h([1-6]) id="([^"]*)"[^>]*>(.*?)</h\1>', re.S)


def page_html(built_site, path: str) -> str:
    return (Path(built_site.dir) / path / "index.html").read_text(encoding="utf-8")


def article(text: str) -> str:
    return text[text.index("<article"):text.index("</article>")]


def headings(text: str) -> list[tuple[int, str, str]]:
    """(level, id, text) of every heading of the page's article."""
    return [(int(level), anchor, re.sub(r"<[^>]+>|¶", "", inner).strip())
            for level, anchor, inner in HEADING.findall(article(text))]


def toc_links(text: str) -> list[str]:
    toc = re.search(r'<nav class="md-nav md-nav--secondary".*?</nav>', text, re.S).group(0)
    return re.findall(r'<a href="([^"]*)" class="md-nav__link">', toc)


def switcher(text: str) -> dict[str, str]:
    """The header's language list: language -> link."""
    select = re.search(r'<ul class="md-select__list">.*?</ul>', text, re.S).group(0)
    return {lang: html.unescape(href) for href, lang in
            re.findall(r'<a href="([^"]*)" hreflang="([^"]*)"', select)}


# --- The built HTML ------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", PAGES)
def test_language_switcher_leads_to_the_other_languages_notebook(built_site, lang):
    for path in PAGES[lang]:  # the notebook, as the Markdown page beside it
        links = switcher(page_html(built_site, path))
        assert set(links) == {"zh", "en"}, path
        twin = PAGES[OTHER[lang]][PAGES[lang].index(path)]
        assert urljoin(built_site.url + path, links[OTHER[lang]]) == built_site.url + twin
        assert urljoin(built_site.url + path, links[lang]) == built_site.url + path


def test_notebook_headings_have_the_english_ids_everywhere_on_the_page(built_site):
    pages = {lang: page_html(built_site, PAGES[lang][0]) for lang in PAGES}
    found = {lang: headings(text) for lang, text in pages.items()}
    assert len(found["en"]) >= 5
    # The same ids in both languages, level by level: the English headings' slugs.
    assert [(level, anchor) for level, anchor, _ in found["zh"]] == \
        [(level, anchor) for level, anchor, _ in found["en"]]
    for level, anchor, text in found["en"]:
        assert anchor == slugify(text, "-"), text
    assert re.search(r"[\u4e00-\u9fff]", found["zh"][1][2])  # the Chinese page kept its words
    for lang, text in pages.items():
        ids = [anchor for _, anchor, _ in found[lang]]
        assert all(ids) and len(set(ids)) == len(ids), lang
        # Each heading's own ¶ link, the table of contents and the skip link point at them.
        assert re.findall(r'<a class="anchor-link" href="#([^"]*)"', text) == ids, lang
        assert toc_links(text) == [f"#{anchor}" for level, anchor, _ in found[lang] if level > 1]
        skip = re.search(r'<a href="#([^"]*)" class="md-skip">', text).group(1)
        assert skip == ids[0], lang


def sitemap(built_site) -> dict[str, dict[str, str]]:
    """sitemap.xml: each page's address -> its hreflang alternates (language -> address)."""
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9", "x": "http://www.w3.org/1999/xhtml"}
    root = ET.parse(Path(built_site.dir) / "sitemap.xml").getroot()
    return {url.find("s:loc", ns).text: {link.get("hreflang"): link.get("href")
                                         for link in url.findall("x:link", ns)}
            for url in root.findall("s:url", ns)}


def test_notebooks_are_in_the_sitemap_with_hreflang_alternates_like_every_page(built_site):
    entries = sitemap(built_site)
    for lang, (notebook, markdown) in PAGES.items():
        for path in (notebook, markdown):
            address = built_site.url + path
            assert address in entries, path
            twin = PAGES[OTHER[lang]][PAGES[lang].index(path)]
            assert entries[address] == {lang: address, OTHER[lang]: built_site.url + twin}, path


@pytest.mark.parametrize("lang", PAGES)
def test_notebook_copy_buttons_speak_the_pages_language_in_materials_words(built_site, lang):
    text = page_html(built_site, PAGES[lang][0])
    # Material's own words for its copy buttons, from the page's configuration.
    config = json.loads(re.search(r'<script id="__config" type="application/json">(.*?)</script>',
                                  text, re.S).group(1))
    copy, copied = (config["translations"][key] for key in ("clipboard.copy", "clipboard.copied"))
    buttons = re.findall(r"<clipboard-copy[^>]*>", text)
    assert len(buttons) >= 6
    for button in buttons:
        assert f'aria-label="{copy}"' in button and f'title="{copy}"' in button, button
    notices = re.findall(r'<span class="notice" hidden[^>]*>([^<]*)</span>', text)
    assert notices == [copied] * len(buttons)
    if lang == "zh":
        assert "Copy to" not in article(text) and "Copied" not in article(text)


def test_hook_fails_the_build_when_the_notebooks_headings_differ(monkeypatch, tmp_path):
    """hooks/notebooks.py takes a notebook's anchors from the English one by position: headings
    that no longer correspond fail the build instead of pointing at the wrong place."""
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.toc import get_toc

    from test_site import import_hook

    notebooks = import_hook("notebooks")
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "x.ipynb").write_text("{}", encoding="utf-8")
    english = ((1, "title"), (2, "first"), (2, "second"))
    monkeypatch.setattr(notebooks, "_heading_tokens", lambda *args: english)
    class Config(dict):  # what the hook reads of MkDocs' configuration
        plugins = {"mkdocs-jupyter": SimpleNamespace(config={"toc_depth": 6})}

    config = Config(docs_dir=str(tmp_path))

    def page(levels):
        tokens = [{"level": level, "id": f"_{i}", "name": "标题", "children": []}
                  for i, level in enumerate(levels)]
        content = "".join(f'<h{level} id="">标题<a class="anchor-link" href="#">¶</a></h{level}>'
                          for level in levels)
        file = SimpleNamespace(src_uri="zh/x.ipynb", norm_src_uri="x.ipynb")
        return content, SimpleNamespace(file=file, toc=get_toc(tokens))

    content, right = page([1, 2, 2])
    out = notebooks._anchor_headings(content, right, config)
    assert re.findall(r'id="([^"]*)"', out) == ["title", "first", "second"]
    assert re.findall(r'href="#([^"]*)"', out) == ["title", "first", "second"]
    assert [link.id for link in right.toc] == ["title", "first", "second"]
    for levels in ([1, 2], [1, 2, 3], [1, 2, 2, 2]):
        content, wrong = page(levels)
        with pytest.raises(PluginError, match="keep the two notebooks' headings in step"):
            notebooks._anchor_headings(content, wrong, config)


# --- In Chromium ---------------------------------------------------------------------------------

@pytest.mark.browser
@pytest.mark.parametrize("lang", PAGES)
def test_switcher_keeps_the_notebook_page(new_context, base_url, lang):
    visit = Visit(new_context(), base_url + PAGES[lang][0])
    page = visit.page
    for target in (OTHER[lang], lang):
        page.locator(".md-header .md-select").hover()  # the list opens on hover
        page.locator(f'.md-header .md-select a[hreflang="{target}"]').click()
        page.wait_for_load_state("load")
        assert page.url == base_url + PAGES[target][0]
        assert page.locator("html").get_attribute("lang") == target
    assert visit.errors == []


@pytest.mark.browser
@pytest.mark.parametrize("lang", PAGES)
def test_table_of_contents_and_skip_link_land_on_their_headings(new_context, base_url, lang):
    visit = Visit(new_context(viewport={"width": 1280, "height": 800}), base_url + PAGES[lang][0])
    page = visit.page
    links = page.locator(".md-sidebar--secondary nav.md-nav--secondary a.md-nav__link")
    assert links.count() >= 5
    for i in range(links.count()):
        link = links.nth(i)
        target = link.get_attribute("href")[1:]
        assert target and page.locator(f"article h2[id='{target}']").count() == 1, target
    middle = links.nth(2)
    target = middle.get_attribute("href")[1:]
    middle.click()
    page.wait_for_function(f"() => location.hash === '#{target}'")
    top = page.locator(f"[id='{target}']").evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top < 200  # the heading came to the top of the window
    # The skip link: the first Tab of the page, then Enter, reaches the title.
    page.goto(base_url + PAGES[lang][0])
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('md-skip')")
    page.keyboard.press("Enter")
    page.wait_for_function("() => location.hash.length > 1")
    heading = page.evaluate("document.getElementById(location.hash.slice(1))?.tagName")
    assert heading == "H1"
    assert visit.errors == []


#: Per code cell: the box its code scrolls in, the copy button; and a paragraph of the page.
CELL_BOXES = """() => [...document.querySelectorAll('.jp-CodeCell > .jp-Cell-inputWrapper')].map(
    cell => {
        const box = e => { const r = e.getBoundingClientRect();
                           return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
        const code = cell.querySelector('.highlight-ipynb');
        const prose = document.querySelector('article .jp-MarkdownOutput > p');
        return {code: box(code), prose: box(prose),
                button: box(cell.querySelector('clipboard-copy')),
                scrolls: code.scrollWidth <= code.clientWidth ||
                         getComputedStyle(code).overflowX === 'auto'};
    })"""


def overlaps(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and \
        a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.browser
@pytest.mark.parametrize("lang", PAGES)
@pytest.mark.parametrize("device", ["phone", "desktop"])
def test_notebook_code_takes_the_width_and_the_copy_button_stays_off_it(new_context, base_url,
                                                                       lang, device):
    context = new_context(**(PHONE if device == "phone" else
                             {"viewport": {"width": 1280, "height": 800}}))
    visit = Visit(context, base_url + PAGES[lang][0])
    page = visit.page
    cells = page.evaluate(CELL_BOXES)
    assert len(cells) >= 6
    width = page.evaluate("document.documentElement.clientWidth")
    for i, cell in enumerate(cells):
        assert cell["scrolls"], i
        assert not overlaps(cell["button"], cell["code"]), (i, cell)
        assert cell["button"]["left"] >= 0 and cell["button"]["right"] <= width, (i, cell)
        if device == "phone":  # edge to edge, as the site's other code blocks
            assert cell["code"]["left"] <= 0.5 and cell["code"]["right"] >= width - 0.5, (i, cell)
        else:  # the text's width, less the prompt's gutter ("In [n]:")
            assert cell["code"]["right"] >= cell["prose"]["right"] - 1, (i, cell)
            assert cell["code"]["left"] - cell["prose"]["left"] <= 100, (i, cell)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert visit.errors == []


@pytest.mark.browser
@pytest.mark.parametrize("lang", PAGES)
def test_notebook_copy_button_copies_the_cell(new_context, base_url, lang):
    context = new_context(permissions=["clipboard-read", "clipboard-write"], **PHONE)
    visit = Visit(context, base_url + PAGES[lang][0])
    page = visit.page
    page.bring_to_front()
    page.evaluate("() => navigator.clipboard.writeText('nothing copied yet')")
    button = page.locator("article clipboard-copy").nth(1)
    expected = button.evaluate(
        "b => document.getElementById(b.getAttribute('for')).textContent")
    button.click()
    assert page.evaluate("() => navigator.clipboard.readText()").strip() == expected.strip()
    assert "tokens" in expected
    assert button.locator(".notice").text_content() == {"zh": "已复制",
                                                        "en": "Copied to clipboard"}[lang]
    assert visit.errors == []
