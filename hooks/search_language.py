"""MkDocs hook: each language searches its own pages.

mkdocs-static-i18n gathers every language's pages into one search index, so a reader on the
English side who searches "scaling" is shown Chinese pages first, and 缩放 lists English pages.
Material's script reads the index from ``<base>/search/search_index.json``, where ``base`` comes
from the page's ``__config``, and resolves each result's ``location`` against that same base.
So after the build this hook splits the index in two: the Chinese entries stay in
``search/search_index.json``, the English ones move to ``en/search/search_index.json`` with
their ``en/`` prefix removed; and every English page's ``__config.base`` points one folder
deeper, at ``en/``. Nothing else in Material's script reads ``base`` on this site (no versions,
no instant navigation); the palette's storage scope is set apart from it (``__md_scope``).
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from mkdocs.plugins import event_priority

#: The languages that live in a folder of their own (the default language is at the root).
FOLDERS = ("en",)
CONFIG = re.compile(r'(<script id="__config" type="application/json">)(.*?)(</script>)', re.S)


def language_folder(page) -> str | None:
    """The folder of the page's language, or None for the default language at the root."""
    url = page.url or ""
    return next((folder for folder in FOLDERS if url.startswith(f"{folder}/")), None)


def with_base_in(output: str, folder: str) -> str:
    """The page's HTML with ``__config.base`` moved down into ``folder``."""
    def move(match):
        config = json.loads(match.group(2))
        config["base"] = posixpath.join(config["base"], folder) + "/"
        text = json.dumps(config, ensure_ascii=False)
        for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(char, escape)  # as Jinja's tojson does, safe inside <script>
        return match.group(1) + text + match.group(3)

    new, count = CONFIG.subn(move, output, count=1)
    if count != 1:
        raise ValueError("no Material __config script on the page")
    return new


def split_index(index: dict) -> dict[str, dict]:
    """The entries of one index per language folder ("" for the default language)."""
    parts: dict[str, list] = {"": [], **{folder: [] for folder in FOLDERS}}
    for doc in index["docs"]:
        folder = next((f for f in FOLDERS if doc["location"].startswith(f"{f}/")), "")
        entry = dict(doc)
        if folder:
            entry["location"] = doc["location"][len(folder) + 1:]
        parts[folder].append(entry)
    return {folder: {"config": index["config"], "docs": docs} for folder, docs in parts.items()}


def on_post_page(output, page, config):
    folder = language_folder(page)
    return with_base_in(output, folder) if folder else output


@event_priority(-110)  # after mkdocs-static-i18n (-100) has written the whole index
def on_post_build(config):
    root = Path(config["site_dir"])
    path = root / "search" / "search_index.json"
    if not path.is_file():
        return
    index = json.loads(path.read_text(encoding="utf-8"))
    if not any(doc["location"].startswith(tuple(f"{f}/" for f in FOLDERS))
               for doc in index["docs"]):
        return  # already split, or an intermediate build of one language
    for folder, part in split_index(index).items():
        target = root / folder / "search" / "search_index.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(part, ensure_ascii=False, separators=(",", ":")),
                          encoding="utf-8")
