"""Write ``gqa.npz``: grouped-query and multi-query attention (and their gradients) computed by
PyTorch, and full causal forwards that cached decoding must reproduce. Run once; CI never needs
torch.

    python3 -m venv /tmp/refenv && /tmp/refenv/bin/pip install torch==2.13.0 numpy
    /tmp/refenv/bin/python tests/golden/make_gqa_golden.py

It deliberately does not import ``mha``: inputs and weights are drawn here with NumPy, and
``tests/test_kv_cache.py`` checks ``mha.MultiHeadAttention(..., kv_heads=)`` (with and without
``mha.KVCache``) against the arrays stored here. The layer is written in torch with ``mha``'s
weight layout (``W_Q`` ``(d_model, h, d_k)``, ``W_K`` ``(d_model, kv_heads, d_k)``, ``W_V``
``(d_model, kv_heads, d_v)``, ``W_O`` ``(h * d_v, d_model)``, no biases). Its attention is
computed twice, and the two must agree here before anything is written:

- ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)`` on the
  ``kv_heads`` key/value heads (PyTorch's grouping: query head ``i`` reads key/value head
  ``i // (h // kv_heads)``);
- by hand: keys and values ``repeat_interleave``-d to ``h`` heads, then
  ``softmax(q k^T / sqrt(d_k))`` (masked with ``-inf``) times ``v``; this one also gives the
  attention weights.

Each case ``{case}/...`` holds ``x``, optional ``context``, optional ``mask`` (boolean, True =
may attend, ``(n, m)`` or ``(b, n, m)``, the same for every head), ``rope`` (RoFormer's
interleaved pairs, base 10000, positions 0 .. n-1), ``kv_heads``, the four weights, ``output``
(from SDPA with ``enable_gqa``), ``output_repeat`` (by hand), ``weights`` ``(..., h, n, m)``, and,
for float64 cases, the gradients of ``L = sum(output * d_out)`` by autograd: ``d_out``, ``dx``,
``dcontext`` (cross-attention only), ``dW_Q``, ``dW_K``, ``dW_V``, ``dW_O``.

Cases whose name starts with ``decode_`` are causal self-attention over a whole sequence: what
feeding the tokens one at a time (or in chunks) through a ``KVCache`` must give.

(Last run with torch 2.13.0; the version is recorded in the file.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from make_backward_golden import rope  # the same RoFormer rotation (this folder is on the path)

HERE = Path(__file__).resolve().parent
torch.set_num_threads(1)


def project(tx, tc, tw, use_rope):
    """(..., n, d_model) x (d_model, heads, d) -> (..., heads, n, d) for queries, keys, values."""
    q = torch.einsum("...nd,dhk->...hnk", tx, tw["W_Q"])   # (..., h, n, d_k)
    k = torch.einsum("...md,dhk->...hmk", tc, tw["W_K"])   # (..., kv_heads, m, d_k)
    v = torch.einsum("...md,dhv->...hmv", tc, tw["W_V"])   # (..., kv_heads, m, d_v)
    if use_rope:
        q, k = rope(q), rope(k)
    return q, k, v


def by_hand(q, k, v, mask):
    """Keys and values repeated to every query head, then softmax(q k^T / sqrt(d_k)) v."""
    group = q.shape[-3] // k.shape[-3]
    k = k.repeat_interleave(group, dim=-3)                  # (..., h, m, d_k)
    v = v.repeat_interleave(group, dim=-3)                  # (..., h, m, d_v)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5    # (..., h, n, m)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def layer_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    cases = {}

    def run(name, x, h, kv_heads, context=None, mask=None, use_rope=False, d_v=None):
        d_model = x.shape[-1]
        d_k = d_model // h
        d_v = d_v or d_k
        dtype = x.dtype
        weights = {"W_Q": rng.normal(0, 0.3, size=(d_model, h, d_k)),
                   "W_K": rng.normal(0, 0.3, size=(d_model, kv_heads, d_k)),
                   "W_V": rng.normal(0, 0.3, size=(d_model, kv_heads, d_v)),
                   "W_O": rng.normal(0, 0.3, size=(h * d_v, d_model))}
        weights = {key: w.astype(dtype) for key, w in weights.items()}
        grad = dtype == np.float64
        tx = torch.from_numpy(x).requires_grad_(grad)
        tc = tx if context is None else torch.from_numpy(context).requires_grad_(grad)
        tw = {key: torch.from_numpy(w).requires_grad_(grad) for key, w in weights.items()}
        tmask = None
        if mask is not None:
            tmask = torch.from_numpy(mask)
            tmask = tmask[:, None] if tmask.ndim == 3 else tmask  # (b, n, m) -> (b, 1, n, m)
        q, k, v = project(tx, tc, tw, use_rope)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=tmask,
                                               enable_gqa=True)    # (..., h, n, d_v)
        concat = heads.transpose(-3, -2).flatten(-2)                # (..., n, h*d_v)
        out = concat @ tw["W_O"]                                    # (..., n, d_model)
        with torch.no_grad():
            heads_r, attn = by_hand(q, k, v, tmask)
            out_r = heads_r.transpose(-3, -2).flatten(-2) @ tw["W_O"]
        tol = 1e-12 if grad else 1e-5
        assert torch.allclose(out, out_r, rtol=tol, atol=tol), name
        stored = {"x": x, **weights, "output": out.detach().numpy(),
                  "output_repeat": out_r.numpy(), "weights": attn.numpy(),
                  "rope": np.array(use_rope), "kv_heads": np.array(kv_heads)}
        if grad:
            d_out = rng.normal(size=x.shape)
            (out * torch.from_numpy(d_out)).sum().backward()
            stored |= {"d_out": d_out, "dx": tx.grad.numpy(),
                       **{f"d{key}": t.grad.numpy() for key, t in tw.items()}}
            if context is not None:
                stored["dcontext"] = tc.grad.numpy()
        if context is not None:
            stored["context"] = context
        if mask is not None:
            stored["mask"] = mask
        for key, value in stored.items():
            cases[f"{name}/{key}"] = value

    d_model = 16
    causal = lambda n: np.tril(np.ones((n, n), dtype=bool))  # noqa: E731
    run("gqa_self", rng.normal(size=(5, d_model)), h=4, kv_heads=2)
    run("mqa_causal", rng.normal(size=(2, 6, d_model)), h=4, kv_heads=1, mask=causal(6))
    lengths = np.array([6, 4, 1])  # padding: keys at or past each sequence's length hidden
    run("gqa_padding", rng.normal(size=(3, 6, d_model)), h=4, kv_heads=2,
        mask=np.broadcast_to(np.arange(6) < lengths[:, None, None], (3, 6, 6)).copy())
    run("gqa_cross", rng.normal(size=(2, 3, d_model)), h=8, kv_heads=2,
        context=rng.normal(size=(2, 7, d_model)), d_v=3)
    run("mqa_rope", rng.normal(size=(2, 7, d_model)), h=4, kv_heads=1, mask=causal(7),
        use_rope=True)
    run("gqa_float32", rng.normal(size=(2, 6, d_model)).astype(np.float32), h=4, kv_heads=2,
        mask=causal(6))
    # The full causal forwards that cached decoding must reproduce.
    run("decode_gqa", rng.normal(size=(9, d_model)), h=4, kv_heads=2, mask=causal(9))
    run("decode_mqa_batch", rng.normal(size=(2, 8, d_model)), h=8, kv_heads=1, mask=causal(8))
    run("decode_gqa_rope", rng.normal(size=(2, 10, d_model)), h=4, kv_heads=2, mask=causal(10),
        use_rope=True)
    lengths = np.array([8, 5])  # left-aligned sequences padded at the end: causal and padding
    run("decode_gqa_padding", rng.normal(size=(2, 8, d_model)), h=4, kv_heads=2,
        mask=causal(8) & (np.arange(8) < lengths[:, None, None]))
    run("decode_gqa_float32", rng.normal(size=(2, 9, d_model)).astype(np.float32), h=4,
        kv_heads=2, mask=causal(9), use_rope=True)
    return cases


def main() -> None:
    rng = np.random.default_rng(20261219)
    cases = layer_cases(rng)
    np.savez_compressed(HERE / "gqa.npz", torch_version=np.array(torch.__version__), **cases)
    print(f"wrote {HERE / 'gqa.npz'} ({len(cases)} arrays) with torch {torch.__version__}")


if __name__ == "__main__":
    main()
