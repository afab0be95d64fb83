"""MkDocs hook: the API reference's section titles in the page's own language.

mkdocstrings reads its locale from the theme's language once, in ``on_config``, and
mkdocs-static-i18n builds the English pages with the same plugin instance, so the English API
page came out with the Chinese titles (参数：, 返回：, 示例：). mkdocstrings renders while a page's
Markdown is converted, after ``on_page_markdown``: here each page hands it its language first.

The same re-run of ``on_config`` for each further language made mkdocstrings put its stylesheet
(``assets/_mkdocstrings.css``) into ``extra_css`` once per language, so English pages linked it
twice: ``on_config`` here, which runs after mkdocstrings', keeps each stylesheet once.
"""

from __future__ import annotations


def on_config(config):
    config.extra_css[:] = list(dict.fromkeys(config.extra_css))  # order kept, repeats dropped
    return config


def on_page_markdown(markdown, page, config, files):
    mkdocstrings = config.plugins.get("mkdocstrings")
    if mkdocstrings is not None:
        language = getattr(page.file, "locale", None) or config["theme"]["language"]
        mkdocstrings.handlers._locale = language  # private: see MAINTAINERS.md
    return markdown
