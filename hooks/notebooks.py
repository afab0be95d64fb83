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

And the notebook pages are made whole pages of a bilingual site, as mkdocs-static-i18n and
Material make the Markdown pages (i18n takes a notebook for an asset, not a page):

- alternates: each notebook page gets its twin in every other language, as i18n gives a Markdown
  page, so the language switcher keeps the page and ``sitemap.xml`` lists it with its hreflang
  alternates (``on_files``);
- anchors: every heading gets the id of the English notebook's heading at the same place (the
  slug of its English text, as the Markdown pages' explicit ``{ #id }``), in the HTML, the table
  of contents and the skip link alike; nbconvert gave the Chinese headings ``id=""``;
- the copy buttons of the cells say "copy" in the page's language, in Material's words
  (``on_page_content``).
"""

from __future__ import annotations

import html
import re
import threading
from functools import lru_cache
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

from _fingerprint import PACKAGE, fingerprint, package_files  # hooks/_fingerprint.py

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "notebooks"
#: The language whose headings name every notebook's anchors.
ANCHOR_LANGUAGE = "en"


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
    i18n = config.plugins.get("i18n")
    for file in list(files):  # edit i18n's own Files object in place: it maps the nav paths
        if not isinstance(file, NotebookFile) and jupyter.should_include(file):
            notebook = NotebookFile(file, **config)
            # Keep the address i18n chose (zh/x.ipynb is served at /x/, not /zh/x/).
            notebook.dest_path, notebook.abs_dest_path, notebook.url = (
                file.dest_path, file.abs_dest_path, file.url)
            files.remove(file)
            files.append(notebook)
            if i18n is not None:
                _add_alternates(notebook, i18n, config)
                # The list sitemap.xml is written from (i18n made it before the notebooks were
                # pages again): the wrapper, which MkDocs gives its page.
                i18n.i18n_files_per_language[i18n.current_language].append(notebook)
    return files


def _add_alternates(notebook, i18n, config) -> None:
    """Give a notebook the twin in every other built language that i18n gives a Markdown page
    (``file.alternates``: its language switcher and sitemap.xml read them), made the way i18n
    makes a Markdown page's (``create_i18n_file``, from the twin as mkdocs-jupyter wraps it)."""
    from mkdocs.structure.files import File
    from mkdocs_jupyter.plugin import NotebookFile
    from mkdocs_static_i18n import folder

    if i18n.config.docs_structure != "folder":
        raise PluginError("hooks/notebooks.py knows mkdocs-static-i18n's folder structure only")
    for language in sorted(i18n.build_languages):
        twin = Path(config["docs_dir"]) / language / notebook.norm_src_uri
        if language in notebook.alternates or not twin.exists():
            continue
        source = NotebookFile(File(f"{language}/{notebook.norm_src_uri}", config["docs_dir"],
                                   config["site_dir"], config["use_directory_urls"]), **config)
        notebook.alternates[language] = folder.create_i18n_file(
            source, language, i18n.default_language, i18n.all_languages, config)


#: Per language: Material's words for "copy" and "copied".
_labels: dict[str, tuple[str, str]] = {}


def _copy_labels(config) -> tuple[str, str]:
    """Material's own words for "copy" and "copied" in this build's language (its
    ``partials/language.html``, as its own copy buttons say them)."""
    language = config["theme"]["language"]
    if language not in _labels:
        words = config["theme"].get_env().from_string(
            '{% import "partials/language.html" as lang with context %}'
            '{{ lang.t("clipboard.copy") }}\n{{ lang.t("clipboard.copied") }}'
        ).render(config=config)
        _labels[language] = tuple(words.split("\n"))
    return _labels[language]


@lru_cache(maxsize=8)
def _heading_tokens(notebook: str, toc_depth: int, mtime: float) -> tuple:
    """(level, id) of every heading of a notebook, in order, as mkdocs-jupyter makes its table of
    contents."""
    from mkdocs_jupyter.plugin import _get_nb_toc_tokens

    def walk(tokens):
        for token in tokens:
            yield token["level"], token["id"]
            yield from walk(token["children"])

    return tuple(walk(_get_nb_toc_tokens(notebook, toc_depth)[0]))


#: A notebook heading as nbconvert writes it (its id, and its anchor link after the text).
HEADING = re.compile(r'<h([1-6]) id="([^"]*)">((?:(?!</h[1-6]>).)*?)<a class="anchor-link" '
                     r'href="#[^"]*">', re.S)
#: mkdocs-jupyter's copy button (its template notebook.html.j2): its label, and what it shows
#: once it has copied.
COPY_LABEL = re.compile(r'aria-label="Copy to Clipboard"')
COPIED = re.compile(r'(<span class="notice" hidden(?:="")?>)Copied!(</span>)')


def on_page_content(content, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    content = _anchor_headings(content, page, config)
    page.present_anchor_ids = set(re.findall(r'\bid="([^"]+)"', content))  # links to it checked
    copy, copied = (html.escape(word) for word in _copy_labels(config))
    buttons = content.count("<clipboard-copy")
    content, labels = COPY_LABEL.subn(f'aria-label="{copy}" title="{copy}"', content)
    content, notices = COPIED.subn(rf"\g<1>{copied}\g<2>", content)
    if not labels == notices == buttons:
        raise PluginError(f"{page.file.src_uri}: {buttons} copy buttons, but {labels} labels and "
                          f"{notices} notices in English to translate: has mkdocs-jupyter's "
                          "template (notebook.html.j2) changed its button?")
    return content


def _anchor_headings(content, page, config):
    """Every heading (HTML, table of contents, skip link) gets the id of the English notebook's
    heading at the same place; the two notebooks must have the same headings, level by level."""
    twin = f"{ANCHOR_LANGUAGE}/{page.file.norm_src_uri}"
    english = Path(config["docs_dir"]) / twin
    if not english.exists():
        raise PluginError(f"{page.file.src_uri}: no {twin} to take its headings' anchors from")
    depth = _jupyter(config).config["toc_depth"]
    reference = _heading_tokens(str(english), depth, english.stat().st_mtime)
    headings = list(HEADING.finditer(content))
    toc = list(_walk_toc(page.toc))
    levels = [int(match.group(1)) for match in headings]
    if levels != [level for level, _ in reference] or len(toc) != len(reference):
        raise PluginError(
            f"{page.file.src_uri}: its headings (levels {levels}) do not match those of "
            f"{twin} (levels {[level for level, _ in reference]}), whose "
            "anchors they take: keep the two notebooks' headings in step")
    ids = [anchor for _, anchor in reference]
    for link, anchor in zip(toc, ids):
        link.id = anchor
    replaced = iter(ids)
    return HEADING.sub(lambda match: (
        f'<h{match.group(1)} id="{(anchor := next(replaced))}">{match.group(3)}'
        f'<a class="anchor-link" href="#{anchor}">'), content)


def _walk_toc(links):
    for link in links:
        yield link
        yield from _walk_toc(link.children)


def on_build_error(error):
    """A failed build still waits for the background thread, so no kernel outlives it."""
    for thread in set(_background.values()):
        thread.join()
    _background.clear()
