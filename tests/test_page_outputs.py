"""The output-block convention (tests/page_outputs.py): the comparison, the pairing of blocks,
and the runner that applies both to every Python block of the site."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import page_outputs
from page_outputs import compare

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def parse(text: str):
    return page_outputs.markdown_parser().parse(text)


@pytest.mark.parametrize("expected, printed", [
    ("[0.659 0.242 0.099]", "[0.659 0.242 0.099]\n"),
    ("[ 5.25  0.   -5.25]", "[ 5.25 0. -5.25]"),           # column padding is not compared
    ("(3, 2) (3, 5)\n\n", "\n(3, 2) (3, 5)"),                # nor blank lines around it
    ("x 0.1", "x 0.10000000001"),                           # numbers within 1e-6
    ("d_k=4  float32  1e-16 nan", "d_k=4 float32 1.0e-16 nan"),
    ("第 1 层：最大注意力权重 0.83", "第 1 层：最大注意力权重 0.83  "),
])
def test_matching_outputs(expected, printed):
    assert compare(expected, printed) is None


@pytest.mark.parametrize("expected, printed", [
    ("[0.659 0.242 0.099]", "[0.659 0.242 0.1]"),            # a number drifted
    ("x 0.1", "x 0.1000002"),                                # beyond 1e-6
    ("scores 1048576", "scores 1048577"),                    # integers are exact
    ("True", "False"),
    ("(3, 2) (3, 5)", "(3, 2) (3, 5)\n(1,)"),               # a line more
    ("a 1", "b 1"),                                          # words differ
    ("float32", "float64"),
    ("nan", "0.0"),
    ("5.551115123125783e-17", "1.1102230246251565e-16"),   # rounding noise is not stable
])
def test_differing_outputs(expected, printed):
    message = compare(expected, printed)
    assert message is not None and "printed" in message


def test_blocks_pair_with_the_output_block_right_after_them():
    text = textwrap.dedent("""\
        ```python
        print(1)
        ```

        ```output
        1
        ```

        Some prose.

        ```python
        x = 2
        ```

        Prose in between.

        ```output
        2
        ```

        ??? question "A question"

            ```python
            print(3)
            ```

            ```output
            3
            ```
        """)
    tokens = parse(text)
    assert page_outputs.output_blocks(tokens) == {1: "1\n", 11: None, 23: "3\n"}
    assert page_outputs.stray_output_blocks(tokens) == [17]


def all_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_no_output_block_stands_alone():
    """An output block is only ever the output of the Python block just before it."""
    stray = {}
    for path in all_pages():
        lines = page_outputs.stray_output_blocks(parse(path.read_text(encoding="utf-8")))
        if lines:
            stray[path.relative_to(ROOT).as_posix()] = lines
    assert stray == {}


def test_prose_does_not_retype_what_a_block_prints():
    """The old habit, "It prints `0.333 ...`" / "打印 0.333 …", retyped the output in the prose,
    where it could drift; the output block shows it now, and the prose points at it. (Any digit
    in the same sentence soon after "prints" / "打印" counts.)"""
    import re

    habit = re.compile(r"(?:\bprints|打印)[^.。\n]{0,40}?\d")
    found = [f"{path.relative_to(ROOT).as_posix()}:{number}"
             for path in all_pages()
             for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1)
             if habit.search(line)]
    assert found == []


def test_the_runner_fails_a_page_whose_output_drifted(tmp_path):
    """A copy of the project's pytest set-up on a throwaway page: a right output passes, a
    drifted number, a missing output block and an output after a silent block each fail."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "page_outputs.py").write_text(
        (ROOT / "tests" / "page_outputs.py").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "conftest.py").write_text(
        (ROOT / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "page.md").write_text(textwrap.dedent("""\
        ```python
        print(round(2 / 3, 3))
        ```

        ```output
        0.667
        ```

        ```python
        print(round(2 / 3, 2))
        ```

        ```output
        0.66
        ```

        ```python
        print("no output block")
        ```

        ```python
        x = 1
        ```

        ```output
        1
        ```
        """), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--markdown-docs",
         "--markdown-docs-syntax=superfences", "--rootdir", str(tmp_path), "-o",
         "addopts=", "-o", "markers=core site model browser", str(docs / "page.md")],
        cwd=tmp_path, capture_output=True, text=True)
    summary = run.stdout.strip().splitlines()[-1]
    assert "3 failed, 1 passed" in summary, run.stdout[-3000:]
    assert "0.66" in run.stdout and "differs from its output block" in run.stdout
    assert "no ```output block follows it" in run.stdout
    assert "follows a block that prints nothing" in run.stdout


def test_prose_is_what_is_left_outside_the_fences():
    """A blank line before a closing fence does not pair it with a later fence (a heading
    between two blocks once vanished that way from the parity check)."""
    text = "## A { #a }\n\n```python\nx = 1\n```\n\n## B { #b }\n\n```python\ny = 2\n\n```\n"
    assert page_outputs.without_fences(text).split() == ["##", "A", "{", "#a", "}", "##", "B",
                                                         "{", "#b", "}"]
