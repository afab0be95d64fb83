#!/usr/bin/env python3
"""Re-create docs/assets/katex/ from the KaTeX release pinned in scripts/katex/.

The site never needs Node: the files this script writes are committed, and MkDocs serves them
from the site's own origin (no CDN, so the maths renders for readers in mainland China too).
Node and npm are needed only to run this script, i.e. when KaTeX is upgraded:

    1. edit the exact version in scripts/katex/package.json;
    2. cd scripts/katex && npm install --package-lock-only --ignore-scripts
       (keep the lockfile free of `resolved` registry URLs: omit-lockfile-registry-resolved=true);
    3. python3 scripts/vendor_katex.py
    4. python3 -m pytest tests/test_katex_vendor.py, update NOTICE.md, commit.

What it does: `npm ci --ignore-scripts` in a temporary copy of scripts/katex (npm ci installs
exactly the lockfile and refuses a tarball whose sha512 differs from the lockfile's `integrity`),
then copies from node_modules/katex/dist/ into docs/assets/katex/:

    katex.min.js, katex.min.css (each @font-face `src` cut down to its woff2 url),
    fonts/*.woff2 (no woff or ttf), and KaTeX's LICENSE,

and writes MANIFEST.json (version, lockfile integrity, sha256 of every vendored file). The output
depends only on the tarball, so running the script twice gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN_DIR = ROOT / "scripts" / "katex"
DEST = ROOT / "docs" / "assets" / "katex"
MANIFEST = "MANIFEST.json"

FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}")
SRC_DECL = re.compile(r"(?<![-\w])src\s*:\s*([^;}]*)")
URL = re.compile(r"url\(\s*(['\"]?)([^'\")]+)\1\s*\)")


def fail(message: str) -> None:
    sys.exit(f"vendor_katex: {message}")


def pinned() -> tuple[str, str]:
    """The exact version in package.json and the version + integrity of katex in the lockfile."""
    package = json.loads((PIN_DIR / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((PIN_DIR / "package-lock.json").read_text(encoding="utf-8"))
    wanted = package["dependencies"]["katex"]
    if not re.fullmatch(r"\d+\.\d+\.\d+", wanted):
        fail(f"package.json must pin katex at one exact version, not {wanted!r}")
    entry = lock["packages"]["node_modules/katex"]
    if entry["version"] != wanted:
        fail(f"lockfile has katex {entry['version']}, package.json pins {wanted}: "
             "re-run npm install --package-lock-only --ignore-scripts in scripts/katex")
    integrity = entry.get("integrity", "")
    if not integrity.startswith("sha512-"):
        fail(f"lockfile has no sha512 integrity for katex: {integrity!r}")
    return wanted, integrity


def install(workdir: Path) -> Path:
    """npm ci in a copy of scripts/katex; returns node_modules/katex."""
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PIN_DIR / name, workdir / name)
    npm = shutil.which("npm")
    if npm is None:
        fail("npm is not on PATH (Node is needed to re-vendor KaTeX, never to build the site)")
    env = dict(os.environ, npm_config_engine_strict="false", npm_config_audit="false",
               npm_config_fund="false", npm_config_update_notifier="false")
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
                   cwd=workdir, env=env, check=True)
    return workdir / "node_modules" / "katex"


def woff2_only(css: str) -> tuple[str, list[str]]:
    """Cut every @font-face src down to its one woff2 url; return the CSS and the fonts used."""
    fonts: list[str] = []

    def rewrite_face(face: re.Match[str]) -> str:
        block = face.group(0)
        srcs = SRC_DECL.findall(block)
        if len(srcs) != 1:
            fail(f"expected one src in {block[:80]}…")
        kept = [entry.strip() for entry in srcs[0].split(",")
                if (m := URL.search(entry)) and m.group(2).endswith(".woff2")]
        if len(kept) != 1:
            fail(f"expected exactly one woff2 url in {block[:80]}…")
        fonts.append(URL.search(kept[0]).group(2))
        return SRC_DECL.sub(lambda _: "src:" + kept[0], block, count=1)

    out, faces = FONT_FACE.subn(rewrite_face, css)
    if faces == 0:
        fail("no @font-face rules found in katex.min.css: has its layout changed?")
    leftover = [u for _, u in URL.findall(out) if not u.endswith(".woff2")]
    if leftover:
        fail(f"urls other than woff2 remain in the CSS: {leftover[:3]}")
    return out, fonts


def vendor(package: Path, stage: Path, version: str) -> None:
    meta = json.loads((package / "package.json").read_text(encoding="utf-8"))
    if meta["version"] != version:
        fail(f"npm installed katex {meta['version']}, expected {version}")
    dist = package / "dist"
    shutil.copyfile(dist / "katex.min.js", stage / "katex.min.js")
    shutil.copyfile(package / "LICENSE", stage / "LICENSE")

    css, fonts = woff2_only((dist / "katex.min.css").read_text(encoding="utf-8"))
    (stage / "katex.min.css").write_bytes(css.encode("utf-8"))

    available = sorted(p.name for p in (dist / "fonts").glob("*.woff2"))
    referenced = sorted({Path(f).name for f in fonts})
    if any(not f.startswith("fonts/") for f in fonts) or referenced != available:
        fail(f"CSS fonts {referenced} do not match dist/fonts/*.woff2 {available}")
    (stage / "fonts").mkdir()
    for name in available:
        shutil.copyfile(dist / "fonts" / name, stage / "fonts" / name)


def write_manifest(stage: Path, version: str, integrity: str) -> None:
    files = {
        path.relative_to(stage).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(stage.rglob("*")) if path.is_file()
    }
    manifest = {
        "package": "katex",
        "version": version,
        "integrity": integrity,
        "license": "MIT",
        "source": "npm package katex: dist/katex.min.js, dist/katex.min.css "
                  "(@font-face src cut to woff2), dist/fonts/*.woff2, LICENSE",
        "regenerate": "python3 scripts/vendor_katex.py",
        "files": dict(sorted(files.items())),
    }
    text = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    (stage / MANIFEST).write_bytes(text.encode("utf-8"))


def main() -> None:
    version, integrity = pinned()
    with tempfile.TemporaryDirectory(prefix="vendor-katex-") as tmp:
        tmp_path = Path(tmp)
        work, stage = tmp_path / "npm", tmp_path / "katex"
        work.mkdir()
        stage.mkdir()
        vendor(install(work), stage, version)
        write_manifest(stage, version, integrity)
        # Replace the whole folder, so files dropped by a new release do not linger.
        if DEST.exists():
            shutil.rmtree(DEST)
        DEST.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(stage, DEST, copy_function=shutil.copyfile)
    total = sum(p.stat().st_size for p in DEST.rglob("*") if p.is_file())
    count = sum(1 for p in DEST.rglob("*") if p.is_file())
    print(f"vendored katex {version} into {DEST.relative_to(ROOT)}: {count} files, {total} bytes")


if __name__ == "__main__":
    main()
