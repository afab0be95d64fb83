#!/usr/bin/env python3
"""Lighthouse scores of the built site, as a reader on a phone would get them.

Builds the site (strict) into a temporary folder for a free port on 127.0.0.1, serves it gzipped
as GitHub Pages does (``scripts/serve_site.py``), and runs Lighthouse (from the npm registry,
pinned below, installed once into ``~/.cache/attention-detectives/``) with Debian's Chromium on
the home page, the chapter and the case board in both languages: mobile form factor
(Lighthouse's default), categories performance, accessibility, best practices and SEO. Each page
is audited three times and the run with the median performance score is kept (performance varies
from run to run; the other categories do not). Prints a table of the scores and every audit that
lost points, and exits non-zero when any score is below the threshold.

    .venv/bin/python scripts/lighthouse.py                       # threshold 0.95, 3 runs a page
    .venv/bin/python scripts/lighthouse.py --runs 1 --reports out/   # keep HTML and JSON reports
    .venv/bin/python scripts/lighthouse.py --base-url http://127.0.0.1:8000/ --pages scores/
                                            # audit a running `mkdocs serve` / serve_site.py

Not part of the test command: it needs Node.js and npm (Debian: apt-get install nodejs npm), the
npm registry once, and 1-5 minutes. Performance is measured on this machine's CPU: run it on an
otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_site import ROOT, build_site, free_port, serve  # noqa: E402

LIGHTHOUSE_VERSION = "12.8.2"  # 13.x needs Node >= 22.19; Debian/NodeSource here ship Node 20
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-detectives"
CHROME = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
CHROME_FLAGS = "--headless=new --no-sandbox --disable-gpu"
CATEGORIES = ["performance", "accessibility", "best-practices", "seo"]
PAGES = ["", "scores/", "caseboard/", "en/", "en/scores/", "en/caseboard/"]


def lighthouse_binary() -> Path:
    """The pinned Lighthouse, installed with npm into the cache folder if it is not there yet."""
    prefix = CACHE / f"lighthouse-{LIGHTHOUSE_VERSION}"
    binary = prefix / "node_modules" / ".bin" / "lighthouse"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if not npm:
        raise SystemExit("lighthouse.py: npm is missing (Debian/Ubuntu: apt-get install npm)")
    prefix.mkdir(parents=True, exist_ok=True)
    print(f"installing lighthouse@{LIGHTHOUSE_VERSION} into {prefix}", flush=True)
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                    f"lighthouse@{LIGHTHOUSE_VERSION}"], check=True)
    return binary


def run_lighthouse(binary: Path, url: str, reports: Path | None, name: str) -> dict:
    """The Lighthouse result (LHR) of one URL."""
    with tempfile.TemporaryDirectory(prefix="lighthouse-") as temp:
        base = Path(temp) / "report"
        command = [str(binary), url, "--quiet", f"--chrome-flags={CHROME_FLAGS}",
                   f"--only-categories={','.join(CATEGORIES)}",
                   "--output=json", "--output=html", f"--output-path={base}"]
        env = dict(os.environ, CHROME_PATH=CHROME)
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"lighthouse failed on {url}:\n{result.stdout}{result.stderr}")
        report_json = base.with_name("report.report.json")
        report_html = base.with_name("report.report.html")
        if reports:
            reports.mkdir(parents=True, exist_ok=True)
            shutil.copy(report_json, reports / f"{name}.json")
            shutil.copy(report_html, reports / f"{name}.html")
        return json.loads(report_json.read_text(encoding="utf-8"))


def lost_points(lhr: dict) -> list[str]:
    """The audits that cost points: scored (weight > 0) and below 1, per category."""
    lines = []
    for category in CATEGORIES:
        for ref in lhr["categories"][category]["auditRefs"]:
            audit = lhr["audits"][ref["id"]]
            score = audit.get("score")
            if ref.get("weight", 0) > 0 and score is not None and score < 1:
                value = f" ({audit['displayValue']})" if audit.get("displayValue") else ""
                lines.append(f"    {category}: {ref['id']} score {score:.2f}{value}")
                for item in (audit.get("details") or {}).get("items", [])[:5]:
                    node = item.get("node") or {}
                    where = node.get("snippet") or item.get("url") or item.get("source") or ""
                    if where:
                        lines.append(f"        {str(where)[:160]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--reports", type=Path, help="keep each page's HTML and JSON report here")
    parser.add_argument("--runs", type=int, default=3,
                        help="run each page N times and keep the run with the median "
                             "performance score (Lighthouse's own advice against noise)")
    parser.add_argument("--base-url", help="audit a site already served there instead of "
                                           "building one (it must have been built for that URL)")
    parser.add_argument("--pages", nargs="+", default=PAGES, metavar="PATH",
                        help="paths under the site root (default: %(default)s)")
    args = parser.parse_args(argv)
    if not Path(CHROME).exists():
        raise SystemExit(f"lighthouse.py: {CHROME} is missing (apt-get install chromium)")
    binary = lighthouse_binary()

    def audit(base_url: str) -> dict:
        results = {}
        for path in args.pages:
            url = base_url + path
            name = path.strip("/").replace("/", "-") or "home"
            runs = []
            for run in range(args.runs):
                print(f"lighthouse {url}" + (f" (run {run + 1})" if args.runs > 1 else ""),
                      flush=True)
                runs.append(run_lighthouse(binary, url, args.reports,
                                           f"{name}-{run + 1}" if args.runs > 1 else name))
            runs.sort(key=lambda lhr: lhr["categories"]["performance"]["score"] or 0)
            results["/" + path] = runs[len(runs) // 2]
        return results

    if args.base_url:
        results = audit(args.base_url.rstrip("/") + "/")
    else:
        python = ROOT / ".venv" / "bin" / "python"
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="lighthouse-site-") as site_dir:
            print(f"building the site for http://127.0.0.1:{port}/", flush=True)
            build_site(site_dir, f"http://127.0.0.1:{port}/",
                       python=str(python) if python.exists() else sys.executable)
            with serve(site_dir, port=port, gzip=True) as base_url:
                results = audit(base_url)

    width = max(len(page) for page in results) + 2
    print("\n" + "page".ljust(width) + "".join(c.rjust(16) for c in CATEGORIES)
          + "benchmarkIndex".rjust(16))
    failed = False
    for page, lhr in results.items():
        scores = [lhr["categories"][c]["score"] for c in CATEGORIES]
        failed |= any(s is None or s < args.threshold for s in scores)
        print(page.ljust(width) + "".join(
            ("-" if s is None else f"{s:.2f}").rjust(16) for s in scores)
            + f"{lhr['environment'].get('benchmarkIndex', 0):16.0f}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > 0.5 * (os.cpu_count() or 1):
        print(f"\nnote: load average {load:.1f} on {os.cpu_count()} CPUs. Lighthouse multiplies "
              "the main-thread time it observes (simulated 4x slower phone), so other work on "
              "this machine lowers the performance scores; the other categories do not depend "
              "on it.")
    for page, lhr in results.items():
        lines = lost_points(lhr)
        if lines:
            print(f"\n{page}: audits that lost points")
            print("\n".join(lines))
    print(f"\n{'FAIL' if failed else 'OK'}: threshold {args.threshold} "
          f"(lighthouse {LIGHTHOUSE_VERSION}, {CHROME})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
