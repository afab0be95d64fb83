"""Draw every figure of ``mha.plots.FIGURES`` in every language into ``docs/<lang>/figures/``,
and write every table of ``mha.plots.TABLES`` (Markdown) into ``.cache/tables/<lang>/``.

Run by ``hooks/figures.py`` in a fresh interpreter, so that it always imports the ``mha`` that
is on disk now (``mkdocs serve`` keeps one process alive across edits). Each figure is cached
under ``.cache/figures/`` on a hash of the files it depends on; a file in ``docs/`` is written
only when its bytes change, so the watcher of ``mkdocs serve`` is not woken for nothing. Tables
are cached the same way; ``hooks/markers.py`` puts each one where a page has its
``<!-- mha:table NAME -->`` marker.

    python hooks/draw_figures.py            # draw what changed
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CACHE = ROOT / ".cache" / "figures"
TABLES_OUT = ROOT / ".cache" / "tables"


def figure_key(name: str, depends: tuple[str, ...], package: Path = ROOT / "mha") -> str:
    """Hash of the matplotlib version and of every source file the figure depends on.

    Every figure depends on the core (``mha/*.py``), the style and the terms, besides the
    modules named for it in ``mha.plots.DEPENDS``.
    """
    import matplotlib

    common = [p.relative_to(package).as_posix() for p in package.glob("*.py")]
    common += ["plots/__init__.py", "plots/_style.py", "plots/terms.py"]
    digest = hashlib.sha256(f"{name}\0{matplotlib.__version__}\0".encode())
    for relative in sorted(set(common) | set(depends)):
        digest.update(relative.encode() + b"\0" + (package / relative).read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def write_if_changed(path: Path, data: bytes) -> bool:
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from mha.plots import DEPENDS, FIGURES, LANGUAGES, TABLES
    from mha.plots._style import render_svg

    if set(DEPENDS) != set(FIGURES) | set(TABLES):
        raise SystemExit(f"mha.plots: DEPENDS and FIGURES + TABLES list different names: "
                         f"{sorted(set(DEPENDS) ^ (set(FIGURES) | set(TABLES)))}")
    drawn, written = 0, 0
    for name, make in FIGURES.items():
        key = figure_key(name, DEPENDS[name])
        for lang in LANGUAGES:
            cached = CACHE / key / lang / f"{name}.svg"
            if not cached.exists():
                write_if_changed(cached, render_svg(make(lang)))
                drawn += 1
            written += write_if_changed(DOCS / lang / "figures" / f"{name}.svg",
                                        cached.read_bytes())
    for name, make in TABLES.items():
        key = figure_key(name, DEPENDS[name])
        for lang in LANGUAGES:
            cached = CACHE / key / lang / f"{name}.md"
            if not cached.exists():
                write_if_changed(cached, make(lang).encode("utf-8"))
                drawn += 1
            written += write_if_changed(TABLES_OUT / lang / f"{name}.md", cached.read_bytes())
    print(f"{len(FIGURES)} figures and {len(TABLES)} tables x {len(LANGUAGES)} languages: "
          f"{drawn} drawn, {written} files updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
