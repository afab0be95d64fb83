"""The search hotkeys as a page's first interaction, in both languages (issue #27, part 4).

Material's script waits for the reader's first interaction (overrides/main.html). A reader who
presses one of Material's search hotkeys (``s``, ``f``, ``/``) and types at once must get a
search for exactly what was typed: the loader opens the search and focuses its field itself,
within the key's own event, so that every later key lands in the field, and Material, when it
arrives, searches for what the field holds. Each test types without a pause, as a reader does;
Chinese comes as an input method commits it (one ``insertText``, no key events) and as
Playwright types it character by character.

Reuses the session's one build and tests/test_browser.py's browser and fixtures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urljoin

import pytest
from test_browser import (  # noqa: F401  (fixtures, used by name)
    LANGUAGES,
    MATERIAL_READY,
    PHONE,
    Visit,
    base_url,
    browser,
    new_context,
    site,
)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
#: Material's search hotkeys (its components/search/_/index.ts, the global keyboard handler).
HOTKEYS = ["s", "f", "/"]
#: How the query reaches the page after the hotkey: key by key, or all at once as an input
#: method commits Chinese (Input.insertText: an input event, no key events).
TYPINGS = {"zh": ["insert_text", "type"], "en": ["type"]}
CASES = [(lang, key, typing) for lang in LANGUAGES for key in HOTKEYS for typing in TYPINGS[lang]]
#: The search field and the search's toggle (a checkbox; checked: the search is open).
QUERY = "input.md-search__input[data-md-component=search-query]"
SEARCH_OPEN = "() => document.getElementById('__search').checked"
#: The search's results (Material writes each result's link into the list).
RESULTS = ".md-search-result__item a"
#: Material's scripts (its bundle and the search worker).
SCRIPTS = "**/assets/javascripts/**"


def hold_scripts(context):
    """Hold Material's scripts at the network until the returned function lets them through: a
    reader who types faster than they arrive (a slow network, a phone's CPU), every time."""
    held = []
    context.route(SCRIPTS, lambda route: held.append(route))

    def release():
        while held:
            held.pop(0).continue_()
        context.unroute(SCRIPTS)  # lets through any request that came meanwhile

    return release


def first_key_then_type(page, key: str, text: str, typing: str) -> None:
    """The reader's first interaction: ``key``, then ``text`` at once, with no pause."""
    assert page.evaluate("window.component$ === undefined")  # nothing has loaded Material yet
    page.keyboard.press(key)
    if typing == "insert_text":
        page.keyboard.insert_text(text)
    else:
        page.keyboard.type(text)


def assert_searched_for(page, base_url: str, lang: str, query: str) -> None:
    """Material has run, the search is open with ``query`` in its field (focused), and the
    results are that query's: the chapter (whose search word it is) among them, each in the
    page's language, and the query's words marked in them."""
    page.wait_for_function(MATERIAL_READY)
    page.wait_for_function(SEARCH_OPEN)
    field = page.locator(QUERY)
    assert field.input_value() == query
    assert field.evaluate("input => input === document.activeElement")
    page.locator(RESULTS).first.wait_for()
    hrefs = [urljoin(page.url, href) for href in
             page.locator(RESULTS).evaluate_all("links => links.map(a => a.getAttribute('href'))")]
    chapter = base_url + LANGUAGES[lang]["chapter"]
    assert chapter in [href.split("#")[0] for href in hrefs], hrefs
    english = [href.startswith(base_url + "en/") for href in hrefs]
    assert all(english) if lang == "en" else not any(english), hrefs
    marked = {text.lower() for text in page.locator(".md-search-result mark").all_inner_texts()}
    assert query in marked, marked
    assert field.input_value() == query  # nothing typed into it since


@pytest.mark.parametrize(("lang", "key", "typing"), CASES)
def test_hotkey_then_typing_before_material_arrives(new_context, base_url, lang, key, typing):
    """Everything typed before Material's script has arrived is in the search."""
    query = LANGUAGES[lang]["query"]
    context = new_context()
    release = hold_scripts(context)
    visit = Visit(context, base_url + LANGUAGES[lang]["chapter"])
    first_key_then_type(visit.page, key, query, typing)
    release()
    assert_searched_for(visit.page, base_url, lang, query)
    assert visit.errors == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_hotkey_then_typing_at_once_searches_for_what_was_typed(new_context, base_url, lang):
    """Nothing held: Material's script arrives while the reader is still typing, or after."""
    query = LANGUAGES[lang]["query"]
    visit = Visit(new_context(), base_url + LANGUAGES[lang]["chapter"])
    first_key_then_type(visit.page, "s", query, "type")
    assert_searched_for(visit.page, base_url, lang, query)
    assert visit.errors == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_hotkey_on_a_phone_with_a_keyboard(new_context, base_url, lang):
    """On a narrow screen the field is in the search dialog, hidden until the search opens:
    the hotkey opens it and the typing lands in it all the same."""
    query = LANGUAGES[lang]["query"]
    context = new_context(**PHONE)
    release = hold_scripts(context)
    visit = Visit(context, base_url + LANGUAGES[lang]["home"])
    first_key_then_type(visit.page, "/", query, "insert_text" if lang == "zh" else "type")
    release()
    assert_searched_for(visit.page, base_url, lang, query)
    assert visit.errors == []


def test_hotkey_while_material_is_on_its_way(new_context, base_url):
    """A pointer move came first and Material's script is on its way (held at the network)
    when the reader presses the hotkey and types: the search still gets all of it."""
    query = LANGUAGES["en"]["query"]
    context = new_context()
    release = hold_scripts(context)
    visit = Visit(context, base_url + LANGUAGES["en"]["chapter"])
    page = visit.page
    page.mouse.move(200, 300)
    page.wait_for_function(
        "() => document.querySelector('script[src*=\"/javascripts/bundle.\"]:not([data-md-lazy])')")
    first_key_then_type(page, "s", query, "type")
    release()
    assert_searched_for(page, base_url, "en", query)
    assert visit.errors == []


def test_hotkey_typed_into_a_field_stays_there(new_context, base_url):
    """In a field the hotkeys are keys like any other: typed into the search field, focused
    before Material's script (the focus brings it), "s" is part of the query, not a hotkey."""
    visit = Visit(new_context(), base_url + LANGUAGES["en"]["chapter"])
    page = visit.page
    page.locator(QUERY).focus()
    page.keyboard.type("softmax")
    page.wait_for_function(MATERIAL_READY)
    assert page.locator(QUERY).input_value() == "softmax"
    assert visit.errors == []


@pytest.mark.parametrize("first", ["Tab", "n"])
def test_other_first_keys_are_not_taken_for_the_search(new_context, base_url, first):
    """Any other first key leaves the search closed: Tab moves the focus as ever, and "n" (next
    page, Material's) is handed to Material."""
    visit = Visit(new_context(), base_url + LANGUAGES["en"]["chapter"])
    page = visit.page
    following = urljoin(page.url, page.locator("link[rel=next]").get_attribute("href"))
    page.keyboard.press(first)
    if first == "n":
        page.wait_for_url(following)
    else:
        page.wait_for_function(MATERIAL_READY)
        assert page.evaluate("document.activeElement !== document.body")  # Tab moved the focus
        assert not page.evaluate(SEARCH_OPEN)
        assert page.locator(QUERY).input_value() == ""
    assert visit.errors == []


def test_annotated_page_searches_for_what_was_typed(new_context, base_url):
    """Pages with code annotations wait for the reader too (#31): the loader's hotkey there."""
    visit = Visit(new_context(), base_url + "en/python/")
    page = visit.page
    assert page.evaluate("window.component$ === undefined")
    page.keyboard.press("/")
    page.keyboard.type("scaling")
    assert_searched_for(page, base_url, "en", "scaling")
    assert visit.errors == []


def test_the_loaders_hotkeys_are_materials():
    """The loader opens the search for Material's own hotkeys, and only those: the installed
    bundle handles exactly HOTKEYS (focus and select the query, claim the key)."""
    import material

    bundle = next((Path(material.__file__).parent / "templates" / "assets" / "javascripts")
                  .glob("bundle.*.min.js")).read_text(encoding="utf-8")
    cases = re.findall(r'((?:case"[^"]+":)+)\w+\.focus\(\),\w+\.select\(\)', bundle)
    assert len(cases) == 1, cases
    assert re.findall(r'case"([^"]+)":', cases[0]) == ["f", "s", "/"]
    main = (ROOT / "overrides" / "main.html").read_text(encoding="utf-8")
    loader = re.search(r"var hotkeys = (\[[^\]]*\])", main)
    assert loader, "overrides/main.html names Material's hotkeys in `var hotkeys = [...]`"
    assert sorted(json.loads(loader.group(1))) == sorted(HOTKEYS)
