"""Not a hook (mkdocs.yml does not list it): the one fingerprint of the sources a build makes
things from, shared by ``figures.py`` (whether to run the drawing at all), ``draw_figures.py``
(each figure's and table's cache key) and ``notebooks.py`` (the notebooks' cache folder).

A source is any file of the package, data as well as code: the benchmark run in
``mha/site/data/benchmark.json`` draws a figure just as a module does. Bytecode and hidden files
(an editor's swap file) are not sources.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mha"


def package_files(package: Path = PACKAGE) -> list[str]:
    """Every source file of ``package``, as sorted POSIX paths relative to it."""
    return sorted(
        path.relative_to(package).as_posix() for path in package.rglob("*")
        if path.is_file() and path.suffix not in (".pyc", ".pyo")
        and not any(part == "__pycache__" or part.startswith(".")
                    for part in path.relative_to(package).parts))


def fingerprint(base: Path, relatives: Iterable[str], *, extra: Iterable[Path] = (),
                salt: str = "") -> str:
    """16 hex digits of SHA-256 over ``salt``, each file ``base / relative`` (its relative path
    and bytes) and each file of ``extra`` (its name and bytes).

    Paths count relative to ``base``, so a copy of the package hashes like the original.
    """
    digest = hashlib.sha256(salt.encode() + b"\0")
    for relative in sorted(set(relatives)):
        digest.update(relative.encode() + b"\0" + (base / relative).read_bytes() + b"\0")
    for path in extra:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
