"""mha._parallel: the row-splitting thread pool gives the serial result, bit for bit, and is safe
after fork, during interpreter shutdown and under concurrent first use."""

import multiprocessing
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from mha import _parallel, attention, scaled_dot_product_attention, softmax
from mha.chunked import chunked_attention

BIG = (1021, 257)  # 262397 entries, just above PARALLEL_MIN_SIZE = 2**18 = 262144


@pytest.fixture
def fresh_pool(monkeypatch):
    """A module state with no pool yet; the pool made during the test is shut down after it."""
    monkeypatch.setattr(_parallel, "_pool", None)
    monkeypatch.setattr(_parallel, "_pool_size", 0)
    yield
    if _parallel._pool is not None:
        _parallel._pool.shutdown(wait=True)


def serial(monkeypatch, func, *args, **kwargs):
    """``func(*args, **kwargs)`` with map_rows forced onto the calling thread."""
    with monkeypatch.context() as m:
        m.setattr(_parallel, "workers", lambda: 1)
        return func(*args, **kwargs)


def threaded_rows(monkeypatch, n_workers):
    """Force ``n_workers`` threads and record which thread softmax's kernel ran each piece on."""
    seen = []
    original = attention._softmax_rows

    def spy(rows):
        seen.append((threading.get_ident(), rows.shape[0]))
        return original(rows)

    monkeypatch.setattr(_parallel, "workers", lambda: n_workers)
    monkeypatch.setattr(attention, "_softmax_rows", spy)
    return seen


# ---- the threaded path is the serial path, bit for bit -------------------------------------------

def test_the_sizes_used_here_cross_the_threshold():
    assert BIG[0] * BIG[1] > _parallel.PARALLEL_MIN_SIZE > BIG[0] // 2 * BIG[1]
    assert _parallel.PARALLEL_MIN_SIZE == 1 << 18


@pytest.mark.parametrize("n_workers", [2, 3, 4, 7])
@pytest.mark.parametrize("shape", [BIG, (BIG[0] // 2, BIG[1])])  # above and below the threshold
def test_softmax_threaded_equals_serial_bit_for_bit(monkeypatch, n_workers, shape):
    # 1021 rows over 2, 3, 4 or 7 threads: ranges of 510/511, 340/340/341, 255 x 3 and 256, ...
    # (odd counts, and a count that does not divide evenly).
    x = np.random.default_rng(n_workers).normal(size=shape) * 5
    expected = serial(monkeypatch, softmax, x)
    seen = threaded_rows(monkeypatch, n_workers)
    got = softmax(x)
    np.testing.assert_array_equal(got, expected)
    assert sum(rows for _, rows in seen) == shape[0]  # every row once
    threads = {ident for ident, _ in seen}
    if x.size >= _parallel.PARALLEL_MIN_SIZE:  # on the pool (one idle thread may take two)
        assert threading.get_ident() not in threads
    else:
        assert threads == {threading.get_ident()}


@pytest.mark.parametrize("n_rows", [23, 24, 25, 2 * 7, 2 * 7 - 1])
@pytest.mark.parametrize("n_workers", [3, 7])
@pytest.mark.parametrize("piece_rows", [1, 2, 5])
def test_map_rows_hands_every_row_to_exactly_one_call_in_order(monkeypatch, n_rows, n_workers,
                                                              piece_rows):
    cols = 6
    monkeypatch.setattr(_parallel, "workers", lambda: n_workers)
    monkeypatch.setattr(_parallel, "PARALLEL_MIN_SIZE", 0)
    monkeypatch.setattr(_parallel, "PIECE_BYTES", piece_rows * cols * 8)
    ids = np.repeat(np.arange(n_rows, dtype=float)[:, None], cols, axis=1)  # row i holds i
    out = np.zeros((n_rows, 1))
    threads = []

    def func(rows, out_rows):
        threads.append(threading.get_ident())
        out_rows[:, 0] = rows[:, 0] + 1  # written into the caller's array
        return rows[:, 0].tolist()

    results = _parallel.map_rows(func, ids, out)
    assert [i for piece in results for i in piece] == list(range(n_rows))  # in order, each once
    assert all(0 < len(piece) <= piece_rows for piece in results)
    np.testing.assert_array_equal(out[:, 0], np.arange(n_rows) + 1)
    if n_rows >= 2 * n_workers:
        assert threading.get_ident() not in threads


@pytest.mark.parametrize("kwargs", [{}, {"causal": True}, {"window": 100}, {"lengths": [900, 17]}])
def test_chunked_attention_threaded_equals_serial_bit_for_bit(monkeypatch, kwargs):
    # One tile of (b=2, h=2, 509 queries, 509 keys) crosses the threshold: 1018 rows per step.
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 2, 2, 1021, 16)).astype(np.float32)
    if "lengths" in kwargs:
        kwargs = {"lengths": np.array(kwargs["lengths"])[:, None]}
    expected = serial(monkeypatch, chunked_attention, q, k, v, block_size=509, **kwargs)
    monkeypatch.setattr(_parallel, "workers", lambda: 3)
    np.testing.assert_array_equal(chunked_attention(q, k, v, block_size=509, **kwargs), expected)


def test_attention_threaded_equals_serial_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(3, 3, 341, 8))  # scores (3, 341, 341): 348843 entries
    mask = rng.random((341, 341)) < 0.5
    expected = serial(monkeypatch, scaled_dot_product_attention, q, k, v, mask)
    seen = threaded_rows(monkeypatch, 4)
    got = scaled_dot_product_attention(q, k, v, mask)
    assert seen and threading.get_ident() not in {ident for ident, _ in seen}
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_an_error_in_one_thread_is_raised_once_every_thread_is_done(monkeypatch):
    monkeypatch.setattr(_parallel, "workers", lambda: 4)
    x = np.random.default_rng(5).normal(size=BIG)
    x[-1, 3] = np.nan  # in the last thread's rows
    with pytest.raises(ValueError, match=r"x must not contain NaN or \+inf"):
        softmax(x)


# ---- one pool, whatever happens ------------------------------------------------------------------

def test_eight_threads_at_once_create_one_pool(monkeypatch, fresh_pool):
    made = []

    class SlowToBuild(ThreadPoolExecutor):  # widens the window in which a second pool could start
        def __init__(self, *args, **kwargs):
            made.append(self)
            threading.Event().wait(0.05)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_parallel, "ThreadPoolExecutor", SlowToBuild)
    monkeypatch.setattr(_parallel, "workers", lambda: 3)
    x = np.random.default_rng(6).normal(size=BIG)
    expected = serial(monkeypatch, softmax, x)
    start = threading.Barrier(8)
    results = [None] * 8

    def call(i):
        start.wait()
        results[i] = softmax(x)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert len(made) == 1
    assert _parallel._pool is made[0]
    for result in results:
        np.testing.assert_array_equal(result, expected)


def test_rows_no_thread_took_are_computed_once_in_the_calling_thread(monkeypatch):
    # Interpreter shutdown may start between two submissions: the first range is running on a
    # thread, the others must not be refused, and none may be computed twice (softmax in place
    # twice is not softmax).
    class ShuttingDown:
        def __init__(self):
            self.accepted = 0

        def submit(self, fn, *args):
            if self.accepted:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
            self.accepted += 1
            future = Future()
            future.set_result(fn(*args))
            return future

    pool = ShuttingDown()
    monkeypatch.setattr(_parallel, "workers", lambda: 4)
    monkeypatch.setattr(_parallel, "_get_pool", lambda n_workers: pool)
    x = np.random.default_rng(7).normal(size=BIG)
    np.testing.assert_array_equal(softmax(x), serial(monkeypatch, softmax, x))
    assert pool.accepted == 1


def _softmax_checksum(seed: int) -> str:
    """softmax of a large array, reduced to an exact, order-sensitive number (run in a child)."""
    x = np.random.default_rng(seed).normal(size=BIG)
    return repr(float((softmax(x) * np.arange(BIG[1])).sum()))


def test_a_forked_child_does_not_deadlock_on_the_parents_pool(monkeypatch):
    monkeypatch.setattr(_parallel, "workers", lambda: 3)  # threads even on a one-core machine
    expected = _softmax_checksum(8)
    # Make the parent's pool start all three of its threads (three calls that wait for each
    # other), then let them go idle: a child that reused this pool would find "idle" threads
    # that do not exist in it, and wait for them for ever.
    everyone = threading.Barrier(3)
    with monkeypatch.context() as m:
        m.setattr(_parallel, "PIECE_BYTES", 1 << 40)  # one call per thread
        _parallel.map_rows(lambda rows: everyone.wait(timeout=30), np.zeros(BIG))
    time.sleep(1)
    context = multiprocessing.get_context("fork")
    with warnings.catch_warnings():  # Python >= 3.12 warns about fork() with threads running
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        pool = context.Pool(1)
    try:
        got = pool.apply_async(_softmax_checksum, (8,)).get(timeout=60)  # a hang fails here
    except multiprocessing.TimeoutError:
        pytest.fail("softmax in a forked child did not finish in 60 s: deadlocked on the pool")
    finally:
        pool.terminate()
        pool.join()
    assert got == expected
    assert _softmax_checksum(8) == expected  # and the parent's pool still works


def test_a_call_in_an_atexit_handler_succeeds():
    code = """
import atexit
import numpy as np
from mha import _parallel, softmax

_parallel.workers = lambda: 3  # threads even on a one-core machine

def checksum():
    x = np.random.default_rng(9).normal(size=(1021, 257))
    print(repr(float((softmax(x) * np.arange(257)).sum())), flush=True)

atexit.register(checksum)  # runs after the pool's threads were told to stop
checksum()                 # the pool exists
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    before_exit, at_exit = result.stdout.split()
    assert at_exit == before_exit == _softmax_checksum(9)
