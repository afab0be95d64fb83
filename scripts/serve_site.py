#!/usr/bin/env python3
"""Serve a built site directory on 127.0.0.1, optionally gzipped as GitHub Pages serves it.

Standard library only (``http.server`` in a background thread), for the browser tests and the
Lighthouse script::

    from serve_site import build_site, free_port, serve

    port = free_port()                                   # the site must know its URL when built
    build_site(site_dir, f"http://127.0.0.1:{port}/")
    with serve(site_dir, port=port, gzip=True) as base_url:
        ...                                              # base_url == "http://127.0.0.1:<port>/"

From the command line::

    python scripts/serve_site.py SITE_DIR [--port 8000] [--gzip]
    python scripts/serve_site.py --build [--port 0] [--gzip]    # strict build into a temp dir first

Like GitHub Pages: ``/dir`` redirects to ``/dir/``, ``/dir/`` serves ``dir/index.html``, a missing
file gets the site's ``404.html`` with status 404, and with ``gzip=True`` text responses (HTML,
CSS, JS, JSON, SVG, XML, plain text) are compressed when the request says
``Accept-Encoding: gzip``. ``port=0`` binds any free port, but a MkDocs site has to be built with
its final ``site_url`` (the language switcher's links contain it): pick the port first with
:func:`free_port` and build with it.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip as gzip_module
import http.server
import io
import mimetypes
import os
import posixpath
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
#: Content types compressed when gzip is on (GitHub Pages compresses these).
COMPRESSIBLE = ("text/", "application/javascript", "application/json", "application/xml",
                "image/svg+xml", "application/manifest+json")
#: Extensions whose type Python's table may lack or get wrong on some systems.
TYPES = {
    ".js": "application/javascript", ".mjs": "application/javascript", ".css": "text/css",
    ".json": "application/json", ".svg": "image/svg+xml", ".xml": "application/xml",
    ".woff2": "font/woff2", ".woff": "font/woff", ".ipynb": "application/x-ipynb+json",
    ".txt": "text/plain", ".gz": "application/gzip", ".map": "application/json",
}


def free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that is free now (the OS picks it; bind it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def build_site(site_dir: str | os.PathLike, site_url: str, *, strict: bool = True,
               python: str | None = None, quiet: bool = True) -> str:
    """Build the MkDocs site of this repository into ``site_dir`` for ``site_url``.

    Returns MkDocs' log when ``quiet`` (else it went to the terminal: ""). Raises
    ``RuntimeError`` with the lines of it that matter when the build fails.
    """
    env = dict(os.environ, SITE_URL=site_url, NO_MKDOCS_2_WARNING="1",
               PYTHONDONTWRITEBYTECODE="1")
    command = [python or sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site_dir),
               "--strict" if strict else "--no-strict"]
    result = subprocess.run(command, cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE if quiet else None,
                            stderr=subprocess.STDOUT if quiet else None)
    if result.returncode != 0:
        lines = (result.stdout or "").splitlines()
        # The warnings and errors that failed it, and how it ended; not the whole log.
        shown = [line for line in lines[:-5] if re.match(r"(WARNING|ERROR|Error|Traceback)", line)]
        raise RuntimeError(f"mkdocs build --site-dir {site_dir} failed "
                           f"(exit {result.returncode}):\n" + "\n".join(shown[:30] + lines[-5:]))
    return result.stdout or ""


def _handler(site_dir: Path, use_gzip: bool, log: bool,
             prefix: str = "/") -> type[http.server.BaseHTTPRequestHandler]:
    class SiteHandler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **TYPES}

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(site_dir), **kwargs)

        def log_message(self, format, *args):  # noqa: A002 (the base class's name)
            if log:
                super().log_message(format, *args)

        def end_headers(self):
            # GitHub Pages lets browsers cache for ten minutes.
            self.send_header("Cache-Control", "max-age=600")
            super().end_headers()

        def translate_path(self, path):
            """The site's file for ``path``, which lies under ``prefix`` (a project site's
            subpath on GitHub Pages); anything outside it is a path the site does not have."""
            bare = urllib.parse.urlsplit(path).path
            if not (bare + "/").startswith(prefix):
                return str(site_dir / "\0outside")  # no such file: the 404 page
            return super().translate_path("/" + bare[len(prefix):])

        def _file_for(self) -> Path | None:
            """The file a GET or HEAD of this path serves; None when there is none."""
            path = Path(self.translate_path(self.path))
            if path.is_dir():
                path = path / "index.html"
            return path if path.is_file() else None

        def send_head(self):
            target = Path(self.translate_path(self.path))
            bare = urllib.parse.urlsplit(self.path).path
            if target.is_dir() and not bare.endswith("/"):
                return super().send_head()  # 301 to the path with a slash
            file = self._file_for()
            if file is None:
                return self._not_found()
            ctype = self.guess_type(str(file))
            accepts = "gzip" in self.headers.get("Accept-Encoding", "")
            if not (use_gzip and accepts and ctype.startswith(COMPRESSIBLE)):
                return super().send_head()
            body = gzip_module.compress(file.read_bytes(), compresslevel=6, mtime=0)
            self.send_response(200)
            self.send_header("Content-Type", _with_charset(ctype))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Last-Modified", self.date_time_string(int(file.stat().st_mtime)))
            self.end_headers()
            return io.BytesIO(body)

        def _not_found(self):
            page = site_dir / "404.html"
            if not page.is_file():
                self.send_error(404, "File not found")
                return None
            body = page.read_bytes()
            encode = use_gzip and "gzip" in self.headers.get("Accept-Encoding", "")
            if encode:
                body = gzip_module.compress(body, compresslevel=6, mtime=0)
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            if encode:
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Vary", "Accept-Encoding")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return io.BytesIO(body)

        def guess_type(self, path):
            ext = posixpath.splitext(str(path))[1].lower()
            return (TYPES.get(ext) or mimetypes.guess_type(str(path))[0]
                    or "application/octet-stream")

    return SiteHandler


def _with_charset(ctype: str) -> str:
    if ctype.startswith("text/") or ctype in ("application/javascript", "application/json",
                                              "application/xml", "image/svg+xml"):
        return f"{ctype}; charset=utf-8"
    return ctype


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextlib.contextmanager
def serve(site_dir: str | os.PathLike, *, port: int = 0, gzip: bool = False, host: str = HOST,
          log: bool = False, prefix: str = "/") -> Iterator[str]:
    """Serve ``site_dir`` in a background thread under the URL path ``prefix`` (``"/"``, or a
    project site's subpath such as ``"/attention-detectives/"``); yield its base URL."""
    if not (prefix.startswith("/") and prefix.endswith("/")):
        raise ValueError(f"prefix must start and end with '/', got {prefix!r}")
    site = Path(site_dir).resolve()
    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"{site} has no index.html: build the site first")
    server = _Server((host, port), _handler(site, gzip, log, prefix))
    thread = threading.Thread(target=server.serve_forever, name="serve_site", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}{prefix}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site_dir", nargs="?", help="a built site (omit with --build)")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (default 8000)")
    parser.add_argument("--gzip", action="store_true", help="gzip text responses, as GitHub Pages")
    parser.add_argument("--build", action="store_true",
                        help="build the site (strict) for this address into a temp dir first")
    parser.add_argument("--log", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if bool(args.site_dir) == args.build:
        parser.error("give either SITE_DIR or --build")
    port = args.port or free_port()
    temp = None
    # `kill` (SIGTERM) stops it as Ctrl-C does, removing the temporary site.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if args.build:
            temp = tempfile.mkdtemp(prefix="attention-site-")
            site_dir = temp
            print(f"building the site for http://{HOST}:{port}/ …", flush=True)
            build_site(site_dir, f"http://{HOST}:{port}/")
        else:
            site_dir = args.site_dir
        with serve(site_dir, port=port, gzip=args.gzip, log=args.log) as url:
            print(f"serving {site_dir} at {url}{' (gzip)' if args.gzip else ''}; Ctrl-C stops",
                  flush=True)
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                pass
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
