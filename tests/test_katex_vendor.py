"""The vendored KaTeX in docs/assets/katex/ is the pinned release, complete, and self-contained.

No network and no Node: these tests read the committed files only. scripts/vendor_katex.py makes
the files; scripts/katex/package-lock.json pins the release and its sha512.
"""

import hashlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "docs" / "assets"
KATEX = ASSETS / "katex"
PIN = ROOT / "scripts" / "katex"

# Absolute URLs that KaTeX's JavaScript uses as XML namespace names (createElementNS, xmlns):
# identifiers, never fetched. Any other absolute URL in a .js or .css file fails the test.
NAMESPACE_URIS = {"http://www.w3.org/2000/svg", "http://www.w3.org/1998/Math/MathML"}

CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)", re.S)
CSS_IMPORT = re.compile(r"@import\s+(?:url\(\s*)?(['\"]?)([^'\")\s;]+)", re.I)
ABSOLUTE_URL = re.compile(r"(?:https?:)?//[^\s'\"`)<>]*", re.I)
JS_ABSOLUTE = re.compile(r"https?://[^\s'\"`)<>\\]*", re.I)
# A string literal that starts a protocol-relative URL ("//cdn.example/x.js").
JS_PROTOCOL_RELATIVE = re.compile(r"""["'`]//[a-z0-9-]+(?:\.[a-z0-9-]+)+""", re.I)
FONT_FACE = re.compile(r"@font-face\s*\{([^}]*)\}")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def manifest() -> dict:
    return load(KATEX / "MANIFEST.json")


def is_relative(url: str) -> bool:
    """A reference resolved against the file that makes it: no scheme, no host, no leading /."""
    return not re.match(r"^(?:[a-z][a-z0-9+.-]*:|/)", url.strip(), re.I)


# (a) -------------------------------------------------------------------------------------------

def test_manifest_matches_the_lockfile_and_the_exact_pin(manifest):
    lock = load(PIN / "package-lock.json")["packages"]["node_modules/katex"]
    pinned = load(PIN / "package.json")["dependencies"]["katex"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"pin one exact version, not {pinned!r}"
    assert lock["version"] == pinned
    assert lock["integrity"].startswith("sha512-")
    assert manifest["package"] == "katex"
    assert manifest["version"] == lock["version"]
    assert manifest["integrity"] == lock["integrity"]


def test_lockfile_names_no_registry_host():
    """npm ci works from name + version + integrity; `resolved` URLs would name a host."""
    for name, entry in load(PIN / "package-lock.json")["packages"].items():
        assert "resolved" not in entry, f"{name or 'root'} has a resolved URL"


def test_notice_lists_the_vendored_release(manifest):
    notice = (ROOT / "NOTICE.md").read_text(encoding="utf-8")
    rows = [line for line in notice.splitlines()
            if line.startswith("|") and "docs/assets/katex/" in line]
    assert len(rows) == 1, "NOTICE.md needs one table row for docs/assets/katex/"
    assert f"KaTeX {manifest['version']}" in rows[0] and "MIT" in rows[0]


# (b) -------------------------------------------------------------------------------------------

def test_every_listed_file_has_its_sha256(manifest):
    assert manifest["files"], "the manifest lists no files"
    for rel, digest in manifest["files"].items():
        path = KATEX / rel
        assert path.is_file(), f"{rel} is listed but missing"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{rel} was changed"


def test_folder_holds_exactly_the_listed_files(manifest):
    on_disk = {p.relative_to(KATEX).as_posix() for p in KATEX.rglob("*") if p.is_file()}
    assert on_disk == set(manifest["files"]) | {"MANIFEST.json"}
    assert list(manifest["files"]) == sorted(manifest["files"])
    for required in ("katex.min.js", "katex.min.css", "LICENSE"):
        assert required in manifest["files"]


def test_license_is_katex_mit(manifest):
    text = (KATEX / "LICENSE").read_text(encoding="utf-8")
    assert manifest["license"] == "MIT"
    assert "MIT License" in text and "Khan Academy" in text


# (c) -------------------------------------------------------------------------------------------

def test_css_references_only_existing_woff2_fonts():
    css_path = KATEX / "katex.min.css"
    css = css_path.read_text(encoding="utf-8")
    faces = FONT_FACE.findall(css)
    assert faces, "no @font-face rules in katex.min.css"
    for face in faces:
        (src,) = re.findall(r"(?<![-\w])src\s*:\s*([^;]*)", face)
        assert re.fullmatch(r"""url\([^)]*\.woff2\)\s*format\(["']woff2["']\)""", src.strip()), (
            f"@font-face src must list only its woff2 url: {src}")

    urls = [url for _, url in CSS_URL.findall(css)]
    assert urls
    for url in urls:
        assert url.endswith(".woff2"), f"non-woff2 url in katex.min.css: {url}"
        assert is_relative(url), url
        assert (css_path.parent / url).resolve().is_file(), f"font {url} is missing"

    fonts = {p.name for p in (KATEX / "fonts").iterdir()}
    assert fonts == {Path(url).name for url in urls}, "fonts folder and CSS disagree"


# (d) -------------------------------------------------------------------------------------------

def site_code() -> list[Path]:
    files = sorted(p for p in ASSETS.rglob("*") if p.suffix in {".css", ".js"})
    assert any(p.suffix == ".css" for p in files) and any(p.suffix == ".js" for p in files)
    return files


@pytest.mark.parametrize("path", [p for p in site_code() if p.suffix == ".css"],
                         ids=lambda p: p.relative_to(ASSETS).as_posix())
def test_css_fetches_nothing_from_another_origin(path):
    css = path.read_text(encoding="utf-8")
    for _, url in CSS_URL.findall(css) + CSS_IMPORT.findall(css):
        assert is_relative(url), f"{path.name}: url({url}) is not relative"
    without_comments = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    stray = [u for u in ABSOLUTE_URL.findall(without_comments) if u != "//"]
    assert not stray, f"{path.name}: absolute URLs {stray[:3]}"


@pytest.mark.parametrize("path", [p for p in site_code() if p.suffix == ".js"],
                         ids=lambda p: p.relative_to(ASSETS).as_posix())
def test_js_fetches_nothing_from_another_origin(path):
    js = path.read_text(encoding="utf-8")
    absolute = set(JS_ABSOLUTE.findall(js)) - NAMESPACE_URIS
    assert not absolute, f"{path.name}: absolute URLs {sorted(absolute)[:3]}"
    assert not JS_PROTOCOL_RELATIVE.findall(js), f"{path.name}: protocol-relative URL"
    for pattern in (r"""\bimport\s*\(\s*["'`](?![./])""", r"""\bfrom\s*["'`](?![./])""",
                    r"""\bimportScripts\s*\(""", r"""\.src\s*=\s*["'`](?![./])"""):
        assert not re.search(pattern, js), f"{path.name}: {pattern} loads from outside"


# The checks themselves: each one must be able to fail ------------------------------------------

def test_the_url_checks_catch_what_they_are_for():
    bad_css = '@font-face{src:url(https://cdn.example/f.woff2) format("woff2")}' \
              '@import "//cdn.example/x.css";'
    urls = [u for _, u in CSS_URL.findall(bad_css) + CSS_IMPORT.findall(bad_css)]
    assert urls and not any(is_relative(u) for u in urls)
    assert is_relative("fonts/KaTeX_Main-Regular.woff2")
    assert not is_relative("/assets/katex/fonts/x.woff2")
    assert set(JS_ABSOLUTE.findall('s.src="https://cdn.example/katex.js"')) - NAMESPACE_URIS
    assert JS_PROTOCOL_RELATIVE.findall('s.src = "//cdn.example/katex.js"')
    assert not set(JS_ABSOLUTE.findall(
        'document.createElementNS("http://www.w3.org/2000/svg","svg")')) - NAMESPACE_URIS
