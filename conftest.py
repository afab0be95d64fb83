"""Root pytest configuration: every test's suite, and code inside Material's containers.

Each collected test gets exactly one of the markers ``core``, ``model``, ``site``, ``browser``
(registered in pyproject.toml), from where it lives (`SUITE_OF_PATH`); collection fails on a
test with none or two.

pytest-markdown-docs parses pages with markdown-it, which does not know Material's admonitions
(``!!!``), collapsible blocks (``???``) or content tabs (``===``): their content is indented, so
a fenced block inside one looked like an indented code block and was silently never run. This
turns each container's header into a blank line and removes its indentation from the content,
keeping every line where it was, so failures still point at the right line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


# ---- the four suites -----------------------------------------------------------------------
# Every collected test belongs to exactly one: `python3 dev.py test -m core` runs in seconds,
# `-m "not browser"` skips Chromium. A test file may set one of them itself (pytestmark);
# otherwise its place in the tree decides, first match below (a prefix of its path).

SUITES = ("core", "model", "site", "browser")
SUITE_OF_PATH = (
    ("tests/test_browser.py", "browser"),
    ("tests/test_minilm.py", "model"),
    ("tests/test_head_roles.py", "model"),
    ("tests/test_site.py", "site"),
    ("tests/test_figures.py", "site"),
    ("tests/test_katex_vendor.py", "site"),
    ("tests/test_bench.py", "site"),
    # Builds a wheel (pip fetches the build backend) and installs it into a fresh environment:
    # slower than the core's tests, and about packaging, not the maths.
    ("tests/test_packaging.py", "site"),
    ("mha/models/", "model"),
    ("mha/site/", "site"),
    ("docs/", "site"),
    ("mha/", "core"),
    ("tests/", "core"),  # every other test file, new ones included
)


def suite_of(path: str) -> str | None:
    """The suite of a test collected from ``path`` (POSIX, relative to the repository)."""
    return next((suite for prefix, suite in SUITE_OF_PATH if path.startswith(prefix)), None)


def suites_of(item) -> list[str]:
    return [mark.name for mark in item.iter_markers() if mark.name in SUITES]


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything
def pytest_collection_modifyitems(config, items):
    root = Path(str(config.rootpath))
    for item in items:
        if not suites_of(item):
            try:
                path = Path(str(item.path)).resolve().relative_to(root).as_posix()
            except ValueError:
                path = str(item.path)
            suite = suite_of(path)
            if suite is not None:
                item.add_marker(suite)
    wrong = [f"{item.nodeid}: {suites_of(item) or 'none'}" for item in items
             if len(suites_of(item)) != 1]
    if wrong:
        raise pytest.UsageError("every test belongs to exactly one of the suites "
                                 f"{', '.join(SUITES)} (conftest.py, SUITE_OF_PATH):\n"
                                 + "\n".join(wrong[:20]))
