"""Every input check of the public functions, and the one overflow message they share.

Each check raises ``TypeError`` (wrong kind of thing) or ``ValueError`` (right kind, wrong
shape or value) with a message that names the argument, what it got and what was expected, and
returns the value in the form the computation uses. Nothing here is public API.

Dimension names as in `mha.attention`: ``n_q`` queries, ``n_k`` keys, ``d_k``, ``d_v``, and
``...`` for the leading (batch, head) dimensions.
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np

# ---- single values --------------------------------------------------------------------------


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as a Python int, raising unless it is an integer >= ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_size(n, name: str = "n") -> int:
    """A sequence length for an ``(n, n)`` mask: an integer >= 0 whose square NumPy can index."""
    n = check_positive_int(n, name, minimum=0)
    if n > math.isqrt(sys.maxsize):
        raise ValueError(f"{name}={n} is too large: an ({name}, {name}) mask would have "
                         f"{name}**2 > {sys.maxsize} entries")
    return n


def check_flag(value, name: str) -> bool:
    """Return ``value`` as a bool, raising ``TypeError`` unless it is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} of type "
                        f"{type(value).__name__}")
    return bool(value)


def check_axis(axis, shape: tuple[int, ...], name: str = "x") -> int:
    """An axis of the array ``name`` of ``shape``, as a Python int (negative counts from the
    end)."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for {name} of shape {shape}"
                         + (" (a 0-d array has no axis)" if not shape else ""))
    return int(axis)


def check_scale(scale, d_k: int, dtype: np.dtype):
    """The scale as a finite scalar of ``dtype``; ``None`` means ``1/sqrt(d_k)``.

    The check comes after the cast, so that a scale finite in float64 but not in ``dtype``
    (``1e6`` in float16) is refused too.
    """
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    elif isinstance(scale, (bool, np.bool_)) or not (
            isinstance(scale, numbers.Real)
            or (isinstance(scale, np.ndarray) and scale.ndim == 0 and scale.dtype.kind in "iuf")):
        raise TypeError(f"scale must be a real number, got {scale!r} of type "
                        f"{type(scale).__name__}")
    try:
        with np.errstate(over="ignore"):
            value = dtype.type(scale)  # a float64 scalar promotes float32 (NumPy >= 2, NEP 50)
    except OverflowError:  # a Python int beyond any float
        value = dtype.type(np.inf)
    if not np.isfinite(value):
        shown = repr(scale) if len(repr(scale)) <= 40 else f"an integer of {len(str(scale))} digits"
        raise ValueError(f"scale must be a finite number in {dtype} (the inputs' dtype), "
                         f"got {shown}")
    return value


def check_seed(seed):
    """``None``, an integer >= 0, or a NumPy ``Generator``, ``BitGenerator`` or ``SeedSequence``:
    what ``np.random.default_rng`` takes."""
    # What np.random.default_rng takes, except sequences of integers (rarely meant as a seed).
    if seed is None or isinstance(seed, (np.random.Generator, np.random.BitGenerator,
                                         np.random.SeedSequence)):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be None, an integer >= 0, a numpy.random.Generator, "
                        f"BitGenerator or SeedSequence, got {seed!r} of type "
                        f"{type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed}")
    return int(seed)


# ---- arrays ---------------------------------------------------------------------------------


def working_dtype(dtype) -> np.dtype:
    """The dtype a result of ``dtype`` is computed in: float32 for float16 (whose sums and
    intermediates leave its range, 65504, long before the result does), else ``dtype``."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def all_finite(array: np.ndarray) -> bool:
    """Whether every entry of a result is finite, with no temporary array (NaN and inf show in
    its min or max): the check adds nothing to the peak memory of the computation."""
    return array.size == 0 or bool(np.isfinite(array.min()) and np.isfinite(array.max()))


def as_float_array(value, name: str, *, finite: bool = True) -> np.ndarray:
    """Return ``value`` as a real floating-point ndarray whose entries are all finite.

    Parameters
    ----------
    value : array_like
        The user's input.
    name : str
        The argument's name, used in error messages.
    finite : bool, default True
        Whether to check that every entry is finite (`mha.softmax` leaves it to its kernel).

    Raises
    ------
    TypeError
        If the array is not of a real floating-point dtype (integers, booleans, complex and
        object arrays are refused rather than silently converted), or is a masked array (whose
        mask NumPy would silently drop).
    ValueError
        If ``finite`` and the array holds NaN or infinity.
    """
    masked = sys.modules.get("numpy.ma")  # (not imported here: no masked array exists without it)
    if masked is not None and isinstance(value, masked.MaskedArray):
        raise TypeError(
            f"{name} must be a plain ndarray, got a numpy.ma.MaskedArray of shape {value.shape}: "
            f"its mask would be ignored (pass the mask as mask=, or fill it in first)"
        )
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.floating):
        raise TypeError(
            f"{name} must be a real floating-point array (such as float32 or float64), "
            f"got dtype {array.dtype} with shape {array.shape}"
        )
    if finite and not np.isfinite(array).all():
        raise nonfinite_error(name, array.shape)
    return array


def nonfinite_error(name: str, shape: tuple[int, ...]) -> ValueError:
    """The error for an input ``name`` of ``shape`` that holds NaN or inf."""
    return ValueError(f"{name} must contain only finite values, got NaN or inf in an array of "
                      f"shape {shape}")


def check_ndim(array: np.ndarray, name: str, allowed: tuple[int, ...], meaning: str) -> None:
    """Raise ``ValueError`` unless ``array.ndim`` is one of ``allowed``.

    ``meaning`` spells out the expected shapes, e.g. ``"(n, d_model) or (b, n, d_model)"``.
    """
    if array.ndim not in allowed:
        raise ValueError(
            f"{name} must have shape {meaning}, got a {array.ndim}-D array of shape {array.shape}"
        )


def broadcast_shape(shapes: dict[str, tuple[int, ...]], context: str) -> tuple[int, ...]:
    """Broadcast named shapes together, raising a ``ValueError`` that lists them all.

    Parameters
    ----------
    shapes : dict of str to tuple of int
        Argument description -> shape, e.g. ``{"mask": (3, 4), "weights": (2, 5, 4)}``.
    context : str
        What the shapes must agree for, e.g. ``"the mask and the scores (..., n_q, n_k)"``.
    """
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"shapes do not broadcast for {context}: {listed}") from None


def check_fits(shape: tuple[int, ...], name: str, target: tuple[int, ...],
               target_name: str) -> None:
    """Raise unless ``shape`` broadcasts to ``target`` without enlarging it."""
    full = broadcast_shape({name: shape, target_name: target}, f"the {name}")
    if full != tuple(target):
        raise ValueError(
            f"{name} of shape {shape} must broadcast to {target_name} {tuple(target)} without "
            f"enlarging it, but together they broadcast to {full}"
        )


# ---- attention's arguments -----------------------------------------------------------------


def check_q_k(q, k) -> tuple[np.ndarray, np.ndarray]:
    """Queries and keys: finite float arrays, at least 2-D, the same ``d_k`` >= 1."""
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    for name, array, meaning in (("q", q, "(..., n_q, d_k)"), ("k", k, "(..., n_k, d_k)")):
        if array.ndim < 2:
            raise ValueError(
                f"{name} must have shape {meaning} (at least 2-D), got shape {array.shape}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share their last dimension d_k, got q {q.shape} and k {k.shape}"
        )
    if q.shape[-1] == 0:
        raise ValueError(
            f"q and k must have d_k >= 1 (their last dimension), got q {q.shape} and k {k.shape}"
        )
    return q, k


def check_q_k_v(q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """Queries, keys and values; returned with their broadcast batch shape ``...``."""
    q, k = check_q_k(q, k)
    v = as_float_array(v, "v")
    if v.ndim < 2:
        raise ValueError(f"v must have shape (..., n_k, d_v) (at least 2-D), got shape {v.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys n_k (second-to-last dimension), "
            f"got k {k.shape} and v {v.shape}"
        )
    batch = broadcast_shape(
        {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]},
        "the leading (batch, head) dimensions of q, k and v",
    )
    return q, k, v, batch


def as_visible_mask(mask, target: tuple[int, ...], target_name: str) -> np.ndarray:
    """Check a user's mask; return it as a boolean array, True where a query may see a key.

    A boolean mask comes back as it is (no copy); a float mask as ``mask == 0``.

    Parameters
    ----------
    mask : array_like
        Boolean (True = may attend) or float (0 = may attend, ``-inf`` = hidden).
    target : tuple of int
        The shape the mask must broadcast to, e.g. the scores' ``(..., n_q, n_k)``.
    target_name : str
        How to call that shape in an error message.

    Raises
    ------
    TypeError
        For any dtype other than bool or real floating point (a 0/1 integer mask is ambiguous).
    ValueError
        If the mask does not broadcast to ``target`` (broadcasting may not enlarge the target),
        or a float mask holds a value other than 0 and ``-inf``.
    """
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.floating):
        raise TypeError(
            f"mask must be boolean (True = attend) or float (0 / -inf), got dtype {mask.dtype} "
            f"with shape {mask.shape}"
        )
    check_fits(mask.shape, "mask", target, target_name)
    if mask.dtype == np.bool_:
        return mask
    visible = mask == 0
    if not (visible | (mask == -np.inf)).all():
        bad = np.unique(mask[~visible & (mask != -np.inf)])[:5]
        raise ValueError(
            "a float mask must hold only 0 (attend) and -inf (hide); got other values such as "
            f"{bad.tolist()}. For a 0/1 matrix pass a boolean mask instead (mask.astype(bool))."
        )
    return visible


def check_lengths(lengths, n: int, n_name: str, batch: tuple[int, ...] | None = None):
    """Sequence lengths as an integer array, each in ``0 .. n``.

    With ``batch`` None the lengths must have shape ``(b,)`` (`mha.padding_mask`); otherwise
    they must broadcast to ``batch`` without enlarging it (`mha.chunked_attention`). An empty
    sequence (``[]``, which NumPy makes float64) means zero sequences.
    """
    lengths = np.asarray(lengths)
    if lengths.size == 0 and lengths.dtype == np.float64 and lengths.ndim == 1:
        lengths = lengths.astype(np.intp)  # [] is no sequences, not a float array
    if lengths.dtype == np.bool_ or not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(
            f"lengths must be integers, got dtype {lengths.dtype} with shape {lengths.shape}"
        )
    if batch is None:
        if lengths.ndim != 1:
            raise ValueError(f"lengths must have shape (b,), got shape {lengths.shape}")
    else:
        check_fits(lengths.shape, "lengths", batch, "the batch shape (...) of q, k and v")
    if lengths.size and (lengths.min() < 0 or lengths.max() > n):
        raise ValueError(
            f"lengths must lie between 0 and {n_name}={n}, got values from {lengths.min()} to "
            f"{lengths.max()}"
        )
    return lengths


def check_structure(causal, window, q_shape, k_shape) -> tuple[bool, int | None]:
    """`chunked_attention`'s ``causal`` and ``window``; a window beyond ``n_k`` becomes ``n_k``.

    A sliding window is causal by definition; both need queries and keys at the same positions.
    """
    causal = check_flag(causal, "causal")
    n_q, n_k = q_shape[-2], k_shape[-2]
    if window is not None:
        given = window = check_positive_int(window, "window", minimum=0)
        window = min(window, n_k)  # any window >= n_k - 1 is causal: no huge integers later
        causal = True
    if causal and n_q != n_k:
        what = "causal=True" if window is None else f"window={given}"
        raise ValueError(
            f"{what} needs queries and keys at the same positions (n_q == n_k), "
            f"got q {q_shape} and k {k_shape}"
        )
    return causal, window


def check_sizes(d_model, h, d_k, d_v) -> tuple[int, int, int, int]:
    """`MultiHeadAttention`'s sizes, each >= 1; ``d_k`` defaults to ``d_model // h`` (which must
    then divide evenly) and ``d_v`` to ``d_k``."""
    d_model = check_positive_int(d_model, "d_model")
    h = check_positive_int(h, "h")
    if d_k is None:
        if d_model % h != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by h={h}; pass d_k (and d_v) explicitly "
                f"or choose h dividing d_model"
            )
        d_k = d_model // h
    d_k = check_positive_int(d_k, "d_k")
    d_v = d_k if d_v is None else check_positive_int(d_v, "d_v")
    return d_model, h, d_k, d_v


def check_kv_heads(kv_heads, h: int) -> int:
    """`MultiHeadAttention`'s ``kv_heads``: ``h`` when None, else an integer >= 1 dividing ``h``."""
    if kv_heads is None:
        return h
    kv_heads = check_positive_int(kv_heads, "kv_heads")
    if h % kv_heads:
        raise ValueError(f"kv_heads={kv_heads} must divide h={h} (each key/value head serves "
                         f"h // kv_heads query heads); divisors of {h}: "
                         f"{[d for d in range(1, h + 1) if h % d == 0]}")
    return kv_heads


def check_tokens(x, context, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """`MultiHeadAttention`'s ``x`` and ``context`` (``x`` when None), each ``(..., d_model)``."""
    x = as_float_array(x, "x")
    check_ndim(x, "x", (2, 3), "(n, d_model) or (b, n, d_model)")
    if context is None:
        context = x
    else:
        context = as_float_array(context, "context")
        if context.ndim != x.ndim or context.shape[:-2] != x.shape[:-2]:
            raise ValueError(
                f"context must have the same number of dimensions and batch size as x: "
                f"x {x.shape} needs context of shape {x.shape[:-2] + ('m', 'd_model')}, "
                f"got {context.shape}"
            )
    for name, array in (("x", x), ("context", context)):
        if array.shape[-1] != d_model:
            raise ValueError(
                f"{name} must have last dimension d_model={d_model}, got shape {array.shape}"
            )
    return x, context


def check_weight(value, name: str, shape: tuple[int, ...], *, finite: bool = True) -> np.ndarray:
    """A layer's weight (read on every call, never cached), checked against ``shape``.

    With ``finite`` False its entries are not read: the caller checks what it computes from the
    weight instead and calls `nonfinite_weight` when that is not finite.
    """
    w = as_float_array(value, name, finite=finite)
    if w.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {w.shape}")
    return w


def nonfinite_weight(weights: dict[str, np.ndarray]) -> ValueError | None:
    """The error `check_weight` raises for the first of ``weights`` (name -> array) that holds
    NaN or inf, or None if all are finite.

    For callers that read a layer's weights through only when a result computed from them is
    not finite: a NaN or inf in a weight makes every product that reads it NaN or inf (IEEE
    arithmetic: ``0 * inf`` and ``0 * nan`` are NaN), so a finite result clears the weights it
    read, and a result that is not finite is blamed on a weight before an overflow. (A BLAS
    that skipped exact zeros of its input would let a bad weight that meets only zeros pass,
    with a result that does not depend on it; OpenBLAS, which NumPy's wheels for Linux and
    Windows use, does not skip them.)
    """
    for name, w in weights.items():
        if not all_finite(w):
            return nonfinite_error(name, w.shape)
    return None


# ---- results --------------------------------------------------------------------------------


def overflow_error(what: str, dtype, **shapes) -> ValueError:
    """The error for results that overflowed ``dtype``, naming the shapes and the way out."""
    dtype = np.dtype(dtype)
    listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
    wider = "" if dtype.itemsize >= 8 else ", or compute in float64"
    return ValueError(
        f"{what} overflowed {dtype} ({listed}): the inputs are too large in magnitude for "
        f"{dtype}; scale them down{wider}"
    )
