"""Benchmark of one self-attention layer: time and memory against the sequence length.

    python -m mha.site.bench                  # n = 256, 1024, 4096 (a few minutes)
    python -m mha.site.bench --quick          # n = 256, 1024, fewer repeats (under a minute)
    python -m mha.site.bench --save mha/site/data/benchmark.json   # the run the site shows
    python -m mha.site.bench --backward-only --save mha/site/data/benchmark.json  # merge in
    python -m mha.site.bench --decode-only --save mha/site/data/benchmark.json    # merge in

The full run also measures the chunked path's peak extra memory on one sequence of n = 16384.
With PyTorch installed it adds PyTorch's column; a CPU-only reference environment is made as in
``tests/golden/make_golden.py`` (``python3 -m venv /tmp/refenv`` and ``pip install torch numpy``
there), then ``/tmp/refenv/bin/python -m mha.site.bench`` from the repository's root.

Measured in one process on the same float32 inputs (d_model = 512, h = 8 by default):

- ``source``: the source document's ``MultiHeadAttention`` class as written (einsum with the
  scores laid out (query, head, key)), given the layer's weights in float32: see
  `SourceDocumentMHA` for why it still computes in float64 under NumPy >= 2;
- ``reference``: ``mha.reference`` (plain Python loops; only at the smallest n);
- ``fast``: ``mha.MultiHeadAttention``;
- ``chunked``: the same projections with ``mha.chunked_attention`` (never stores n x n);
- ``torch``: PyTorch's ``scaled_dot_product_attention`` with the same projections, when torch is
  installed: one unbatched sequence, on the threads PyTorch chooses.

Then the backward pass (`measure_backward`), at n = 1024 by default: one
``MultiHeadAttention.backward`` call (which recomputes the forward) against one ``forward`` call,
and, with torch, PyTorch autograd on the same projections (forward and ``backward()`` against a
forward under ``torch.no_grad()``): the two ratios. ``--backward-only`` measures just this and
merges it, under the key ``"backward"``, into the JSON file that ``--save`` names.

Then decoding (`measure_decode`): generating 1,024 tokens one at a time with a ``KVCache``
against recomputing the whole prefix for each new token, the time per token as the prefix grows,
the cache's bytes for ``kv_heads`` = 8, 2, 1, and one cached step at prefix 1,024 against
PyTorch's (a preallocated cache, ``scaled_dot_product_attention``, ``no_grad``, the same
threads), each cut into preparation (the checks), projections, attention and output
projection. ``--decode-only`` measures just this and merges it under ``"decode"``.

Then the ladder (`ladder`, `measure_ladder`), at n = 1024 by default: the source class, then the
same class with one more change at each step, up to ``mha``'s fast path, so that the run says
which change buys how much.

Each time is the fastest of the repeats after a warm-up, each repeat on fresh inputs (the
median is saved too). As Python's ``timeit`` documentation says, the slower calls mostly measure
other processes, not the code: on a shared machine the fastest call is the steadiest number.
The repeats of the implementations are interleaved (one call of each in turn, repeated), so that
a slow spell of the machine (another process, memory being reclaimed after a large call) falls
on all of them alike instead of on whichever ran at that moment: the ratios are what the
benchmark is for.
Above n = 1024 the two slow implementations are timed once, before the others. Peak memory is the
peak that ``tracemalloc`` sees during one call (NumPy reports its arrays there) minus nothing:
inputs are allocated before tracing starts. PyTorch's allocations are invisible to tracemalloc.
FLOPs are counted as 8 n d^2 + 4 n^2 d per sequence; the fraction of the machine's GEMM peak
compares the achieved rate with a large float32 matrix product measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from ..cache import KVCache
from ..masks import causal_mask
from ..multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = ["DECODE_KV_HEADS", "DECODE_PREFIXES", "KEPT_RUN", "LADDER_STEPS", "STEP_PARTS",
           "SourceDocumentMHA", "kept_run", "ladder", "measure_backward", "measure_decode", "run",
           "main"]

#: The run the site shows (``--save`` writes it; the build and the pages only read it).
KEPT_RUN = Path(__file__).parent / "data" / "benchmark.json"


def kept_run(path=KEPT_RUN) -> dict:
    """The benchmark run the repository keeps, parsed (the structure `run` saves)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


class SourceDocumentMHA:
    """The source document's class, reproduced as written, as the benchmark's baseline.

    Do not use it: its (query, head, key) score layout mishandles an (n, n) mask (see the Python
    walkthrough page). The weights are those of an ``mha.MultiHeadAttention``, cast to ``dtype``
    (the input's, as ``mha`` does on every call), so that every implementation computes the same
    thing from the same numbers. Even so, under NumPy >= 2 the class computes in float64 from
    float32 input and weights: ``np.sqrt(self.d_k)`` is a NumPy float64 scalar, and since NEP 50
    a NumPy scalar keeps its type in arithmetic with an array (NumPy 1.x looked at its value and
    kept float32). The source document draws its own weights with ``np.random.randn``, in
    float64, so with them it computes in float64 under any NumPy.
    """

    def __init__(self, layer: MultiHeadAttention, dtype=np.float32):
        self.d_k = layer.d_k
        self.W_Q, self.W_K, self.W_V, self.W_O = (
            w.astype(dtype) for w in (layer.W_Q, layer.W_K, layer.W_V, layer.W_O))

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


# ---- the ladder: the source class, one change at a time, up to mha's fast path -----------------
#
# Each step is the step before it with one more change (no mask: the benchmark uses none). The
# weights are the source class's (float32 when the input is). Only the last step is mha itself.

def _softmax(scores):
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    attn = np.exp(scores)
    return attn / np.sum(attn, axis=-1, keepdims=True)


def _optimized_einsum(w, X):
    """Step 1: ``optimize=True`` on every einsum, so that NumPy may hand them to BLAS."""
    n = X.shape[0]
    Q = np.einsum('nd, dhk -> nhk', X, w.W_Q, optimize=True)
    K = np.einsum('nd, dhk -> nhk', X, w.W_K, optimize=True)
    V = np.einsum('nd, dhv -> nhv', X, w.W_V, optimize=True)
    scores = np.einsum('nhk, mhk -> nhm', Q, K, optimize=True) / np.sqrt(w.d_k)
    attn = _softmax(scores)
    ctx = np.einsum('nhm, mhv -> nhv', attn, V, optimize=True)
    return ctx.reshape(n, -1) @ w.W_O


def _python_float_scale(w, X):
    """Step 2: divide by a Python float, which takes the array's type (no float64 scores)."""
    n = X.shape[0]
    Q = np.einsum('nd, dhk -> nhk', X, w.W_Q, optimize=True)
    K = np.einsum('nd, dhk -> nhk', X, w.W_K, optimize=True)
    V = np.einsum('nd, dhv -> nhv', X, w.W_V, optimize=True)
    scores = np.einsum('nhk, mhk -> nhm', Q, K, optimize=True) / math.sqrt(w.d_k)
    attn = _softmax(scores)
    ctx = np.einsum('nhm, mhv -> nhv', attn, V, optimize=True)
    return ctx.reshape(n, -1) @ w.W_O


def _heads_first_matmul(w, X):
    """Step 3: heads first, ``(h, n, d_k)``, and matrix products (``@``) instead of einsum."""
    d, h = X.shape[1], w.W_Q.shape[1]
    Q = split_heads(X @ w.W_Q.reshape(d, -1), h)               # (h, n, d_k)
    K = split_heads(X @ w.W_K.reshape(d, -1), h)               # (h, n, d_k)
    V = split_heads(X @ w.W_V.reshape(d, -1), h)               # (h, n, d_v)
    scores = Q @ K.swapaxes(-1, -2) / math.sqrt(w.d_k)         # (h, n, n)
    attn = _softmax(scores)
    return merge_heads(attn @ V) @ w.W_O                       # (n, h*d_v) @ (h*d_v, d_model)


def _scaled_queries(w, X):
    """Step 4: the scale multiplies the n x d_k queries, not the n x n scores."""
    d, h = X.shape[1], w.W_Q.shape[1]
    Q = split_heads(X @ w.W_Q.reshape(d, -1), h) * (1 / math.sqrt(w.d_k))
    K = split_heads(X @ w.W_K.reshape(d, -1), h)
    V = split_heads(X @ w.W_V.reshape(d, -1), h)
    attn = _softmax(Q @ K.swapaxes(-1, -2))                    # (h, n, n)
    return merge_heads(attn @ V) @ w.W_O


def _fused_projection(w, X):
    """Step 5: one matrix product for the queries, keys and values of every head."""
    d, h = X.shape[1], w.W_Q.shape[1]
    fused = np.concatenate([a.reshape(d, -1) for a in (w.W_Q, w.W_K, w.W_V)], axis=1)
    Q, K, V = (split_heads(a, h) for a in np.split(X @ fused, 3, axis=1))  # (h, n, d_k) each
    attn = _softmax((Q * (1 / math.sqrt(w.d_k))) @ K.swapaxes(-1, -2))
    return merge_heads(attn @ V) @ w.W_O


def _softmax_in_place(w, X):
    """Step 6: the softmax overwrites the scores instead of making three more (h, n, n) arrays."""
    d, h = X.shape[1], w.W_Q.shape[1]
    fused = np.concatenate([a.reshape(d, -1) for a in (w.W_Q, w.W_K, w.W_V)], axis=1)
    Q, K, V = (split_heads(a, h) for a in np.split(X @ fused, 3, axis=1))
    attn = (Q * (1 / math.sqrt(w.d_k))) @ K.swapaxes(-1, -2)  # (h, n, n)
    np.subtract(attn, attn.max(axis=-1, keepdims=True), out=attn)
    np.exp(attn, out=attn)
    np.divide(attn, attn.sum(axis=-1, keepdims=True), out=attn)
    return merge_heads(attn @ V) @ w.W_O


#: The ladder's steps in order: name -> function of (the source class's weights, x). The last
#: step, ``mha``, is ``mha.MultiHeadAttention.forward``: it adds the softmax on several threads
#: in cache-sized pieces (``mha._parallel``) and checks its input and output.
LADDER_STEPS = ("as-written", "einsum-optimize", "python-float-scale", "heads-first-matmul",
                "scaled-queries", "fused-projection", "softmax-in-place", "mha")


def ladder(layer: MultiHeadAttention, dtype=np.float32) -> dict:
    """The steps of `LADDER_STEPS`: name -> function of x returning the layer's output."""
    w = SourceDocumentMHA(layer, dtype)
    steps = {"as-written": w.forward}
    for name, fn in zip(LADDER_STEPS[1:-1], (_optimized_einsum, _python_float_scale,
                                             _heads_first_matmul, _scaled_queries,
                                             _fused_projection, _softmax_in_place)):
        steps[name] = functools.partial(fn, w)
    steps["mha"] = layer.forward
    return steps


def _implementations(layer: MultiHeadAttention, dtype):
    """name -> function of x (n, d_model) returning the layer's output."""
    from ..reference import multi_head_attention_reference

    source = SourceDocumentMHA(layer, dtype)
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


def _time(fns: dict, make_input, repeats: int, block: int = 1) -> dict:
    """The seconds of each call of each function of ``fns``, interleaved.

    Each function is called once first (warm-up); then, round after round, each function in
    turn ``block`` times in a row, until each has ``repeats`` calls (rounded up to whole
    blocks). Each call gets a fresh ``make_input()`` (made outside the timing), or no argument
    when ``make_input`` is None.

    Interleaving spreads a slow spell of the machine over every function alike. Blocks longer
    than one call keep what a call reads (the weights, the cache) in the processor's caches, as
    the steps of one generation do when they follow each other.
    """
    def call(fn) -> float:
        args = () if make_input is None else (make_input(),)
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start

    for fn in fns.values():
        call(fn)  # warm-up
    times = {name: [] for name in fns}
    for _ in range(-(-repeats // block)):
        for name, fn in fns.items():
            for _ in range(block):
                times[name].append(call(fn))
    return times


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


def measure_ladder(layer: MultiHeadAttention, n: int = 1024, dtype=np.float32,
                   repeats: int = 7, log=print) -> dict:
    """Time every step of `ladder` at length ``n``, interleaved, in this process.

    Returns the steps in order, each with its fastest and median seconds, its peak memory
    (tracemalloc), the dtype it computes its output in and its largest difference from ``mha``.
    """
    dtype = np.dtype(dtype)
    steps = ladder(layer, dtype)
    rng = np.random.default_rng(3)

    def make_input():
        return rng.normal(size=(n, layer.d_model)).astype(dtype)

    times = _time(steps, make_input, repeats)
    check = make_input()
    expected = layer.forward(check)
    rows = []
    for name, fn in steps.items():
        out = fn(check)
        rows.append({"step": name, "seconds": min(times[name]),
                     "median_seconds": statistics.median(times[name]),
                     "peak_bytes": _peak_bytes(fn, make_input()), "dtype": out.dtype.name,
                     "max_abs_error_vs_fast": float(np.abs(out - expected).max())})
    before = None
    for row in rows:
        gain = "" if before is None else f"  x{before / row['seconds']:.2f} over the step before"
        log(f"ladder n={n} {row['step']:20s} {row['seconds'] * 1e3:9.1f} ms  "
            f"{row['dtype']:8s} peak {row['peak_bytes'] / 2**20:7.1f} MiB{gain}")
        before = row["seconds"]
    return {"n": n, "repeats": repeats, "steps": rows}


def _backward_implementations(layer: MultiHeadAttention, dtype) -> tuple[dict, dict]:
    """Two dicts name -> function of ``(x, d_out)``: the timed calls, and for the check, the
    same computations returning ``{"output": ..., "x": dL/dx, "W_O": dL/dW_O}`` as arrays.

    ``forward`` and ``backward`` are ``mha``'s; with torch, ``torch_forward`` is the benchmark's
    PyTorch layer (`_implementations`) under ``torch.no_grad()`` and ``torch_forward_backward``
    the same layer with autograd: the gradients of ``x`` and of the fused input projection and
    ``W_O`` (``mha``'s four weights), ``out.backward(d_out)``, on the threads PyTorch chooses.
    """
    calls = {"forward": lambda xd: layer.forward(xd[0]),
             "backward": lambda xd: layer.backward(xd[0], xd[1])}

    def ours(xd):
        grads = layer.backward(xd[0], xd[1])
        return {"output": layer.forward(xd[0]), "x": grads["x"], "W_O": grads["W_O"]}

    checks = {"backward": ours}
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return calls, checks
    d, h, d_k = layer.d_model, layer.h, layer.d_k
    w_qkv = np.concatenate([w.reshape(d, -1) for w in (layer.W_Q, layer.W_K, layer.W_V)],
                           axis=1).astype(dtype)                 # (d_model, 3 h d_k)
    w_o = layer.W_O.astype(dtype)                                # (h d_v, d_model)

    def layer_torch(x, t_qkv, t_o):
        q, k, v = (split_heads(a, h) for a in (x @ t_qkv).split(h * d_k, dim=1))  # (h, n, d_k)
        return merge_heads(F.scaled_dot_product_attention(q, k, v)) @ t_o         # (n, d_model)

    def torch_forward(xd):
        with torch.no_grad():
            return layer_torch(torch.from_numpy(xd[0]), torch.from_numpy(w_qkv),
                               torch.from_numpy(w_o))

    def torch_forward_backward(xd):
        x, t_qkv, t_o = (torch.from_numpy(a).requires_grad_() for a in (xd[0], w_qkv, w_o))
        out = layer_torch(x, t_qkv, t_o)
        out.backward(torch.from_numpy(xd[1]))
        return out, x, t_o

    def theirs(xd):
        out, x, t_o = torch_forward_backward(xd)
        return {"output": out.detach().numpy(), "x": x.grad.numpy(), "W_O": t_o.grad.numpy()}

    calls |= {"torch_forward": torch_forward, "torch_forward_backward": torch_forward_backward}
    checks["torch"] = theirs
    return calls, checks


def measure_backward(layer: MultiHeadAttention, n: int = 1024, dtype=np.float32,
                     repeats: int = 7, log=print) -> dict:
    """Time one ``layer.backward`` against one ``layer.forward`` at length ``n``, and PyTorch
    autograd's forward and backward against its forward, interleaved, in this process.

    Each call gets a fresh ``x`` and ``d_out`` ``(n, d_model)``. Returns the fastest and median
    seconds of each call, the ratios ``backward_over_forward`` (``mha``: the backward call
    includes recomputing the forward) and ``torch_backward_over_forward`` (forward + backward
    with autograd over a forward under ``no_grad``), PyTorch's thread count, and, with torch,
    the largest difference between the two libraries' output and gradients of ``x`` and
    ``W_O``, relative to the largest entry (a check that both compute the same thing).
    """
    dtype = np.dtype(dtype)
    calls, checks = _backward_implementations(layer, dtype)
    rng = np.random.default_rng(4)

    def make_input():
        return (rng.normal(size=(n, layer.d_model)).astype(dtype),
                rng.normal(size=(n, layer.d_model)).astype(dtype))

    times = _time(calls, make_input, repeats)
    seconds = {name: min(t) for name, t in times.items()}
    result = {"n": n, "d_model": layer.d_model, "h": layer.h, "dtype": dtype.name,
              "repeats": repeats, "seconds": seconds,
              "median_seconds": {name: statistics.median(t) for name, t in times.items()},
              "backward_over_forward": seconds["backward"] / seconds["forward"]}
    log(f"backward n={n}: forward {seconds['forward'] * 1e3:.1f} ms, backward (forward "
        f"included) {seconds['backward'] * 1e3:.1f} ms: x{result['backward_over_forward']:.2f}")
    if "torch" in checks:
        import torch

        result["torch_threads"] = torch.get_num_threads()
        result["torch_backward_over_forward"] = (seconds["torch_forward_backward"]
                                                 / seconds["torch_forward"])
        check = make_input()
        ours, theirs = checks["backward"](check), checks["torch"](check)
        result["relative_difference_vs_torch"] = {
            name: float(np.abs(ours[name] - theirs[name]).max() / np.abs(theirs[name]).max())
            for name in ours}
        log(f"backward n={n}: torch forward {seconds['torch_forward'] * 1e3:.1f} ms, forward + "
            f"backward {seconds['torch_forward_backward'] * 1e3:.1f} ms: "
            f"x{result['torch_backward_over_forward']:.2f} ({result['torch_threads']} threads)")
    return result


# ---- decoding: one new token at a time, with the key/value cache and without ------------------

#: The prefix lengths at which the time of one generated token is kept: the new token attends
#: to this many tokens (the cached ones and itself).
DECODE_PREFIXES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: The key/value head counts whose cache size is measured (h = 8: MHA, GQA, MQA).
DECODE_KV_HEADS = (8, 2, 1)
#: The parts of one decode step, in the order of the table.
STEP_PARTS = ("preparation", "projections", "attention", "output")


def _generate(layer: MultiHeadAttention, x: np.ndarray, cached: bool, causal: np.ndarray):
    """Produce one output row per row of ``x`` ``(n, d_model)``, one token at a time.

    ``cached``: each step gives the new row to ``layer`` with a `KVCache` (the token attends
    to the cached keys and values and its own); otherwise each step runs the layer on the
    whole prefix ``x[:t + 1]`` with a causal mask and keeps the last row. Returns the rows
    ``(n, d_model)``, the seconds of each step ``(n,)`` and the seconds of the whole loop.
    """
    n = x.shape[0]
    rows = np.empty_like(x)                   # (n, d_model)
    steps = np.empty(n)
    cache = KVCache()
    begin = time.perf_counter()
    for t in range(n):
        start = time.perf_counter()
        if cached:
            rows[t] = layer(x[t:t + 1], cache=cache)[0]                # (1, d_model) -> row
        else:
            rows[t] = layer(x[:t + 1], mask=causal[:t + 1, :t + 1])[-1]  # (t+1, d_model) -> row
        steps[t] = time.perf_counter() - start
    return rows, steps, time.perf_counter() - begin


def _per_token(layer: MultiHeadAttention, x: np.ndarray, prefixes, causal: np.ndarray,
               repeats: int) -> dict:
    """The fastest time of one generated token at each prefix length ``p`` of ``prefixes``
    (increasing): with a cache holding the first ``p - 1`` rows of ``x`` (filled one token at a
    time, as while generating), the step on row ``p - 1``, its token taken back out after each
    call; and the layer on ``x[:p]`` with a causal mask. ``repeats`` calls each, in three
    interleaved blocks (see `_time`).
    The steps of a whole generation, timed one by one, are too short to time once each on a
    shared machine: here each prefix gets its repeats."""
    cache = KVCache()
    seconds = {"cached": [], "recomputed": []}
    for p in prefixes:
        while len(cache) < p - 1:
            layer(x[len(cache):len(cache) + 1], cache=cache)

        def cached(p=p):
            layer(x[p - 1:p], cache=cache)                         # (1, d_model)
            cache._truncate(p - 1)  # forget it: the next call is the same step again

        def recomputed(p=p):
            layer(x[:p], mask=causal[:p, :p])                      # (p, d_model)

        times = _time({"cached": cached, "recomputed": recomputed}, None, repeats,
                      block=max(1, repeats // 3))
        for way in seconds:
            seconds[way].append(min(times[way]))
    return seconds


def _our_step(layer: MultiHeadAttention, cache: KVCache, x_new: np.ndarray) -> dict:
    """One decode step of ``layer`` on ``x_new`` ``(1, d_model)`` with ``cache``, whole and cut
    into the pieces ``MultiHeadAttention._run`` runs for a few new tokens, each a function of no
    argument that leaves the cache as it found it.

    - ``preparation``: the input's checks, the weights' types and shapes (not their entries:
      see `mha._checks.nonfinite_weight`), the cache's layout check, the scale, and the checks
      that the new queries, keys and values and the output are finite;
    - ``projections``: ``x @ W`` for the queries, keys and values (the weights read as stored,
      float64), the cast back to float32, the split into heads, the append to the cache;
    - ``attention``: every query head on the cached keys and values, then the heads merged;
    - ``output``: the merged heads times ``W_O`` (read as stored), rounded to float32.
    """
    from .._checks import all_finite, check_scale, check_tokens, check_weight

    d_model, h, kv, d_k, d_v = layer.d_model, layer.h, layer.kv_heads, layer.d_k, layer.d_v
    start = len(cache)

    def total():
        out = layer(x_new, cache=cache)
        cache._truncate(start)  # forget the new token: the next call is the same step again
        return out

    def preparation():
        x, context = check_tokens(x_new, None, d_model)
        check_weight(layer.W_Q, "self.W_Q", (d_model, h, d_k), finite=False)
        check_weight(layer.W_K, "self.W_K", (d_model, kv, d_k), finite=False)
        check_weight(layer.W_V, "self.W_V", (d_model, kv, d_v), finite=False)
        check_weight(layer.W_O, "self.W_O", (h * d_v, d_model), finite=False)
        dtype = np.result_type(x, context)
        cache._check_layout(x.shape[:-2], kv, d_k, d_v, dtype)
        scale = check_scale(layer.scale, d_k, dtype)
        new = (state["q"], state["k"][..., start:, :], state["v"][..., start:, :])  # new token
        finite = [all_finite(a) for a in (*new, state["output"])]
        return dtype, scale, finite

    def projections():
        flat = [layer.W_Q.reshape(d_model, h * d_k), layer.W_K.reshape(d_model, kv * d_k),
                layer.W_V.reshape(d_model, kv * d_v)]
        q, k, v = (x_new @ W for W in flat)                             # (1, heads * d)
        q, k, v = (a.astype(x_new.dtype, copy=False) for a in (q, k, v))
        q, k, v = split_heads(q, h), split_heads(k, kv), split_heads(v, kv)  # (heads, 1, d)
        k, v = cache._append(k, v)                                      # (kv, start + 1, d)
        cache._truncate(start)
        return q, k, v

    def attention():
        heads, _, _ = layer._attend(state["q"], state["k"], state["v"], None, state["scale"],
                                    False)                              # (h, 1, d_v)
        return merge_heads(heads)                                       # (1, h*d_v)

    def output():
        return (state["concat"] @ layer.W_O).astype(x_new.dtype)        # (1, d_model)

    state = {"output": total()}
    state["q"], state["k"], state["v"] = projections()  # views that still hold the new token
    _, state["scale"], _ = preparation()
    state["concat"] = attention()
    pieces_out = output()
    return {"total": total, "preparation": preparation, "projections": projections,
            "attention": attention, "output": output}, state["output"], pieces_out


def _torch_step(layer: MultiHeadAttention, cache: KVCache, x_new: np.ndarray, capacity: int):
    """PyTorch's decode step on the same weights and cached keys and values: a preallocated
    cache of ``capacity`` tokens, the weights as float32 tensors made once (as a module's
    parameters are), ``scaled_dot_product_attention``; the caller runs it under
    ``torch.no_grad()``. Returns the functions of no argument (whole and by piece, like
    `_our_step`: ``preparation`` is only the input's conversion to a tensor, the weights being
    ready) and the step's output."""
    import torch
    import torch.nn.functional as F

    d_model, h, kv, d_k, d_v = layer.d_model, layer.h, layer.kv_heads, layer.d_k, layer.d_v
    dtype = x_new.dtype
    t_qkv = torch.from_numpy(np.concatenate(
        [layer.W_Q.reshape(d_model, -1), layer.W_K.reshape(d_model, -1),
         layer.W_V.reshape(d_model, -1)], axis=1).astype(dtype))        # (d_model, (h+2kv) d)
    t_o = torch.from_numpy(layer.W_O.astype(dtype))                     # (h*d_v, d_model)
    pos = len(cache)
    k_cache = torch.zeros((kv, capacity, d_k), dtype=t_qkv.dtype)       # preallocated
    v_cache = torch.zeros((kv, capacity, d_v), dtype=t_qkv.dtype)
    k_cache[:, :pos] = torch.from_numpy(np.ascontiguousarray(cache.keys))
    v_cache[:, :pos] = torch.from_numpy(np.ascontiguousarray(cache.values))
    gqa = kv < h
    split = [h * d_k, kv * d_k, kv * d_v]

    def total():
        xt = torch.from_numpy(x_new)                                    # (1, d_model)
        q, k, v = (xt @ t_qkv).split(split, dim=-1)
        k_cache[:, pos] = k.view(kv, d_k)
        v_cache[:, pos] = v.view(kv, d_v)
        out = F.scaled_dot_product_attention(q.view(h, 1, d_k), k_cache[:, :pos + 1],
                                             v_cache[:, :pos + 1], enable_gqa=gqa)
        return out.view(1, h * d_v) @ t_o                               # (1, d_model)

    state = {}

    def preparation():
        return torch.from_numpy(x_new)

    def projections():
        q, k, v = (state["xt"] @ t_qkv).split(split, dim=-1)           # (1, heads * d)
        k_cache[:, pos] = k.view(kv, d_k)                               # write into the cache
        v_cache[:, pos] = v.view(kv, d_v)
        return q.view(h, 1, d_k)

    def attention():
        out = F.scaled_dot_product_attention(state["q"], k_cache[:, :pos + 1],
                                             v_cache[:, :pos + 1], enable_gqa=gqa)  # (h, 1, d_v)
        return out.view(1, h * d_v)

    def output():
        return state["concat"] @ t_o                                    # (1, d_model)

    with torch.no_grad():
        state["xt"] = preparation()
        state["q"] = projections()
        state["concat"] = attention()
        result = total().numpy()
    return {"total": total, "preparation": preparation, "projections": projections,
            "attention": attention, "output": output}, result


def measure_decode(d_model: int = 512, h: int = 8, n: int = 1024, dtype=np.float32,
                   repeats: int = 3, token_repeats: int = 15, step_repeats: int = 300,
                   kv_heads=None,
                   log=print) -> dict:
    """Generate ``n`` tokens one at a time, with a `KVCache` and by recomputing the prefix.

    One layer ``MultiHeadAttention(d_model, h, seed=0)``; step ``t`` takes row ``t`` of a
    fixed random ``x`` ``(n, d_model)`` (the outputs are not fed back: the layer's cost does
    not depend on its input's values). The two ways are run in turn ``repeats`` times in this
    process; the result holds:

    - ``seconds``: the fastest whole generation of each way (``cached``, ``recomputed``) and
      ``recomputed_over_cached``, their ratio; ``median_seconds`` beside it;
    - ``per_token``: at each prefix length ``p`` of `DECODE_PREFIXES` up to ``n``, the step
      whose new token attends to ``p`` tokens, each way, timed on its own (`_per_token`): the
      fastest of ``token_repeats`` interleaved calls;
    - ``max_abs_difference``: between the rows both ways produced (``agree``: within float32
      tolerance, ``rtol=1e-4, atol=1e-5``);
    - ``cache``: for each of ``kv_heads`` (default: those of `DECODE_KV_HEADS` that divide
      ``h``), ``KVCache.nbytes`` after all ``n`` tokens and the
      formula ``2 * n * kv_heads * d_head * itemsize``;
    - ``step``: one cached step at prefix ``n`` (``n - 1`` tokens cached), the fastest of
      ``step_repeats`` calls (in ten interleaved blocks) of the whole step and of each piece
      (`STEP_PARTS`: see `_our_step`), and with torch installed the same for PyTorch
      (`_torch_step`) with its thread count and its output's difference from ours.
    """
    dtype = np.dtype(dtype)
    layer = MultiHeadAttention(d_model, h, seed=0)
    x = np.random.default_rng(5).normal(size=(n, d_model)).astype(dtype)  # (n, d_model)
    causal = causal_mask(n)
    _generate(layer, x[:8], True, causal)                                  # warm-up
    _generate(layer, x[:8], False, causal)
    totals = {"cached": [], "recomputed": []}
    rows = {}
    for _ in range(repeats):
        for way in totals:
            rows[way], _, total = _generate(layer, x, way == "cached", causal)
            totals[way].append(total)
    best = {way: min(t) for way, t in totals.items()}
    prefixes = [p for p in DECODE_PREFIXES if p <= n]
    per_token = _per_token(layer, x, prefixes, causal, token_repeats)
    difference = float(np.abs(rows["cached"] - rows["recomputed"]).max())
    result = {
        "n": n, "d_model": d_model, "h": h, "dtype": dtype.name, "repeats": repeats,
        "seconds": best, "median_seconds": {w: statistics.median(t) for w, t in totals.items()},
        "recomputed_over_cached": best["recomputed"] / best["cached"],
        "per_token": {"prefix": prefixes, "repeats": token_repeats, **per_token},
        "max_abs_difference": difference,
        "agree": bool(np.allclose(rows["cached"], rows["recomputed"], rtol=1e-4, atol=1e-5)),
    }
    log(f"decode n={n}: cached {best['cached']:.3f} s, recomputed {best['recomputed']:.3f} s: "
        f"x{result['recomputed_over_cached']:.1f} (outputs differ by at most {difference:.1e})")
    for i, p in enumerate(prefixes):
        log(f"decode prefix {p:5d}: cached {result['per_token']['cached'][i] * 1e3:7.3f} ms, "
            f"recomputed {result['per_token']['recomputed'][i] * 1e3:8.3f} ms per token")

    result["cache"] = []
    if kv_heads is None:
        kv_heads = [kv for kv in DECODE_KV_HEADS if h % kv == 0]
    for kv in kv_heads:
        cache = KVCache()
        MultiHeadAttention(d_model, h, seed=0, kv_heads=kv)(x, cache=cache)
        d_head = d_model // h
        row = {"kv_heads": kv, "tokens": len(cache), "nbytes": cache.nbytes,
               "formula_bytes": 2 * n * kv * d_head * dtype.itemsize}
        result["cache"].append(row)
        log(f"decode cache kv_heads={kv}: {row['nbytes']} bytes after {n} tokens "
            f"(2 * {n} * {kv} * {d_head} * {dtype.itemsize} = {row['formula_bytes']})")

    # One step at prefix n: n - 1 tokens cached one at a time (so that the cache's arrays have
    # grown as they do while generating), then the n-th token, again and again.
    cache = KVCache()
    for t in range(n - 1):
        layer(x[t:t + 1], cache=cache)
    x_new = x[n - 1:n]                                                     # (1, d_model)
    fns, ours, pieces = _our_step(layer, cache, x_new)
    step = {"prefix": n, "step_repeats": step_repeats}
    try:
        import torch
    except ImportError:
        torch = None
    block = max(1, step_repeats // 10)  # ten interleaved blocks of each function
    step["block"] = block
    if torch is None:
        times = _time(fns, None, step_repeats, block)
    else:
        torch_fns, theirs = _torch_step(layer, cache, x_new, capacity=2 * n)
        both = {**fns, **{"torch_" + name: fn for name, fn in torch_fns.items()}}
        with torch.no_grad():
            times = _time(both, None, step_repeats, block)
        step["torch_threads"] = torch.get_num_threads()
        step["relative_difference_vs_torch"] = float(np.abs(ours - theirs).max()
                                                     / np.abs(theirs).max())
    step["pieces_match_total"] = bool(np.allclose(pieces, ours, rtol=1e-5, atol=1e-6))
    step["environment"] = {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}
    for lib, prefix in (("mha", ""), ("torch", "torch_")):
        if prefix + "total" not in times:
            continue
        parts = {part: min(times[prefix + part]) for part in STEP_PARTS}
        step[lib] = {"seconds": min(times[prefix + "total"]),
                     "median_seconds": statistics.median(times[prefix + "total"]),
                     "parts": parts, "median_parts": {part: statistics.median(times[prefix + part])
                                                      for part in STEP_PARTS},
                     "sum_of_parts": sum(parts.values())}
        log(f"decode step at prefix {n} ({lib}): {step[lib]['seconds'] * 1e3:.3f} ms; "
            + ", ".join(f"{part} {s * 1e3:.3f}" for part, s in parts.items())
            + f" (sum {step[lib]['sum_of_parts'] * 1e3:.3f}) ms")
    if "torch" in step:
        step["mha_over_torch"] = step["mha"]["seconds"] / step["torch"]["seconds"]
        log(f"decode step: mha / torch = {step['mha_over_torch']:.2f} "
            f"({step['torch_threads']} torch threads)")
    result["step"] = step
    return result


def run(sizes=(256, 1024, 4096), d_model: int = 512, h: int = 8, repeats: int = 5,
        dtype=np.float32, skip=(), reference_max_n: int = 64, source_max_n: int = 4096,
        long_n: int | None = 16384, ladder_n: int | None = 1024,
        backward_n: int | None = 1024, decode_n: int | None = 1024, decode_repeats: int = 3,
        log=print) -> dict:
    """Run the benchmark and return its results as a JSON-ready dict.

    With ``ladder_n``, the steps of `ladder` are also timed at that length (see
    `measure_ladder`), after the implementations; with ``backward_n``, the backward pass at
    that length (see `measure_backward`), after the ladder; with ``decode_n``, generating that
    many tokens one at a time (see `measure_decode`, ``decode_repeats`` times), last.
    """
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
        times = {}
        for name in once:
            times |= _time({name: measured[name]}, make_input, 1)
        interleaved = {name: fn for name, fn in measured.items() if name not in once}
        times |= _time(interleaved, make_input, repeats)
        seconds = {name: min(t) for name, t in times.items()}
        for name in (name for name in impls if name in seconds):
            fn = impls[name]
            out = np.asarray(fn(check))
            error = float(np.abs(out - expected).max())
            peak = None if name == "torch" else _peak_bytes(fn, make_input())
            row = {"n": n, "impl": name, "seconds": seconds[name],
                   "median_seconds": statistics.median(times[name]), "calls": len(times[name]),
                   "peak_bytes": peak,
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
    ladder_run = None
    if ladder_n:
        ladder_run = measure_ladder(layer, ladder_n, dtype, repeats, log=log)
    backward = None
    if backward_n:
        backward = measure_backward(layer, backward_n, dtype, repeats, log=log)
    decode = None
    if decode_n:
        decode = measure_decode(d_model, h, decode_n, dtype, decode_repeats, log=log)
    long = None
    if long_n:
        long = long_sequence_memory(long_n, h, d_model // h, dtype)
        log(f"n={long_n} chunked peak extra memory {long['chunked_peak_extra_bytes'] / 2**20:.1f} "
            f"MiB (tracemalloc, output excluded); the {h} dense n x n score matrices alone: "
            f"{long['dense_scores_bytes'] / 2**30:.1f} GiB")
    return {
        **_provenance(), "d_model": d_model, "h": h, "dtype": dtype.name,
        "gemm_gflops": gemm, "results": results, "ratios": ratios, "ladder": ladder_run,
        "long_sequence": long, "backward": backward, "decode": decode,
    }


def _provenance() -> dict:
    """When, on what machine and with which versions a measurement ran."""
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import torch
        versions["torch"] = torch.__version__
    except ImportError:
        pass
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"platform": platform.platform(), "processor": platform.machine(),
                        "cpu_count": os.cpu_count()},
            "versions": versions}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mha.site.bench",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 256 and 1024, 3 repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help="sequence lengths")
    parser.add_argument("--repeats", type=int, help="timed repeats per size")
    parser.add_argument("--long-n", type=int, default=16384,
                        help="n of the chunked path's long-sequence memory run (0: skip; "
                             "skipped by --quick)")
    parser.add_argument("--ladder-n", type=int, default=1024,
                        help="n at which the ladder of changes is timed (0: skip)")
    parser.add_argument("--backward-n", type=int, default=1024,
                        help="n at which the backward pass is timed (0: skip)")
    parser.add_argument("--backward-only", action="store_true",
                        help="measure only the backward pass (at --backward-n); with --save, "
                             "merge it into that file's other results under \"backward\"")
    parser.add_argument("--decode-n", type=int, default=1024,
                        help="tokens generated one at a time in the decoding run (0: skip; "
                             "skipped by --quick)")
    parser.add_argument("--decode-repeats", type=int, default=3,
                        help="whole generations of each way in the decoding run")
    parser.add_argument("--decode-only", action="store_true",
                        help="measure only decoding (at --decode-n); with --save, merge it into "
                             "that file's other results under \"decode\"")
    parser.add_argument("--save", help="write the results as JSON to this path")
    args = parser.parse_args(argv)
    # NumPy's BLAS threads and PyTorch's OpenMP threads share the cores; threads that spin
    # while waiting for work slow the other library down (PyTorch took 6x longer at n = 256
    # here). Waiting passively is fair to both. Must be set before torch is imported.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sizes = args.sizes or ((256, 1024) if args.quick else (256, 1024, 4096))
    repeats = args.repeats or (3 if args.quick else 7)
    if args.backward_only and args.decode_only:
        parser.error("--backward-only and --decode-only exclude each other")
    if args.backward_only or args.decode_only:
        if args.backward_only:
            if not args.backward_n:
                parser.error("--backward-only needs --backward-n > 0")
            key, part = "backward", measure_backward(MultiHeadAttention(512, 8, seed=0),
                                                     args.backward_n, np.float32, repeats)
        else:
            if not args.decode_n:
                parser.error("--decode-only needs --decode-n > 0")
            key, part = "decode", measure_decode(512, 8, args.decode_n, np.float32,
                                                 args.decode_repeats)
        results = {}
        if args.save and os.path.exists(args.save):
            with open(args.save, encoding="utf-8") as f:
                results = json.load(f)
        # The rest of the file keeps its own date and versions; this part records its own.
        results[key] = {**_provenance(), **part}
    else:
        results = run(sizes=sizes, repeats=repeats, source_max_n=1024 if args.quick else 4096,
                      long_n=None if args.quick else args.long_n, ladder_n=args.ladder_n or None,
                      backward_n=args.backward_n or None,
                      decode_n=None if args.quick else args.decode_n or None,
                      decode_repeats=args.decode_repeats)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        print(f"wrote {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
