"""Root pytest configuration: lets pytest-markdown-docs see code inside Material's containers.

pytest-markdown-docs parses pages with markdown-it, which does not know Material's admonitions
(``!!!``), collapsible blocks (``???``) or content tabs (``===``): their content is indented, so
a fenced block inside one looked like an indented code block and was silently never run. This
turns each container's header into a blank line and removes its indentation from the content,
keeping every line where it was, so failures still point at the right line.
"""

from __future__ import annotations

import re

CONTAINER = re.compile(r"^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?|===\+?)(?:[ \t]|$)")


def open_containers(text: str) -> str:
    """Return ``text`` with Material container headers blanked and their bodies dedented."""
    out: list[str] = []
    stack: list[int] = []  # content indentation of each open container
    for line in text.split("\n"):
        if not line.strip():
            out.append("")
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and indent < stack[-1]:
            stack.pop()
        shift = stack[-1] if stack else 0
        header = CONTAINER.match(line)
        if header:
            stack.append(len(header.group("indent")) + 4)
            out.append("")
        else:
            out.append(line[shift:] if line[:shift].strip() == "" else line.lstrip())
    return "\n".join(out)


def pytest_markdown_docs_markdown_it():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")

    def dedent_containers(state):
        state.src = open_containers(state.src)

    md.core.ruler.after("normalize", "open_material_containers", dedent_containers)
    return md
