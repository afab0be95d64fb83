"""Draw every figure of ``mha.site.plots.FIGURES`` in every language into ``docs/<lang>/figures/``,
and write every table of ``mha.site.plots.TABLES`` (Markdown) into ``.cache/tables/<lang>/``.

Run by ``hooks/figures.py`` in a fresh interpreter, so that it always imports the ``mha`` that
is on disk now (``mkdocs serve`` keeps one process alive across edits). Each figure is cached
under ``.cache/figures/`` on a hash of the files it depends on; a file in ``docs/`` is written
only when its bytes change, so the watcher of ``mkdocs serve`` is not woken for nothing. Tables
are cached the same way; ``hooks/markers.py`` puts each one where a page has its
``<!-- mha:table NAME -->`` marker. The case board's data (``mha.site.caseboard.files``) goes
into ``docs/assets/caseboard/``, cached the same way as one item. No model is run: the real
heads' figures, tables and case board files come from their kept runs (``mha.site.model_runs``);
the last line printed names the weights packages that are not installed, if any.

    python hooks/draw_figures.py                      # draw what changed
    python hooks/draw_figures.py --root DIR           # from DIR/mha into DIR/docs, DIR/.cache
    python hooks/draw_figures.py --only NAME[,NAME]   # only these (caseboard: the board's data)

``--root`` and ``--only`` are for the tests, which draw from a copy of ``mha/`` in a temporary
folder and never into the work tree.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# One drawing process per core, so each does its linear algebra on one thread. Left to itself,
# OpenBLAS starts a thread per core in every process, and on 2 cores the idle ones spin against
# each other: a cold drawing took 30 s (56 s of CPU) instead of 13 s (22 s). Also the same
# numbers (and so the same bytes) whichever way the figures are shared out. Set before NumPy
# is imported here and inherited by the workers.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

from _fingerprint import fingerprint, package_files  # noqa: E402 - hooks/_fingerprint.py

ROOT = Path(__file__).resolve().parents[1]


def figure_key(name: str, depends: tuple[str, ...], package: Path = ROOT / "mha") -> str:
    """Hash of the matplotlib version and of every source file the figure depends on.

    Every figure depends on the core (the files directly in ``mha/``), the style and the terms,
    besides the files named for it in ``mha.site.plots.DEPENDS`` (data files among them).
    """
    import matplotlib

    common = [relative for relative in package_files(package) if "/" not in relative]
    common += ["site/plots/__init__.py", "site/plots/_style.py", "site/terms.py"]
    return fingerprint(package, [*common, *depends], extra=[Path(__file__)],
                       salt=f"{name}\0{matplotlib.__version__}")


def write_if_changed(path: Path, data: bytes) -> bool:
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def make(kind: str, name: str, lang: str) -> bytes:
    """One figure (SVG) or table (Markdown) of ``mha.site.plots`` in one language."""
    from mha.site.plots import FIGURES, TABLES
    from mha.site.plots._style import render_svg

    if kind == "svg":
        return render_svg(FIGURES[name](lang))
    return TABLES[name](lang).encode("utf-8")


def make_into_cache(job: tuple[str, str, Path]) -> None:
    """Make every language of one figure or table into its cache folder (a worker's job)."""
    kind, name, folder = job
    from mha.site.plots import LANGUAGES

    for lang in LANGUAGES:
        cached = folder / lang / f"{name}.{kind}"
        if not cached.exists():
            write_if_changed(cached, make(kind, name, lang))


#: Where the case board's data goes, under the root, and what it is made from (under mha/).
CASEBOARD = Path("docs") / "assets" / "caseboard"
#: The real heads' files are copied from their kept run, every file under KEPT_CASEBOARD.
CASEBOARD_DEPENDS = ("site/caseboard.py", "site/experiments.py", "site/plots/case.py",
                     "site/model_runs.py")
KEPT_CASEBOARD = "site/data/caseboard/"


def caseboard_depends(package: Path) -> tuple[str, ...]:
    """What the case board's data is made from, under ``package``: `CASEBOARD_DEPENDS` and
    every kept file of the real heads."""
    return (*CASEBOARD_DEPENDS,
            *(p for p in package_files(package) if p.startswith(KEPT_CASEBOARD)))


def caseboard_data(root: Path) -> int:
    """Write the case board's data files under ``root / CASEBOARD`` (from the cache when its
    sources have not changed); remove files it no longer makes. Returns how many were written."""
    folder = root / ".cache" / "figures" / figure_key("caseboard", caseboard_depends(root / "mha"),
                                                      root / "mha")
    done = folder / "caseboard.done"
    if not done.exists():
        from mha.site.caseboard import files

        for relative, data in files().items():
            write_if_changed(folder / "caseboard" / relative, data)
        done.write_text("", encoding="utf-8")
    cached = {path.relative_to(folder / "caseboard"): path
              for path in (folder / "caseboard").rglob("*") if path.is_file()}
    target = root / CASEBOARD
    for stale in (target.rglob("*") if target.exists() else []):
        if stale.is_file() and stale.relative_to(target) not in cached:
            stale.unlink()
    return sum(write_if_changed(target / relative, path.read_bytes())
               for relative, path in cached.items())


def missing_models() -> list[str]:
    """The weights packages not installed here (or hidden by ``MHA_NO_MODELS``), each with
    the model it carries."""
    from mha.models import e5, minilm
    from mha.models.weights import WeightsNotInstalledError

    missing = []
    for module, model in ((minilm, "all-MiniLM-L6-v2"), (e5, "multilingual-e5-small")):
        try:
            module.model_folder()
        except WeightsNotInstalledError:
            missing.append(f"{module.PACKAGE} ({model})")
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw the site's figures and tables.")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the folder holding mha/; docs/ and .cache/ are written in it")
    parser.add_argument("--only", help="comma-separated names: draw only these")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    from mha.site.plots import DEPENDS, FIGURES, LANGUAGES, TABLES

    if set(DEPENDS) != set(FIGURES) | set(TABLES):
        raise SystemExit(f"mha.site.plots: DEPENDS and FIGURES + TABLES list different names: "
                         f"{sorted(set(DEPENDS) ^ (set(FIGURES) | set(TABLES)))}")
    only = set(args.only.split(",")) if args.only else {*DEPENDS, "caseboard"}
    if only - set(DEPENDS) - {"caseboard"}:
        raise SystemExit(f"no figure or table named {sorted(only - set(DEPENDS))}")
    outputs = {"svg": lambda lang, name: root / "docs" / lang / "figures" / f"{name}.svg",
               "md": lambda lang, name: root / ".cache" / "tables" / lang / f"{name}.md"}
    with_caseboard = "caseboard" in only
    only.discard("caseboard")
    items = [("svg", name) for name in FIGURES if name in only]
    items += [("md", name) for name in TABLES if name in only]
    folders = {name: root / ".cache" / "figures" / figure_key(name, DEPENDS[name], root / "mha")
               for _, name in items}
    jobs = [(kind, name, folders[name]) for kind, name in items
            if not all((folders[name] / lang / f"{name}.{kind}").exists() for lang in LANGUAGES)]
    # A cold build draws every figure: share them out between the cores (the output does not
    # depend on which process drew it). On Linux the workers are forked, so they start with the
    # modules imported above (matplotlib, mha.site.plots: a second of CPU each); elsewhere each
    # imports them (spawn).
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers > 1:
        start = "fork" if sys.platform == "linux" else "spawn"
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(start),
                                 initializer=sys.path.insert, initargs=(0, str(root))) as pool:
            list(pool.map(make_into_cache, jobs))
    else:
        for job in jobs:
            make_into_cache(job)
    written = 0
    for kind, name in items:
        for lang in LANGUAGES:
            written += write_if_changed(outputs[kind](lang, name),
                                        (folders[name] / lang / f"{name}.{kind}").read_bytes())
    for stale in (root / ".cache" / "tables").glob("*/*.md"):
        if stale.stem not in TABLES:  # gone from the registry: a page's marker must not find it
            stale.unlink()
    if with_caseboard:
        written += caseboard_data(root)
    figures = sum(kind == "svg" for kind, _ in items)
    print(f"{figures} figures and {len(items) - figures} tables x {len(LANGUAGES)} languages: "
          f"{len(jobs) * len(LANGUAGES)} drawn, {written} files updated")
    missing = missing_models()
    if missing:  # hooks/figures.py logs this line on every build (it starts with "real heads:")
        print(f"real heads: drawn from the kept runs in mha/site/data/, as in every build (no "
              f"model runs); not installed here, so not checked here against a fresh run: "
              f"{', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
