"""Root pytest configuration: every test's suite, and code inside Material's containers.

Each collected test gets exactly one of the markers ``core``, ``model``, ``site``, ``browser``
(registered in pyproject.toml), from where it lives (`SUITE_OF_PATH`); collection fails on a
test with none or two.

pytest-markdown-docs parses pages with markdown-it, which does not know Material's admonitions
(``!!!``), collapsible blocks (``???``) or content tabs (``===``); the parser it gets here
(`page_outputs.markdown_parser`) opens them, so the blocks inside them run too.

What a page's Python block prints must be what the output block right after it shows
(`tests/page_outputs.py` states the convention and how numbers are compared): every block of
``docs/`` runs with its standard output captured, through `OutputCheckingRunner`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def _load_page_outputs():
    """tests/page_outputs.py, under the name the tests import it by (one module, not two)."""
    if "page_outputs" not in sys.modules:
        spec = importlib.util.spec_from_file_location("page_outputs",
                                                      ROOT / "tests" / "page_outputs.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["page_outputs"] = module
        spec.loader.exec_module(module)
    return sys.modules["page_outputs"]


page_outputs = _load_page_outputs()

def pytest_markdown_docs_markdown_it():
    return page_outputs.markdown_parser()


# ---- output blocks -------------------------------------------------------------------------
# pytest-markdown-docs runs each block through its default runner; ours runs it the same way
# with standard output captured, then holds it against the page's output block. Registering a
# default runner is the plugin's documented extension point (`register_runner(default=True)`);
# MAINTAINERS.md lists it with the test that guards it.

@lru_cache(maxsize=None)
def _expected_outputs(path: str) -> dict[int, str | None]:
    text = Path(path).read_text(encoding="utf-8")
    return page_outputs.output_blocks(pytest_markdown_docs_markdown_it().parse(text))


def _register_output_runner():
    from pytest_markdown_docs._runners import DefaultRunner, register_runner

    @register_runner(default=True)
    class OutputCheckingRunner(DefaultRunner):
        """Runs a block as the plugin does; on a site page, also checks what it prints."""

        def runtest(self, test, args, *, asyncio_runner=None):
            if not page_outputs.is_site_page(Path(test.source_path), ROOT):
                return super().runtest(test, args, asyncio_runner=asyncio_runner)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                super().runtest(test, args, asyncio_runner=asyncio_runner)
            expected = _expected_outputs(str(test.source_path)).get(test.start_line)
            where = f"{Path(test.source_path).relative_to(ROOT)}:{test.start_line}"
            if expected is None:
                if printed.getvalue().strip():
                    raise AssertionError(
                        f"{where}: the block prints, but no ```output block follows it; add one "
                        f"holding what it printed:\n{printed.getvalue()}")
                return
            if not printed.getvalue().strip():
                raise AssertionError(f"{where}: an ```output block follows a block that prints "
                                     "nothing")
            message = page_outputs.compare(expected, printed.getvalue())
            if message:
                raise AssertionError(f"{where}: {message}")

    return OutputCheckingRunner


OutputCheckingRunner = _register_output_runner()


# ---- the four suites -----------------------------------------------------------------------
# Every collected test belongs to exactly one: `python3 dev.py test -m core` runs in seconds,
# `-m "not browser"` skips Chromium. A test file may set one of them itself (pytestmark);
# otherwise its place in the tree decides, first match below (a prefix of its path).

SUITES = ("core", "model", "site", "browser")
SUITE_OF_PATH = (
    ("tests/test_browser.py", "browser"),
    ("tests/test_minilm.py", "model"),
    ("tests/test_e5.py", "model"),
    ("tests/test_head_roles.py", "model"),
    ("tests/test_site.py", "site"),
    ("tests/test_figures.py", "site"),
    ("tests/test_katex_vendor.py", "site"),
    ("tests/test_bench.py", "site"),
    ("tests/test_page_outputs.py", "site"),
    ("tests/test_notebook_pages.py", "site"),
    ("tests/test_frame.py", "site"),
    ("tests/test_annotations.py", "site"),
    ("tests/test_api_copy.py", "site"),
    ("tests/test_api_html.py", "site"),
    ("tests/test_api_pages.py", "site"),
    ("tests/test_phone.py", "browser"),  # reads every page; runs pytest on a sample page
    # Builds a wheel (pip fetches the build backend) and installs it into a fresh environment:
    # slower than the core's tests, and about packaging, not the maths.
    ("tests/test_packaging.py", "site"),
    ("mha/models/", "model"),
    ("mha/site/", "site"),
    ("docs/", "site"),
    ("mha/", "core"),
    ("tests/", "core"),  # every other test file, new ones included
)


#: What the ``plots`` and ``docs`` extras bring that modules here import (top-level names).
#: With only the ``test`` extra installed (``python3 dev.py test -m core``, CI's core jobs on
#: every platform), a module that cannot be imported for want of one of them is skipped, with
#: the reason, instead of failing the whole collection: markers deselect only after collecting,
#: and such a module belongs to the site's suites anyway. With every extra installed, as
#: ``python3 dev.py test`` has it, nothing is skipped.
SITE_STACK = frozenset({
    "matplotlib", "PIL", "markdown", "jinja2", "mkdocs", "material", "mkdocs_jupyter",
    "mkdocstrings", "mkdocstrings_handlers", "pymdownx", "jieba", "quickjs", "nbformat",
    "nbconvert",
})


def missing_site_stack(error: str) -> list[str]:
    """The modules of `SITE_STACK` an import error names, or [] if it names any other module."""
    missing = sorted({name.split(".")[0]
                      for name in re.findall(r"No module named '([\w.]+)'", error)})
    return missing if missing and set(missing) <= SITE_STACK else []


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    missing = missing_site_stack(str(report.longrepr)) if report.failed else []
    if missing:
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), None,
                           f"Skipped: needs {', '.join(missing)} (the plots and docs extras)")
    return report


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
    keep_shard(config, items)


#: ``python3 dev.py test`` runs the whole suite as two pytest processes at once, one per
#: half: ``MHA_TEST_SHARD=site`` keeps the tests that use the built site (the one strict build,
#: Chromium), ``MHA_TEST_SHARD=rest`` every other test. One process alone keeps a 2-core machine
#: only ~80% busy (the browser tests mostly wait on pages). The halves share the work tree,
#: which no test of the second half writes to, and the built site: dev.py gives both the folder
#: ``MHA_SHARED_SITE``, where the site half builds it (tests/conftest.py, ``built_site``).
SHARDS = ("site", "rest")

#: Tests on the built site that the rest half runs, after all its other tests, on the site the
#: site half built (when dev.py shares it): the case board's browser tests and the search
#: hotkeys, so that the two halves take about as long as each other (with one BLAS thread a
#: process the rest half ended two minutes before the site half).
ON_SHARED_SITE = ("tests/test_caseboard_lab.py", "tests/test_caseboard_real.py",
                  "tests/test_caseboard_tasks.py", "tests/test_caseboard_own_real.py",
                  "tests/test_search_hotkey.py")


def keep_shard(config, items) -> None:
    shard = os.environ.get("MHA_TEST_SHARD")
    if not shard:
        return
    if shard not in SHARDS:
        raise pytest.UsageError(f"MHA_TEST_SHARD must be one of {SHARDS}, got {shard!r}")
    shared = bool(os.environ.get("MHA_SHARED_SITE"))
    root = Path(str(config.rootpath))

    def half(item) -> str:
        if "built_site" not in item.fixturenames:
            return "rest"
        path = Path(str(item.path)).resolve()
        moved = shared and path.is_relative_to(root) and \
            path.relative_to(root).as_posix().startswith(ON_SHARED_SITE)
        return "rest" if moved else "site"

    keep = [item for item in items if half(item) == shard]
    # The rest half's tests on the site last: by then the site half has long built it.
    keep.sort(key=lambda item: "built_site" in item.fixturenames)
    kept = set(keep)
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = keep
