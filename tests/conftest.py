"""Shared test settings: a Hypothesis profile that cannot flake on a slow, shared machine, and
the real model for the tests that need it."""

import os

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

# The script that made the golden files needs torch; CI does not have it and must not import it.
collect_ignore = ["golden/make_golden.py", "golden/make_minilm_golden.py"]


@pytest.fixture(scope="session")
def model():
    """The real all-MiniLM-L6-v2 (`mha.minilm`): skipped when its weights are not installed,
    except under CI (``CI`` set), where their absence is a failure."""
    from mha.minilm import MiniLMNotInstalledError, load_minilm

    try:
        return load_minilm()
    except MiniLMNotInstalledError as error:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the all-MiniLM-L6-v2 weights: {error}")
        pytest.skip(f"all-MiniLM-L6-v2 is not installed: {error}")
