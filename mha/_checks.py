"""Input checks shared by the public functions.

Every check raises ``TypeError`` (wrong kind of thing) or ``ValueError`` (right kind, wrong
shape or value) with a message that names the argument, what it got and what was expected.
Nothing here is public API.
"""

from __future__ import annotations

import numpy as np


def as_float_array(value, name: str) -> np.ndarray:
    """Return ``value`` as a real floating-point ndarray whose entries are all finite.

    Parameters
    ----------
    value : array_like
        The user's input.
    name : str
        The argument's name, used in error messages.

    Raises
    ------
    TypeError
        If the array is not of a real floating-point dtype (integers, booleans, complex and
        object arrays are refused rather than silently converted).
    ValueError
        If the array holds NaN or infinity.
    """
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.floating):
        raise TypeError(
            f"{name} must be a real floating-point array (float32 or float64), "
            f"got dtype {array.dtype} with shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError(
            f"{name} must contain only finite values, got NaN or inf in an array of shape "
            f"{array.shape}"
        )
    return array


def check_ndim(array: np.ndarray, name: str, allowed: tuple[int, ...], meaning: str) -> None:
    """Raise ``ValueError`` unless ``array.ndim`` is one of ``allowed``.

    ``meaning`` spells out the expected shapes, e.g. ``"(n, d_model) or (b, n, d_model)"``.
    """
    if array.ndim not in allowed:
        raise ValueError(
            f"{name} must have shape {meaning}, got a {array.ndim}-D array of shape {array.shape}"
        )


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as a Python int, raising unless it is an integer >= ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


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
