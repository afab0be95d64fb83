"""The one piece of performance machinery in the core: row-wise work split across threads.

`softmax` (and so every attention call) and `chunked_attention` hand their element-wise work on
the rows of a 2-D array to `map_rows`. NumPy's ufuncs release the GIL, so on a machine with
several cores a few threads finish a large array sooner, while BLAS is idle. Small arrays stay
in the calling thread. Nothing here changes a result: every row is computed by the same code,
in whichever thread.

The pool is created once, under a lock, on first use (however many threads ask at once). It is
safe to use

- after ``os.fork()``: a forked child inherits no pool threads, so it starts a pool of its own
  (the parent's, with its lock, is forgotten in the child);
- while the interpreter shuts down (an ``atexit`` handler): no new work can be scheduled then,
  so the rows that no thread took are computed in the calling thread.

``tests/test_parallel.py`` checks each of these, and that the threaded path gives the serial
result bit for bit.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

__all__ = ["map_rows", "workers"]

#: Below this many entries (of the first array), the rows are done in the calling thread.
PARALLEL_MIN_SIZE = 1 << 18
#: Rows are handed to the function in pieces of about this many bytes (of the first array), so
#: that its passes over a piece (max, subtract, exp, sum, ...) run in the CPU's cache.
PIECE_BYTES = 1 << 20

_pool: ThreadPoolExecutor | None = None
_pool_size = 0  # how many threads _pool has
_pool_lock = threading.Lock()


def workers() -> int:
    """How many threads `map_rows` uses for a large array: the cores, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def _forget_pool_in_child() -> None:
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()  # no parent's thread is here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _get_pool(n_workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size != n_workers:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its queued work still runs; its threads then exit
            _pool = ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="mha-rows")
            _pool_size = n_workers
        return _pool


def map_rows(func, *arrays: np.ndarray) -> list:
    """``func(*row_slices)`` over 2-D arrays with the same number of rows, piece by piece.

    Parameters
    ----------
    func : callable
        Called with one slice ``a[i:j]`` of each array (the same rows of each); it may write
        into them. It must not depend on which rows it gets together.
    *arrays : ndarray of shape ``(rows, ...)``

    Returns
    -------
    list
        Every call's result, in row order. The first exception of a call is re-raised.

    Notes
    -----
    The rows are cut into pieces of about `PIECE_BYTES`. Above `PARALLEL_MIN_SIZE` entries (and
    with at least two rows per thread) the pieces are shared out between `workers()` threads,
    one contiguous range of rows each, on one shared pool; otherwise, during interpreter
    shutdown, or with one core, they run in the calling thread. Every call has returned when
    this function returns or raises, so none writes into the arrays afterwards.
    """
    first = arrays[0]
    n_rows = first.shape[0]
    piece = max(1, PIECE_BYTES // max(1, first.itemsize * first[0].size)) if n_rows else 1

    def run(start: int, stop: int) -> list:
        return [func(*(a[i:min(i + piece, stop)] for a in arrays))
                for i in range(start, stop, piece)]

    n_workers = workers()
    if (first.size < PARALLEL_MIN_SIZE or n_workers == 1 or n_rows < 2 * n_workers
            or sys.is_finalizing()):
        return run(0, n_rows)
    bounds = np.linspace(0, n_rows, n_workers + 1).astype(int).tolist()
    ranges = list(zip(bounds[:-1], bounds[1:]))  # one contiguous range of rows per thread
    pool, futures = _get_pool(n_workers), []
    for start, stop in ranges:
        try:
            futures.append(pool.submit(run, start, stop))
        except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
            break
    try:  # the ranges no thread took, here
        rest = [result for start, stop in ranges[len(futures):] for result in run(start, stop)]
    finally:
        wait(futures)
    return [result for future in futures for result in future.result()] + rest
