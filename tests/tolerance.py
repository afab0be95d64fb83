"""Tolerances from the computation's error: the one rule for every comparison in ``tests/``.

Why
---
Two computations of the same quantity differ by their rounding, and the rounding depends on
the machine. NumPy picks a SIMD path for ``sin``, ``exp`` or ``**`` by CPU (AVX-512 or not:
``NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR"`` turns it off), and OpenBLAS picks a
kernel for each matrix product (``OPENBLAS_CORETYPE=Haswell``, ``SkylakeX``, ``Sandybridge``),
which changes the order of every sum and so its last bits. A tolerance read off what one
machine printed fails on the next one. So every tolerance in the tests states the error of
the computation it checks, by one of the rules below, and a test passes under every kernel and
SIMD path (``python3 dev.py test`` runs the numeric suites under a second kernel to keep it so).

The rule
--------
1. **Elementwise functions** (``sin``, ``exp``, ``**``, a scale, a cast): a few ulp of the
   magnitude the error scales with, `ulps` (``n * eps * |magnitude|``, default ``n = 4``:
   NumPy's SIMD paths are documented within 1-4 ulp, a correctly rounded libm within 0.5).
   The magnitude is the *input's* when the function passes on its input's rounding: ``sin(x)``
   for ``x`` up to 300 rad is off by about ``|x| * eps`` because ``x`` itself is, however
   small ``sin(x)`` is.
2. **Sums, dot products and matrix products over k terms** (float32 or float64): the classical
   bound ``gamma(k) * sum |terms|`` with ``gamma(k) = k u / (1 - k u)``, ``u = eps / 2``
   (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1). It holds
   for any order of summation a kernel picks (blocked, pairwise, fused multiply-add), so two
   kernels agree within twice it: `sum_bound`, `matmul_bound`. Where this worst case is too
   loose to test anything (float32, k in the hundreds, a chain of products), `sqrt(k)` takes
   the place of ``k`` (``probabilistic=True``): rounding errors are independent enough that
   their sum grows like ``sqrt(k)``; the bound ``LAMBDA * sqrt(k) * u * sum |terms|`` holds
   with probability at least about ``1 - 2 k exp(-LAMBDA**2 / 2)`` (Higham and Mary, "A new
   approach to probabilistic rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019).
   A computation of several such steps (a layer, a model) adds their bounds, or, where that
   cannot be written down, is held against the float64 result at the float32 error measured
   for it (``tests/golden/measure_minilm_error.py``) times a stated factor.
3. **Quantities built on argmax, ranks or thresholds** are discontinuous: an error below any
   bound flips a near-tie. Count only what the error cannot flip (`clear_top`: rows whose
   top-2 margin exceeds the bound), or compare as intervals: `argmax_agreement` gives the
   lowest and highest value a fraction can take over every way the near-ties may resolve, and
   `rounds_to` asks whether a value, give or take its error, rounds to the number a page or a
   docstring prints.

What is exact stays exact: integer counts, shapes, masks, a computation compared with itself
(the same code on the same arrays, same shapes and layout, in the same process), and values a
float represents exactly. Those keep ``assert_array_equal`` and ``atol=0``.

The pages follow the same rule (``tests/page_outputs.py``): a number a page prints or quotes
is rounded to digits the error cannot reach, computed in float64, or stated as a bound; an
integer printed is compared exactly.

Adding a comparison: name its rule and write the bound with these helpers, or, where a helper
does not fit, state in a comment the k, the magnitude and the dtype the number comes from.
Then run it under the other kernels and SIMD paths, for example::

    OPENBLAS_CORETYPE=SkylakeX .venv/bin/python -m pytest tests/test_x.py
    OPENBLAS_CORETYPE=Sandybridge .venv/bin/python -m pytest tests/test_x.py
    NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" .venv/bin/python -m pytest tests/test_x.py
"""

from __future__ import annotations

import math

import numpy as np

#: Rule 2 for the real models' float32 attention weights and the scores built on them (the
#: head-role study's shares of a few weights and normalised entropies): two float32 runs of
#: all-MiniLM-L6-v2 or multilingual-e5-small on a sentence differ by up to 3.2e-6 across BLAS
#: kernels (tests/test_truth_pages.py, GOLDEN_BOUND), each within 3e-6 of a float64 run of the
#: same weights (tests/test_e5.py); a score sums a few weights or takes their entropy.
MODEL_SCORE_ERROR = 1e-5

#: The factor of the probabilistic bound (rule 2): with k = 384 terms the bound fails with
#: probability below 2 * 384 * exp(-18) ~ 1e-5 per sum.
LAMBDA = 6.0


def eps(dtype=np.float64) -> float:
    """Machine epsilon of ``dtype``: the gap between 1 and the next float (2**-52 for float64,
    2**-23 for float32, 2**-10 for float16)."""
    return float(np.finfo(dtype).eps)


def ulps(magnitude, n: float = 4, dtype=np.float64):
    """Rule 1: ``n`` ulp of ``magnitude`` (a number or an array, broadcast as given), the
    absolute tolerance of an elementwise function whose error scales with ``magnitude``."""
    return n * eps(dtype) * np.abs(np.asarray(magnitude, dtype=np.float64))


def gamma(k: int, dtype=np.float64, probabilistic: bool = False) -> float:
    """Rule 2's factor for ``k`` terms: ``k u / (1 - k u)`` with ``u = eps / 2``, or, with
    ``probabilistic``, ``LAMBDA * sqrt(k) * u``.

    Examples
    --------
    >>> f"{gamma(384, np.float32):.1e}  {gamma(384, np.float32, probabilistic=True):.1e}"
    '2.3e-05  7.0e-06'
    """
    u = eps(dtype) / 2
    if probabilistic:
        return LAMBDA * math.sqrt(k) * u
    if k * u >= 1:
        raise ValueError(f"gamma({k}) is unbounded in {np.dtype(dtype)} (k * u >= 1)")
    return k * u / (1 - k * u)


def sum_bound(terms, axis=-1, dtype=None, probabilistic: bool = False):
    """Rule 2 for a sum of ``terms`` along ``axis``: ``gamma(k) * sum |terms|``, where ``k`` is
    the number of terms and ``dtype`` defaults to that of ``terms``."""
    terms = np.asarray(terms)
    dtype = np.dtype(dtype or terms.dtype)
    k = terms.shape[axis]
    return gamma(k, dtype, probabilistic) * np.abs(terms.astype(np.float64)).sum(axis=axis)


def matmul_bound(a, b, dtype=None, probabilistic: bool = False):
    """Rule 2 for ``a @ b``: ``gamma(k) * (|a| @ |b|)`` elementwise, ``k`` the inner dimension,
    ``dtype`` that of the product by default. Two kernels' products of the same float arrays
    differ by at most twice this."""
    a, b = np.asarray(a), np.asarray(b)
    dtype = np.dtype(dtype or np.result_type(a, b))
    k = a.shape[-1]
    return gamma(k, dtype, probabilistic) * (np.abs(a.astype(np.float64))
                                             @ np.abs(b.astype(np.float64)))


def assert_within(actual, expected, bound, err_msg: str = ""):
    """Assert ``|actual - expected| <= bound`` elementwise (``bound`` broadcasts), naming the
    worst element and its bound."""
    actual, expected, bound = np.broadcast_arrays(  # a number against an array, too
        *(np.asarray(a, dtype=np.float64) for a in (actual, expected, bound)))
    diff = np.abs(actual - expected)
    bad = ~(diff <= bound) & ~((actual == expected) | (np.isnan(actual) & np.isnan(expected)))
    if bad.any():
        where = np.unravel_index(np.argmax(np.where(bad, diff - bound, -np.inf)), bad.shape)
        raise AssertionError(
            f"{err_msg + ': ' if err_msg else ''}{int(bad.sum())} of {bad.size} elements differ "
            f"by more than the error bound; worst at {tuple(int(i) for i in where)}: "
            f"|{float(actual[where])!r} - {float(expected[where])!r}| = {diff[where]:.3e} "
            f"> {bound[where]:.3e}")


def assert_ulp_close(actual, expected, magnitude=None, n: float = 4, dtype=None):
    """Rule 1 as an assertion: ``actual`` within `ulps` ``(magnitude, n)`` of ``expected``;
    ``magnitude`` defaults to ``|expected|``, ``dtype`` to ``actual``'s."""
    actual = np.asarray(actual)
    dtype = np.dtype(dtype or actual.dtype)
    magnitude = np.abs(expected) if magnitude is None else magnitude
    assert_within(actual, expected, ulps(magnitude, n, dtype),
                  f"more than {n} ulp ({dtype}) of the magnitude apart")


def top2_margin(scores, axis=-1):
    """The gap between the largest and the second largest value along ``axis`` (``inf`` when
    there is only one)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape[axis] < 2:
        return np.full(np.delete(scores.shape, axis % scores.ndim), np.inf)
    top2 = -np.partition(-scores, 1, axis=axis)
    return np.take(top2, 0, axis=axis) - np.take(top2, 1, axis=axis)


def clear_top(scores, bound, axis=-1):
    """Rule 3: where the argmax along ``axis`` cannot be flipped by an error of ``bound`` in
    each value (its top-2 margin exceeds ``2 * bound``).

    Examples
    --------
    >>> clear_top([[0.5, 0.3, 0.2], [0.4, 0.4 - 1e-9, 0.2]], 1e-6)
    array([ True, False])
    """
    return top2_margin(scores, axis) > 2 * np.asarray(bound)


def argmax_agreement(a, b, bound, axis=-1) -> tuple[float, float]:
    """Rule 3 for the fraction of rows where ``a`` and ``b`` have the same argmax along
    ``axis``, each value known within ``bound``: the fraction's lowest and highest value over
    every way a near-tie (a row not `clear_top` in ``a`` or ``b``) may resolve."""
    same = np.argmax(a, axis=axis) == np.argmax(b, axis=axis)
    sure = clear_top(a, bound, axis) & clear_top(b, bound, axis)
    total = same.size
    return float((same & sure).sum() / total), float((same | ~sure).sum() / total)


def rounds_to(value, shown: str, error: float = 0.0) -> bool:
    """Rule 3 for a printed number: whether some value within ``error`` of ``value`` rounds to
    ``shown`` (as written, say ``"0.90"``: two decimals) -- the interval ``[value - error,
    value + error]`` meets ``shown``'s rounding cell. ``value`` may be a ``(low, high)`` pair,
    as `argmax_agreement` gives.

    Examples
    --------
    >>> rounds_to(0.8951, "0.90"), rounds_to(0.8931, "0.90"), rounds_to(0.8931, "0.90", 0.002)
    (True, False, True)
    >>> rounds_to((0.886, 0.902), "0.89")
    True
    """
    low, high = (value, value) if np.ndim(value) == 0 else value
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    half = 0.5 * 10.0 ** -decimals
    target = float(shown)
    return low - error <= target + half and high + error >= target - half
