"""MkDocs hook: the API reference's section titles in the page's own language.

mkdocstrings reads its locale from the theme's language once, in ``on_config``, and
mkdocs-static-i18n builds the English pages with the same plugin instance, so the English API
page came out with the Chinese titles (参数：, 返回：, 示例：). mkdocstrings renders while a page's
Markdown is converted, after ``on_page_markdown``: here each page hands it its language first.
"""

from __future__ import annotations


def on_page_markdown(markdown, page, config, files):
    mkdocstrings = config.plugins.get("mkdocstrings")
    if mkdocstrings is not None:
        language = getattr(page.file, "locale", None) or config["theme"]["language"]
        mkdocstrings.handlers._locale = language  # private: see MAINTAINERS.md
    return markdown
