"""What a page's Python block prints, and the output block that shows it to the reader.

The convention, the same on every page of ``docs/``: a Python block whose code prints is followed
directly (nothing but a blank line between) by a fenced block whose info string is ``output``,
holding what the code prints::

    ```python
    print(weights.round(3))
    ```

    ```output
    [0.659 0.242 0.099]
    ```

The root ``conftest.py`` runs every Python block of the site with its standard output captured
and compares it with that block (`compare`): a block that prints without an output block, an
output block after a block that prints nothing, and any difference fail the test. The prose
points at the output block instead of retyping its numbers, so a number that drifts fails CI.

How the text is compared (`compare`): leading and trailing blank lines and the whitespace at the
end of each line are ignored, and so is the width of runs of spaces (NumPy pads array columns to
the widest number); everything else must be the same, except numbers, which are compared as
numbers. An integer (``32768``, a count, a shape) must be the same integer. Any other number
must be equal within a relative tolerance of 1e-6, so ``0.1`` and ``0.1000000001`` match but
``0.1`` and ``0.2`` do not: that absorbs how a float prints, not how it was computed.

A page must therefore print values that survive another machine: another BLAS kernel or SIMD
path changes a float32 sum in its last bits, and a float64 function by an ulp or so
(``tests/tolerance.py`` states the rule the tests follow). Round what is printed to digits the
error cannot reach, compute a fragile value in float64, or print a bound (``err < 1e-12``), a
count, or a comparison, never rounding noise. ``python3 dev.py test`` runs the pages' blocks
under a second BLAS kernel to keep them so.

The pages are parsed as the tests run them (`markdown_parser`): markdown-it does not know
Material's admonitions (``!!!``), collapsible blocks (``???``) or content tabs (``===``), whose
content is indented, so a fenced block inside one looked like an indented code block and was
silently never run. The parser turns each container's header into a blank line and removes its
indentation from the content, keeping every line where it was, so failures still point at the
right line.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

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


def markdown_parser():
    """The markdown-it parser that finds the site's Python blocks, containers opened."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")

    def dedent_containers(state):
        state.src = open_containers(state.src)

    md.core.ruler.after("normalize", "open_material_containers", dedent_containers)
    return md


#: The info string that marks an output block.
OUTPUT = "output"
#: A number as Python and NumPy print it: 3, -0.5, 1., .5, 2.5e-07, nan, inf.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w])|\b(?:nan|inf)\b")
#: How close two printed numbers that are not both integers must be to count as the same.
REL_TOL = 1e-6
#: An integer as printed (``-3``, ``32768``): compared exactly.
INTEGER = re.compile(r"[-+]?\d+")


def fence_language(info: str) -> str:
    """The language of a fence's info string, in either syntax (``python title=..`` or
    ``{.python title=..}``)."""
    words = info.strip().strip("{}").split()
    lang = next((w[1:] for w in words if w.startswith(".")), words[0] if words else "")
    return {"py": "python", "python3": "python"}.get(lang, lang)


def output_blocks(tokens) -> dict[int, str | None]:
    """For each Python fence of a page (keyed by its first code line, 1-based, as
    pytest-markdown-docs numbers it), the content of the output block right after it, or None.

    ``tokens`` come from the markdown-it parser the tests use (root ``conftest.py``), so blocks
    inside Material's containers are found as they are run.
    """
    found: dict[int, str | None] = {}
    for i, token in enumerate(tokens):
        if token.type == "fence" and token.map and fence_language(token.info) == "python":
            after = tokens[i + 1] if i + 1 < len(tokens) else None
            is_output = (after is not None and after.type == "fence"
                         and fence_language(after.info) == OUTPUT)
            found[token.map[0] + 1] = after.content if is_output else None
    return found


def stray_output_blocks(tokens) -> list[int]:
    """Lines (1-based) of output blocks that do not follow a Python block directly."""
    stray = []
    for i, token in enumerate(tokens):
        if token.type == "fence" and fence_language(token.info) == OUTPUT:
            before = tokens[i - 1] if i else None
            if not (before is not None and before.type == "fence"
                    and fence_language(before.info) == "python"):
                stray.append(token.map[0] + 1)
    return stray


def _lines(text: str) -> list[str]:
    lines = [re.sub(r"[ \t]+", " ", line).rstrip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _same_line(expected: str, actual: str) -> bool:
    want, got = NUMBER.split(expected), NUMBER.split(actual)
    want_numbers, got_numbers = NUMBER.findall(expected), NUMBER.findall(actual)
    if want != got or len(want_numbers) != len(got_numbers):
        return False
    for a, b in zip(want_numbers, got_numbers):
        if INTEGER.fullmatch(a) and INTEGER.fullmatch(b):
            if int(a) != int(b):
                return False
            continue
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return False
        elif not math.isclose(x, y, rel_tol=REL_TOL, abs_tol=0.0):
            return False
    return True


def compare(expected: str, actual: str) -> str | None:
    """None if ``actual`` (what the code printed) matches ``expected`` (the output block),
    else a message that shows both, line by line."""
    want, got = _lines(expected), _lines(actual)
    if len(want) == len(got) and all(_same_line(a, b) for a, b in zip(want, got)):
        return None
    width = max([len(line) for line in want] + [10])
    rows = [f"  {'output block':{width}} | printed"]
    for k in range(max(len(want), len(got))):
        a = want[k] if k < len(want) else "<missing>"
        b = got[k] if k < len(got) else "<missing>"
        mark = " " if k < len(want) and k < len(got) and _same_line(a, b) else "!"
        rows.append(f"{mark} {a:{width}} | {b}")
    return "what the block printed differs from its output block:\n" + "\n".join(rows)


#: A fenced block: its opening fence, anything, and the same fence, at the same indentation
#: (spaces and tabs only, so a blank line before a fence cannot pair it with another one).
FENCED_BLOCK = re.compile(r"^([ \t]*)(`{3,}).*?^\1\2[ \t]*$", re.S | re.M)


def without_fences(text: str) -> str:
    """A page's text with every fenced block (code, output) removed: what the reader reads."""
    return FENCED_BLOCK.sub("", text)


def is_site_page(path: Path, root: Path) -> bool:
    """Whether the convention applies to ``path``: the Markdown pages of the site."""
    try:
        relative = Path(path).resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return relative.parts[:1] == ("docs",) and relative.suffix == ".md"
