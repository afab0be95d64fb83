"""MkDocs hook: two repairs to the HTML mkdocstrings writes for the API reference.

1. **Types written as numpydoc writes them.** mha's docstrings give a parameter's type the
   numpydoc way, code in double backticks (``q : ndarray of shape ``(..., n_q, d_k)````), which
   ``help()`` and NumPy's own renderer show as code. mkdocstrings puts the whole type in one
   ``<code>`` cell without reading that markup, so the page showed the backticks literally. Inside
   a type cell the text is already code: the backticks are dropped (`plain_types`). The
   docstrings stay standard numpydoc.
2. **One id per line anchor.** pymdownx.highlight numbers the line anchors of a page's code
   blocks (``anchor_linenums``) as ``__codelineno-<block>-<line>``, counting blocks per Markdown
   conversion. mkdocstrings converts each docstring on its own, so every example on the API page
   was block 0, and the page repeated ids such as ``__codelineno-0-1`` (a link to a line went to
   the first example; an HTML validator fails the page). The blocks are numbered again in page
   order (`unique_line_anchors`).

Both apply to any page that has either pattern, so the API reference split over several pages
keeps them; on other pages nothing matches.
"""

from __future__ import annotations

import re

#: A type cell: mkdocstrings' ``<code>`` in the second column of a parameters/returns table.
TYPE_CODE = re.compile(r"(<td>\s*<code>)(.*?)(</code>\s*</td>)", re.S)
DOUBLE_BACKTICKS = re.compile(r"``(.+?)``")
#: One code block as pymdownx.highlight writes it (the anchors of its lines are inside).
CODE_BLOCK = re.compile(r"<code[ >].*?</code>", re.S)
LINE_ANCHOR = re.compile(r"__codelineno-\d+-(\d+)")


def plain_types(page_html: str) -> str:
    """The page with ``double backticks`` removed inside type cells (already code)."""
    return TYPE_CODE.sub(lambda m: m.group(1) + DOUBLE_BACKTICKS.sub(r"\1", m.group(2))
                         + m.group(3), page_html)


def unique_line_anchors(page_html: str) -> str:
    """The page with each code block's line anchors numbered by the block's place on the page:
    ``__codelineno-<k>-<line>`` for the k-th block (from 0) that has line anchors."""
    count = 0

    def renumber(match: re.Match) -> str:
        nonlocal count
        block = match.group(0)
        if "__codelineno-" not in block:
            return block
        k, count = count, count + 1
        return LINE_ANCHOR.sub(lambda m: f"__codelineno-{k}-{m.group(1)}", block)

    return CODE_BLOCK.sub(renumber, page_html)


def on_page_content(html_text, page, config, files):
    if "``" in html_text:
        html_text = plain_types(html_text)
    if "__codelineno-" in html_text:
        html_text = unique_line_anchors(html_text)
    return html_text
