"""MkDocs hook: page markers.

- ``<!-- mha:table NAME -->`` becomes the table ``NAME`` of ``mha.site.plots.TABLES`` in the
  page's language: the glossary (from ``mha/site/terms.py``), the benchmark run the repository
  keeps (``mha/site/data/benchmark.json``), the head-role table. ``hooks/draw_figures.py``
  computes every one of them from ``mha`` (with the figures, in a subprocess, cached on its
  sources) into ``.cache/tables/<lang>/NAME.md``; this hook only reads them.
- ``<!-- mha:repository -->`` becomes the address of the repository the site is built from, as
  plain text (so it works inside a code block and as a link target): ``extra.repository`` in
  ``mkdocs.yml``, which the Pages workflow sets from the repository it runs in (``REPO_URL``);
  without it, the ``origin`` remote of the working copy being built (an SSH address is turned
  into its HTTPS form), or the working copy's own folder when there is no remote.
- Any other ``<!-- mha:… -->`` marker, or a table the registry does not have, fails the build.

(The glossary's Chinese terms go into search's word list in ``hooks/search_cache.py``, only when
a page is indexed again.)
"""

from __future__ import annotations

import re
import runpy
import subprocess
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*mha:([\w-]+)(?:\s+([\w-]+))?\s*-->")
TABLES = ROOT / ".cache" / "tables"


def load_terms() -> dict:
    """The terms module's names, read from disk on every build (so ``mkdocs serve`` sees edits)."""
    return runpy.run_path(str(ROOT / "mha" / "site" / "terms.py"))


def page_language(page, config) -> str:
    lang = getattr(page.file, "locale", None) or config["theme"]["language"]
    if lang not in load_terms()["LANGUAGES"]:
        raise PluginError(f"{page.file.src_uri}: no language known for locale {lang!r}")
    return lang


def repository_address(configured: str | None, root: Path = ROOT) -> str:
    """Where readers get the code: ``configured`` if set, else the working copy's ``origin``."""
    if configured:
        return configured.rstrip("/")
    try:
        origin = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(root)
    ssh = re.fullmatch(r"[\w.-]+@([\w.-]+):(.+)", origin)  # git@host:owner/name.git
    if ssh:
        origin = f"https://{ssh.group(1)}/{ssh.group(2)}"
    return re.sub(r"\.git$", "", origin) if "://" in origin else origin


def on_page_markdown(markdown, page, config, files):
    def replace(match):
        name, argument = match.groups()
        if name == "repository" and argument is None:
            return repository_address(config["extra"].get("repository"))
        if name != "table":
            raise PluginError(f"{page.file.src_uri}: unknown marker <!-- mha:{name} -->")
        table = argument
        path = TABLES / page_language(page, config) / f"{table}.md"
        if table is None or not path.is_file():
            raise PluginError(f"{page.file.src_uri}: no table {table!r} "
                              f"(mha.site.plots.TABLES, drawn into {path.parent})")
        return path.read_text(encoding="utf-8")

    return MARKER.sub(replace, markdown)
