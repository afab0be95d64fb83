"""Write the golden reference values in this folder from PyTorch. Run once; CI never needs torch.

    python3 -m venv /tmp/refenv && /tmp/refenv/bin/pip install torch==2.13.0 numpy
    /tmp/refenv/bin/python tests/golden/make_golden.py

It deliberately does not import ``mha``: inputs and weights are drawn here with NumPy, the
outputs come from PyTorch alone, and ``tests/test_golden.py`` checks ``mha`` against them.

Files written:

- ``torch_sdpa.npz``: ``torch.nn.functional.scaled_dot_product_attention`` outputs, and the
  attention weights computed with ``torch.softmax``, for several shapes, masks and dtypes.
- ``torch_mha.npz``: ``torch.nn.MultiheadAttention`` (no biases) with our weights copied in.

PyTorch's conventions differ from ``mha``'s, and this script does the translation:
``scaled_dot_product_attention``'s boolean ``attn_mask`` is True = *attend* (as in ``mha``), but
``MultiheadAttention``'s boolean ``attn_mask`` and ``key_padding_mask`` are True = *ignore*.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
torch.set_num_threads(1)


def sdpa_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    cases = {}

    def add(name, q, k, v, mask=None, scale=None):
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        tmask = None if mask is None else torch.from_numpy(mask)
        out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, scale=scale)
        s = (1.0 / np.sqrt(q.shape[-1])) if scale is None else scale
        scores = tq @ tk.transpose(-1, -2) * s
        if tmask is not None:
            scores = (scores.masked_fill(~tmask, float("-inf")) if tmask.dtype == torch.bool
                      else scores + tmask)
        weights = torch.softmax(scores, dim=-1)
        for key, value in (("q", q), ("k", k), ("v", v), ("output", out.numpy()),
                           ("weights", weights.numpy())):
            cases[f"{name}/{key}"] = value
        if mask is not None:
            cases[f"{name}/mask"] = mask
        if scale is not None:
            cases[f"{name}/scale"] = np.array(scale)

    f64 = np.float64
    # Different n_q and n_k, d_k != d_v, batch and head axes.
    add("plain", rng.normal(size=(2, 3, 5, 8)), rng.normal(size=(2, 3, 7, 8)),
        rng.normal(size=(2, 3, 7, 6)))
    # Broadcast leading dimensions: one key/value set shared by every head.
    add("broadcast", rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(1, 1, 6, 8)),
        rng.normal(size=(1, 1, 6, 5)))
    # Boolean causal mask (True = attend).
    n = 6
    causal = np.tril(np.ones((n, n), dtype=bool))
    add("causal", rng.normal(size=(2, 4, n, 8)), rng.normal(size=(2, 4, n, 8)),
        rng.normal(size=(2, 4, n, 8)), mask=causal)
    # Additive float mask of 0 / -inf, every row keeping at least one key.
    keep = rng.random((5, 7)) < 0.6
    keep[np.arange(5), rng.integers(0, 7, size=5)] = True
    additive = np.where(keep, 0.0, -np.inf).astype(f64)
    add("additive", rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 7, 4)),
        rng.normal(size=(3, 7, 3)), mask=additive)
    # A custom scale.
    add("scale", rng.normal(size=(4, 8)), rng.normal(size=(5, 8)), rng.normal(size=(5, 8)),
        scale=0.3)
    # float32 end to end.
    add("float32", *(rng.normal(size=(2, 6, 16)).astype(np.float32) for _ in range(3)),
        mask=np.tril(np.ones((6, 6), dtype=bool)))
    # A query that may attend to nothing: PyTorch's math gives NaN in that row; mha gives zeros.
    fully = np.tril(np.ones((4, 4), dtype=bool))
    fully[2] = False
    add("fully_masked", rng.normal(size=(4, 8)), rng.normal(size=(4, 8)),
        rng.normal(size=(4, 8)), mask=fully)
    return cases


def mha_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    cases = {}
    d_model, h = 16, 4
    d_k = d_model // h

    def run(name, x, context=None, causal=False, lengths=None, dtype=np.float64):
        W_Q = rng.normal(0, 0.3, size=(d_model, h, d_k))
        W_K = rng.normal(0, 0.3, size=(d_model, h, d_k))
        W_V = rng.normal(0, 0.3, size=(d_model, h, d_k))
        W_O = rng.normal(0, 0.3, size=(h * d_k, d_model))
        layer = torch.nn.MultiheadAttention(d_model, h, bias=False, batch_first=True,
                                            dtype=torch.float64 if dtype == np.float64
                                            else torch.float32)
        with torch.no_grad():
            # torch computes x @ in_proj_weight.T; our fused (d_model, h*d_k) matrix is its .T
            layer.in_proj_weight.copy_(torch.from_numpy(np.concatenate(
                [W.reshape(d_model, h * d_k).T for W in (W_Q, W_K, W_V)]).astype(dtype)))
            layer.out_proj.weight.copy_(torch.from_numpy(W_O.T.astype(dtype)))
        ctx = x if context is None else context
        n, m = x.shape[1], ctx.shape[1]
        attn_mask = (torch.from_numpy(~np.tril(np.ones((n, m), dtype=bool))) if causal
                     else None)
        key_padding_mask = (torch.from_numpy(np.arange(m)[None, :] >= np.asarray(lengths)[:, None])
                            if lengths is not None else None)
        with torch.no_grad():
            out, weights = layer(torch.from_numpy(x), torch.from_numpy(ctx),
                                 torch.from_numpy(ctx), attn_mask=attn_mask,
                                 key_padding_mask=key_padding_mask, need_weights=True,
                                 average_attn_weights=False)
        for key, value in (("x", x), ("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V), ("W_O", W_O),
                           ("output", out.numpy()), ("weights", weights.numpy())):
            cases[f"{name}/{key}"] = value
        if context is not None:
            cases[f"{name}/context"] = context
        if lengths is not None:
            cases[f"{name}/lengths"] = np.asarray(lengths)
        cases[f"{name}/causal"] = np.array(causal)

    run("self", rng.normal(size=(2, 5, d_model)))
    run("causal", rng.normal(size=(2, 6, d_model)), causal=True)
    run("padding", rng.normal(size=(3, 6, d_model)), lengths=[6, 4, 1])
    run("cross", rng.normal(size=(2, 3, d_model)), context=rng.normal(size=(2, 7, d_model)))
    run("float32", rng.normal(size=(2, 5, d_model)).astype(np.float32), causal=True,
        dtype=np.float32)
    return cases


def main() -> None:
    rng = np.random.default_rng(20261129)
    np.savez_compressed(HERE / "torch_sdpa.npz", torch_version=np.array(torch.__version__),
                        **sdpa_cases(rng))
    np.savez_compressed(HERE / "torch_mha.npz", torch_version=np.array(torch.__version__),
                        **mha_cases(rng))
    print("wrote", *(p.name for p in sorted(HERE.glob("*.npz"))), "with torch", torch.__version__)


if __name__ == "__main__":
    main()
