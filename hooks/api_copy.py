"""MkDocs hook: a console example (a ``pycon`` block) copies as code that runs.

mkdocstrings renders the Examples section of each of mha's docstrings as a ``pycon`` block:
prompts (``>>>``, ``...``) and the output that doctest compares. Material's copy button copies
the code's text, so an example pasted into a file kept its prompts and output lines and did not
run. Material copies the value of a ``data-copy`` attribute instead when the code element or an
element around it has one (``extract`` in its clipboard integration: added in 9.4.4, then taken
out of its documentation, squidfunk/mkdocs-material#6086; see MAINTAINERS.md). Each pycon block
gets one here, at build time: the example's source lines without prompts, read by doctest's own
parser, so the reader copies exactly the code the doctests run. The page still shows prompts and
output, and the docstrings in mha/ stay doctests.

griffe shows a docstring's ``<BLANKLINE>`` as the empty line it stands for (NumPy prints one
between the matrices of a 3-D array). That line is marked as output, like the lines around it,
and like them it is not copied.
"""

from __future__ import annotations

import doctest
import html
import re

#: A pycon block as pymdownx.highlight writes it: the code element's opening tag, its lines.
BLOCK = re.compile(r'(<div class="language-pycon highlight"[^>]*>(?:(?!</div>).)*?<code)'
                   r"([^>]*>)(.*?)(</code>)", re.S)
TAG = re.compile(r"<[^>]+>")


def text_of(code_html: str) -> str:
    """The text a code element's HTML shows (tags dropped, entities decoded)."""
    return html.unescape(TAG.sub("", code_html))


def copy_text(example: str, where: str = "a pycon block") -> str:
    """The code of a console example: each example's source, without prompts or output, as
    doctest reads it (a ``...`` line continues the statement above it)."""
    try:
        examples = doctest.DocTestParser().get_examples(example, where)
    except ValueError as error:  # a prompt without its space, a badly indented continuation
        raise ValueError(f"{where}: not a console example doctest can read: {error}") from None
    if not examples:
        raise ValueError(f"{where}: a pycon block without a single >>> prompt")
    return "".join(e.source for e in examples)


def mark_blank_output(code_html: str) -> str:
    """Each empty line of a pycon block (a ``<BLANKLINE>``: griffe ends an example at any other
    blank line) becomes an empty output line (Pygments' class ``go``)."""
    lines = code_html.split("\n")
    for i, line in enumerate(lines[:-1]):  # the last piece follows the final newline
        if not text_of(line).strip():
            lines[i] = line + '<span class="go"></span>'
    return "\n".join(lines)


def with_copy_text(page_html: str, where: str = "a page") -> str:
    """The page with a ``data-copy`` attribute (the example's code) on each pycon block."""

    def rewrite(match: re.Match) -> str:
        opening, rest_of_tag, code_html, closing = match.groups()
        code = copy_text(text_of(code_html), where)
        attribute = html.escape(code.rstrip("\n"), quote=True).replace("\n", "&#10;")
        return (f'{opening} data-copy="{attribute}"{rest_of_tag}'
                f"{mark_blank_output(code_html)}{closing}")

    return BLOCK.sub(rewrite, page_html)


def on_page_content(html_text, page, config, files):
    if 'class="language-pycon highlight"' not in html_text:
        return html_text
    return with_copy_text(html_text, page.file.src_uri)
