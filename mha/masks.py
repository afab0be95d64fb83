"""Boolean attention masks: True where a query may attend to a key.

Masks combine with ``&`` (both must allow) and ``|`` (either allows), e.g.
``causal_mask(n) & padding_mask(lengths, n)`` gives a ``(b, n, n)`` mask for a padded batch of
causal sequences.
"""

from __future__ import annotations

import numpy as np

from ._checks import check_lengths, check_positive_int, check_size

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

    Raises
    ------
    TypeError
        If ``n`` is not an integer.
    ValueError
        If ``n < 0``, or ``n * n`` is beyond what NumPy can index.

    Examples
    --------
    >>> from mha import causal_mask
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    n = check_size(n)
    return np.tri(n, n, dtype=bool)


def sliding_window_mask(n: int, window: int) -> np.ndarray:
    """Causal mask restricted to a window: each query sees itself and the ``window`` keys before it.

    Parameters
    ----------
    n : int
        Sequence length.
    window : int
        How many earlier keys each query may see, >= 0. ``window=0`` lets a query see only
        itself; ``window >= n - 1`` (however large) is the same as `causal_mask`.

    Returns
    -------
    ndarray of bool, shape ``(n, n)``
        ``mask[i, j]`` is True exactly when ``i - window <= j <= i``.

    Raises
    ------
    TypeError
        If ``n`` or ``window`` is not an integer.
    ValueError
        If ``n < 0`` (or ``n * n`` is beyond what NumPy can index) or ``window < 0``.

    Notes
    -----
    The mask hides scores, it does not avoid them: `mha.scaled_dot_product_attention` still
    computes all ``n * n`` of them and then discards the hidden ones. Only
    `mha.chunked_attention` with ``window=`` skips the work, tile by tile. The window looks
    back only, as a decoder needs; the restricted self-attention of Vaswani et al. (2017,
    Table 1) is a neighbourhood of size r around each position, in both directions.

    Examples
    --------
    >>> from mha import sliding_window_mask
    >>> sliding_window_mask(4, 1).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    n = check_size(n)
    window = min(check_positive_int(window, "window", minimum=0), n)  # wider sees no more
    i = np.arange(n)[:, None]  # (n, 1) query positions
    j = np.arange(n)[None, :]  # (1, n) key positions
    return (j <= i) & (j >= i - window)


def padding_mask(lengths, n: int) -> np.ndarray:
    """Mask that hides the padding keys of a batch of sequences padded to length ``n``.

    Parameters
    ----------
    lengths : array_like of int, shape ``(b,)``
        The true length of each sequence, each between 0 and ``n``. An empty sequence gives
        an empty batch, shape ``(0, 1, n)``.
    n : int
        The padded length.

    Returns
    -------
    ndarray of bool, shape ``(b, 1, n)``
        ``mask[s, 0, j]`` is True exactly when ``j < lengths[s]``. The middle axis of size 1
        broadcasts over the queries, so the mask applies to weights of shape ``(b, n_q, n)``.

    Raises
    ------
    TypeError
        If ``n`` is not an integer or ``lengths`` are not integers.
    ValueError
        If ``n < 0``, ``lengths`` is not 1-D, or a length lies outside ``0 .. n``.

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
    lengths = check_lengths(lengths, n, "n")
    return (np.arange(n)[None, None, :] < lengths[:, None, None])  # (b, 1, n)
