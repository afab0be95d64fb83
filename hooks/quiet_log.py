"""MkDocs hook: keep a plain build's log to what a reader of it needs.

Three INFO lines say nothing to act on, on every build and rebuild: the i18n plugin's note that
it overrides the English theme's palette (one 400-character line: the palette is set per
language in mkdocs.yml on purpose), MkDocs' note that the 404 template gave an empty page for
the language build that has none, and mkdocstrings' note that it formats signatures only with
Black or Ruff installed (the API page's signatures are short and shown as written). They are
dropped by a filter on the handlers MkDocs logs through; warnings and errors always pass, so
``--strict`` counts exactly what it counted before.
"""

from __future__ import annotations

import logging
import re

#: The INFO messages dropped, after the prefix a plugin's logger puts before them, if any
#: ("mkdocs_static_i18n: Overriding ...").
QUIET = re.compile(r"(\w+: )?("
                   r"Overriding '[\w-]+' config 'theme\.palette' with "
                   r"|Template skipped: '404\.html' generated empty output\."
                   r"|Formatting signatures requires either Black or Ruff to be installed\.)")


def is_quiet(record: logging.LogRecord) -> bool:
    """Whether ``record`` is one of the `QUIET` INFO lines."""
    return record.levelno == logging.INFO and bool(QUIET.match(record.getMessage()))


class QuietFilter(logging.Filter):
    quiet_log = True  # marks it, so that loading this file twice adds it once

    def filter(self, record: logging.LogRecord) -> bool:
        return not is_quiet(record)


def install(logger: logging.Logger) -> None:
    """Put one `QuietFilter` on each of ``logger``'s handlers (once, however often called)."""
    for handler in logger.handlers:
        if not any(getattr(existing, "quiet_log", False) for existing in handler.filters):
            handler.addFilter(QuietFilter())


# At load time, before any plugin's on_config logs: MkDocs' command line has set up its handler.
install(logging.getLogger("mkdocs"))
