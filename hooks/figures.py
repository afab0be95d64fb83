"""MkDocs hook: make sure every figure is drawn from the current ``mha`` before a build.

The drawing happens in a subprocess (``hooks/draw_figures.py``) so that an edit to ``mha`` under
``mkdocs serve`` is drawn with the new code. A fingerprint of every source file of ``mha/`` (data
files too: ``mha/site/data/benchmark.json`` draws a figure) and of the drawing script skips even
the subprocess when nothing changed since the last build of this process (the i18n plugin builds
once per language; ``mkdocs serve`` keeps this module across rebuilds). A fresh process (every
``mkdocs build``) skips it too when the last drawing was of the same sources and left every file
it wrote as it was (`STAMP`).

The drawing's summary is logged, and so is its note when a weights package is missing: the real
models' figures, tables and case board files always come from their kept runs
(``mha.site.model_runs``), and the build says in one line which model is not here to check them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from mkdocs.exceptions import PluginError

from _fingerprint import PACKAGE, fingerprint, package_files  # hooks/_fingerprint.py

ROOT = Path(__file__).resolve().parents[1]
DRAW = ROOT / "hooks" / "draw_figures.py"
#: The last drawing: its sources' fingerprint, every file it left (path, size, mtime) and what
#: it printed.
STAMP = ROOT / ".cache" / "figures" / "drawn.json"
log = logging.getLogger("mkdocs.hooks.figures")
_last_fingerprint: str | None = None


def sources_fingerprint(package: Path) -> str:
    """What the figures and tables are made from: every file of ``package``, the script,
    matplotlib's version and whether the weights packages are hidden (``MHA_NO_MODELS``)."""
    return fingerprint(package, package_files(package), extra=[DRAW],
                       salt=f"{version('matplotlib')}\0{os.environ.get('MHA_NO_MODELS', '')}")


def outputs(root: Path = ROOT) -> list[list]:
    """Every file the drawing writes, as ``[path, size, mtime_ns]``, sorted."""
    folders = [*root.glob("docs/*/figures"), root / ".cache" / "tables",
               root / "docs" / "assets" / "caseboard"]
    return sorted([path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns]
                  for folder in folders for path in folder.rglob("*")
                  if path.is_file() and (stat := path.stat()))


def draw() -> list[str]:
    """Run ``hooks/draw_figures.py`` in a fresh interpreter; return the lines it printed (on
    failure, its output is the error message)."""
    result = subprocess.run([sys.executable, str(DRAW)], capture_output=True, text=True, cwd=ROOT,
                            encoding="utf-8")
    if result.returncode != 0:
        raise PluginError("drawing the figures failed:\n" + result.stdout + result.stderr)
    return result.stdout.splitlines()


def on_pre_build(config) -> None:
    global _last_fingerprint
    current = sources_fingerprint(PACKAGE)
    if current == _last_fingerprint:
        return
    try:
        stamp = json.loads(STAMP.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stamp = {}
    if stamp.get("sources") == current and stamp.get("outputs") == outputs(ROOT):
        printed = [line for line in stamp["printed"] if line.startswith("real heads:")]
    else:
        log.info("drawing the figures, tables and the case board's data from mha (a subprocess; "
                 "the first build takes about 10-20 s)")
        started = time.perf_counter()
        printed = draw()
        printed[:1] = [f"{line} in {time.perf_counter() - started:.1f} s" for line in printed[:1]]
        STAMP.parent.mkdir(parents=True, exist_ok=True)
        STAMP.write_text(json.dumps({"sources": current, "outputs": outputs(ROOT),
                                     "printed": printed}), encoding="utf-8")
    for line in printed:
        log.info(line)
    _last_fingerprint = current


_IMG = re.compile(r'<img ([^>]*?)src="([^"]*figures/[^"]+\.svg)"([^>]*)>')
_SIZE = re.compile(rb'<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"')


def on_page_content(html, page, config, files):
    """Give every figure its width and height, so the page does not jump while it loads, and
    have the browser fetch the figures past the page's first section only as the reader nears
    them (``loading="lazy"``).

    A figure is an SVG drawn by matplotlib (the training chapter's five: 590 to 1,495 elements
    each) that the browser parses, styles and lays out on the page's main thread, one task per
    figure. Fetched with the page, those five added five such tasks (7 to 22 ms each on this
    machine, four times that on Lighthouse's simulated phone) to the first load. A figure before
    the first ``<h2>`` may be on the first screen, so it stays eager (a lazy first-screen image
    arrives late; tests/test_phone.py checks that no lazy figure is on a phone's first screen).
    """
    first_section = html.find("<h2")
    first_section = len(html) if first_section < 0 else first_section

    def add_size(match):
        before, src, after = match.groups()
        if "width=" in before + after:
            return match.group(0)
        # Figures live in docs/<lang>/figures/, whatever the page's URL depth.
        svg = Path(config["docs_dir"]) / page.file.src_uri.split("/")[0] / "figures" / Path(src).name
        head = svg.read_bytes()[:2000]
        size = _SIZE.search(head)
        if size is None:
            raise PluginError(f"{page.file.src_uri}: cannot read the size of {svg}")
        width, height = (round(float(v) * 4 / 3) for v in size.groups())  # pt -> CSS px
        lazy = ' loading="lazy" decoding="async"' if match.start() > first_section else ""
        return f'<img {before}src="{src}" width="{width}" height="{height}"{lazy}{after}>'

    return _IMG.sub(add_size, html)
