"""The repository keeps its promises: README, set-up commands, CI, package layout, site build."""

import contextlib
import io
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import mha

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


def test_the_two_halves_dev_py_runs_at_once_split_the_suite_by_the_built_site(monkeypatch):
    """``python3 dev.py test`` runs two pytest processes (conftest.py ``keep_shard``): every test
    lands in exactly one, by whether it uses the built site; with the site shared between them
    (``MHA_SHARED_SITE``), the case board's browser tests go to the rest half, last."""
    import importlib.util
    import types

    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
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
    dev = (ROOT / "dev.py").read_text()
    assert 'MHA_TEST_SHARD="site"' in dev and 'MHA_TEST_SHARD="rest"' in dev
    assert "MHA_SHARED_SITE" in dev


def test_readme_gives_exactly_two_commands_and_ci_runs_the_test_one():
    (block,) = fenced_blocks(README.split("## Quick start")[1].split("\n## ")[0], "bash")
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["python3 dev.py serve", "python3 dev.py test"]
    ci_lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert ci_lines == ["exec python3 dev.py test"]


def test_github_workflow_runs_the_same_command_in_a_debian_container():
    workflow = (ROOT / ".github/workflows/ci.yml").read_text()
    assert "run: bash .ci/run" in workflow
    assert re.search(r"container: python:3\.\d+-bookworm", workflow)


def test_docs_workflow_tests_builds_strictly_and_deploys_with_minimal_permissions():
    workflow = (ROOT / ".github/workflows/docs.yml").read_text()
    assert "run: bash .ci/run" in workflow
    assert "mkdocs build --strict" in workflow and "SITE_URL:" in workflow
    assert "actions/upload-pages-artifact@" in workflow and "actions/deploy-pages@" in workflow
    top = workflow.split("jobs:")[0]
    assert re.search(r"^permissions:\n  contents: read\n\n", top, re.M)
    assert "pages: write" in workflow and "id-token: write" in workflow


def test_workflows_pass_actionlint():
    actionlint = shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(Path(sys.executable).parent))
    assert actionlint, "actionlint is missing: install the test extra (python3 dev.py test does)"
    result = subprocess.run([actionlint, "-no-color", "-oneline"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pyproject_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
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
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "Attribution 4.0 International" in (ROOT / "LICENSE-docs").read_text()
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
            for line in path.read_text().splitlines():
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
        source = (ROOT / "mha" / f"{module}.py").read_text()
        assert "reference" not in re.sub(r'""".*?"""', "", source, flags=re.S), module
