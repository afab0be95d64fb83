"""MkDocs hook: index again only the pages whose HTML changed.

Material's search plugin parses the HTML of every page and cuts its Chinese into words (jieba) on
every build: over a second of each rebuild under ``mkdocs serve``, when one page changed. This
hook remembers the index entries each page gave, for the life of the process (``mkdocs serve``
keeps hooks across rebuilds), keyed on everything they are made from: the page's address,
title, metadata, HTML and table of contents, the search plugin's settings, and the state of
jieba's dictionary (``hooks/markers.py`` adds the glossary's terms to it). A page whose key is
known gets copies of its entries instead of being parsed again.

It does so by replacing Material's ``SearchIndex.add_entry_from_context`` (a monkeypatch,
listed in MAINTAINERS.md) from ``on_startup`` to ``on_shutdown`` of ``mkdocs build`` or
``mkdocs serve``: importing this module changes nothing.
"""

from __future__ import annotations

import copy
import hashlib
import json

from material.plugins.search.plugin import SearchIndex

_entries: dict[str, list[dict]] = {}  # key -> the entries the page gave


def _toc(items) -> list:
    return [[item.id, item.url, item.title, _toc(item.children)] for item in items]


def _jieba_state() -> list:
    try:
        import jieba
    except ImportError:  # Material then leaves Chinese uncut
        return []
    return [len(jieba.dt.FREQ), jieba.dt.total]


def page_key(index: SearchIndex, page) -> str:
    """What the page's entries depend on, hashed."""
    parts = [page.url, str(page.title), page.content or "",
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
    if key not in _entries:
        start = len(self.entries)
        _parse(self, page)
        _entries[key] = copy.deepcopy(self.entries[start:])
    else:
        self.entries.extend(copy.deepcopy(_entries[key]))


add_entry_from_context.__wrapped__ = _parse


def on_startup(command, dirty):
    SearchIndex.add_entry_from_context = add_entry_from_context


def on_shutdown():
    SearchIndex.add_entry_from_context = _parse
