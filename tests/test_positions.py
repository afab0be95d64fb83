"""mha.sinusoidal_positions, mha.rope and MultiHeadAttention(rope=True): against the plain-Python
reference, against transformers' RoFormer and Llama (tests/golden/rope.npz, made by
tests/golden/make_rope_golden.py; no torch needed here), their properties, and bad input."""

import copy
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import (BAD_FLAGS, BAD_INTEGERS, DTYPES, MASK_KINDS, assert_close, bad_arrays,
                     in_threads, make_mask, no_warnings)
from mha import MultiHeadAttention, causal_mask, rope, sinusoidal_positions
from mha.positions import halves_order
from mha.reference import multi_head_attention_reference, rope_reference, sinusoidal_reference
from tolerance import assert_ulp_close, assert_within, gamma, matmul_bound, ulps

GOLDEN = np.load(Path(__file__).parent / "golden" / "rope.npz")


def rotate_half(x):
    """Llama's ``rotate_half``, written from its definition: (x1, x2) -> (-x2, x1) by halves."""
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rope_llama(x, positions, base=10000.0):
    """RoPE in Llama's layout (pairs i and i + d/2), written from its definition."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)                     # (d/2,)
    angles = np.asarray(positions, dtype=float)[:, None] * inv_freq       # (n, d/2)
    emb = np.concatenate([angles, angles], axis=-1)                       # (n, d)
    return x * np.cos(emb) + rotate_half(x) * np.sin(emb)


# ---- sinusoidal_positions -----------------------------------------------------------------------

@pytest.mark.parametrize("n, d_model, base", [(0, 4, 1e4), (1, 2, 1e4), (50, 16, 1e4),
                                              (7, 6, 2.0), (300, 64, 1e4), (9, 10, 5e5)])
def test_sinusoidal_table_is_the_papers_formula(n, d_model, base):
    table = sinusoidal_positions(n, d_model, base=base)
    assert table.shape == (n, d_model) and table.dtype == np.float64
    assert_ulp_close(table, sinusoidal_reference(n, d_model, base),
                     magnitude=sinusoid_error_scale(n, d_model, base), n=1)


def sinusoid_error_scale(n, d_model, base, positions=None):
    """How far two correct float64 tables of sinusoids may differ, in units of float64's eps,
    entry by entry (rule 1 of tests/tolerance.py): an angle ``p / base**(2i/d)`` carries the rounding of the exponent
    (half an ulp of ``2i/d``, times ``ln(base) * 2i/d``), of the power (NumPy's SIMD ``**`` is
    within 4 ulp, libm's within 1) and of the division (half an ulp): about
    ``(5 + ln(base) / 2)`` ulp of the angle, on each side; ``sin`` and ``cos`` add up to 4 ulp
    of 1 each. NumPy's AVX-512 ``**`` and Python's differ by 1.4e-14 at p = 299. Positions
    default to ``0, 1, ..., n - 1``."""
    p = np.arange(n) if positions is None else np.abs(np.asarray(positions, dtype=np.float64))
    angles = p[:, None] / base ** (2 * (np.arange(d_model) // 2) / d_model)
    return 2 * (5 + np.log(base) / 2) * angles + 8


def pair_sums(x):
    """``|x1| + |x2|`` for each pair ``(2i, 2i+1)`` of the last axis, at both places of the
    pair: a rotation's output, and the error it passes on, are bounded by it."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    return np.repeat(x[..., 0::2] + x[..., 1::2], 2, axis=-1)


def rope_error(x, positions=None, base=1e4):
    """How far two correct float64 rotations ``rope(x, positions)`` may differ, entry by entry
    (rule 1): the pair's ``|x1| + |x2|`` times its angle's error (`sinusoid_error_scale`) and
    2 ulp for the two products and their sum."""
    n, d = np.shape(x)[-2:]
    return ulps(pair_sums(x) * (sinusoid_error_scale(n, d, base, positions) + 2), n=1)


def score_error(qr, kr, q_error, k_error):
    """Rule 2 for the scores ``qr @ kr.T`` of rotated queries and keys (last axis d) known
    within ``q_error`` and ``k_error``: each factor's error times the other's magnitude, and
    ``gamma(d + 1)`` of the terms for the sum and a scaling."""
    qr, kr = np.abs(qr), np.abs(kr).swapaxes(-1, -2)
    return (q_error @ kr + qr @ k_error.swapaxes(-1, -2) + q_error @ k_error.swapaxes(-1, -2)
            + gamma(qr.shape[-1] + 1) * (qr @ kr))


def test_sinusoidal_table_known_values():
    table = sinusoidal_positions(3, 4)
    # pair 0 turns 1 radian per position, pair 1 turns 1 / 10000^(2/4) = 0.01 radian
    expected = [[0, 1, 0, 1],
                [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)],
                [np.sin(2), np.cos(2), np.sin(0.02), np.cos(0.02)]]
    assert_ulp_close(table, expected, magnitude=sinusoid_error_scale(3, 4, 1e4), n=1)


def test_sinusoidal_table_equals_roformers_after_the_halves_permutation():
    # transformers' RoFormer keeps the sines in the first half of each row, the cosines in the
    # second: the same table with its columns in halves_order. It is stored in float32.
    golden = GOLDEN["roformer/table"]
    n, d = golden.shape
    table = sinusoidal_positions(n, d)
    # rule 1: entries are sines and cosines, at most 1, each rounded to float32 (half an ulp of
    # 1); float64's own error (1e-14 at 40 positions) stays far below the other half
    assert_ulp_close(table[:, halves_order(d)], golden, magnitude=1, n=1, dtype=np.float32)
    assert np.abs(table - golden).max() > 0.5  # the layouts differ: the permutation matters


@given(st.integers(0, 200), st.integers(0, 200), st.integers(-50, 50))
def test_sinusoidal_dot_product_depends_only_on_the_distance(p, q, shift):
    table = sinusoidal_positions(301, 32)
    p, q = p + 50, q + 50
    # rule 2: each entry within its angle's error (sinusoid_error_scale), a sum of 32 products
    error = ulps(sinusoid_error_scale(301, 32, 1e4), n=1)

    def dot_error(a, b):
        return score_error(table[a][None], table[b][None], error[a][None], error[b][None]).item()

    assert_within(table[p] @ table[q], table[p + shift] @ table[q + shift],
                  dot_error(p, q) + dot_error(p + shift, q + shift))
    d = np.arange(0, 32, 2)
    cosines = np.cos((p - q) / 1e4 ** (d / 32))     # 16 cosines, each with its angle's error
    cos_error = ulps(sinusoid_error_scale(1, 32, 1e4, [p - q])[0, ::2], n=1).sum() + gamma(16) * 16
    assert_within(table[p] @ table[q], cosines.sum(), dot_error(p, q) + cos_error)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"n": 4, "d_model": 5}, ValueError, r"d_model=5 must be even"),
    ({"n": 4, "d_model": 0}, ValueError, r"d_model must be >= 1, got 0"),
    ({"n": 4, "d_model": 4, "base": 0.0}, ValueError, r"base must be a finite number >= 1 .*got 0"),
    ({"n": 4, "d_model": 4, "base": -2}, ValueError, r"base must be a finite number >= 1 .*got -2"),
    ({"n": 4, "d_model": 4, "base": np.inf}, ValueError, r"base must be a finite .* got inf"),
    ({"n": 4, "d_model": 4, "base": np.nan}, ValueError, r"base must be a finite .* got nan"),
    ({"n": 4, "d_model": 4, "base": 10**400}, ValueError, r"an integer of 401 digits"),
    ({"n": 4, "d_model": 4, "base": "1e4"}, TypeError, r"base must be a real number, got '1e4'"),
    ({"n": 4, "d_model": 4, "base": True}, TypeError, r"base must be a real number, got True"),
    ({"n": 4, "d_model": 4, "base": 1j}, TypeError, r"base must be a real number, got 1j"),
    *[({"n": value, "d_model": 4}, error, "n " + message)
      for value, error, message in BAD_INTEGERS if value != -1],
    ({"n": -1, "d_model": 4}, ValueError, r"n must be >= 0, got -1"),
    *[({"n": 4, "d_model": value}, error, "d_model " + message)
      for value, error, message in BAD_INTEGERS],
])
def test_sinusoidal_bad_input(kwargs, error, message):
    with pytest.raises(error, match=message):
        sinusoidal_positions(**kwargs)


# ---- rope ---------------------------------------------------------------------------------------

@st.composite
def rope_inputs(draw):
    """x of a drawn dtype and shape (..., n, d) with d even, and positions (or None)."""
    dtype = draw(DTYPES)
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n, d = draw(st.integers(0, 6)), 2 * draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.normal(size=lead + (n, d)).astype(dtype)
    kind = draw(st.sampled_from(["none", "ints", "floats", "list"]))
    positions = {"none": None,
                 "ints": rng.integers(-1000, 100_000, size=n),
                 "floats": rng.uniform(-50, 5000, size=n),
                 "list": [int(p) for p in rng.integers(0, 600, size=n)]}[kind]
    base = draw(st.sampled_from([10000.0, 500000.0, 2.0]))
    return x, positions, base


@given(rope_inputs())
def test_rope_equals_the_rotation_matrices_of_the_reference(case):
    x, positions, base = case
    before = x.copy()
    out = rope(x, positions, base=base)
    assert out.shape == x.shape and out.dtype == x.dtype
    expected = rope_reference(x.astype(np.float64), positions, base)
    if x.dtype == np.float64:
        # An angle of p radians is known to a few ulp of p (mha divides by base^(2i/d), the
        # reference multiplies by base^(-2i/d)): far out, the last digits differ.
        assert_within(out, expected, rope_error(x, positions, base))
    else:
        assert_close(out, expected, x.dtype)
    np.testing.assert_array_equal(x, before)  # the input is never modified
    # Rotations keep each pair's length, so each token's vector keeps its length too.
    assert_close(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1), x.dtype)


def test_rope_known_values():
    # d = 4: pair 0 turns 1 radian per position, pair 1 turns 1 / 10000^(2/4) = 0.01 radian.
    x = np.array([[1.0, 0.0, 0.0, 1.0]] * 3)
    expected = [[1, 0, 0, 1],
                [np.cos(1), np.sin(1), -np.sin(0.01), np.cos(0.01)],
                [np.cos(2), np.sin(2), -np.sin(0.02), np.cos(0.02)]]
    # x's entries are 0 and 1: each output is one sine or cosine, with its angle's error
    assert_ulp_close(rope(x), expected, magnitude=sinusoid_error_scale(3, 4, 1e4), n=1)
    # Position 0 is no rotation at all; a position given as a float equals the same integer.
    np.testing.assert_array_equal(rope(x, [0, 1, 2]), rope(x))
    np.testing.assert_array_equal(rope(x, np.array([0.0, 1.0, 2.0])), rope(x))


@given(st.integers(0, 2**32 - 1), st.lists(st.integers(-3000, 3000), min_size=5, max_size=5),
       st.sampled_from([2, 8, 64]))
def test_rope_score_depends_only_on_the_distance(seed, shifts, d):
    """q at position m and k at position n: q'.k' is the same for (m + s, n + s), every s."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(1, d)), rng.normal(size=(1, d))
    m, n = rng.integers(0, 500, size=2)

    def scored(a, b):    # q at position a, k at position b: the score and its error (rule 2)
        qr, kr = rope(q, [a]), rope(k, [b])
        return (qr @ kr.T).item(), score_error(qr, kr, rope_error(q, [a]),
                                               rope_error(k, [b])).item()

    score, error = scored(m, n)
    for s in shifts:
        shifted, shifted_error = scored(m + s, n + s)
        assert_within(shifted, score, error + shifted_error)
    # and it is the score of q rotated alone by the difference: R_m q . R_n k = R_(m-n) q . k
    alone, alone_error = scored(m - n, 0)
    assert_within((rope(q, [m - n]) @ k.T).item(), score, error + alone_error)


def test_rope_scores_of_one_repeated_vector_form_a_toeplitz_matrix():
    # The same query and key at every position: the scores depend on i - j only.
    rng = np.random.default_rng(3)
    n, d = 12, 16
    q = np.repeat(rng.normal(size=(1, d)), n, axis=0)
    k = np.repeat(rng.normal(size=(1, d)), n, axis=0)
    scores = rope(q) @ rope(k).T                                  # (n, n)
    error = score_error(rope(q), rope(k), rope_error(q), rope_error(k))     # rule 2
    for offset in range(-n + 1, n):
        diagonal, bound = np.diagonal(scores, offset), np.diagonal(error, offset)
        assert_within(diagonal, diagonal[0], bound + bound[0])
    assert np.ptp(scores) > 1  # but not all the same: the distance does matter


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_rope_keeps_the_dtype_and_the_layout_does_not_matter(dtype):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 3, 7, 8))
    expected = rope(x)                                            # float64
    for layout in (x.astype(dtype), np.asfortranarray(x.astype(dtype)),
                   x.astype(dtype).swapaxes(0, 1).copy().swapaxes(0, 1),
                   np.repeat(x.astype(dtype), 2, axis=-1)[..., ::2]):  # strided last axis
        out = rope(layout)
        assert out.dtype == dtype and out.shape == x.shape
        assert_close(out, expected, dtype)


def test_rope_equals_roformer_in_transformers():
    for name in ("q", "k"):
        x, golden = GOLDEN[f"roformer/{name}"], GOLDEN[f"roformer/{name}_rotated"]
        # transformers' sines and cosines are rounded to float32 (half an ulp of 1 each), then
        # multiply the pair in float64: half an ulp (float32) of |x1| + |x2|, doubled for
        # float64's own error (measured: a quarter of an ulp)
        assert_within(rope(x), golden, ulps(pair_sums(x), n=1, dtype=np.float32))


@pytest.mark.parametrize("base", [10000, 500000])
def test_rope_equals_llamas_rotate_half_through_the_permutation(base):
    order = halves_order(GOLDEN[f"llama{base}/q"].shape[-1])
    undo = np.argsort(order)
    positions = GOLDEN[f"llama{base}/positions"]
    for name in ("q", "k"):
        x, golden = GOLDEN[f"llama{base}/{name}"], GOLDEN[f"llama{base}/{name}_rotated"]
        # x is in Llama's layout; x[..., undo] is the same vector in interleaved pairs.
        out = rope(x[..., undo], positions, base=base)[..., order]
        assert out.dtype == np.float32
        # Llama computes its angles (position x frequency) in float32: at positions near 1,000
        # they are up to ~1e-4 radian off; mha's are computed in float64. Rule 1 in float32:
        # an angle carries its exponent's rounding (ln(base) / 2 ulp), the power's, the
        # reciprocal's and the product's (2 ulp); sin, cos, the products, their sum and the
        # cast add about 6 ulp of 1; each times the pair's |x1| + |x2| (measured: within
        # 1 ulp of (angle + 1) times it).
        n, d = x.shape[-2:]
        angles = np.abs(positions)[:, None] / base ** (2 * (np.arange(d) // 2) / d)
        error = ulps(pair_sums(x[..., undo]) * ((np.log(base) / 2 + 2) * angles + 6),
                     n=1, dtype=np.float32)[..., order]
        assert_within(out, golden, error)
        assert_within(rope_llama(x.astype(np.float64), positions, base), golden, error)


@given(st.integers(1, 16), st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_halves_order_maps_interleaved_pairs_to_llamas_halves(half, n, seed):
    d = 2 * half
    order = halves_order(d)
    assert sorted(order) == list(range(d))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    positions = rng.integers(0, 4096, size=n)
    assert_within(rope_llama(x[..., order], positions), rope(x, positions)[..., order],
                  rope_error(x, positions)[..., order])
    np.testing.assert_array_equal(x[..., order][..., np.argsort(order)], x)


def test_rope_on_empty_inputs():
    for shape in [(0, 4), (3, 0, 8), (2, 5, 0)]:
        out = rope(np.zeros(shape, np.float32))
        assert out.shape == shape and out.dtype == np.float32


def test_rope_in_threads_gives_the_same_answer():
    rng = np.random.default_rng(5)
    xs = [rng.normal(size=(4, 64, 32)) for _ in range(8)]
    expected = [rope(x) for x in xs]
    results = [None] * len(xs)

    def run(i):
        results[i] = rope(xs[i])

    in_threads(run, len(xs))
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((np.zeros((3, 5)),), {}, ValueError, r"last dimension of x must be even .*\(3, 5\)"),
    ((np.zeros(4),), {}, ValueError, r"x must have shape \(\.\.\., n, d\).*1-D array of shape \(4,\)"),
    ((np.float64(1.0),), {}, ValueError, r"x must have shape \(\.\.\., n, d\).*0-D"),
    ((np.zeros((3, 4)), [0, 1]), {}, ValueError,
     r"positions must have shape \(n,\) = \(3,\), one per token of x, got shape \(2,\)"),
    ((np.zeros((3, 4)), np.zeros((1, 3))), {}, ValueError, r"positions must have shape \(n,\)"),
    ((np.zeros((3, 4)), 2), {}, ValueError, r"positions must have shape \(n,\).*got shape \(\)"),
    ((np.zeros((3, 4)), [0.0, np.nan, 2.0]), {}, ValueError, r"positions must be finite"),
    ((np.zeros((3, 4)), [0.0, np.inf, 2.0]), {}, ValueError, r"positions must be finite"),
    ((np.zeros((3, 4)), [True, False, True]), {}, TypeError,
     r"positions must hold integers or floats, got dtype bool"),
    ((np.zeros((3, 4)), ["a", "b", "c"]), {}, TypeError, r"positions must hold integers or floats"),
    ((np.zeros((3, 4)), [1j, 2j, 3j]), {}, TypeError, r"positions must hold .*complex128"),
    ((np.zeros((3, 4)),), {"base": 0}, ValueError, r"base must be a finite number >= 1"),
    ((np.zeros((3, 4)),), {"base": "10000"}, TypeError, r"base must be a real number"),
    ((np.full((2, 2), 6e4, np.float16),), {}, ValueError,
     r"rope\(x\) overflowed float16 \(x \(2, 2\)\).*compute in float64"),
    *[((bad,), {}, error, message) for bad, error, message in bad_arrays("x", (3, 4))],
])
def test_rope_bad_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        rope(*args, **kwargs)


@pytest.mark.parametrize("d, error, message", [
    (5, ValueError, r"d=5 must be even"), (0, ValueError, r"d must be >= 1"),
    (2.0, TypeError, r"d must be an integer")])
def test_halves_order_bad_input(d, error, message):
    with pytest.raises(error, match=message):
        halves_order(d)


# ---- MultiHeadAttention(rope=True) --------------------------------------------------------------

@st.composite
def rope_layers_and_inputs(draw):
    """A layer with rope=True (d_k even, d_v free), x (n, d) or (b, n, d), a mask."""
    h, d_model = draw(st.integers(1, 4)), draw(st.integers(1, 12))
    d_k, d_v = 2 * draw(st.integers(1, 3)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    layer = MultiHeadAttention(d_model, h, d_k, d_v, seed=seed, rope=True)
    rng = np.random.default_rng(seed + 1)
    dtype = draw(DTYPES)
    lead = (draw(st.integers(1, 3)),) if draw(st.booleans()) else ()
    n = draw(st.integers(1, 7))
    x = rng.normal(size=lead + (n, d_model)).astype(dtype)
    mask = make_mask(draw(st.sampled_from(MASK_KINDS)), rng, lead, n, n)
    return layer, x, mask


@given(rope_layers_and_inputs())
def test_rope_layer_equals_reference(case):
    layer, x, mask = case
    out, w = layer(x, mask, return_weights=True)
    ref_out, ref_w = multi_head_attention_reference(x, layer.W_Q, layer.W_K, layer.W_V,
                                                    layer.W_O, mask, rope=True)
    assert out.dtype == x.dtype and w.dtype == x.dtype
    assert_close(w, ref_w, x.dtype)
    assert_close(out, ref_out, x.dtype)


def test_rope_draws_the_same_weights_and_is_off_by_default():
    plain, rotary = MultiHeadAttention(16, 4, seed=7), MultiHeadAttention(16, 4, seed=7, rope=True)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(rotary, name))
    assert plain.rope is False and rotary.rope is True
    assert repr(rotary) == "MultiHeadAttention(d_model=16, h=4, d_k=4, d_v=4, rope=True)"
    assert repr(plain) == "MultiHeadAttention(d_model=16, h=4, d_k=4, d_v=4)"
    x = np.random.default_rng(8).normal(size=(6, 16))
    assert not np.allclose(plain(x), rotary(x))
    # With one token there is only position 0: no rotation, the same output.
    np.testing.assert_array_equal(plain(x[:1]), rotary(x[:1]))


def test_rope_layer_breaks_permutation_equivariance_and_its_trace_shows_the_rotation():
    layer = MultiHeadAttention(16, 4, seed=0, rope=True)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(7, 16))
    perm = rng.permutation(7)
    assert np.abs(layer(x[perm]) - layer(x)[perm]).max() > 1e-2
    plain = copy.copy(layer)
    plain.rope = False
    # a whole float64 layer (projections over 16 and 4 terms, a softmax over 7 keys, the mix)
    # with its rows and keys in another order: each step within gamma(16) ~ 2e-15 of outputs
    # near 1; 1e-12 is that chain's bound times a wide factor (measured: 5e-16)
    np.testing.assert_allclose(plain(x[perm]), plain(x)[perm], rtol=0, atol=1e-12)
    stages, unrotated = layer.trace(x), plain.trace(x)
    for name in ("q", "k"):   # each output mixes a pair: (|x1| + |x2|) times its angle's error
        pairs = 2 * np.abs(unrotated[name]).max()
        assert_ulp_close(stages[name], rope(unrotated[name]), n=1,
                         magnitude=pairs * sinusoid_error_scale(7, 4, 1e4))
    np.testing.assert_array_equal(stages["v"], unrotated["v"])
    # scores: a product over d_k = 4 terms and a scale, in whichever order, on each side
    q, k = stages["q"], stages["k"].swapaxes(-1, -2)
    assert_within(stages["scores"], q @ k / np.sqrt(4),
                  2 * gamma(4 + 1) * (np.abs(q) @ np.abs(k)) / np.sqrt(4))


def test_rope_layer_scores_of_a_repeated_token_depend_on_the_distance_only():
    layer = MultiHeadAttention(16, 2, seed=2, rope=True)
    x = np.repeat(np.random.default_rng(3).normal(size=(1, 16)), 9, axis=0)
    stages = layer.trace(x, mask=causal_mask(9))
    plain = copy.copy(layer)
    plain.rope = False
    unrotated = plain.trace(x)
    for i, head in enumerate(stages["scores"]):                  # (n, n) for each head
        # rule 2: q and k rows within their projection's bound (over 16 terms) of the one
        # exact row, rotated (the pair's sum), plus the rotation's own error
        q, k = unrotated["q"][i], unrotated["k"][i]
        q_error = pair_sums(matmul_bound(x, layer.W_Q[:, i, :])) + rope_error(q)
        k_error = pair_sums(matmul_bound(x, layer.W_K[:, i, :])) + rope_error(k)
        error = score_error(stages["q"][i], stages["k"][i], q_error, k_error) / np.sqrt(8)
        for offset in range(-8, 9):
            diagonal, bound = np.diagonal(head, offset), np.diagonal(error, offset)
            assert_within(diagonal, diagonal[0], bound + bound[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rope_layer_keeps_the_dtype(dtype):
    layer = MultiHeadAttention(8, 2, seed=0, rope=True)
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(dtype)
    out, w = layer(x, causal_mask(5), return_weights=True)
    assert out.dtype == dtype and w.dtype == dtype
    assert all(a.dtype == dtype for a in layer.trace(x).values())


def test_rope_layer_refuses_cross_attention_and_odd_d_k():
    layer = MultiHeadAttention(8, 2, seed=0, rope=True)
    x = np.zeros((3, 8))
    for context in (np.zeros((4, 8)), x):
        with pytest.raises(ValueError, match=r"context= \(cross-attention\) is not supported "
                                             r"with rope=True"):
            layer(x, context=context)
    with pytest.raises(ValueError, match=r"rope=True needs an even d_k .*got d_k=3"):
        MultiHeadAttention(9, 3, rope=True)
    with pytest.raises(ValueError, match=r"rope=True needs an even d_k .*got d_k=5"):
        MultiHeadAttention(8, 2, d_k=5, rope=True)


@pytest.mark.parametrize("value, message", BAD_FLAGS)
def test_rope_flag_must_be_a_bool(value, message):
    with pytest.raises(TypeError, match="rope " + message):
        MultiHeadAttention(8, 2, rope=value)


def test_rope_is_keyword_only():
    with pytest.raises(TypeError):
        MultiHeadAttention(8, 2, None, None, 0, True)


# ---- a base below 1 (found by outside tests) ----------------------------------------------------

@pytest.mark.parametrize("base, shown", [
    (5e-324, "5e-324"), (1e-310, "1e-310"), (1e-10, "1e-10"), (0.5, "0.5"),
    (np.nextafter(1.0, 0.0), "0.9999999999999999"), (np.float32(0.5), "0.5"), (0, "0"),
    (-1.0, "-1.0"), (np.int64(-3), "-3"), (np.inf, "inf"), (-np.inf, "-inf"), (np.nan, "nan")])
def test_a_base_below_1_or_not_finite_is_refused_by_name_never_nan(base, shown):
    """base=5e-324 gave NaN with warnings (the angles p / base^(2i/d) overflowed); any base
    below 1 makes the later pairs turn faster than pair 0, more than a radian a position."""
    message = rf"^base must be a finite number >= 1 \(pair i turns .*\), got {shown}$"
    for call in (lambda: sinusoidal_positions(4, 64, base=base),
                 lambda: rope(np.ones((4, 64)), base=base),
                 lambda: rope(np.ones((2, 64)), [0.0, 1e300], base=base)):
        with no_warnings(), pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("base", [1, 1.0, np.nextafter(1.0, 2.0), 2, 1e300, np.finfo(float).max])
def test_any_finite_base_from_1_up_gives_finite_angles(base):
    """From 1 up no pair turns faster than a radian a position: no angle exceeds its position,
    and the table and the rotation stay finite even at the largest positions."""
    with no_warnings():
        table = sinusoidal_positions(50, 64, base=base)
        far = rope(np.ones((2, 64)), [0.0, np.finfo(float).max], base=base)
    assert np.isfinite(table).all() and np.isfinite(far).all()
    # rule 2: each of the 64 entries is cos - sin or sin + cos of one angle, within 9 ulp of 1
    # whatever the angle's error (a rotation keeps the length); the 64 squares are within
    # 2 * sqrt(2) * 9 ulp each, their sum adds gamma(64) of 64, and the square root halves the
    # relative error of 8 ** 2 and adds half an ulp of 8
    squares_error = 64 * 2 * np.sqrt(2) * ulps(1, n=9) + gamma(64) * 64
    assert_within(np.linalg.norm(far, axis=-1), 8.0, squares_error / (2 * 8) + ulps(8, n=0.5))
    if base == 1:  # every pair turns by one radian a position: d/2 copies of pair 0
        np.testing.assert_array_equal(table, np.tile(table[:, :2], 32))
