"""Measure the site build: strict build time, rebuild time under ``mkdocs serve``, page weights.

    .venv/bin/python scripts/measure_build.py [--runs 3]

Prints medians over ``--runs`` runs, in one process, on this machine:

- full strict build, cold (empty ``.cache/``: figures drawn, notebooks executed) and warm;
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


def strict_build(site_dir: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                    str(site_dir)], cwd=ROOT, env=ENV, check=True, capture_output=True)
    return time.perf_counter() - start


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


def serve_rebuild_times(runs: int) -> list[float]:
    page = ROOT / "docs" / "en" / "scores.md"
    original = page.read_bytes()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "--dev-addr", f"127.0.0.1:{port}"],
        cwd=ROOT, env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        cold = []
        for _ in range(args.runs):
            shutil.rmtree(ROOT / ".cache", ignore_errors=True)
            for lang in ("zh", "en"):
                shutil.rmtree(ROOT / "docs" / lang / "figures", ignore_errors=True)
            cold.append(strict_build(site))
        warm = [strict_build(site) for _ in range(args.runs)]
        rebuild = serve_rebuild_times(args.runs)

        print(f"strict build, cold (figures drawn, notebooks executed): "
              f"median {statistics.median(cold):.1f} s  {[round(t, 1) for t in cold]}")
        print(f"strict build, warm (caches kept):                       "
              f"median {statistics.median(warm):.1f} s  {[round(t, 1) for t in warm]}")
        print(f"rebuild under mkdocs serve after editing one page:      "
              f"median {statistics.median(rebuild):.1f} s  {[round(t, 1) for t in rebuild]}")

        for prefix in ("", "en/"):
            html = site / prefix / "scores" / "index.html"
            figures = [site / prefix / "figures" / name for name in
                       re.findall(r'src="[./]*figures/([^"]+)"', html.read_text("utf-8"))]
            raw, zipped = weight([html, *figures])
            print(f"chapter page /{prefix}scores/ (HTML + {len(figures)} figure): "
                  f"{raw / 1024:.0f} KiB, {zipped / 1024:.0f} KiB gzip")
        html = (site / "scores" / "index.html").read_text("utf-8")
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
