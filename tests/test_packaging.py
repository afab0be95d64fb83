"""The package as a reader installs it: a wheel (not the editable install the tests run on),
installed into a fresh virtual environment, holds every module and data file of ``mha/``.

An editable install imports straight from the work tree, so a subpackage that the packaging
configuration forgets still imports there; only a real wheel shows it missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "NOTICE.md", "MANIFEST.in", "mha")


def modules_in_the_tree() -> list[str]:
    """Every module under mha/ in the work tree, by its import name."""
    names = []
    for path in sorted((ROOT / "mha").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def data_files_in_the_tree() -> list[str]:
    """Every file under mha/ that is not Python source: each must be in the wheel too."""
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "mha").rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc")
                  and "__pycache__" not in p.parts)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment with mha installed from a wheel; returns its python."""
    tmp = tmp_path_factory.mktemp("packaging")
    source = tmp / "source"  # a copy: building writes build/ and *.egg-info next to the sources
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    wheels = tmp / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(wheels), str(source)], check=True)
    (wheel,) = wheels.glob("mha-*.whl")
    env = tmp / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # Unpack the wheel as pip would (no pip in this environment, no network): it is a zip of
    # the package's files plus its metadata.
    shutil.unpack_archive(wheel, site, format="zip")
    # NumPy and matplotlib come from the test environment; its mha (editable) must not.
    deps = {Path(np.__file__).parents[1]}
    (site / "test-deps.pth").write_text("\n".join(str(d) for d in deps) + "\n",
                                         encoding="utf-8")
    return python


def test_a_wheel_holds_every_module_and_data_file(installed, tmp_path):
    code = (
        "import importlib, json, sys\n"
        "from pathlib import Path\n"
        "import mha\n"
        "root = Path(mha.__file__).parent\n"
        "found = {}\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    module = importlib.import_module(name)\n"
        "    found[name] = str(Path(module.__file__).resolve().relative_to(root.parent))\n"
        "files = sorted(p.relative_to(root.parent).as_posix() for p in root.rglob('*')\n"
        "               if p.is_file() and '__pycache__' not in p.parts)\n"
        "print(json.dumps({'root': str(root), 'found': found, 'files': files}))\n"
    )
    modules = modules_in_the_tree()
    assert {"mha", "mha.models.minilm", "mha.site.plots", "mha.minilm"} <= set(modules)
    result = subprocess.run([str(installed), "-c", code, json.dumps(modules)], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # Imported from the fresh environment, not from the work tree.
    assert Path(report["root"]).resolve() != (ROOT / "mha").resolve()
    assert str(installed.parents[1]) in report["root"]
    assert sorted(report["found"]) == sorted(modules)
    assert set(data_files_in_the_tree()) <= set(report["files"])
    assert "mha/site/data/benchmark.json" in report["files"]


def test_the_wheel_carries_both_licence_files_and_one_version(installed, tmp_path):
    code = ("import importlib.metadata as metadata, json, mha\n"
            "print(json.dumps({'versions': [metadata.version('mha'), mha.__version__],\n"
            "                  'licences': sorted(f.name for f in metadata.files('mha')\n"
            "                                     if 'licenses' in f.parts)}))")
    result = subprocess.run([str(installed), "-c", code], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["licences"] == ["LICENSE", "NOTICE.md"]
    assert report["versions"][0] == report["versions"][1]


def test_importing_the_core_from_the_wheel_needs_numpy_alone(installed, tmp_path):
    code = ("import sys, mha, mha.reference, mha.models, mha.minilm\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'mkdocs'}))")
    result = subprocess.run([str(installed), "-c", code], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
