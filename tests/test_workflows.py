"""CI and deployment (.github/): what the workflow promises, and actionlint and zizmor find
nothing in it.

One workflow, ``.github/workflows/ci.yml``, tests every push once and publishes the site built
from the commit the tests passed on; its header says which job does what. Its conditions
(``if:``, ``cancel-in-progress:``) are checked by evaluating them (`evaluate`) for the events
that matter: a push to main, a pull request, a fork.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from helpers import load_file

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the test extra installs tomli, the same parser
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CI = ROOT / ".github" / "workflows" / "ci.yml"


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:  # YAML 1.1 (PyYAML) reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


@pytest.fixture(scope="module")
def ci() -> dict:
    return load(CI)


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def action(step: dict) -> str:
    """``owner/name`` of the action a step uses ('' for a ``run:`` step)."""
    return step.get("uses", "").split("@")[0]


def script(job: dict) -> str:
    """The job's shell commands, one a line (a line continued with a backslash joined)."""
    return "\n".join(step.get("run", "") for step in steps(job)).replace("\\\n", " ")


def jobs_using(ci: dict, name: str) -> dict[str, dict]:
    return {key: job for key, job in ci["jobs"].items()
            if any(action(step) == name for step in steps(job))}


def evaluate(expression: str, **contexts) -> bool:
    """A GitHub Actions expression of the small subset the workflow uses, evaluated in Python.

    ``contexts`` are nested dicts (``github={"ref": ...}``, ``vars={}``); a missing property
    reads as ``''``, as a variable that is not set does on GitHub.
    """
    expression = expression.strip()
    if expression.startswith("${{"):
        expression = expression[3:-2]
    # Only what the translation below handles: names, '...' strings, (), ==, !=, !, &&, ||.
    token = r"\s+|[A-Za-z_][\w.]*|'[^']*'|==|!=|!|&&|\|\||[()]"
    assert re.fullmatch(f"(?:{token})*", expression), f"expression beyond the subset: {expression}"

    def namespace(value):
        if isinstance(value, dict):
            return _Context(**{key: namespace(item) for key, item in value.items()})
        return value

    python = re.sub(r"!(?!=)", " not ", expression).replace("&&", " and ").replace("||", " or ")
    return bool(eval(python, {"__builtins__": {}},
                     {name: namespace(value) for name, value in contexts.items()}))


class _Context(SimpleNamespace):
    def __getattr__(self, name):  # only called for a property that is not there
        return ""


def github(event: str, ref: str, fork: bool = False) -> dict:
    return {"event_name": event, "ref": ref, "event": {"repository": {"fork": fork}}}


def script_path(name: str) -> str:
    """A console script installed with this Python's packages (a venv's or not), else on PATH."""
    found = shutil.which(name, path=sysconfig.get_path("scripts")) or shutil.which(name)
    assert found, f"{name} is missing: install the test extra (pip install -e '.[test]')"
    return found


# ---- the jobs ------------------------------------------------------------------------------

def test_the_core_suite_runs_on_every_promised_platform_and_python(ci):
    (core,) = [job for job in ci["jobs"].values() if "-m core" in script(job)]
    matrix = core["strategy"]["matrix"]
    assert core["runs-on"] == "${{ matrix.os }}" and core["strategy"]["fail-fast"] is False
    runners = matrix["os"]
    # Linux x86-64 and arm64, macOS on Apple silicon (every macOS runner since macos-14), Windows.
    assert any(re.fullmatch(r"ubuntu-(latest|\d\d\.\d\d)", os) for os in runners)
    assert any(re.fullmatch(r"ubuntu-\d\d\.\d\d-arm", os) for os in runners)
    assert any(re.fullmatch(r"macos-(latest|1[4-9]|[2-9]\d)", os) for os in runners)
    assert any(os.startswith("windows-") for os in runners)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lowest = re.fullmatch(r">=\s*(3\.\d+)", project["requires-python"]).group(1)
    minors = [int(version.split(".")[1]) for version in matrix["python"]]
    assert matrix["python"][0] == lowest and minors == list(range(minors[0], minors[-1] + 1))
    assert minors[-1] >= 13
    classified = [c.rsplit(" :: ", 1)[1] for c in project.get("classifiers", [])
                  if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    if classified:  # the versions the package says it supports are the ones tested
        assert classified == matrix["python"]
    (setup,) = [s for s in steps(core) if action(s) == "actions/setup-python"]
    assert setup["with"]["python-version"] == "${{ matrix.python }}"
    # Only what the core needs: the test extra, none of the site's packages or model wheels.
    assert 'python -m pip install -e ".[test]"' in script(core)
    assert "docs" not in script(core) and "requirements/" not in script(core)
    assert "python -m pytest -m core -p no:cacheprovider" in script(core)


def test_every_test_runs_once_per_push_and_the_full_command_in_a_debian_container(ci):
    every = {name: job for path in WORKFLOWS for name, job in load(path)["jobs"].items()
             if "bash .ci/run" in script(job)}
    assert list(every) == ["test"], "the README's test command runs in exactly one job"
    test = every["test"]
    assert re.fullmatch(r"python:3\.\d+-bookworm", test["container"])
    (step,) = [s for s in steps(test) if s.get("run") == "bash .ci/run"]
    assert step["env"]["CI"] == "true"  # dev.py: a missing system package is an error
    for name, job in ci["jobs"].items():  # nothing else runs tests again
        if name not in ("core", "test"):
            assert not re.search(r"pytest|\.ci/run|dev\.py", script(job)), name


def test_the_site_is_built_strictly_on_macos_too(ci):
    macos = [job for job in ci["jobs"].values()
             if str(job["runs-on"]).startswith("macos") and "mkdocs build --strict" in script(job)]
    assert len(macos) == 1


def test_site_builds_install_what_dev_py_installs(ci):
    """Each job that builds the site installs the docs extra and every file of hash-pinned
    model wheels that dev.py installs (``PINNED``), the way dev.py does."""
    dev = load_file(ROOT / "dev.py")
    pins = [path.relative_to(ROOT).as_posix() for path in dev.PINNED]
    builds = {name: job for name, job in ci["jobs"].items() if "mkdocs build" in script(job)}
    assert len(builds) == 2  # on macOS, and for Pages
    for name, job in builds.items():
        assert "mkdocs build --strict" in script(job), name
        assert re.search(r'pip install -e "\.\[docs\]"', script(job)), name
        (line,) = [line for line in script(job).splitlines() if "--require-hashes" in line]
        assert "--no-deps" in line and re.findall(r"-r (\S+)", line) == pins, name


def test_pip_downloads_are_cached(ci):
    keyed = ("pyproject.toml", "requirements/*.txt")
    for name, job in ci["jobs"].items():
        installs = "pip install" in script(job) or ".ci/run" in script(job)
        for step in steps(job):
            if action(step) == "actions/setup-python":
                assert step["with"]["cache"] == "pip", name
                assert step["with"]["cache-dependency-path"].split() == list(keyed), name
        if installs and "container" in job:  # setup-python does not run in a container
            (cache,) = [s for s in steps(job) if action(s) == "actions/cache"]
            assert cache["with"]["path"] == "~/.cache/pip", name
            assert f"hashFiles('{keyed[0]}', '{keyed[1]}')" in cache["with"]["key"], name
        elif installs:
            assert any(action(s) == "actions/setup-python" for s in steps(job)), name


# ---- Pages ---------------------------------------------------------------------------------

def test_pages_are_built_from_the_tested_commit_and_deployed_from_main_only(ci):
    (build_name, build), = jobs_using(ci, "actions/configure-pages").items()
    (deploy_name, deploy), = jobs_using(ci, "actions/deploy-pages").items()
    tests = {name for name in ci["jobs"] if name not in (build_name, deploy_name)}
    assert set(build["needs"]) == tests  # every other job passed first
    assert deploy["needs"] == build_name and "if" not in deploy  # it follows the build's
    assert deploy["environment"]["name"] == "github-pages"
    assert [action(s) for s in steps(build)][-1] == "actions/upload-pages-artifact"
    (strict,) = [s for s in steps(build) if "mkdocs build --strict" in s.get("run", "")]
    assert strict["env"]["SITE_URL"] == "${{ steps.pages.outputs.base_url }}/"
    assert strict["env"]["DEPLOY"] == "true"  # hooks/deploy_check.py insists on SITE_URL
    # The install page's clone address (hooks/markers.py): the repository the run is in.
    assert strict["env"]["REPO_URL"] == "${{ github.server_url }}/${{ github.repository }}"
    main, branch, pull = "refs/heads/main", "refs/heads/topic", "refs/pull/7/merge"
    cases = [  # (github, vars) -> is the site built and deployed?
        (github("push", main), {}, True),
        (github("workflow_dispatch", main), {}, True),
        (github("push", main), {"DEPLOY_PAGES": "false"}, True),
        (github("workflow_dispatch", branch), {}, False),
        (github("pull_request", pull), {}, False),
        (github("pull_request", main), {}, False),
        (github("push", main, fork=True), {}, False),  # a fork without Pages stays green
        (github("push", main, fork=True), {"DEPLOY_PAGES": "true"}, True),
        (github("pull_request", pull, fork=True), {"DEPLOY_PAGES": "true"}, False),
    ]
    for context, variables, deployed in cases:
        assert evaluate(build["if"], github=context, vars=variables) is deployed, \
            (context, variables)


def test_permissions_are_none_by_default_and_least_per_job(ci):
    assert ci["permissions"] == {}
    for name, job in ci["jobs"].items():
        used = {action(s) for s in steps(job)}
        if "actions/deploy-pages" in used:
            assert used == {"actions/deploy-pages"}, name  # nothing else runs with write access
            assert job["permissions"] == {"pages": "write", "id-token": "write"}, name
        elif "actions/configure-pages" in used:
            # configure-pages reads the Pages site (GET /repos/{owner}/{repo}/pages): pages: read
            assert job["permissions"] == {"contents": "read", "pages": "read"}, name
        else:
            assert job["permissions"] == {"contents": "read"}, name


def test_superseded_runs_are_cancelled_but_never_a_deployment(ci):
    concurrency = ci["concurrency"]
    assert "${{ github.ref }}" in concurrency["group"]
    cancels = concurrency["cancel-in-progress"]
    assert evaluate(cancels, github=github("pull_request", "refs/pull/7/merge")) is True
    assert evaluate(cancels, github=github("push", "refs/heads/main")) is False
    (deploy,) = jobs_using(ci, "actions/deploy-pages").values()
    assert deploy["concurrency"]["cancel-in-progress"] is False


def test_no_file_names_a_workflow_that_does_not_exist():
    files = [ROOT / name for name in ("README.md", "MAINTAINERS.md", "mkdocs.yml", "dev.py")]
    files += sorted((ROOT / "hooks").glob("*.py")) + sorted((ROOT / "tests").glob("*.py"))
    named = {(path.name, found) for path in files for found in
             re.findall(r"\.github/workflows/[\w.-]+\.ya?ml", path.read_text(encoding="utf-8"))}
    assert named, "the files above name ci.yml"
    assert {found for _, found in named if not (ROOT / found).exists()} == set(), sorted(named)


# ---- supply chain --------------------------------------------------------------------------

def test_every_action_is_pinned_to_a_commit_with_its_version_in_a_comment():
    versions = {}
    for path in WORKFLOWS:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not re.match(r"\s*(- )?uses:", line):
                continue
            match = re.fullmatch(
                r"\s*(?:- )?uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)", line)
            assert match, f"{path.name}: {line.strip()}"
            name, commit, version = match.groups()
            assert versions.setdefault((name, commit), version) == version, line
    assert len({name for name, _ in versions}) == len(versions), "one version of each action"


def test_every_checkout_keeps_no_credentials():
    checkouts = [(path.name, step) for path in WORKFLOWS for job in load(path)["jobs"].values()
                 for step in steps(job) if action(step) == "actions/checkout"]
    assert checkouts
    for name, step in checkouts:
        assert step["with"]["persist-credentials"] is False, name


def test_dependabot_raises_the_actions_and_the_python_packages_weekly_in_groups():
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    updates = {update["package-ecosystem"]: update for update in config["updates"]}
    assert set(updates) == {"github-actions", "pip"}
    for update in updates.values():
        assert update["directory"] == "/"  # for pip: pyproject.toml and requirements/*.txt
        assert update["schedule"]["interval"] == "weekly"
        assert [group["patterns"] for group in update["groups"].values()] == [["*"]]


# ---- linters -------------------------------------------------------------------------------

def test_workflows_pass_actionlint():
    # Without shellcheck and pyflakes, which actionlint runs when it finds them installed: the
    # result must not depend on the machine. (Both were clean when this was written.)
    result = subprocess.run([script_path("actionlint"), "-no-color", "-oneline",
                             "-shellcheck=", "-pyflakes="],
                            cwd=ROOT, capture_output=True, text=True, encoding="utf-8")
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_finds_nothing_of_medium_severity_or_higher():
    """zizmor's default persona, offline (no audit that asks GitHub), on the workflows and the
    Dependabot file; a file it cannot read fails the run (--strict-collection)."""
    zizmor = [script_path("zizmor"), "--offline", "--strict-collection", "--min-severity",
              "medium", "--color", "never"]
    found = subprocess.run(zizmor + ["--format", "json", ".github"], cwd=ROOT,
                           capture_output=True, text=True, encoding="utf-8")
    # Exit codes: 0 nothing found, 11-14 the highest severity found; anything else is an error.
    assert found.returncode in (0, 11, 12, 13, 14), found.stderr
    if json.loads(found.stdout):
        shown = subprocess.run(zizmor + [".github"], cwd=ROOT, capture_output=True, text=True,
                               encoding="utf-8")
        pytest.fail(shown.stdout)
