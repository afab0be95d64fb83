"""The frame around the pages, in both languages: the footer's licence link, the 404 page, the
stylesheets each page links, the logo and favicon, the local address on the install pages.

The build is the session's one (``built_site``, tests/conftest.py). The 404 page is checked in a
real browser (tests/test_browser.py's fixtures), served as GitHub Pages serves it: every missing
path, at any depth and in either language, answers with the site's one ``404.html`` (status 404,
``scripts/serve_site.py``). Under ``…/en/`` it must read in English, anywhere else in Chinese,
and every link on it must work.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from test_browser import PHONE, Visit, base_url, browser, new_context, site  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
LICENCE_TEXT = {"zh": "许可与第三方声明", "en": "Licence and third-party notices"}
#: The path of Material's magnifier (its search icon, and the logo this site had before).
MAGNIFIER = "M9.5 3A6.5 6.5 0 0 1 16 9.5"


def built_pages(site_dir: Path) -> list[Path]:
    """Every page of the build (the 404 page aside), as its index.html."""
    return sorted(p for p in site_dir.rglob("index.html") if "assets" not in p.parts)


def language_of(site_dir: Path, page: Path) -> str:
    return "en" if page.relative_to(site_dir).parts[0] == "en" else "zh"


def site_path(site_dir: Path, page: Path) -> str:
    """The page's address under the site root: "" for the home page, "en/scores/", …"""
    relative = page.parent.relative_to(site_dir).as_posix()
    return "" if relative == "." else relative + "/"


def resolve(site_dir: Path, page: Path, href: str) -> str:
    """A page's relative link as a path under the site root."""
    base = "http://site/" + site_path(site_dir, page)
    return urlsplit(urljoin(base, href)).path.lstrip("/")


# ---- the built pages ---------------------------------------------------------------------------


def test_footer_links_to_the_licence_page_in_the_pages_language(built_site):
    """The English footer opened the Chinese licence page (the partial ignored the language)."""
    site_dir = built_site.dir
    pages = built_pages(site_dir)
    assert len(pages) > 20
    for page in pages:
        lang = language_of(site_dir, page)
        html = page.read_text(encoding="utf-8")
        footer = re.search(r'<div class="md-copyright">(.*?)</div>\s*</div>', html, re.S).group(1)
        links = re.findall(r'<a href="([^"]+)">([^<]*)</a>', footer)
        assert [text.strip() for _, text in links] == [LICENCE_TEXT[lang]], page
        expected = "en/license/" if lang == "en" else "license/"
        assert resolve(site_dir, page, links[0][0]) == expected, page


def test_each_stylesheet_is_linked_once(built_site):
    """mkdocstrings adds its stylesheet in on_config, which runs once per language's build; the
    English pages and the 404 page linked it twice (overrides/main.html, block styles)."""
    site_dir = built_site.dir
    for page in built_pages(site_dir) + [site_dir / "404.html"]:
        html = page.read_text(encoding="utf-8")
        sheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', html)
        assert len(sheets) == len(set(sheets)), (page, sheets)
        assert sum(sheet.endswith("assets/_mkdocstrings.css") for sheet in sheets) == 1, page


def test_logo_and_favicon_are_our_own_mark(built_site):
    """The header's logo was Material's magnifier, the same icon as the search button."""
    site_dir = built_site.dir
    logo = site_dir / "assets" / "images" / "logo.svg"
    svg = ET.fromstring(logo.read_bytes())
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and svg.get("viewBox") == "0 0 32 32"
    text = logo.read_text(encoding="utf-8")
    assert len(text) < 4000
    # Flat and self-contained: no script, no image, link, font or style sheet to fetch.
    assert not re.search(r"<(script|image|use|style|foreignObject)\b|href=|url\(|@import", text)
    for page in built_pages(site_dir) + [site_dir / "404.html"]:
        html = page.read_text(encoding="utf-8")
        header = re.search(r'<header class="md-header.*?</header>', html, re.S).group(0)
        logo_img = re.search(r'class="md-header__button md-logo".*?<img src="([^"]+)"', header,
                             re.S)
        assert logo_img, page
        icon = re.search(r'<link rel="icon" href="([^"]+)"', html).group(1)
        for src in (logo_img.group(1), icon):
            path = urlsplit(src).path if page.name == "404.html" else resolve(site_dir, page, src)
            assert path.endswith("assets/images/logo.svg"), (page, src)
        # The magnifier stays the search button's icon only.
        assert MAGNIFIER not in header.split('class="md-search"')[0].split("md-header__title")[0]


def test_install_pages_link_the_local_address_alike(built_site):
    """Only the Chinese install page made http://127.0.0.1:8000 a link."""
    for lang in ("zh", "en"):
        page = built_site.dir / ("en" if lang == "en" else "") / "install" / "index.html"
        html = page.read_text(encoding="utf-8")
        assert '<a href="http://127.0.0.1:8000">http://127.0.0.1:8000</a>' in html, lang


def test_the_404_page_is_the_chinese_builds_and_links_from_the_site_root(built_site):
    """Each language's build writes 404.html; only the default (Chinese) one renders it, so the
    file is the Chinese page (with the English message beside it) whichever build ran last, and
    its links are absolute from site_url's path, right at any depth of a missing path."""
    html = (built_site.dir / "404.html").read_text(encoding="utf-8")
    assert re.search(r'<html lang="zh"', html)
    assert "<title>找不到这一页 - 注意力侦探团</title>" in html
    assert html.count('class="md-404"') == 2
    root = urlsplit(built_site.url).path
    for href in re.findall(r'<a href="([^"#]+)"', html):
        assert href.startswith(root) or href.startswith("http://127.0.0.1:8000"), href


# ---- the 404 page in a browser -----------------------------------------------------------------

#: Missing paths under the site root, at several depths, and the language each must read in.
MISSING = {
    "no-such-page/": "zh",
    "scores/no/such/page.html": "zh",
    "en/no-such-page/": "en",
    "en/scores/deep/er/missing": "en",
}
HEADING = {"zh": "404：找不到这一页", "en": "404: Page not found"}
#: The text and attributes (aria-label, title, placeholder) of every element a reader or a
#: screen reader meets, outside the message the page hides and the lines and links that name the
#: other language in its own words (hreflang, lang).
VISIBLE_STRINGS = """() => {
    const hidden = e => e.closest('.md-404')
        && getComputedStyle(e.closest('.md-404')).display === 'none';
    const skip = e => hidden(e) || e.closest('[hreflang], .md-404 [lang], script, style');
    const out = [document.title];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!skip(node.parentElement) && node.nodeValue.trim()) out.push(node.nodeValue.trim());
    }
    for (const e of document.body.querySelectorAll('[aria-label], [title], [placeholder]')) {
        if (skip(e)) continue;
        for (const name of ['aria-label', 'title', 'placeholder']) {
            if (e.hasAttribute(name)) out.push(e.getAttribute(name));
        }
    }
    return out;
}"""


@pytest.mark.browser
@pytest.mark.parametrize("device", ["desktop", "phone"])
@pytest.mark.parametrize("missing", MISSING)
def test_a_missing_page_gets_the_404_page_in_its_language(new_context, base_url, built_site,
                                                         missing, device):
    lang = MISSING[missing]
    other = "zh" if lang == "en" else "en"
    home = {"zh": base_url, "en": base_url + "en/"}
    context = new_context(**(PHONE if device == "phone" else {}))
    visit = Visit(context, base_url + missing)
    page = visit.page
    assert visit.response.status == 404  # the server's answer: the site's one 404.html
    assert page.locator("html").get_attribute("lang") == lang
    assert page.locator("article h1:visible").all_inner_texts() == [HEADING[lang]]
    assert page.locator(f'.md-404[lang="{other}"]').is_hidden()

    strings = page.evaluate(VISIBLE_STRINGS)
    if lang == "en":  # the frame too: header, navigation, palette, search, footer, title
        assert [s for s in strings if CJK.search(s)] == []
        assert "Attention Detectives" in strings and LICENCE_TEXT["en"] in strings
    else:
        assert "注意力侦探团" in strings and LICENCE_TEXT["zh"] in strings

    links = page.evaluate("""() => [...document.querySelectorAll('a[href]')].map(a => ({
        href: a.href, text: a.textContent.trim(), hreflang: a.getAttribute('hreflang'),
        where: a.closest('.md-logo') ? 'logo' : a.closest('.md-copyright') ? 'licence'
             : a.closest('.md-nav') ? 'nav' : a.closest('.md-404') ? 'content' : 'other'}))""")
    by_place = {}
    for link in links:
        by_place.setdefault(link["where"], []).append(link)
    assert {link["href"] for link in by_place["logo"]} == {home[lang]}
    assert [link["href"] for link in by_place["licence"]] == [home[lang] + "license/"]
    nav = [link["href"] for link in by_place["nav"] if not link["hreflang"]]
    assert len(nav) > 10
    if lang == "en":
        assert all(href.startswith(home["en"]) for href in nav), nav
    else:
        assert not any(href.startswith(home["en"]) for href in nav), nav
    # The language selector names each language's home.
    selector = {link["hreflang"]: link["href"] for link in links if link["hreflang"]
                and link["where"] == "other"}
    assert selector == home
    # Every link of the page works (the 404 itself aside: it only links to pages that exist).
    for href in sorted({urljoin(page.url, link["href"]).split("#")[0] for link in links}):
        if href.startswith(base_url):
            assert context.request.get(href).status == 200, href

    # Material's script, once the reader moves, runs in the page's language without errors.
    page.mouse.move(200, 300)
    page.wait_for_function("() => window.component$ !== undefined")
    translations = page.evaluate("JSON.parse(document.getElementById('__config').textContent)"
                                 ".translations")
    home_page = built_site.dir / ("en" if lang == "en" else "") / "index.html"
    config = re.search(r'<script id="__config" type="application/json">(.*?)</script>',
                       home_page.read_text(encoding="utf-8")).group(1)
    assert translations == json.loads(config)["translations"]  # as on the language's own pages
    search_base = page.evaluate("new URL(JSON.parse(document.getElementById('__config')"
                                ".textContent).base, location.href).href")
    assert search_base == home[lang]  # the language's own search index (hooks/search_language.py)
    if device == "desktop":  # and search finds the chapter on scaling in the page's language
        page.locator(".md-search__input").fill({"zh": "缩放", "en": "scaling"}[lang])
        results = page.locator(".md-search-result__link")
        results.first.wait_for()
        hrefs = [urljoin(page.url, href) for href in
                 page.eval_on_selector_all(".md-search-result__link", "l => l.map(a => a.href)")]
        assert (base_url + ("en/" if lang == "en" else "") + "scores/") in {
            href.split("#")[0] for href in hrefs}
        assert all(href.startswith(home["en"]) == (lang == "en") for href in hrefs), hrefs
    assert [e for e in visit.errors if base_url + missing not in e
            and "status of 404" not in e] == []


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_footer_opens_the_licence_page_in_the_readers_language(new_context, base_url, lang):
    prefix = "en/" if lang == "en" else ""
    visit = Visit(new_context(), base_url + prefix + "scores/")
    page = visit.page
    page.locator(".md-copyright a").click()
    page.wait_for_url(base_url + prefix + "license/")
    assert page.locator("html").get_attribute("lang") == lang
