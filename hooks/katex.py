"""MkDocs hook: typeset every formula at build time with the vendored KaTeX.

pymdownx.arithmatex (generic) leaves ``<span class="arithmatex">\\( … \\)</span>`` and
``<div class="arithmatex">\\[ … \\]</div>`` in the page. This hook runs the site's own
``docs/assets/katex/katex.min.js`` in an embedded JavaScript engine (QuickJS, from PyPI: no
Node) and replaces each one with KaTeX's HTML, marked ``data-katex="done"``. Readers' browsers
then only need KaTeX's CSS and fonts: no 270 KB script, no maths painted twice, no layout shift.
A formula KaTeX cannot parse fails the build, naming the page and the formula.

Typeset formulas are kept, in memory for the life of the process (``mkdocs serve`` keeps this
module across rebuilds) and in ``.cache/katex/`` keyed on the hash of ``katex.min.js``, so a
rebuild only runs KaTeX on formulas it has not seen.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.utils import get_relative_url

ROOT = Path(__file__).resolve().parents[1]
KATEX = ROOT / "docs" / "assets" / "katex" / "katex.min.js"
ELEMENT = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
DELIMITERS = {"span": (r"\(", r"\)", False), "div": (r"\[", r"\]", True)}
CACHE_DIR = ROOT / ".cache" / "katex"
_context = None
_cache: dict[str, str] | None = None  # "d" or "i" + TeX source -> KaTeX's HTML
_cache_size_on_disk = 0


def _cache_file() -> Path:
    return CACHE_DIR / (hashlib.sha256(KATEX.read_bytes()).hexdigest()[:16] + ".json")


def _load_cache() -> dict[str, str]:
    global _cache, _cache_size_on_disk
    if _cache is None:
        try:
            _cache = json.loads(_cache_file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            _cache = {}
        _cache_size_on_disk = len(_cache)
    return _cache


def _katex():
    global _context
    if _context is None:
        import quickjs

        _context = quickjs.Context()
        _context.eval(KATEX.read_text(encoding="utf-8"))
    return _context


def render(tex: str, display: bool) -> str:
    """KaTeX's HTML for ``tex``; raises ``PluginError`` with KaTeX's message on bad TeX."""
    cache = _load_cache()
    key = ("d" if display else "i") + tex
    if key not in cache:
        cache[key] = _render(tex, display)
    return cache[key]


def _render(tex: str, display: bool) -> str:
    call = (f"katex.renderToString({json.dumps(tex)}, "
            f"{{displayMode: {'true' if display else 'false'}, throwOnError: true}})")
    try:
        return _katex().eval(call)
    except Exception as error:  # quickjs.JSException carries KaTeX's ParseError message
        raise PluginError(f"KaTeX cannot typeset {tex!r}: {error}") from None


def typeset(page_html: str, where: str = "") -> str:
    def replace(match):
        tag, source = match.group(1), html.unescape(match.group(2)).strip()
        left, right, display = DELIMITERS[tag]
        control = CONTROL.search(source)
        if control:  # KaTeX would quietly typeset "\times" written as a tab + "imes"
            raise PluginError(f"{where}: maths with the control character "
                              f"{control.group(0)!r} (a backslash lost to a string escape, such "
                              f"as \\t in \\times?): {source!r}")
        if not (source.startswith(left) and source.endswith(right)):
            raise PluginError(f"{where}: maths without {left} {right} delimiters: {source!r}")
        try:
            rendered = render(source[len(left):-len(right)], display)
        except PluginError as error:
            raise PluginError(f"{where}: {error}") from None
        return f'<{tag} class="arithmatex" data-katex="done">{rendered}</{tag}>'

    return ELEMENT.sub(replace, page_html)


#: KaTeX's two workhorse fonts and the class that shows a page uses each (Main: every formula).
PRELOAD = {"KaTeX_Main-Regular.woff2": 'class="katex"', "KaTeX_Math-Italic.woff2": "mathnormal"}


def on_post_page(output, page, config):
    # After the search plugin has read the page: it indexes the TeX source (short, searchable)
    # instead of KaTeX's markup (a dozen elements per symbol, and most of a rebuild's time).
    output = typeset(output, page.file.src_uri)
    # Fetch the fonts the formulas need together with the stylesheets, instead of after the
    # first layout has found them: a formula in the opening paragraph otherwise holds back the
    # page's first full paint (Lighthouse's LCP) by a network round trip on a phone.
    links = "".join(
        f'<link rel="preload" href="{get_relative_url(f"assets/katex/fonts/{name}", page.url)}"'
        f' as="font" type="font/woff2" crossorigin>'
        for name, used in PRELOAD.items() if used in output)
    return output.replace("</head>", links + "</head>", 1) if links else output


def on_post_build(config):
    """Save the formulas typeset for the first time (bad TeX never reaches the cache)."""
    global _cache_size_on_disk
    if _cache is not None and len(_cache) != _cache_size_on_disk:
        path = _cache_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_cache, ensure_ascii=False), encoding="utf-8")
        _cache_size_on_disk = len(_cache)
