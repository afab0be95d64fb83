"""MkDocs hook: the API reference's index, made from its part pages and mha's docstrings.

The API reference is laid out as NumPy, pydantic and FastAPI lay theirs out: an index page
(``api/index.md``) and one page per part (``api/core.md``, ``api/layer.md``, ...), each part
page a list of mkdocstrings entries (``::: mha.softmax``). On the index, the marker
``<!-- api:index PART PART ... -->`` becomes, for each part in that order, a section titled and
anchored as the part page's H1 (linked to the page) and a table of every name the part page
documents, each linked to its entry (mkdocstrings' anchor, ``core.md#mha.softmax``) with the
short summary of its docstring (numpydoc's first paragraph, joined into one line).

One home for each fact: which names a part documents is its page's ``:::`` lines (a module's
line stands for the names of its ``__all__``, which mkdocstrings shows as its members); the
summaries are read from mha's source at build time by griffe, the library mkdocstrings reads
docstrings with, so none is typed twice. Each row also carries its name as an id, so a link
into the reference from when it was one page (``api/#mha.softmax``) still lands on the row
that links to the entry.

A part page without an H1 or without a single ``:::`` line, a name griffe cannot find, or an
entry without a docstring fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path

import griffe
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*api:index((?:\s+[\w-]+)+)\s*-->")
#: An mkdocstrings entry: ``::: identifier`` at the start of a line.
ENTRY = re.compile(r"^:::\s+([\w.]+)\s*$", re.M)
H1 = re.compile(r"^# (.+?)\s*\{\s*#([\w-]+)\s*\}\s*$", re.M)
FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
#: A code span (``x`` or `x`): a table's pipes inside one are not cell borders.
CODE_SPAN = re.compile(r"(`+).+?\1")
#: The table's header in each language.
HEADER = {"zh": ("名称", "摘要"), "en": ("Name", "Summary")}


def load_package(root: Path = ROOT) -> griffe.Module:
    """mha as griffe reads it from the source (no import), as mkdocstrings does."""
    return griffe.load("mha", search_paths=[str(root)], resolve_aliases=False)


def find(package: griffe.Module, identifier: str) -> griffe.Object | griffe.Alias:
    if not identifier.startswith("mha."):
        raise PluginError(f"api index: {identifier!r} is not a name of mha")
    try:
        return package[identifier.removeprefix("mha.")]
    except (KeyError, griffe.AliasResolutionError):
        raise PluginError(f"api index: griffe finds no {identifier!r} in mha's source") from None


def summary(obj) -> str:
    """The docstring's short summary: its first paragraph, as one line."""
    docstring = obj.docstring
    if docstring is None or not docstring.value.strip():
        raise PluginError(f"api index: {obj.path} has no docstring to summarise")
    return " ".join(docstring.value.strip().split("\n\n")[0].split())


def table_cell(text: str) -> str:
    """``text`` made safe for a Markdown table cell: each ``|`` outside code spans escaped."""
    out, end = [], 0
    for span in CODE_SPAN.finditer(text):
        out += [text[end:span.start()].replace("|", r"\|"), span.group(0)]
        end = span.end()
    return "".join(out) + text[end:].replace("|", r"\|")


def names(part_markdown: str, package: griffe.Module) -> list[str]:
    """The identifiers a part page documents, in page order: each ``:::`` line's, or for a
    module's line the names of the module's ``__all__``."""
    out = []
    for identifier in ENTRY.findall(part_markdown):
        obj = find(package, identifier)
        if obj.is_module:
            out.extend(f"{identifier}.{name}" for name in obj.exports or ())
        else:
            out.append(identifier)
    return out


def part_section(folder: Path, part: str, lang: str, package: griffe.Module) -> str:
    """The index's section for one part page: its title as a linked heading, and the table."""
    path = folder / f"{part}.md"
    if not path.is_file():
        raise PluginError(f"api index: no part page {path}")
    text = FRONT_MATTER.sub("", path.read_text(encoding="utf-8"))
    heading = H1.search(text)
    if heading is None:
        raise PluginError(f"{path}: no H1 with an explicit anchor ('# Title {{ #anchor }}')")
    identifiers = names(text, package)
    if not identifiers:
        raise PluginError(f"{path}: no ::: entry")
    title, anchor = heading.groups()
    name, about = HEADER[lang]
    rows = [f"## [{title}]({part}.md) {{ #{anchor} }}", "", f"| {name} | {about} |", "|---|---|"]
    for identifier in identifiers:
        text_of_summary = table_cell(summary(find(package, identifier)))
        shown = ".<wbr>".join(identifier.split("."))  # a long name breaks at its dots
        rows.append(f'| <span id="{identifier}"></span>[<code>{shown}</code>]({part}.md#'
                    f"{identifier}) | {text_of_summary} |")
    return "\n".join(rows) + "\n"


def index_markdown(markdown: str, folder: Path, lang: str, root: Path = ROOT) -> str:
    """The index page's Markdown with its marker replaced by every part's section."""
    match = MARKER.search(markdown)
    if match is None:
        return markdown
    package = load_package(root)
    sections = [part_section(folder, part, lang, package) for part in match.group(1).split()]
    return markdown[:match.start()] + "\n".join(sections) + markdown[match.end():]


def on_page_markdown(markdown, page, config, files):
    if "api:index" not in markdown:
        return markdown
    lang = getattr(page.file, "locale", None) or config["theme"]["language"]
    if lang not in HEADER:
        raise PluginError(f"{page.file.src_uri}: no table header for language {lang!r}")
    return index_markdown(markdown, Path(page.file.abs_src_path).parent, lang)
