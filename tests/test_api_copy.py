"""Copying an example from the API reference gives code that runs (hooks/api_copy.py).

The Examples of mha's docstrings are doctests, rendered as console (``pycon``) blocks: prompts and
output. On every built part page of the API reference (``api/core/``, ...) in each language, the
text Material's copy button copies from every such block (the ``data-copy`` value of the code
element or of an element around it, else the code's text: ``extract`` in Material's clipboard
integration) is the example's code alone, every line of it, and it runs in a fresh Python
process. The page still shows the prompts and
the output, a ``<BLANKLINE>`` included (as an empty output line), and in Chromium the copy
button puts exactly that code on the clipboard.
"""

from __future__ import annotations

import doctest
import importlib
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LANGS = {"zh": "api", "en": "en/api"}
#: The API reference has at least this many examples (24 when this was written).
MIN_EXAMPLES = 20
#: Material's clipboard integration, as its bundle has it (minified names aside): the text comes
#: from the nearest ``[data-copy]`` around the code element, else from the code's innerText.
MATERIAL_EXTRACT = re.compile(r'(\w+)=(\w+)\.closest\("\[data-copy\]"\),\w+=\1\?\1\.getAttribute\('
                              r'"data-copy"\):\2\.innerText')
MATERIAL_TARGET = '"data-clipboard-target":`#${e} > code`'


def import_hook():
    """hooks/api_copy.py, imported as MkDocs imports it (its folder on sys.path)."""
    sys.path.insert(0, str(ROOT / "hooks"))
    try:
        return importlib.import_module("api_copy")
    finally:
        sys.path.remove(str(ROOT / "hooks"))


class ConsoleBlocks(HTMLParser):
    """Every ``pycon`` block of a page: the ``data-copy`` of its code, pre and div (innermost
    first, as ``closest`` looks) and its lines, each a list of (text, Pygments class) pieces."""

    def __init__(self, page_html: str):
        super().__init__(convert_charrefs=True)
        self.blocks: list[dict] = []
        self.depth = 0          # open <div>s inside the current block (0: not in a block)
        self.spans: list[str] = []
        self.in_code = False
        self.feed(page_html)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "div" and self.depth:
            self.depth += 1
        elif tag == "div" and "language-pycon" in (attrs.get("class") or "").split():
            self.depth = 1
            self.blocks.append({"copy": {}, "lines": [[]]})
        if not self.depth:
            return
        if tag in ("div", "pre", "code") and "data-copy" in attrs:
            self.blocks[-1]["copy"].setdefault(tag, attrs["data-copy"])
        if tag == "code":
            self.in_code = True
        elif tag == "span" and self.in_code:
            self.spans.append(attrs.get("class") or "")
            self.blocks[-1]["lines"][-1].append(("", self.spans[-1]))  # seen even when empty

    def handle_endtag(self, tag):
        if not self.depth:
            return
        if tag == "div":
            self.depth -= 1
        elif tag == "code":
            self.in_code = False
        elif tag == "span" and self.in_code:
            self.spans.pop()

    def handle_data(self, data):
        if not (self.depth and self.in_code):
            return
        lines = self.blocks[-1]["lines"]
        for i, part in enumerate(data.split("\n")):
            if i:
                lines.append([])
            if part:
                lines[-1].append((part, self.spans[-1] if self.spans else ""))


def shown(block) -> list[str]:
    """The block's lines as the page shows them."""
    return ["".join(text for text, _ in line) for line in block["lines"]][:-1]  # final newline


def material_copy(block) -> str:
    """What Material's copy button copies from the block: the nearest ``data-copy`` from the
    code element outwards, else the code's text, with its end trimmed."""
    for tag in ("code", "pre", "div"):
        if tag in block["copy"]:
            return block["copy"][tag].rstrip()
    return "\n".join(shown(block)).rstrip()


def part_pages(site_dir: Path, lang: str) -> list[str]:
    """The API reference's part pages of a language (``api/core/``, ...), the index left out:
    it lists names, not entries."""
    folder = site_dir / LANGS[lang]
    return sorted(f"{LANGS[lang]}/{page.parent.name}/" for page in folder.glob("*/index.html"))


@pytest.fixture(scope="module")
def blocks_by_page(built_site):
    """Per language, {part page: its console blocks}."""
    return {lang: {page: ConsoleBlocks((built_site.dir / page / "index.html")
                                       .read_text(encoding="utf-8")).blocks
                   for page in part_pages(built_site.dir, lang)}
            for lang in LANGS}


@pytest.fixture(scope="module")
def blocks(blocks_by_page):
    """Per language, the console blocks of every part page, page by page."""
    return {lang: [block for page_blocks in pages.values() for block in page_blocks]
            for lang, pages in blocks_by_page.items()}


# ---- the hook alone ---------------------------------------------------------------------------

def test_the_copy_text_is_what_doctest_runs():
    api_copy = import_hook()
    example = (">>> import numpy as np\n"
               ">>> for i in range(2):\n"
               "...     print(i)\n"
               "0\n"
               "1\n"
               ">>> np.zeros((2, 1, 1))\n"
               "array([[[0.]],\n"
               "\n"
               "       [[0.]]])\n"
               ">>> x = '...'\n")
    assert api_copy.copy_text(example) == ("import numpy as np\n"
                                           "for i in range(2):\n"
                                           "    print(i)\n"
                                           "np.zeros((2, 1, 1))\n"
                                           "x = '...'\n")
    with pytest.raises(ValueError, match="without a single >>> prompt"):
        api_copy.copy_text("array([0.])\n")
    with pytest.raises(ValueError, match="doctest"):
        api_copy.copy_text(">>>print(1)\n")


def test_materials_copy_button_still_reads_data_copy():
    """hooks/api_copy.py relies on Material copying the ``data-copy`` of the nearest element
    around the code (undocumented, MAINTAINERS.md): its installed bundle still does."""
    import material

    folder = Path(material.__file__).parent / "templates" / "assets" / "javascripts"
    bundles = list(folder.glob("bundle.*.min.js"))
    assert len(bundles) == 1, bundles
    bundle = bundles[0].read_text(encoding="utf-8")
    assert MATERIAL_EXTRACT.search(bundle), "Material's copy button no longer reads data-copy"
    assert MATERIAL_TARGET in bundle, "Material's copy button no longer targets the code element"


# ---- the built API page -----------------------------------------------------------------------

def test_every_example_copies_its_code_and_nothing_else(blocks):
    for lang, page_blocks in blocks.items():
        assert len(page_blocks) >= MIN_EXAMPLES, (lang, len(page_blocks))
        for block in page_blocks:
            copied = material_copy(block)
            where = f"{lang}: {shown(block)[0]!r}…"
            # Every shown line with a prompt, without it; no output line, nothing else.
            code_lines = []
            for line in block["lines"][:-1]:
                if line and line[0][1] == "gp":
                    code_lines.append("".join(text for text, cls in line if cls != "gp"))
                else:  # an output line, empty ones included
                    assert line and all(cls == "go" for _, cls in line), (where, line)
            assert copied.split("\n") == code_lines, where
            assert not re.search(r"^(>>>|\.\.\.)( |$)", copied, re.M), where
            compile(copied, where, "exec")
    # Both languages offer the same examples.
    assert [material_copy(b) for b in blocks["zh"]] == [material_copy(b) for b in blocks["en"]]


def test_a_blankline_shows_as_an_empty_output_line_and_is_not_copied(blocks):
    from mha import padding_mask

    assert "\n    <BLANKLINE>\n" in padding_mask.__doc__  # the doctest this is about
    for lang, page_blocks in blocks.items():
        block = next(b for b in page_blocks if "padding_mask([2, 3], 3)" in material_copy(b))
        lines = shown(block)
        blank = lines.index("")
        assert lines[blank - 1].startswith("array([[[1, 1, 0]],"), lang
        assert lines[blank + 1].strip() == "[[1, 1, 1]]])", lang
        assert block["lines"][blank] == [("", "go")], lang
        assert "\n\n" not in material_copy(block), lang


def test_every_copied_example_runs_in_a_fresh_python(blocks, tmp_path):
    """Each example, copied, runs on its own in a new interpreter, in an empty folder. Those that
    need a pretrained model's weights (all-MiniLM-L6-v2, multilingual-e5-small) are skipped when
    they are missing, except under CI."""
    examples = sorted({material_copy(b) for page_blocks in blocks.values() for b in page_blocks})
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}

    def run(code):
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(examples, pool.map(run, examples)))
    failed = {code.split("\n")[-1]: r.stderr[-800:] for code, r in results.items()
              if r.returncode}
    missing_weights = {line: err for line, err in failed.items()
                       if "MiniLMNotInstalledError" in err or "E5NotInstalledError" in err}
    if missing_weights and not os.environ.get("CI"):
        failed = {line: err for line, err in failed.items() if line not in missing_weights}
    assert failed == {}
    if missing_weights and not os.environ.get("CI"):
        pytest.skip(f"{len(missing_weights)} examples need a pretrained model that is not "
                    f"installed")


# ---- the copy button in Chromium --------------------------------------------------------------

@pytest.mark.browser
@pytest.mark.parametrize("lang", ["zh"])
def test_the_copy_button_copies_each_examples_code(lang, blocks_by_page, new_context,
                                                  base_url):
    """Clicking an example's copy button puts that example's code on the clipboard.

    In the default language only: both languages' part pages carry the same examples with the
    same copy text (test_every_example_copies_its_code_and_nothing_else checks both) and the
    same button. On every part page that has examples, and there on every fourth example of
    the reference, the last and the longest: the button and its script are the same for each
    (what each one copies is checked above, block by block), and ~45 clicks with clipboard
    reads cost ~20 s."""
    from test_browser import COPY_BUTTON, Visit, interact

    context = new_context(permissions=["clipboard-read", "clipboard-write"])
    everything = [material_copy(b) for page_blocks in blocks_by_page[lang].values()
                  for b in page_blocks]
    longest = max(range(len(everything)), key=lambda i: len(everything[i]))
    chosen = {*range(0, len(everything), 4), len(everything) - 1, longest}
    first = 0  # the place, in the whole reference, of the page's first example
    for path, page_blocks in blocks_by_page[lang].items():
        expected = [material_copy(b) for b in page_blocks]
        mine = [i - first for i in chosen if first <= i < first + len(expected)]
        first += len(expected)
        if not expected:
            continue
        visit = Visit(context, base_url + path)
        page = visit.page
        interact(page)
        page.bring_to_front()  # the clipboard needs a focused page
        buttons = page.locator(f"article .language-pycon :is({COPY_BUTTON})")
        assert buttons.count() == len(expected), path
        for i in sorted({*mine, 0}):  # at least one click on every page
            page.evaluate("() => navigator.clipboard.writeText('nothing copied yet')")
            buttons.nth(i).click()
            assert page.evaluate("() => navigator.clipboard.readText()") == expected[i], (path, i)
        assert visit.errors == [], path
        page.close()


# The browser fixtures are test_browser.py's (one Chromium per module, the session's build served
# gzipped at its own address).
from test_browser import base_url, browser, new_context, site  # noqa: E402,F401
