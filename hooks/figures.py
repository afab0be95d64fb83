"""MkDocs hook: make sure every figure is drawn from the current ``mha`` before a build.

The drawing happens in a subprocess (``hooks/draw_figures.py``) so that an edit to ``mha`` under
``mkdocs serve`` is drawn with the new code. A fingerprint of ``mha/`` and the drawing script
skips even the subprocess when nothing changed since the last build of this process (the i18n
plugin builds once per language).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
_last_fingerprint: str | None = None


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "mha").rglob("*.py")) + [ROOT / "hooks" / "draw_figures.py"]:
        digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def on_pre_build(config) -> None:
    global _last_fingerprint
    fingerprint = _fingerprint()
    if fingerprint == _last_fingerprint:
        return
    result = subprocess.run([sys.executable, str(ROOT / "hooks" / "draw_figures.py")],
                            capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise PluginError("drawing the figures failed:\n" + result.stdout + result.stderr)
    _last_fingerprint = fingerprint
