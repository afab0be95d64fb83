"""The benchmark runs and its implementations agree (a smoke test: no timing is asserted)."""

import json

import numpy as np

from mha import MultiHeadAttention
from mha.site.bench import SourceDocumentMHA, main, run


def test_source_document_class_computes_the_same_attention_in_float64():
    layer = MultiHeadAttention(32, 4, seed=0)
    x = np.random.default_rng(0).normal(size=(6, 32)).astype(np.float32)
    out = SourceDocumentMHA(layer).forward(x)
    assert out.dtype == np.float64                     # the silent promotion the issue names
    np.testing.assert_allclose(out, layer(x), rtol=1e-4, atol=1e-5)


def test_benchmark_runs_and_every_implementation_agrees(tmp_path):
    lines = []
    results = run(sizes=(16,), d_model=32, h=4, repeats=1, reference_max_n=16, long_n=2048,
                  log=lines.append)
    names = {r["impl"] for r in results["results"]}
    assert {"source", "reference", "fast"} <= names
    for row in results["results"]:
        assert row["max_abs_error_vs_fast"] < 1e-3, row
        assert row["seconds"] > 0
    assert any("ratios" in line for line in lines)
    long = results["long_sequence"]  # the chunked path on one longer sequence: memory only
    assert long["n"] == 2048 and long["dense_scores_bytes"] == 4 * 2048 * 2048 * 4
    assert 0 < long["chunked_peak_extra_bytes"] < long["dense_scores_bytes"]
    path = tmp_path / "results.json"
    assert main(["--sizes", "16", "--repeats", "1", "--long-n", "0", "--save", str(path)]) == 0
    saved = json.loads(path.read_text())
    assert saved["machine"]["cpu_count"] and saved["versions"]["numpy"] == np.__version__
