"""MkDocs hook: index again only the pages whose HTML changed.

Material's search plugin parses the HTML of every page and cuts its Chinese into words (jieba) on
every build: over a second of each rebuild under ``mkdocs serve``, when one page changed, and a
third of a warm ``mkdocs build``. This hook remembers the index entries each page gave, keyed on
everything they are made from: the page's address, title, metadata, HTML and table of contents,
the search plugin's settings and version, and the words jieba knows (its version, and the
glossary's terms this hook adds to it). A page whose key is known gets copies of its entries
instead of being parsed again. The entries are kept for the life of the process (``mkdocs
serve`` keeps hooks across rebuilds) and in ``.cache/search/entries.json`` for the next one:
after each build it holds the entries of the pages this process indexed.

Every Chinese term of the terms file (``mha/site/terms.py``, read on every build) is added to
jieba's dictionary, so search indexes 注意力头 as one word instead of 注意力 + 头: just before
the first page is parsed (`jieba_ready`), so a build that parses none never loads jieba's
dictionary (half a second).

It does so by replacing Material's ``SearchIndex.add_entry_from_context`` (a monkeypatch,
listed in MAINTAINERS.md) from ``on_startup`` to ``on_shutdown`` of ``mkdocs build`` or
``mkdocs serve``: importing this module changes nothing.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import runpy
from importlib.metadata import version
from pathlib import Path

from material.plugins.search.plugin import SearchIndex

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "search" / "entries.json"
TERMS = ROOT / "mha" / "site" / "terms.py"
#: The parser's version, in every key: a kept entry is of the parser that made it.
MATERIAL = version("mkdocs-material")
_entries: dict[str, list[dict]] = {}  # key -> the entries the page gave
_used: set[str] = set()               # the keys of the pages this process indexed
_glossary: list[str] = []             # the glossary's Chinese terms, as this build read them
_jieba_words: set[str] = set()        # added to jieba in this process


def _toc(items) -> list:
    return [[item.id, item.url, item.title, _toc(item.children)] for item in items]


def _jieba_state() -> list:
    """What jieba cuts with: its version (its own dictionary) and the words this hook adds."""
    try:
        import jieba
    except ImportError:  # Material then leaves Chinese uncut
        return []
    return [jieba.__version__, _glossary]


def jieba_ready() -> None:
    """Add the glossary's terms to jieba's dictionary, each once per process (jieba adds a
    word's frequency to its total every time, which would shift every later cut a little on
    each rebuild under mkdocs serve). The first call loads jieba's dictionary."""
    try:
        import jieba
    except ImportError:
        return
    jieba.setLogLevel(logging.WARNING)  # not its four "Building prefix dict ..." lines
    for word in _glossary:
        if word not in _jieba_words:
            jieba.add_word(word)
            _jieba_words.add(word)


def page_key(index: SearchIndex, page) -> str:
    """What the page's entries depend on, hashed."""
    parts = [MATERIAL, page.url, str(page.title), page.content or "",
             json.dumps(page.meta, sort_keys=True, default=str), json.dumps(_toc(page.toc)),
             json.dumps(index.config, sort_keys=True, default=str), json.dumps(_jieba_state())]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8") + b"\0")
    return digest.hexdigest()


#: Material's own method (``on_startup`` replaces it, ``on_shutdown`` puts it back), even when
#: this module is imported again while the replacement is in place.
_parse = getattr(SearchIndex.add_entry_from_context, "__wrapped__",
                 SearchIndex.add_entry_from_context)


def add_entry_from_context(self: SearchIndex, page) -> None:
    key = page_key(self, page)
    _used.add(key)
    if key not in _entries:
        start = len(self.entries)
        jieba_ready()
        _parse(self, page)
        _entries[key] = copy.deepcopy(self.entries[start:])
    else:
        self.entries.extend(copy.deepcopy(_entries[key]))


add_entry_from_context.__wrapped__ = _parse


def on_startup(command, dirty):
    SearchIndex.add_entry_from_context = add_entry_from_context
    try:
        _entries.update(json.loads(CACHE.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass  # no cache yet, or a damaged one: every page is parsed


def on_config(config):
    """Read the glossary's terms (from disk: mkdocs serve sees an edit of the terms file)."""
    _glossary[:] = sorted({entry.zh for entry in runpy.run_path(str(TERMS))["TERMS"].values()})
    return config


def on_post_build(config):
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    kept = {key: _entries[key] for key in sorted(_used)}
    CACHE.write_text(json.dumps(kept, ensure_ascii=False, separators=(",", ":")),
                     encoding="utf-8")


def on_shutdown():
    SearchIndex.add_entry_from_context = _parse
