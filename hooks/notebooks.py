"""MkDocs hook: notebooks rendered as pages in both languages, re-executed when ``mha`` changes.

Two fixes around mkdocs-jupyter:

- mkdocs-static-i18n rebuilds the file list after mkdocs-jupyter has wrapped the notebooks, so
  the notebooks were copied as raw JSON into ``…/index.html`` (and ``--strict`` still passed).
  Wrapping them again after i18n (lower priority = later) makes them real pages again.
- mkdocs-jupyter caches an executed notebook on the notebook's bytes only, so its outputs went
  stale when ``mha`` changed. Its cache folder is keyed here on ``mha``'s sources as well (and on
  the language, see ``on_pre_build``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]


def _jupyter(config):
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is None:
        raise PluginError("hooks/notebooks.py needs the mkdocs-jupyter plugin in mkdocs.yml")
    return plugin


def mha_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "mha").rglob("*.py")):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def on_pre_build(config):
    # One folder per language too: mkdocs-jupyter evicts every cached notebook its last build did
    # not use, and i18n's English build runs inside the Chinese one, so a shared folder lost the
    # other language's notebook on every build (and re-executed it the next time).
    language = config["theme"]["language"]
    _jupyter(config).config["cache_dir"] = str(
        ROOT / ".cache" / "notebooks" / mha_fingerprint() / language)


@event_priority(-200)  # after mkdocs-static-i18n (-100) has rebuilt the file list
def on_files(files, config):
    from mkdocs_jupyter.plugin import NotebookFile

    jupyter = _jupyter(config)
    for file in list(files):  # edit i18n's own Files object in place: it maps the nav paths
        if not isinstance(file, NotebookFile) and jupyter.should_include(file):
            notebook = NotebookFile(file, **config)
            # Keep the address i18n chose (zh/x.ipynb is served at /x/, not /zh/x/).
            notebook.dest_path, notebook.abs_dest_path, notebook.url = (
                file.dest_path, file.abs_dest_path, file.url)
            files.remove(file)
            files.append(notebook)
    return files
