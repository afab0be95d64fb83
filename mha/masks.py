"""Boolean attention masks: True where a query may attend to a key.

Masks combine with ``&`` (both must allow) and ``|`` (either allows), e.g.
``causal_mask(n) & padding_mask(lengths, n)`` gives a ``(b, n, n)`` mask for a padded batch of
causal sequences.
"""

from __future__ import annotations

import numpy as np

from ._checks import broadcast_shape, check_positive_int

__all__ = ["causal_mask", "sliding_window_mask", "padding_mask"]


def causal_mask(n: int) -> np.ndarray:
    """Mask that lets each query see itself and the keys before it, never after.

    Parameters
    ----------
    n : int
        Sequence length (queries and keys are the same sequence).

    Returns
    -------
    ndarray of bool, shape ``(n, n)``
        ``mask[i, j]`` is True exactly when ``j <= i``.

    Examples
    --------
    >>> from mha import causal_mask
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    n = check_positive_int(n, "n", minimum=0)
    return np.tri(n, n, dtype=bool)


def sliding_window_mask(n: int, window: int) -> np.ndarray:
    """Causal mask restricted to a window: each query sees itself and the ``window`` keys before it.

    Parameters
    ----------
    n : int
        Sequence length.
    window : int
        How many earlier keys each query may see, >= 0. ``window=0`` lets a query see only
        itself; ``window >= n - 1`` is the same as `causal_mask`.

    Returns
    -------
    ndarray of bool, shape ``(n, n)``
        ``mask[i, j]`` is True exactly when ``i - window <= j <= i``.

    Examples
    --------
    >>> from mha import sliding_window_mask
    >>> sliding_window_mask(4, 1).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    n = check_positive_int(n, "n", minimum=0)
    window = check_positive_int(window, "window", minimum=0)
    i = np.arange(n)[:, None]  # (n, 1) query positions
    j = np.arange(n)[None, :]  # (1, n) key positions
    return (j <= i) & (j >= i - window)


def padding_mask(lengths, n: int) -> np.ndarray:
    """Mask that hides the padding keys of a batch of sequences padded to length ``n``.

    Parameters
    ----------
    lengths : array_like of int, shape ``(b,)``
        The true length of each sequence, each between 0 and ``n``.
    n : int
        The padded length.

    Returns
    -------
    ndarray of bool, shape ``(b, 1, n)``
        ``mask[s, 0, j]`` is True exactly when ``j < lengths[s]``. The middle axis of size 1
        broadcasts over the queries, so the mask applies to weights of shape ``(b, n_q, n)``.

    Examples
    --------
    >>> from mha import padding_mask, causal_mask
    >>> padding_mask([2, 3], 3).astype(int)
    array([[[1, 1, 0]],
    <BLANKLINE>
           [[1, 1, 1]]])
    >>> (causal_mask(3) & padding_mask([2, 3], 3)).shape
    (2, 3, 3)
    """
    n = check_positive_int(n, "n", minimum=0)
    lengths = np.asarray(lengths)
    if lengths.dtype == np.bool_ or not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(
            f"lengths must be integers, got dtype {lengths.dtype} with shape {lengths.shape}"
        )
    if lengths.ndim != 1:
        raise ValueError(f"lengths must have shape (b,), got shape {lengths.shape}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > n):
        raise ValueError(f"lengths must lie between 0 and n={n}, got {lengths.tolist()}")
    return (np.arange(n)[None, None, :] < lengths[:, None, None])  # (b, 1, n)


def as_attention_mask(mask, target: tuple[int, ...], target_name: str) -> np.ndarray:
    """Check a user's mask and return it as a boolean or an additive float ndarray.

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
    full = broadcast_shape({"mask": mask.shape, target_name: target}, "the mask")
    if full != tuple(target):
        raise ValueError(
            f"mask of shape {mask.shape} must broadcast to {target_name} {tuple(target)} without "
            f"enlarging it, but together they broadcast to {full}"
        )
    if mask.dtype != np.bool_ and not ((mask == 0) | (mask == -np.inf)).all():
        bad = np.unique(mask[(mask != 0) & (mask != -np.inf)])[:5]
        raise ValueError(
            "a float mask must hold only 0 (attend) and -inf (hide); got other values such as "
            f"{bad.tolist()}. For a 0/1 matrix pass a boolean mask instead (mask.astype(bool))."
        )
    return mask
