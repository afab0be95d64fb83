"""MkDocs hook: pages whose front matter says ``layout: long`` lay out their far blocks lazily.

Their article gets the class ``md-typeset--long``; extra.css then gives the article's code
blocks, display formulas, paragraphs and folded answers past its first eight blocks
``content-visibility: auto``, so a phone styles and lays out only what is near the screen. The
long chapters use it, in both languages: training (9,000 elements: laid out at once they
blocked a phone's main thread for 290-490 ms under Lighthouse), scores (9,600) and positions
(8,100, with 125 formulas; 230-450 ms of blocking time without it, 0-130 ms with it, same
machine, runs interleaved), and the chapters of 3,500-8,800 elements whose blocking time came
near Lighthouse's 200 ms when the machine was slow (inference, real heads, projections,
overview, teaching, misconceptions, long range). Short pages, the API reference and the case
board (whose lab must not move) keep the plain layout.

A page with code annotations cannot have the layout (the build stops): contained paint would
cut off an annotation's tooltip wherever it reaches past its code block's edge.

The article's class is the one Material's ``main.html`` writes; a page that asks for the long
layout and has no such article stops the build (MAINTAINERS.md).
"""

from __future__ import annotations

from mkdocs.exceptions import PluginError

#: Material's article element (material/templates/main.html), and the class added to it.
ARTICLE = 'class="md-content__inner md-typeset"'
LONG = 'class="md-content__inner md-typeset md-typeset--long"'
#: A code annotation's marker, as overrides/main.html draws it at build time.
ANNOTATION = '<aside class="md-annotation"'


def on_post_page(output: str, page, config) -> str:
    layout = page.meta.get("layout")
    if layout is None:
        return output
    if layout != "long":
        raise PluginError(f"{page.file.src_uri}: layout must be 'long' or absent, got {layout!r}")
    if ANNOTATION in output:
        raise PluginError(f"{page.file.src_uri}: layout: long and code annotations do not go "
                          f"together: content-visibility contains paint, so an annotation's "
                          f"tooltip reaching past its code block's edge would be cut off")
    if output.count(ARTICLE) != 1:
        raise PluginError(f"{page.file.src_uri}: layout: long needs one <article {ARTICLE}>, "
                          f"found {output.count(ARTICLE)} (has Material's main.html changed?)")
    return output.replace(ARTICLE, LONG, 1)
