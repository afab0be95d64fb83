#!/usr/bin/env python3
"""Lighthouse scores of the built site, as a reader on a phone would get them.

Builds the site (strict) into a temporary folder for a free port on 127.0.0.1, serves it gzipped
as GitHub Pages does (``scripts/serve_site.py``), and runs Lighthouse (from the npm registry,
pinned below, installed once into ``~/.cache/attention-detectives/``) with Debian's Chromium on
the home page, the chapter and the case board in both languages, or with ``--all`` on every page
of the site in both languages (the pages its ``sitemap.xml`` lists): mobile form factor
(Lighthouse's default), categories performance, accessibility, best practices and SEO. Each page
is audited three times and the run with the median performance score is kept (performance varies
from run to run; the other categories do not). Prints a table of the scores, the total blocking
time and the speed index of each page, and every audit that lost points, and exits non-zero when
any score is below the threshold or a page's total blocking time above its limit.

    .venv/bin/python scripts/lighthouse.py                       # threshold 0.95, 3 runs a page
    .venv/bin/python scripts/lighthouse.py --all                 # every page, both languages
    .venv/bin/python scripts/lighthouse.py --runs 1 --reports out/   # keep HTML and JSON reports
    .venv/bin/python scripts/lighthouse.py --base-url http://127.0.0.1:8000/ --pages scores/
                                            # audit a running `mkdocs serve` / serve_site.py

``--jobs N`` runs N audits at once, each in its own Chromium and temporary folder. Lighthouse
multiplies the main-thread time it observes (a simulated phone 4x slower than this CPU), so
audits that share the CPU lower each other's performance scores and raise their blocking times:
keep N at most half the CPUs for numbers to compare, and 1 (the default) for the record.

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
import urllib.request
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_site import ROOT, build_site, free_port, serve  # noqa: E402

LIGHTHOUSE_VERSION = "12.8.2"  # 13.x needs Node >= 22.19; Debian/NodeSource here ship Node 20
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attention-detectives"
CHROME = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
CHROME_FLAGS = "--headless=new --no-sandbox --disable-gpu"
CATEGORIES = ["performance", "accessibility", "best-practices", "seo"]
PAGES = ["", "scores/", "caseboard/", "en/", "en/scores/", "en/caseboard/"]
#: The issue's bar for every page (#31): total blocking time at most this, in ms.
MAX_TBT_MS = 200
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


def sitemap_pages(sitemap_xml: bytes | str) -> list[str]:
    """Every page a site's ``sitemap.xml`` lists, as a path under the site's root ("" for the
    home page): MkDocs writes one entry per page, both languages' (the root is the shortest
    address, so a site built for any address or sub-path gives the same paths)."""
    locations = [loc.text.strip() for loc in ElementTree.fromstring(sitemap_xml).iter(
        f"{SITEMAP}loc")]
    if not locations:
        raise SystemExit("lighthouse.py: the sitemap lists no page")
    root = min(locations, key=len)
    if not all(location.startswith(root) for location in locations):
        raise SystemExit(f"lighthouse.py: not every page of the sitemap is under {root}")
    return sorted(location[len(root):] for location in locations)


def read_sitemap(base_url: str) -> bytes:
    with urllib.request.urlopen(base_url + "sitemap.xml", timeout=30) as response:
        return response.read()


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
    pages = parser.add_mutually_exclusive_group()
    pages.add_argument("--pages", nargs="+", default=PAGES, metavar="PATH",
                       help="paths under the site root (default: %(default)s)")
    pages.add_argument("--all", action="store_true",
                       help="every page of the site, both languages (its sitemap.xml)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run N audits at once (see above: more than half the CPUs "
                             "lowers the performance scores)")
    parser.add_argument("--max-tbt", type=float, default=MAX_TBT_MS, metavar="MS",
                        help="fail a page whose total blocking time is above this "
                             "(default: %(default)s)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.runs < 1:
        parser.error("--jobs and --runs must be at least 1")
    if not Path(CHROME).exists():
        raise SystemExit(f"lighthouse.py: {CHROME} is missing (apt-get install chromium)")
    binary = lighthouse_binary()

    def audit(base_url: str) -> dict:
        paths = sitemap_pages(read_sitemap(base_url)) if args.all else args.pages
        jobs = [(path, run) for path in paths for run in range(args.runs)]

        def one(job):
            path, run = job
            url = base_url + path
            name = path.strip("/").replace("/", "-") or "home"
            print(f"lighthouse {url}" + (f" (run {run + 1})" if args.runs > 1 else ""),
                  flush=True)
            return run_lighthouse(binary, url, args.reports,
                                  f"{name}-{run + 1}" if args.runs > 1 else name)

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            lhrs = list(pool.map(one, jobs))
        results = {}
        for path in paths:
            runs = sorted((lhr for (p, _), lhr in zip(jobs, lhrs) if p == path),
                          key=lambda lhr: lhr["categories"]["performance"]["score"] or 0)
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
          + "TBT (ms)".rjust(10) + "SI (s)".rjust(8) + "benchmarkIndex".rjust(16))
    failed = False
    for page, lhr in results.items():
        scores = [lhr["categories"][c]["score"] for c in CATEGORIES]
        tbt = lhr["audits"]["total-blocking-time"].get("numericValue")
        speed = lhr["audits"]["speed-index"].get("numericValue")
        failed |= any(s is None or s < args.threshold for s in scores)
        failed |= tbt is None or tbt > args.max_tbt
        print(page.ljust(width) + "".join(
            ("-" if s is None else f"{s:.2f}").rjust(16) for s in scores)
            + ("-" if tbt is None else f"{tbt:,.0f}").rjust(10)
            + ("-" if speed is None else f"{speed / 1000:.1f}").rjust(8)
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
    print(f"\n{'FAIL' if failed else 'OK'}: threshold {args.threshold}, total blocking time "
          f"at most {args.max_tbt:g} ms, {len(results)} pages "
          f"(lighthouse {LIGHTHOUSE_VERSION}, {CHROME}, {args.jobs} at once)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
