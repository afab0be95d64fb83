"""MkDocs hook: make sure every figure is drawn from the current ``mha`` before a build.

The drawing happens in a subprocess (``hooks/draw_figures.py``) so that an edit to ``mha`` under
``mkdocs serve`` is drawn with the new code. A fingerprint of every source file of ``mha/`` (data
files too: ``mha/site/data/benchmark.json`` draws a figure) and of the drawing script skips even
the subprocess when nothing changed since the last build of this process (the i18n plugin builds
once per language; ``mkdocs serve`` keeps this module across rebuilds).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

from _fingerprint import PACKAGE, fingerprint, package_files  # hooks/_fingerprint.py

ROOT = Path(__file__).resolve().parents[1]
DRAW = ROOT / "hooks" / "draw_figures.py"
_last_fingerprint: str | None = None


def sources_fingerprint(package: Path) -> str:
    """What the figures and tables are made from: every file of ``package`` and the script."""
    return fingerprint(package, package_files(package), extra=[DRAW])


def draw() -> None:
    """Run ``hooks/draw_figures.py`` in a fresh interpreter; its output is the error message."""
    result = subprocess.run([sys.executable, str(DRAW)], capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise PluginError("drawing the figures failed:\n" + result.stdout + result.stderr)


def on_pre_build(config) -> None:
    global _last_fingerprint
    current = sources_fingerprint(PACKAGE)
    if current == _last_fingerprint:
        return
    draw()
    _last_fingerprint = current


_IMG = re.compile(r'<img ([^>]*?)src="([^"]*figures/[^"]+\.svg)"([^>]*)>')
_SIZE = re.compile(rb'<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"')


def on_page_content(html, page, config, files):
    """Give every figure its width and height, so the page does not jump while it loads."""
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
        return f'<img {before}src="{src}" width="{width}" height="{height}"{after}>'

    return _IMG.sub(add_size, html)
