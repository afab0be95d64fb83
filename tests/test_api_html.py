"""The API reference's HTML: numpydoc types without literal backticks, one id per line anchor
(hooks/api_html.py; issue #31's two rendering defects)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from helpers import load_file

ROOT = Path(__file__).resolve().parents[1]
#: The API reference's folder in each language: its index and a page per part.
FOLDERS = {"zh": "api", "en": "en/api"}
api_html = load_file(ROOT / "hooks" / "api_html.py", "api_html_hook")
ID = re.compile(r'\bid="([^"]+)"')


def test_a_type_cell_loses_its_backticks_and_nothing_else_does():
    cell = ('<td>\n  <code>ndarray of shape ``(..., n_k, d_k)``</code>\n</td>'
            '<td><div><p>Keys, as <code>``k``</code> in prose.</p></div></td>')
    out = api_html.plain_types(cell)
    assert "<code>ndarray of shape (..., n_k, d_k)</code>" in out
    assert "<p>Keys, as <code>``k``</code> in prose.</p>" in out  # not a type cell: untouched


def test_line_anchors_are_numbered_by_block_in_page_order():
    block = ('<pre><code><a id="__codelineno-0-1" name="__codelineno-0-1" '
             'href="#__codelineno-0-1"></a>x = 1\n<a id="__codelineno-0-2"></a>y</code></pre>')
    page = block + "<p><code>inline</code></p>" + block + block
    out = api_html.unique_line_anchors(page)
    ids = ID.findall(out)
    assert ids == ["__codelineno-0-1", "__codelineno-0-2", "__codelineno-1-1", "__codelineno-1-2",
                   "__codelineno-2-1", "__codelineno-2-2"]
    assert 'href="#__codelineno-1-1"' in out and "<code>inline</code>" in out


@pytest.mark.parametrize("lang", FOLDERS)
def test_the_built_api_pages_show_no_backticks_in_a_type_and_repeat_no_id(built_site, lang):
    """On every page of the reference (the index and each part), as on the one page it was."""
    pages = sorted((built_site.dir / FOLDERS[lang]).glob("**/index.html"))
    assert len(pages) >= 8, pages
    types = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        types += [m.group(2) for m in api_html.TYPE_CODE.finditer(text)]
        repeated = [i for i, n in Counter(ID.findall(text)).items() if n > 1]
        assert not repeated, (page, repeated[:5])
    assert len(types) > 50, "the API pages' parameter tables were not found"
    assert not [t for t in types if "``" in t], [t for t in types if "``" in t][:3]
    assert any("of shape (..., n_k, d_k)" in t for t in types)


@pytest.mark.parametrize("page", ["scores/index.html", "en/training/index.html"])
def test_no_page_repeats_an_id(built_site, page):
    text = (built_site.dir / page).read_text(encoding="utf-8")
    repeated = [i for i, n in Counter(ID.findall(text)).items() if n > 1]
    assert not repeated, repeated[:5]
