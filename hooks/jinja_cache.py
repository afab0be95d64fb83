"""MkDocs hook: keep compiled Jinja templates between builds.

Every build compiles the theme's templates and mkdocstrings' templates from scratch (about 160
templates: a second of each rebuild under ``mkdocs serve``). Jinja can store the compiled code
and reuse it while a template's source is unchanged (its cache key includes the source's
checksum, so an edited template is compiled again). Stored in ``.cache/jinja/``.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import FileSystemBytecodeCache

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "jinja"


def _bytecode_cache() -> FileSystemBytecodeCache:
    CACHE.mkdir(parents=True, exist_ok=True)
    return FileSystemBytecodeCache(str(CACHE))


def on_nav(nav, config, files):
    """The API reference's templates. Pages are rendered from Markdown (mkdocstrings at work)
    after this event and before ``on_env``; the handler is made here, then reused."""
    mkdocstrings = config.plugins.get("mkdocstrings")
    if mkdocstrings is not None:
        mkdocstrings.handlers.get_handler("python").env.bytecode_cache = _bytecode_cache()
    return nav


def on_env(env, config, files):
    env.bytecode_cache = _bytecode_cache()  # the theme's templates
    return env
