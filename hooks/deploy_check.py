"""MkDocs hook: a build meant for deployment must know the address it will be served from.

Most of the site links relatively and works under any subpath, but the 404 page cannot: it is
served for a missing path at any depth, so its links are absolute, made from ``site_url``'s path.
The Pages workflow (.github/workflows/ci.yml) sets ``SITE_URL`` from the Pages address and
``DEPLOY=true``; a deployment build without a usable ``SITE_URL`` stops here instead of
publishing a 404 page whose links lead nowhere.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from mkdocs.exceptions import PluginError


def check_deploy(environ) -> None:
    """Raise `PluginError` when ``environ`` asks for a deployment without a usable SITE_URL."""
    if environ.get("DEPLOY") != "true":
        return
    site_url = environ.get("SITE_URL", "")
    parts = urlsplit(site_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or not site_url.endswith("/"):
        raise PluginError(f"DEPLOY=true needs SITE_URL, the address the site is served from, "
                          f"ending in '/' (e.g. https://<owner>.github.io/<repository>/); "
                          f"got {site_url!r}")


def on_config(config):
    check_deploy(os.environ)
    return config
