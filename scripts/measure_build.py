"""Measure the site build: strict build time, rebuild time under ``mkdocs serve``, page weights.

    .venv/bin/python scripts/measure_build.py [--runs 3] [--models with|without|both]

Prints medians over ``--runs`` runs, in one process, on this machine, of builds in a fresh copy
of the work tree (its files, without ``.git``, ``.cache/`` and what builds write), so that the
work tree and its caches are left alone and "cold" means a fresh clone's first build:

- full strict build, cold (empty ``.cache/``: figures drawn, notebooks executed) and warm,
  with the model packages installed and without them (``MHA_NO_MODELS=1``: `mha.models` finds
  neither package, as on a machine without them; the build draws the real heads from their
  kept runs either way), each with the CPU time of all its processes, which a machine others
  share changes less than the wall time (the load average is printed too);
- rebuild under ``mkdocs serve`` after editing one page: time from saving the file to the
  server's "Reloading browsers";
- the weight of the chapter page in each language (HTML + its figure) and of the shared assets
  every page loads (theme CSS, KaTeX CSS, preloaded fonts; Material's script apart, as it waits
  for the reader's first interaction), raw and gzip-compressed as GitHub Pages serves them.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1")
#: What a build writes, or git does not hold: never copied.
NOT_COPIED = {".git", ".venv", ".cache", "site", "build"}


def copy_of_work_tree(target: Path) -> Path:
    """The work tree's files, as a fresh clone with its edits would hold them, in ``target``."""
    def ignore(folder, names):
        relative = Path(folder).relative_to(ROOT)
        skipped = {n for n in names if n in NOT_COPIED and relative == Path(".")}
        skipped |= {n for n in names if n in ("__pycache__", ".pytest_cache", ".hypothesis")
                    or n.endswith(".egg-info")}
        if relative.parent == Path("docs") and "figures" in names:
            skipped.add("figures")                     # docs/<lang>/figures/: drawn
        if relative == Path("docs") / "assets" and "caseboard" in names:
            skipped.add("caseboard")                   # docs/assets/caseboard/: made
        return skipped

    shutil.copytree(ROOT, target, ignore=ignore, symlinks=True)
    return target


def make_cold(root: Path) -> None:
    """Remove what a build leaves for the next one."""
    shutil.rmtree(root / ".cache", ignore_errors=True)
    for figures in root.glob("docs/*/figures"):
        shutil.rmtree(figures)
    shutil.rmtree(root / "docs" / "assets" / "caseboard", ignore_errors=True)


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far, theirs included
    (Unix; 0 elsewhere)."""
    try:
        import resource
    except ImportError:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def strict_build(root: Path, site_dir: Path, env: dict) -> tuple[float, float]:
    """One strict build of ``root``: its wall time and the CPU time of all its processes (the
    drawing's workers and the notebooks' kernels too). On a machine others share, the CPU time
    moves less than the wall time; on an idle one with c cores, the wall time is at least
    CPU / c."""
    start, cpu = time.perf_counter(), children_cpu()
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                    str(site_dir)], cwd=root, env=env, check=True, capture_output=True)
    return time.perf_counter() - start, children_cpu() - cpu


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(process, pattern: str, timeout: float) -> float:
    """Read the server's log until a line matches; return when it did (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        line = process.stderr.readline()
        if not line:
            time.sleep(0.01)
            continue
        if re.search(pattern, line):
            return time.perf_counter()
    raise TimeoutError(f"no {pattern!r} from mkdocs serve within {timeout} s")


def serve_rebuild_times(root: Path, runs: int) -> list[float]:
    page = root / "docs" / "en" / "scores.md"
    original = page.read_bytes()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "--dev-addr", f"127.0.0.1:{port}"],
        cwd=root, env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    times = []
    try:
        wait_for(process, r"Serving on", 180)
        for run in range(runs):
            time.sleep(1.0)
            start = time.perf_counter()
            page.write_bytes(original + f"\n<!-- edit {run} -->\n".encode())
            times.append(wait_for(process, r"Reloading browsers", 120) - start)
        page.write_bytes(original)
        wait_for(process, r"Reloading browsers", 120)
    finally:
        page.write_bytes(original)
        process.terminate()
        process.wait(timeout=30)
    return times


def weight(paths: list[Path]) -> tuple[int, int]:
    raw = sum(p.stat().st_size for p in paths)
    zipped = sum(len(gzip.compress(p.read_bytes(), compresslevel=6)) for p in paths)
    return raw, zipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--models", choices=("with", "without", "both"), default="both",
                        help="build with the model packages, without them (MHA_NO_MODELS=1), "
                        "or both, alternating (default)")
    args = parser.parse_args()
    settings = {"with": {"with the model packages": ENV},
                "without": {"without them": dict(ENV, MHA_NO_MODELS="1")}}
    settings["both"] = {**settings["with"], **settings["without"]}
    settings = settings[args.models]

    load = os.getloadavg() if hasattr(os, "getloadavg") else "?"
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_of_work_tree(Path(tmp) / "tree")
        site = Path(tmp) / "site"
        cold: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
        warm: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
        for _ in range(args.runs):      # alternating, so that a busy moment hits both alike
            for name, env in settings.items():
                make_cold(root)
                cold[name].append(strict_build(root, site, env))
                warm[name].append(strict_build(root, site, env))
        rebuild = serve_rebuild_times(root, args.runs)

        def report(what: str, times: list[float], cpu: list[float] | None = None) -> None:
            line = (f"{what:<62}median {statistics.median(times):5.1f} s  "
                    f"{[round(t, 1) for t in times]}")
            if cpu:
                line += f"  (CPU median {statistics.median(cpu):.1f} s)"
            print(line)

        print(f"{os.cpu_count()} cores; load average before and after: {load}, "
              f"{os.getloadavg() if hasattr(os, 'getloadavg') else '?'}")
        for name in settings:
            for what, runs in (("cold (figures drawn, notebooks run)", cold[name]),
                               ("warm (caches kept)", warm[name])):
                report(f"strict build, {what}, {name}:", [wall for wall, _ in runs],
                       [cpu for _, cpu in runs])
        report("rebuild under mkdocs serve after editing one page:", rebuild)

        for prefix in ("", "en/"):
            html = site / prefix / "scores" / "index.html"
            figures = [site / prefix / "figures" / name for name in
                       re.findall(r'src="[./]*figures/([^"]+)"', html.read_text(encoding="utf-8"))]
            raw, zipped = weight([html, *figures])
            print(f"chapter page /{prefix}scores/ (HTML + {len(figures)} figure): "
                  f"{raw / 1024:.0f} KiB, {zipped / 1024:.0f} KiB gzip")
        html = (site / "scores" / "index.html").read_text(encoding="utf-8")
        # Material's script waits for the reader's first interaction (overrides/main.html).
        lazy = r'<script[^>]*data-md-lazy[^>]*src="\.\./(assets/[^"]+)"'
        later = {site / m for m in re.findall(lazy, html)}
        shared = sorted({site / m for m in re.findall(r'(?:href|src)="\.\./(assets/[^"]+)"', html)
                         if (site / m).is_file()} - later)
        raw, zipped = weight(shared)
        print(f"shared assets every page loads ({len(shared)} files: CSS, favicon, preloaded "
              f"fonts): {raw / 1024:.0f} KiB, {zipped / 1024:.0f} KiB gzip")
        raw, zipped = weight(sorted(later))
        print(f"  + on the reader's first interaction ({len(later)} file, Material's script): "
              f"{raw / 1024:.0f} KiB, {zipped / 1024:.0f} KiB gzip")
        fonts = list((site / "assets" / "katex" / "fonts").glob("*.woff2"))
        print(f"KaTeX fonts available (a page loads only those it uses): {len(fonts)} files, "
              f"{weight(fonts)[0] / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
