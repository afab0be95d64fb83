"""Code for the site, not a stable API for readers' programs: the studies and experiments whose
results the pages show (`experiments`, `head_roles`), the real models' studies as the build
reads them (`model_runs`, their kept runs in ``data/``), the benchmark (`bench`, its kept run in
``data/benchmark.json``), the terms file (`terms`: every term in both languages) and the
figures (`plots`). It imports the numeric core and `mha.models`; nothing in the core imports it.
"""
