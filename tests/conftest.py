"""Shared test settings: a Hypothesis profile that cannot flake on a slow, shared machine."""

import os

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
