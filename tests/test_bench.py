"""The benchmark runs and its implementations agree (a smoke test: no timing is asserted)."""

import json
import math

import numpy as np

from mha import MultiHeadAttention
from mha import KVCache, causal_mask
from mha.site.bench import (DECODE_PREFIXES, LADDER_STEPS, STEP_PARTS, SourceDocumentMHA,
                            kept_run, ladder, main, measure_backward, measure_decode, run)
from tolerance import assert_within, gamma

NUMPY_2 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def output_error(expected, d_model, dtype=np.float32):
    """Rule 2 of tests/tolerance.py summed over one attention layer's steps: the three
    projections and the output's (d_model terms each), the scores' (d_k terms) and the mix's
    (n terms; d_k and n at most d_model here), five gamma(d_model) of the largest output
    (measured: within a tenth of it under three OpenBLAS kernels)."""
    return 5 * gamma(d_model, dtype) * np.abs(np.asarray(expected, dtype=np.float64)).max()


def test_source_document_class_computes_the_same_attention_in_float64_under_numpy_2():
    """Given float32 weights and input, the class's np.sqrt(d_k), a NumPy float64 scalar, makes
    the scores float64 under NumPy >= 2 (NEP 50); NumPy 1.x kept float32."""
    layer = MultiHeadAttention(32, 4, seed=0)
    x = np.random.default_rng(0).normal(size=(6, 32)).astype(np.float32)
    source = SourceDocumentMHA(layer, np.float32)
    assert source.W_Q.dtype == source.W_O.dtype == np.float32
    out = source.forward(x)
    assert out.dtype == (np.float64 if NUMPY_2 else np.float32)
    assert_within(out, layer(x), output_error(layer(x), 32))     # float32 against float64


def test_each_step_of_the_ladder_computes_the_layer():
    """Every step gives mha's output; only the steps before the Python-float scale compute in
    float64 (under NumPy >= 2), and the last step is mha itself."""
    layer = MultiHeadAttention(32, 4, seed=0)
    x = np.random.default_rng(1).normal(size=(9, 32)).astype(np.float32)
    steps = ladder(layer, np.float32)
    assert tuple(steps) == LADDER_STEPS
    expected = layer(x)
    for name, fn in steps.items():
        out = fn(x)
        assert_within(out, expected, 2 * output_error(expected, 32), err_msg=name)
        float64 = NUMPY_2 and name in ("as-written", "einsum-optimize")
        assert out.dtype == (np.float64 if float64 else np.float32), name
    assert steps["mha"] == layer.forward
    x64 = x.astype(np.float64)  # in float64 every step agrees closely
    for name, fn in ladder(layer, np.float64).items():
        assert_within(fn(x64), layer(x64), 2 * output_error(layer(x64), 32, np.float64),
                      err_msg=name)


def test_benchmark_runs_and_every_implementation_agrees(tmp_path):
    lines = []
    results = run(sizes=(16,), d_model=32, h=4, repeats=1, reference_max_n=16, long_n=2048,
                  ladder_n=24, backward_n=20, decode_n=10, decode_repeats=1,
                  log=lines.append)
    names = {r["impl"] for r in results["results"]}
    assert {"source", "reference", "fast"} <= names
    for row in results["results"]:
        assert row["max_abs_error_vs_fast"] < 1e-3, row
        assert 0 < row["seconds"] <= row["median_seconds"]  # the fastest call, and the median
    assert any("ratios" in line for line in lines)
    steps = results["ladder"]["steps"]  # the ladder: every step, in order, timed and checked
    assert results["ladder"]["n"] == 24 and [s["step"] for s in steps] == list(LADDER_STEPS)
    for step in steps:
        assert 0 < step["seconds"] <= step["median_seconds"] and step["peak_bytes"] > 0, step
        assert step["max_abs_error_vs_fast"] < 1e-4, step
    assert steps[-1]["max_abs_error_vs_fast"] == 0 and steps[-1]["dtype"] == "float32"
    assert sum("ladder" in line for line in lines) == len(LADDER_STEPS)
    long = results["long_sequence"]  # the chunked path on one longer sequence: memory only
    assert long["n"] == 2048 and long["dense_scores_bytes"] == 4 * 2048 * 2048 * 4
    assert 0 < long["chunked_peak_extra_bytes"] < long["dense_scores_bytes"]
    backward = results["backward"]  # the backward pass at its own length
    assert (backward["n"], backward["d_model"], backward["h"]) == (20, 32, 4)
    assert any(line.startswith("backward n=20") for line in lines)
    decode = results["decode"]  # decoding, last: both ways give the same rows
    assert (decode["n"], decode["d_model"], decode["h"]) == (10, 32, 4) and decode["agree"]
    assert any(line.startswith("decode n=10") for line in lines)
    path = tmp_path / "results.json"
    assert main(["--sizes", "16", "--repeats", "1", "--long-n", "0", "--ladder-n", "0",
                 "--backward-n", "0", "--decode-n", "0", "--save", str(path)]) == 0
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["machine"]["cpu_count"] and saved["versions"]["numpy"] == np.__version__
    assert saved["ladder"] is None and saved["backward"] is None and saved["decode"] is None


def test_backward_measurement_times_both_calls_and_checks_them():
    """At a tiny n (a smoke test: no time is asserted): mha's forward and backward, and with
    torch installed PyTorch's forward and forward + backward, each timed on every repeat; the
    ratios are the quotients of the fastest calls; both libraries compute the same gradients."""
    lines = []
    result = measure_backward(MultiHeadAttention(32, 4, seed=0), n=12, repeats=2,
                              log=lines.append)
    assert (result["n"], result["d_model"], result["h"], result["dtype"]) == (12, 32, 4,
                                                                              "float32")
    seconds, medians = result["seconds"], result["median_seconds"]
    assert {"forward", "backward"} <= set(seconds) and set(seconds) == set(medians)
    for name in seconds:
        assert 0 < seconds[name] <= medians[name], name
    assert result["backward_over_forward"] == seconds["backward"] / seconds["forward"]
    try:
        import torch  # noqa: F401
    except ImportError:
        assert set(seconds) == {"forward", "backward"} and len(lines) == 1
        return
    assert set(seconds) == {"forward", "backward", "torch_forward", "torch_forward_backward"}
    assert result["torch_backward_over_forward"] == (seconds["torch_forward_backward"]
                                                     / seconds["torch_forward"])
    assert result["torch_threads"] >= 1 and len(lines) == 2
    assert set(result["relative_difference_vs_torch"]) == {"output", "x", "W_O"}
    assert max(result["relative_difference_vs_torch"].values()) < 1e-5


def test_backward_only_merges_into_the_saved_results(tmp_path, monkeypatch):
    """--backward-only measures the backward pass alone and adds it to the file --save names,
    leaving the other results (and their date) as they were."""
    import mha.site.bench as bench

    def tiny(layer, n, dtype, repeats, log=print):  # the same call at n = 8, d_model 16
        assert (layer.d_model, layer.h, n, np.dtype(dtype)) == (512, 8, 64, np.float32)
        return measure_backward(MultiHeadAttention(16, 2, seed=0), 8, dtype, repeats, log=log)

    monkeypatch.setattr(bench, "measure_backward", tiny)
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps({"date": "2000-01-01", "results": [1, 2], "backward": "old"}),
                    encoding="utf-8")
    assert main(["--backward-only", "--backward-n", "64", "--repeats", "1",
                 "--save", str(path)]) == 0
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["date"] == "2000-01-01" and saved["results"] == [1, 2]
    backward = saved["backward"]
    assert backward["n"] == 8 and backward["repeats"] == 1 and backward["date"] != "2000-01-01"
    assert backward["versions"]["numpy"] == np.__version__ and backward["machine"]["cpu_count"]


def test_the_kept_run_is_what_the_speed_page_says_it_is():
    """docs/*/speed.md describes the kept run in words, so the run must bear them out: every
    implementation at every length, d_model 512, h 8, float32, one sequence on the machine it
    names; a ladder of every step ending at mha, in float64 only before the Python-float scale
    (the run used NumPy 2.4, where einsum's optimize reaches BLAS for every contraction); "most of the gap closes in the first two rows", counted as
    factors (log time), and each later row buys little by itself; and the chunked path, doing
    the same arithmetic, in the fast path's range of time from n = 1024 on."""
    run = kept_run()
    assert (run["d_model"], run["h"], run["dtype"]) == (512, 8, "float32")
    assert run["machine"]["cpu_count"] == 2                     # "a CPU with two cores"
    assert np.lib.NumpyVersion(run["versions"]["numpy"]) >= "2.4.0"  # "the NumPy ... (2.4"
    sizes = sorted({r["n"] for r in run["results"]})
    for n in sizes:
        assert {r["impl"] for r in run["results"] if r["n"] == n} >= {"source", "fast", "chunked"}
    steps = run["ladder"]["steps"]
    assert [s["step"] for s in steps] == list(LADDER_STEPS)
    assert [s["dtype"] for s in steps] == ["float64"] * 2 + ["float32"] * 6
    assert all(s["max_abs_error_vs_fast"] < 1e-4 for s in steps)
    t = [s["seconds"] for s in steps]
    assert math.log(t[0] / t[2]) > math.log(t[2] / t[-1]) > 0
    assert all(t[i - 1] / t[i] < 1.5 for i in range(3, len(t)))  # "from row 3 on ... little"
    for line in run["ratios"]:
        if line["n"] >= 1024:
            assert 0.6 < line["chunked_over_fast"] < 1.4, line


def test_the_ladder_table_has_a_row_per_step_in_both_languages():
    """The speed page's ladder table: every step of the kept run's ladder, in order, with its
    type and time, and the first-to-last speed-up in the note under it."""
    from mha.site.plots.tables import LADDER_CHANGES, benchmark_table, ladder_table

    run = kept_run()
    steps = run["ladder"]["steps"]
    for lang in ("zh", "en"):
        assert set(LADDER_CHANGES[lang]) == set(LADDER_STEPS)
        table = ladder_table(run, lang)
        assert table not in benchmark_table(run, lang)
        lines = table.split("\n")
        assert all(line.count("|") == 6 for line in lines[:2 + len(steps)])
        for i, (line, step) in enumerate(zip(lines[2:], steps)):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            assert cells[0] == f"{i}. {LADDER_CHANGES[lang][step['step']]}"
            assert cells[1:3] == [step["dtype"], f"{step['seconds'] * 1e3:.0f}"]
        assert f"{steps[0]['seconds'] / steps[-1]['seconds']:.1f}" in lines[-1]


def test_the_kept_run_measures_the_backward_pass_the_issue_asks_for():
    """One MultiHeadAttention.backward (forward recomputed inside) against one forward at
    n = 1024, d_model 512, h 8, float32, on the two-core machine, within the issue's budget of
    3x; PyTorch autograd's ratio beside it, on the same projections, computing the same output
    and gradients."""
    backward = kept_run()["backward"]
    assert (backward["n"], backward["d_model"], backward["h"], backward["dtype"]) == (
        1024, 512, 8, "float32")
    assert backward["machine"]["cpu_count"] == 2 and backward["versions"]["torch"]
    seconds = backward["seconds"]
    assert set(seconds) == {"forward", "backward", "torch_forward", "torch_forward_backward"}
    assert backward["backward_over_forward"] == seconds["backward"] / seconds["forward"]
    assert backward["torch_backward_over_forward"] == (seconds["torch_forward_backward"]
                                                       / seconds["torch_forward"])
    assert 1 < backward["backward_over_forward"] <= 3
    assert backward["torch_backward_over_forward"] > 1
    assert max(backward["relative_difference_vs_torch"].values()) < 1e-5


def test_both_ways_of_generating_give_the_rows_of_one_causal_forward():
    """The benchmark's two loops (a KVCache fed one row at a time; the whole prefix again each
    step, keeping its last row) each produce, row by row, the layer's causal output."""
    from mha.site.bench import _generate

    layer = MultiHeadAttention(32, 4, seed=0)
    x = np.random.default_rng(6).normal(size=(11, 32)).astype(np.float32)
    expected = layer(x, mask=causal_mask(11))
    for cached in (True, False):
        rows, steps, total = _generate(layer, x, cached, causal_mask(11))
        assert rows.dtype == np.float32 and steps.shape == (11,) and (steps > 0).all()
        assert total >= steps.sum()
        assert_within(rows, expected, 2 * output_error(expected, 32), err_msg=str(cached))


def test_decode_measurement_at_a_tiny_size_checks_what_it_times():
    """At n = 20 (a smoke test: no time is asserted): the totals, their ratio, the time per
    token at every kept prefix up to n, the cache bytes against the formula for each kv_heads,
    and one step at prefix n whose pieces compute what the whole step computes; with torch,
    PyTorch's step computes the same output."""
    lines = []
    result = measure_decode(32, 4, n=20, repeats=2, token_repeats=2, step_repeats=3,
                            kv_heads=(4, 2, 1),
                            log=lines.append)
    assert (result["n"], result["d_model"], result["h"], result["dtype"]) == (20, 32, 4,
                                                                              "float32")
    seconds = result["seconds"]
    assert set(seconds) == {"cached", "recomputed"}
    for way in seconds:
        assert 0 < seconds[way] <= result["median_seconds"][way]
    assert result["recomputed_over_cached"] == seconds["recomputed"] / seconds["cached"]
    per_token = result["per_token"]
    assert per_token["prefix"] == [p for p in DECODE_PREFIXES if p <= 20] == [1, 2, 4, 8, 16]
    assert per_token["repeats"] == 2
    for way in ("cached", "recomputed"):
        assert len(per_token[way]) == 5 and all(t > 0 for t in per_token[way])
    assert result["agree"] and result["max_abs_difference"] < 1e-5
    assert [(c["kv_heads"], c["tokens"], c["nbytes"]) for c in result["cache"]] == [
        (4, 20, 2 * 20 * 4 * 8 * 4), (2, 20, 2 * 20 * 2 * 8 * 4), (1, 20, 2 * 20 * 1 * 8 * 4)]
    assert all(c["nbytes"] == c["formula_bytes"] for c in result["cache"])
    step = result["step"]
    assert step["prefix"] == 20 and step["step_repeats"] == 3 and step["pieces_match_total"]
    libs = ["mha"]
    try:
        import torch  # noqa: F401
        libs.append("torch")
    except ImportError:
        assert "torch" not in step
    for lib in libs:
        assert tuple(step[lib]["parts"]) == STEP_PARTS
        assert all(t > 0 for t in step[lib]["parts"].values())
        assert step[lib]["sum_of_parts"] == sum(step[lib]["parts"].values())
        assert 0 < step[lib]["seconds"] <= step[lib]["median_seconds"]
    if "torch" in libs:
        assert step["relative_difference_vs_torch"] < 1e-5 and step["torch_threads"] >= 1
        assert step["mha_over_torch"] == step["mha"]["seconds"] / step["torch"]["seconds"]
    assert any(line.startswith("decode n=20") for line in lines)
    assert sum(line.startswith("decode prefix") for line in lines) == 5


def test_the_decode_step_leaves_the_cache_as_it_found_it():
    """The step is timed again and again at the same prefix: each timed piece takes its token
    back out of the cache."""
    from mha.site.bench import _our_step

    layer = MultiHeadAttention(16, 2, seed=0)
    x = np.random.default_rng(7).normal(size=(6, 16)).astype(np.float32)
    cache = KVCache()
    for t in range(5):
        layer(x[t:t + 1], cache=cache)
    keys = cache.keys.copy()
    fns, whole, pieces = _our_step(layer, cache, x[5:])
    for fn in fns.values():
        fn()
        assert len(cache) == 5
    np.testing.assert_array_equal(cache.keys, keys)
    expected = layer(x, mask=causal_mask(6))[5:]
    assert_within(whole, expected, 2 * output_error(expected, 16))
    # the pieces run the same operations on the same arrays, in the same process: exact
    np.testing.assert_array_equal(pieces, whole)


def test_decode_only_merges_into_the_saved_results(tmp_path, monkeypatch):
    """--decode-only measures decoding alone and adds it to the file --save names, leaving the
    other results (and their date) as they were."""
    import mha.site.bench as bench

    def tiny(d_model, h, n, dtype, repeats, log=print):  # the same call at n = 6, d_model 16
        assert (d_model, h, n, np.dtype(dtype), repeats) == (512, 8, 64, np.float32, 2)
        return measure_decode(16, 2, 6, dtype, 1, token_repeats=1, step_repeats=2, log=log)

    monkeypatch.setattr(bench, "measure_decode", tiny)
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps({"date": "2000-01-01", "results": [1, 2], "backward": "old"}),
                    encoding="utf-8")
    assert main(["--decode-only", "--decode-n", "64", "--decode-repeats", "2",
                 "--save", str(path)]) == 0
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["date"] == "2000-01-01" and saved["results"] == [1, 2]
    assert saved["backward"] == "old"
    decode = saved["decode"]
    assert decode["n"] == 6 and decode["agree"] and decode["date"] != "2000-01-01"
    assert decode["versions"]["numpy"] == np.__version__ and decode["machine"]["cpu_count"]


def test_the_kept_run_measures_decoding_as_the_issue_asks():
    """1,024 tokens one at a time, d_model 512, h 8, float32, on the two-core machine: both
    ways give the same rows; the cached way meets the issue's goal (at least 20x faster); the
    time per token at the prefixes the figure draws; the cache bytes for kv_heads 8, 2, 1 equal
    the formula; one step at prefix 1,024 part by part, ours and PyTorch's (same output), ours
    within the issue's 1.5 times PyTorch's, as docs/*/inference.md says, with what the page says
    of the parts: mha's projections (float64 weights, twice the bytes) take longer than
    PyTorch's, its attention less long."""
    decode = kept_run()["decode"]
    assert (decode["n"], decode["d_model"], decode["h"], decode["dtype"]) == (1024, 512, 8,
                                                                              "float32")
    assert decode["machine"]["cpu_count"] == 2 and decode["versions"]["torch"]
    assert decode["agree"] and decode["max_abs_difference"] < 1e-4
    seconds = decode["seconds"]
    assert decode["recomputed_over_cached"] == seconds["recomputed"] / seconds["cached"]
    assert decode["recomputed_over_cached"] >= 20
    per_token = decode["per_token"]
    assert per_token["prefix"] == list(DECODE_PREFIXES)
    assert len(per_token["cached"]) == len(per_token["recomputed"]) == len(DECODE_PREFIXES)
    assert per_token["recomputed"][-1] > per_token["cached"][-1]
    assert [(c["kv_heads"], c["tokens"]) for c in decode["cache"]] == [(8, 1024), (2, 1024),
                                                                       (1, 1024)]
    for c in decode["cache"]:
        assert c["nbytes"] == c["formula_bytes"] == 2 * 1024 * c["kv_heads"] * 64 * 4
    step = decode["step"]
    assert step["prefix"] == 1024 and step["pieces_match_total"]
    for lib in ("mha", "torch"):
        assert tuple(step[lib]["parts"]) == STEP_PARTS
    assert step["mha_over_torch"] == step["mha"]["seconds"] / step["torch"]["seconds"]
    assert step["relative_difference_vs_torch"] < 1e-5 and step["torch_threads"] == 2
    assert step["mha_over_torch"] <= 1.5
    ours, theirs = step["mha"]["parts"], step["torch"]["parts"]
    assert ours["projections"] > theirs["projections"] and ours["attention"] < theirs["attention"]


def test_pieces_are_timed_in_interleaved_blocks():
    """After one warm-up call each, every function runs ``block`` times in a row, then the next
    one, round after round, until each has its repeats (rounded up to whole blocks)."""
    from mha.site.bench import _time

    calls = []
    times = _time({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, None,
                  repeats=5, block=2)
    assert "".join(calls) == "ab" + "aabb" * 3
    assert [len(times["a"]), len(times["b"])] == [6, 6]
    calls.clear()
    _time({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, None, repeats=2)
    assert "".join(calls) == "ab" + "ab" * 2
