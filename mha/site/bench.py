"""Benchmark of one self-attention layer: time and memory against the sequence length.

    python -m mha.site.bench                  # n = 256, 1024, 4096 (a few minutes)
    python -m mha.site.bench --quick          # n = 256, 1024, fewer repeats (under a minute)

The full run also measures the chunked path's peak extra memory on one sequence of n = 16384.
    python -m mha.site.bench --save benchmarks/results.json

Measured in one process on the same float32 inputs (d_model = 512, h = 8 by default):

- ``source``: the source document's ``MultiHeadAttention`` class as written (einsum with the
  scores laid out (query, head, key); it silently computes in float64);
- ``reference``: ``mha.reference`` (plain Python loops; only at the smallest n);
- ``fast``: ``mha.MultiHeadAttention``;
- ``chunked``: the same projections with ``mha.chunked_attention`` (never stores n x n);
- ``torch``: PyTorch's ``scaled_dot_product_attention`` with the same projections, when torch is
  installed.

Times are medians over repeats after a warm-up, each repeat on fresh inputs. The repeats of the
implementations are interleaved (one call of each in turn, repeated), so that a slow spell of
the machine (another process, memory being reclaimed after a large call) falls on all of them
alike instead of on whichever ran at that moment: the ratios are what the benchmark is for.
Above n = 1024 the two slow implementations are timed once, before the others. Peak memory is the
peak that ``tracemalloc`` sees during one call (NumPy reports its arrays there) minus nothing:
inputs are allocated before tracing starts. PyTorch's allocations are invisible to tracemalloc.
FLOPs are counted as 8 n d^2 + 4 n^2 d per sequence; the fraction of the machine's GEMM peak
compares the achieved rate with a large float32 matrix product measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc

import numpy as np

from ..multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = ["SourceDocumentMHA", "run", "main"]


class SourceDocumentMHA:
    """The source document's class, reproduced as written, as the benchmark's baseline.

    Do not use it: its (query, head, key) score layout mishandles an (n, n) mask (see the Python
    walkthrough page), and ``np.sqrt(self.d_k)`` turns float32 work into float64. The weights are
    taken from an ``mha.MultiHeadAttention`` so that every implementation computes the same thing.
    """

    def __init__(self, layer: MultiHeadAttention):
        self.d_k = layer.d_k
        self.W_Q, self.W_K, self.W_V, self.W_O = layer.W_Q, layer.W_K, layer.W_V, layer.W_O

    def forward(self, X, mask=None):
        n, d = X.shape
        Q = np.einsum('nd, dhk -> nhk', X, self.W_Q)
        K = np.einsum('nd, dhk -> nhk', X, self.W_K)
        V = np.einsum('nd, dhv -> nhv', X, self.W_V)
        scores = np.einsum('nhk, mhk -> nhm', Q, K) / np.sqrt(self.d_k)
        if mask is not None:
            scores = scores + mask
        scores = scores - np.max(scores, axis=-1, keepdims=True)
        attn = np.exp(scores)
        attn = attn / np.sum(attn, axis=-1, keepdims=True)
        ctx = np.einsum('nhm, mhv -> nhv', attn, V)
        return ctx.reshape(n, -1) @ self.W_O


def _implementations(layer: MultiHeadAttention, dtype):
    """name -> function of x (n, d_model) returning the layer's output."""
    from ..reference import multi_head_attention_reference

    source = SourceDocumentMHA(layer)
    impls = {
        "source": source.forward,
        "reference": lambda x: multi_head_attention_reference(
            x, layer.W_Q, layer.W_K, layer.W_V, layer.W_O)[0],
        "fast": layer.forward,
    }
    try:
        from ..chunked import chunked_attention
    except ImportError:
        chunked_attention = None
    d, h, d_k = layer.d_model, layer.h, layer.d_k
    w_qkv = np.concatenate([w.reshape(d, -1) for w in (layer.W_Q, layer.W_K, layer.W_V)],
                           axis=1).astype(dtype)
    w_o = layer.W_O.astype(dtype)
    if chunked_attention is not None:
        def chunked(x):
            q, k, v = (split_heads(a, h) for a in np.split(x @ w_qkv, 3, axis=1))  # (h, n, d_k)
            out = chunked_attention(q, k, v, block_size=512)  # (h, n, d_k)
            return merge_heads(out) @ w_o
        impls["chunked"] = chunked
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return impls
    t_qkv, t_o = torch.from_numpy(w_qkv), torch.from_numpy(w_o)

    def with_torch(x):
        with torch.no_grad():  # split_heads and merge_heads work on torch tensors too
            q, k, v = (split_heads(a, h)
                       for a in (torch.from_numpy(x) @ t_qkv).split(h * d_k, dim=1))
            out = F.scaled_dot_product_attention(q, k, v)  # (h, n, d_k)
            return (merge_heads(out) @ t_o).numpy()
    impls["torch"] = with_torch
    return impls


def _gemm_gflops(dtype, size: int = 2048, repeats: int = 5) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, size, size)).astype(dtype)
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * size**3 / min(times) / 1e9


def _time(fns: dict, make_input, repeats: int) -> dict:
    """Median seconds of each function of ``fns`` over ``repeats`` interleaved calls.

    Each function is called once first (warm-up); then, ``repeats`` times, each function in turn
    on fresh inputs.
    """
    for fn in fns.values():
        fn(make_input())  # warm-up
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            x = make_input()
            start = time.perf_counter()
            fn(x)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _peak_bytes(fn, x) -> int:
    tracemalloc.start()
    try:
        fn(x)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


#: Up to this n the slow implementations are repeated (and interleaved) like the others.
SLOW_REPEATED_UP_TO = 1024


def long_sequence_memory(n: int = 16384, h: int = 8, d_k: int = 64, dtype=np.float32,
                         block_size: int = 512) -> dict:
    """Peak extra memory of `mha.chunked_attention` on one long sequence, beside the dense size.

    ``q``, ``k`` and ``v`` ``(h, n, d_k)`` are made before tracing starts; the peak that
    ``tracemalloc`` sees during the call, minus the output (which any method must return), is
    the extra memory. The plain path would need ``h`` score matrices of ``n x n`` at least.
    """
    from ..chunked import chunked_attention

    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((h, n, d_k), dtype=np.float32).astype(dtype) for _ in range(3))
    start = time.perf_counter()
    tracemalloc.start()
    try:
        out = chunked_attention(q, k, v, block_size=block_size)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {"n": n, "h": h, "d_k": d_k, "block_size": block_size,
            "chunked_peak_extra_bytes": peak - out.nbytes,
            "dense_scores_bytes": h * n * n * np.dtype(dtype).itemsize,
            "seconds_under_tracemalloc": time.perf_counter() - start}


def run(sizes=(256, 1024, 4096), d_model: int = 512, h: int = 8, repeats: int = 5,
        dtype=np.float32, skip=(), reference_max_n: int = 64, source_max_n: int = 4096,
        long_n: int | None = 16384, log=print) -> dict:
    """Run the benchmark and return its results as a JSON-ready dict."""
    dtype = np.dtype(dtype)
    layer = MultiHeadAttention(d_model, h, seed=0)
    impls = {k: v for k, v in _implementations(layer, dtype).items() if k not in skip}
    rng = np.random.default_rng(1)
    gemm = _gemm_gflops(dtype)
    results = []
    for n in sizes:
        def make_input():
            return rng.normal(size=(n, d_model)).astype(dtype)

        check = make_input()
        expected = layer.forward(check)
        flops = 8 * n * d_model**2 + 4 * n**2 * d_model
        # Up to n = 1024 every implementation takes its turn in every repeat. Beyond it the
        # slow ones (seconds to a minute per call) are timed once each, beforehand.
        limit = {"reference": reference_max_n, "source": source_max_n}
        measured = {name: fn for name, fn in impls.items() if n <= limit.get(name, n)}
        once = {name for name in measured if name in limit and n > SLOW_REPEATED_UP_TO}
        seconds = {}
        for name in once:
            seconds |= _time({name: measured[name]}, make_input, 1)
        interleaved = {name: fn for name, fn in measured.items() if name not in once}
        seconds |= _time(interleaved, make_input, repeats)
        for name in (name for name in impls if name in seconds):
            fn = impls[name]
            out = np.asarray(fn(check))
            error = float(np.abs(out - expected).max())
            peak = None if name == "torch" else _peak_bytes(fn, make_input())
            row = {"n": n, "impl": name, "seconds": seconds[name], "peak_bytes": peak,
                   "max_abs_error_vs_fast": error, "gflops": flops / seconds[name] / 1e9,
                   "fraction_of_gemm_peak": flops / seconds[name] / 1e9 / gemm}
            results.append(row)
            log(f"n={n:5d} {name:9s} {seconds[name] * 1e3:10.2f} ms  "
                f"peak {'-' if peak is None else f'{peak / 2**20:8.1f} MiB'}  "
                f"{row['gflops']:6.1f} GFLOP/s ({row['fraction_of_gemm_peak']:.0%} of GEMM)")
    by = {(r["n"], r["impl"]): r["seconds"] for r in results}
    ratios = []
    for n in sizes:
        fast = by.get((n, "fast"))
        line = {"n": n}
        if fast and (n, "source") in by:
            line["source_over_fast"] = by[(n, "source")] / fast
        if fast and (n, "torch") in by:
            line["fast_over_torch"] = fast / by[(n, "torch")]
        if (n, "chunked") in by and fast:
            line["chunked_over_fast"] = by[(n, "chunked")] / fast
        ratios.append(line)
        log("ratios " + ", ".join(f"{k} {v:.2f}" for k, v in line.items() if k != "n")
            + f"  (n={n})")
    long = None
    if long_n:
        long = long_sequence_memory(long_n, h, d_model // h, dtype)
        log(f"n={long_n} chunked peak extra memory {long['chunked_peak_extra_bytes'] / 2**20:.1f} "
            f"MiB (tracemalloc, output excluded); the {h} dense n x n score matrices alone: "
            f"{long['dense_scores_bytes'] / 2**30:.1f} GiB")
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import torch
        versions["torch"] = torch.__version__
    except ImportError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.machine(),
                    "cpu_count": os.cpu_count()},
        "versions": versions, "d_model": d_model, "h": h, "dtype": dtype.name,
        "gemm_gflops": gemm, "results": results, "ratios": ratios, "long_sequence": long,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mha.site.bench",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 256 and 1024, 3 repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help="sequence lengths")
    parser.add_argument("--repeats", type=int, help="timed repeats per size")
    parser.add_argument("--long-n", type=int, default=16384,
                        help="n of the chunked path's long-sequence memory run (0: skip; "
                             "skipped by --quick)")
    parser.add_argument("--save", help="write the results as JSON to this path")
    args = parser.parse_args(argv)
    # NumPy's BLAS threads and PyTorch's OpenMP threads share the cores; threads that spin
    # while waiting for work slow the other library down (PyTorch took 6x longer at n = 256
    # here). Waiting passively is fair to both. Must be set before torch is imported.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sizes = args.sizes or ((256, 1024) if args.quick else (256, 1024, 4096))
    repeats = args.repeats or (3 if args.quick else 7)
    results = run(sizes=sizes, repeats=repeats, source_max_n=1024 if args.quick else 4096,
                  long_n=None if args.quick else args.long_n)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        print(f"wrote {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
