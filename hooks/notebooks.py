"""MkDocs hook: notebooks rendered as pages in both languages, re-executed when ``mha`` changes.

Two fixes around mkdocs-jupyter:

- mkdocs-static-i18n rebuilds the file list after mkdocs-jupyter has wrapped the notebooks, so
  the notebooks were copied as raw JSON into ``…/index.html`` (and ``--strict`` still passed).
  Wrapping them again after i18n (lower priority = later) makes them real pages again.
- mkdocs-jupyter caches an executed notebook on the notebook's bytes only, so its outputs went
  stale when ``mha`` changed. Its cache folder is keyed here on every source file of ``mha/``
  (the fingerprint of ``hooks/_fingerprint.py``, data files included) as well, and on the
  language (see ``on_pre_build``).

A cold build also starts executing every language's notebooks in a background thread before
the figures are drawn (kernels run in their own processes), so the two overlap.
"""

from __future__ import annotations

import threading
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

from _fingerprint import PACKAGE, fingerprint, package_files  # hooks/_fingerprint.py

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "notebooks"


def _jupyter(config):
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is None:
        raise PluginError("hooks/notebooks.py needs the mkdocs-jupyter plugin in mkdocs.yml")
    return plugin


def _cache_dir(language: str) -> Path:
    """``.cache/notebooks/<fingerprint of mha's sources>/<language>``."""
    return CACHE / fingerprint(PACKAGE, package_files(PACKAGE)) / language


@event_priority(50)  # before hooks/figures.py: notebooks execute while the figures are drawn
def on_pre_build(config):
    # One folder per language too: mkdocs-jupyter evicts every cached notebook its last build did
    # not use, and i18n's English build runs inside the Chinese one, so a shared folder lost the
    # other language's notebook on every build (and re-executed it the next time).
    jupyter = _jupyter(config)
    jupyter.config["cache_dir"] = str(_cache_dir(config["theme"]["language"]))
    _start_in_background(config, jupyter)


#: Notebooks being executed in the background: their cache file -> the thread that writes it.
_background: dict[Path, threading.Thread] = {}


def _start_in_background(config, jupyter) -> None:
    """Execute and convert every language's notebooks whose cache entry is missing, in one
    background thread, into the entries mkdocs-jupyter will look for (same key, same content
    as its own render). A notebook it fails on is simply not cached: mkdocs-jupyter then
    executes it itself, and reports the error."""
    from mkdocs_jupyter.plugin import _compute_cache_key, _get_cache_path

    options = dict(jupyter.config)
    jobs = []
    for notebook in sorted(Path(config["docs_dir"]).glob("*/*.ipynb")):
        key = _compute_cache_key(str(notebook), options, options["execute"])
        cache = _get_cache_path(_cache_dir(notebook.parent.name), key)
        if not cache.exists() and cache not in _background:
            jobs.append((notebook, cache))
    if jobs:
        thread = threading.Thread(target=_render, args=(jobs, options), daemon=True)
        thread.start()
        _background.update({cache: thread for _, cache in jobs})


def _render(jobs, options) -> None:
    import json

    from mkdocs_jupyter import convert
    from mkdocs_jupyter.plugin import _get_nb_toc_tokens

    for notebook, cache in jobs:
        try:  # the arguments mkdocs-jupyter's own render passes
            body = convert.nb2html(
                str(notebook), execute=options["execute"], kernel_name=options["kernel_name"],
                theme=options["theme"], allow_errors=options["allow_errors"],
                show_input=options["show_input"], no_input=options["no_input"],
                no_prompt=options["no_prompt"], remove_tag_config=options["remove_tag_config"],
                highlight_extra_classes=options["highlight_extra_classes"],
                include_requirejs=options["include_requirejs"],
                custom_mathjax_url=options["custom_mathjax_url"])
            toc_tokens, title = _get_nb_toc_tokens(str(notebook), options["toc_depth"])
        except Exception:  # noqa: BLE001 - mkdocs-jupyter runs it again and reports it
            continue
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"content": body, "toc_tokens": toc_tokens, "title": title}),
                         encoding="utf-8")


def on_pre_page(page, config, files):
    """A notebook page waits for the background thread that renders its cache entry."""
    if page.file.src_uri.endswith(".ipynb"):
        for cache, thread in list(_background.items()):
            thread.join()
            del _background[cache]
    return page


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


def on_build_error(error):
    """A failed build still waits for the background thread, so no kernel outlives it."""
    for thread in set(_background.values()):
        thread.join()
    _background.clear()
