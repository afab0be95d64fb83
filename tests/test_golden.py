"""mha against golden values from PyTorch (made by tests/golden/make_golden.py; no torch needed).

Tolerances: float64 cases agree to 1e-12 (both sides compute the same sums in a different order);
float32 cases to 1e-5 relative, the precision of float32 after a few matrix products.
"""

from pathlib import Path

import numpy as np
import pytest

from mha import MultiHeadAttention, causal_mask, padding_mask, scaled_dot_product_attention

GOLDEN = Path(__file__).parent / "golden"
SDPA = np.load(GOLDEN / "torch_sdpa.npz")
MHA = np.load(GOLDEN / "torch_mha.npz")
# Rule 2 of tests/tolerance.py: ours and torch's results are each within gamma(k) times the
# sum of the terms' sizes of the exact ones. The golden inputs are N(0, 1) draws, products over
# k <= 16 terms whose sizes sum to ~10: gamma(16) * 10 = 1.8e-14 in float64 (1e-12 leaves
# room for the softmax and the second product); in float32 the worst case is 9.5e-6, the
# typical error (sqrt(k) in place of k) 2.4e-6, within 1e-5 relative to results of size ~1-2.
TOL = {np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12},
       np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-6}}


def cases(golden):
    return sorted({key.split("/")[0] for key in golden.files if "/" in key})


def test_golden_files_hold_the_expected_cases():
    assert cases(SDPA) == ["additive", "broadcast", "causal", "float32", "fully_masked", "plain",
                           "scale"]
    assert cases(MHA) == ["causal", "cross", "float32", "padding", "self"]
    assert str(SDPA["torch_version"]).startswith("2.")


@pytest.mark.parametrize("name", [c for c in cases(SDPA) if c != "fully_masked"])
def test_scaled_dot_product_attention_matches_torch(name):
    get = lambda key: SDPA[f"{name}/{key}"] if f"{name}/{key}" in SDPA.files else None  # noqa: E731
    scale = get("scale")
    out, w = scaled_dot_product_attention(get("q"), get("k"), get("v"), get("mask"),
                                          scale=None if scale is None else float(scale))
    assert out.dtype == get("output").dtype
    np.testing.assert_allclose(out, get("output"), **TOL[out.dtype])
    np.testing.assert_allclose(np.broadcast_to(w, get("weights").shape), get("weights"),
                               **TOL[w.dtype])


def test_fully_masked_query_matches_torch_sdpa_where_plain_softmax_gives_nan():
    g = lambda key: SDPA[f"fully_masked/{key}"]  # noqa: E731
    out, w = scaled_dot_product_attention(g("q"), g("k"), g("v"), g("mask"))
    # torch's scaled_dot_product_attention also returns zeros for the query that sees nothing...
    np.testing.assert_array_equal(g("output")[2], np.zeros(8))
    np.testing.assert_allclose(out, g("output"), **TOL[out.dtype])
    # ...while a plain torch.softmax over its scores gives NaN: the trap mha.softmax avoids.
    assert np.isnan(g("weights")[2]).all()
    np.testing.assert_array_equal(w[2], np.zeros(4))
    keep = [0, 1, 3]
    np.testing.assert_allclose(w[keep], g("weights")[keep], **TOL[w.dtype])


@pytest.mark.parametrize("name", cases(MHA))
def test_multi_head_attention_matches_torch(name):
    g = lambda key: MHA[f"{name}/{key}"]  # noqa: E731
    x = g("x")
    layer = MultiHeadAttention(x.shape[-1], g("W_Q").shape[1], seed=0)
    layer.W_Q, layer.W_K, layer.W_V, layer.W_O = g("W_Q"), g("W_K"), g("W_V"), g("W_O")
    context = g("context") if f"{name}/context" in MHA.files else None
    m = x.shape[1] if context is None else context.shape[1]
    mask = None
    if bool(g("causal")):
        mask = causal_mask(x.shape[1])
    if f"{name}/lengths" in MHA.files:
        mask = padding_mask(g("lengths"), m)
    out, w = layer(x, mask, context=context, return_weights=True)
    assert out.dtype == x.dtype
    np.testing.assert_allclose(out, g("output"), **TOL[out.dtype])
    np.testing.assert_allclose(w, g("weights"), **TOL[w.dtype])
