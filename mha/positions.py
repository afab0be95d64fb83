r"""Where each token stands: sinusoidal positions (added to the embeddings) and RoPE (rotating
queries and keys).

Attention on its own is permutation-equivariant: shuffle the tokens and every output is shuffled
the same way, so without help a layer cannot tell "the key was under the desk" from "the desk was
under the key". Two ways of telling it where each token stands live here:

- `sinusoidal_positions`: the original Transformer's fixed table (Vaswani et al. 2017, section
  3.5), one row per position, *added* to the token embeddings before the first layer;
- `rope`: rotary position embedding (Su et al. 2021, RoFormer), which *rotates* each head's
  queries and keys by an angle proportional to their position, so that their dot product depends
  only on how far apart two tokens are. `mha.MultiHeadAttention(..., rope=True)` applies it.

Both use the same angles: position ``p`` times the frequency ``base ** (-2i / d)`` of pair ``i``.

Dimension names: ``n`` tokens, ``d`` the size of the vectors (``d_model`` for the table, ``d_k``
inside a head), ``...`` any leading (batch, head) dimensions.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._checks import all_finite, as_float_array, check_positive_int, overflow_error

__all__ = ["sinusoidal_positions", "rope", "halves_order"]


def _check_base(base) -> float:
    """``base`` as a Python float: a finite real number >= 1.

    Pair ``i`` turns by ``base ** (-2i / d)`` radians per position. A base >= 1 keeps every
    pair at or below pair 0's one radian, so no angle exceeds its position; below 1 the later
    pairs turn faster and faster (``base=1e-10``: by up to 1e10 radians a position, so that
    neighbours are no longer told apart), and a tiny base makes the angles overflow to inf and
    the table NaN.
    """
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a real number, got {base!r} of type {type(base).__name__}")
    try:
        value = float(base)
    except OverflowError:  # a Python int beyond any float
        value = float("inf")
    if not (np.isfinite(value) and value >= 1):
        shown = str(base) if isinstance(base, (int, np.integer)) else repr(value)  # 5e-324
        if len(shown) > 40:
            shown = f"an integer of {len(shown)} digits"
        raise ValueError(f"base must be a finite number >= 1 (pair i turns by "
                         f"base ** (-2i / d) radians per position: below 1 the later pairs "
                         f"turn ever faster, and their angles overflow), got {shown}")
    return value


def _check_even(d, name: str, shape: tuple[int, ...] | None = None) -> int:
    """A vector size that splits into pairs: an even integer >= 2."""
    d = check_positive_int(d, name)
    if d % 2:
        where = "" if shape is None else f" (x has shape {shape})"
        raise ValueError(f"{name}={d} must be even: the dimensions go in pairs (2i, 2i+1){where}")
    return d


def _angles(positions: np.ndarray, d: int, base: float) -> np.ndarray:
    r"""The angle of every position and pair, in float64.

    Parameters
    ----------
    positions : ndarray of shape ``(n,)``
    d : int
        Even vector size; there are ``d // 2`` pairs.
    base : float

    Returns
    -------
    ndarray of float64, shape ``(n, d // 2)``
        ``angles[j, i] = positions[j] / base ** (2i / d)``.
    """
    wavelength = base ** (np.arange(0, d, 2, dtype=np.float64) / d)       # (d/2,): base^(2i/d)
    return positions.astype(np.float64)[:, None] / wavelength[None, :]   # (n, d/2)


def sinusoidal_positions(n: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    r"""The sinusoidal position table of "Attention Is All You Need" (section 3.5).

    Parameters
    ----------
    n : int
        Number of positions (0, 1, ..., n - 1), >= 0.
    d_model : int
        Width of each row; must be even (sin and cos come in pairs).
    base : float, default 10000.0
        Sets how slowly the later pairs turn; at least 1. Pair ``i``'s wavelength is
        ``2 pi base ** (2i / d_model)``: from ``2 pi`` for pair 0 up to
        ``2 pi base ** ((d_model - 2) / d_model)`` for the last pair, which approaches
        ``2 pi base`` only in a wide table (with the default base: about 19,869 positions for
        ``d_model = 16``, 47,117 for 64 and 60,611 for 512, against ``2 pi 10000`` = 62,832).

    Returns
    -------
    ndarray of float64, shape ``(n, d_model)``
        Row ``p`` is added to the embedding of the token at position ``p``.

    Raises
    ------
    TypeError
        If ``n`` or ``d_model`` is not an integer, or ``base`` is not a real number.
    ValueError
        If ``n`` < 0, ``d_model`` < 1 or odd, or ``base`` is not a finite number >= 1.

    Notes
    -----
    $$
    PE_{(p,\,2i)} = \sin\!\left(\frac{p}{\text{base}^{2i/d_\text{model}}}\right),
    \qquad
    PE_{(p,\,2i+1)} = \cos\!\left(\frac{p}{\text{base}^{2i/d_\text{model}}}\right)
    $$

    Pair ``i`` is a clock hand turning at its own speed: pair 0 once every $2\pi$ positions,
    the last pair once every $2\pi \cdot \text{base}^{(d_\text{model}-2)/d_\text{model}}$
    (the paper's "from $2\pi$ to $10000 \cdot 2\pi$" gives the limit of a wide table, which
    the last pair never reaches). The dot product of two rows depends only on their distance:
    $PE_p \cdot PE_{p+k} = \sum_i \cos(k / \text{base}^{2i/d_\text{model}})$.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import sinusoidal_positions
    >>> pe = sinusoidal_positions(50, 8)
    >>> pe.shape, pe.dtype
    ((50, 8), dtype('float64'))
    >>> np.round(pe[1, :4], 4)          # sin(1), cos(1), sin(0.1), cos(0.1)
    array([0.8415, 0.5403, 0.0998, 0.995 ])
    >>> bool(np.isclose(pe[3] @ pe[10], pe[20] @ pe[27]))   # only the distance, 7, matters
    True
    >>> pe = sinusoidal_positions(2, 16)
    >>> theta = np.arctan2(pe[1, 0::2], pe[1, 1::2])    # radians per position, one per pair
    >>> round(2 * np.pi / theta[-1])                    # last pair's wavelength: not 62,832
    19869
    """
    n = check_positive_int(n, "n", minimum=0)
    d_model = _check_even(d_model, "d_model")
    base = _check_base(base)
    angles = _angles(np.arange(n), d_model, base)   # (n, d_model/2)
    table = np.empty((n, d_model))                  # (n, d_model)
    table[:, 0::2] = np.sin(angles)                 # even columns 2i
    table[:, 1::2] = np.cos(angles)                 # odd columns 2i + 1
    return table


def _check_positions(positions, n: int) -> np.ndarray:
    """RoPE's positions: ``arange(n)`` when None, else ``n`` finite real numbers."""
    if positions is None:
        return np.arange(n)
    array = np.asarray(positions)
    if array.dtype.kind not in "iuf":
        raise TypeError(f"positions must hold integers or floats, got dtype {array.dtype} with "
                        f"shape {array.shape}")
    if array.shape != (n,):
        raise ValueError(f"positions must have shape (n,) = ({n},), one per token of x, got "
                         f"shape {array.shape}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError(f"positions must be finite, got NaN or inf in {array.shape}")
    return array


def rope(x, positions=None, *, base: float = 10000.0) -> np.ndarray:
    r"""Rotary position embedding: rotate each pair of ``x``'s last axis by its token's angle.

    Applied to a head's queries and keys (not to the embeddings), it makes their dot product a
    function of the two tokens' *distance* only (RoFormer, Su et al. 2021, eq. 34).

    Parameters
    ----------
    x : ndarray of shape ``(..., n, d)``
        Queries or keys, float; ``d`` must be even. Token ``j`` is row ``x[..., j, :]``.
    positions : array_like of shape ``(n,)``, optional
        Each token's position: integers or floats (a shift, a fraction, a gap are all fine).
        Defaults to ``0, 1, ..., n - 1``.
    base : float, default 10000.0
        As in `sinusoidal_positions`: pair ``i`` turns by ``base ** (-2i / d)`` per position.

    Returns
    -------
    ndarray of shape ``(..., n, d)``, the dtype of ``x``
        A new array; ``x`` is never modified.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point array, ``positions`` holds neither integers nor floats,
        or ``base`` is not a real number.
    ValueError
        If ``x`` has fewer than 2 dimensions or holds NaN or inf, ``d`` is odd, ``positions`` has
        the wrong shape or is not finite, ``base`` is not a finite number >= 1, or the
        result overflows ``x``'s dtype.

    Notes
    -----
    With $\theta_i = \text{base}^{-2i/d}$, the pair $(x_{2i}, x_{2i+1})$ of token $j$ at
    position $p_j$ is rotated by the angle $p_j \theta_i$:

    $$
    \begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix} =
    \begin{pmatrix} \cos p_j\theta_i & -\sin p_j\theta_i \\
                    \sin p_j\theta_i & \cos p_j\theta_i \end{pmatrix}
    \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}
    $$

    Rotations keep lengths, and rotating $q$ by $a$ and $k$ by $b$ changes their dot product
    exactly as rotating $q$ by $a - b$ alone: $R_a q \cdot R_b k = q \cdot R_{b-a} k$. That is the
    relative property. Pairs are *interleaved* here, as in RoFormer; Llama-style code pairs
    dimension ``i`` with ``i + d/2`` instead. It is the same rotation on permuted dimensions:
    see `halves_order`. The angles are computed in float64 and their sine and cosine cast to
    ``x``'s dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import rope
    >>> rope(np.array([[1.0, 0.0], [1.0, 0.0]]))     # d = 2: token 1 turns by 1 radian
    array([[1.        , 0.        ],
           [0.54030231, 0.84147098]])
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(1, 8)), rng.normal(size=(1, 8))
    >>> a = rope(q, [7]) @ rope(k, [3]).T            # positions 7 and 3
    >>> b = rope(q, [104]) @ rope(k, [100]).T        # positions 104 and 100: the same distance
    >>> bool(np.allclose(a, b))
    True
    """
    x = as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., n, d), one row per token, got a {x.ndim}-D "
                         f"array of shape {x.shape}")
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"the last dimension of x must be even (the dimensions go in pairs "
                         f"(2i, 2i+1)), got x of shape {x.shape}")
    positions = _check_positions(positions, n)
    base = _check_base(base)

    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
        out = _rotate(x, positions, base)               # (..., n, d)
    if not all_finite(out):
        raise overflow_error("rope(x)", x.dtype, x=x.shape)
    return out


def _rotate(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """`rope` on checked inputs (``MultiHeadAttention`` calls it on its queries and keys)."""
    angles = _angles(positions, x.shape[-1], base)      # (n, d/2), float64
    cos = np.cos(angles).astype(x.dtype, copy=False)    # (n, d/2)
    sin = np.sin(angles).astype(x.dtype, copy=False)    # (n, d/2)
    even, odd = x[..., 0::2], x[..., 1::2]              # (..., n, d/2): the two members of each pair
    out = np.empty(x.shape, dtype=x.dtype)              # (..., n, d)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def halves_order(d: int) -> np.ndarray:
    """The permutation between RoFormer's interleaved pairs and Llama's halves.

    `rope` pairs dimension ``2i`` with ``2i + 1``; Llama-style code (``rotate_half``) pairs
    dimension ``i`` with ``i + d/2``. Reordering the dimensions with this permutation turns one
    layout into the other, and the rotation commutes with it::

        rope_halves(x[..., order]) == rope(x)[..., order]

    Parameters
    ----------
    d : int
        Even vector size.

    Returns
    -------
    ndarray of int, shape ``(d,)``
        ``[0, 2, 4, ..., d - 2, 1, 3, ..., d - 1]``: the first members of the pairs, then the
        second members. ``np.argsort(order)`` undoes it.

    Examples
    --------
    >>> from mha.positions import halves_order
    >>> halves_order(8)
    array([0, 2, 4, 6, 1, 3, 5, 7])
    """
    d = _check_even(d, "d")
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])
