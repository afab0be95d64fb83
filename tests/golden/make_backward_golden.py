"""Write ``backward.npz``: gradients of attention computed by PyTorch autograd. Run once; CI
never needs torch.

    python3 -m venv /tmp/refenv && /tmp/refenv/bin/pip install torch==2.13.0 numpy
    /tmp/refenv/bin/python tests/golden/make_backward_golden.py

It deliberately does not import ``mha``: inputs, weights and output gradients are drawn here with
NumPy, every gradient comes from ``torch.autograd``, and ``tests/test_backward.py`` checks
``mha.attention_backward`` and ``mha.MultiHeadAttention.backward`` against them. Each case is
the gradient of ``L = sum(output * d_out)`` (so ``d_out`` is the gradient reaching the output).

- ``sdpa/{case}/...``: ``torch.nn.functional.scaled_dot_product_attention`` (boolean
  ``attn_mask``, True = attend, as in ``mha``). Keys ``q``, ``k``, ``v``, ``d_out``, optional
  ``mask`` and ``scale``; gradients ``dq``, ``dk``, ``dv``. Inputs with fewer leading dimensions
  are ``expand``-ed to the batch in torch, so that autograd sums their gradients over it.
- ``mha/{case}/...``: a multi-head layer written here in torch with ``mha``'s weight layout
  (``W_Q``, ``W_K`` ``(d_model, h, d_k)``, ``W_V`` ``(d_model, h, d_v)``, ``W_O``
  ``(h * d_v, d_model)``, no biases), its attention by ``scaled_dot_product_attention``. Keys
  ``x``, optional ``context``, ``mask`` (``(n, m)`` or ``(b, n, m)``, the same for every head),
  ``rope`` (RoFormer's interleaved pairs, base 10000, positions 0 .. n-1), the weights,
  ``d_out``, and the gradients ``dx``, ``dcontext`` (cross-attention only), ``dW_Q``, ``dW_K``,
  ``dW_V``, ``dW_O``.

(Last run with torch 2.13.0; the version is recorded in the file.)
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
        out_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                        () if mask is None else mask.shape[:-2])
        d_out = rng.normal(size=out_shape + (q.shape[-2], v.shape[-1])).astype(q.dtype)
        leaves = [torch.from_numpy(a).requires_grad_() for a in (q, k, v)]
        # expand: one (broadcast) input shared by the batch; autograd sums its gradient over it
        tq, tk, tv = (t.expand(out_shape + t.shape[-2:]) for t in leaves)
        tmask = None if mask is None else torch.from_numpy(mask)
        out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, scale=scale)
        (out * torch.from_numpy(d_out)).sum().backward()
        for key, value in (("q", q), ("k", k), ("v", v), ("d_out", d_out),
                           ("dq", leaves[0].grad.numpy()), ("dk", leaves[1].grad.numpy()),
                           ("dv", leaves[2].grad.numpy())):
            cases[f"sdpa/{name}/{key}"] = value
        if mask is not None:
            cases[f"sdpa/{name}/mask"] = mask
        if scale is not None:
            cases[f"sdpa/{name}/scale"] = np.array(scale)

    # Batch and head axes, n_q != n_k, d_k != d_v.
    add("plain", rng.normal(size=(2, 3, 5, 8)), rng.normal(size=(2, 3, 7, 8)),
        rng.normal(size=(2, 3, 7, 6)))
    # Causal (True = attend).
    n = 6
    add("causal", rng.normal(size=(2, 4, n, 8)), rng.normal(size=(2, 4, n, 8)),
        rng.normal(size=(2, 4, n, 8)), mask=np.tril(np.ones((n, n), dtype=bool)))
    # Padding: each sequence of the batch hides the keys at or past its length, (b, 1, 1, m).
    lengths = np.array([7, 4, 1])
    padding = (np.arange(7) < lengths[:, None])[:, None, None, :]
    add("padding", rng.normal(size=(3, 2, 5, 4)), rng.normal(size=(3, 2, 7, 4)),
        rng.normal(size=(3, 2, 7, 4)), mask=padding)
    # Broadcast: one key/value set shared by every batch entry and head; a random mask per head.
    add("broadcast", rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(1, 1, 6, 8)),
        rng.normal(size=(1, 1, 6, 5)), mask=(rng.random((3, 4, 6)) < 0.7) | np.eye(4, 6, dtype=bool))
    # A custom scale.
    add("scale", rng.normal(size=(4, 8)), rng.normal(size=(5, 8)), rng.normal(size=(5, 8)),
        scale=0.3)
    # A query that may see no key: torch gives it a zero output and zero gradients, as mha does.
    fully = np.tril(np.ones((4, 4), dtype=bool))
    fully[2] = False
    add("fully_masked", rng.normal(size=(4, 8)), rng.normal(size=(4, 8)),
        rng.normal(size=(4, 8)), mask=fully)
    # float32 end to end.
    add("float32", *(rng.normal(size=(2, 6, 16)).astype(np.float32) for _ in range(3)),
        mask=np.tril(np.ones((6, 6), dtype=bool)))
    return cases


def rope(x: torch.Tensor) -> torch.Tensor:
    """RoFormer's rotation of interleaved pairs (2i, 2i+1) by angle p * 10000^(-2i/d)."""
    n, d = x.shape[-2:]
    angles = (torch.arange(n, dtype=torch.float64)[:, None]
              * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d))   # (n, d/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def mha_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    cases = {}

    def run(name, x, context=None, mask=None, use_rope=False, d_model=16, h=4, d_v=None):
        d_k = d_model // h
        d_v = d_v or d_k
        weights = {"W_Q": rng.normal(0, 0.3, size=(d_model, h, d_k)),
                   "W_K": rng.normal(0, 0.3, size=(d_model, h, d_k)),
                   "W_V": rng.normal(0, 0.3, size=(d_model, h, d_v)),
                   "W_O": rng.normal(0, 0.3, size=(h * d_v, d_model))}
        d_out = rng.normal(size=x.shape)
        tx = torch.from_numpy(x).requires_grad_()
        tc = tx if context is None else torch.from_numpy(context).requires_grad_()
        tw = {key: torch.from_numpy(w).requires_grad_() for key, w in weights.items()}
        # (..., n, d_model) x (d_model, h, d) -> (..., h, n, d)
        q = torch.einsum("...nd,dhk->...hnk", tx, tw["W_Q"])
        k = torch.einsum("...md,dhk->...hmk", tc, tw["W_K"])
        v = torch.einsum("...md,dhv->...hmv", tc, tw["W_V"])
        if use_rope:
            q, k = rope(q), rope(k)
        tmask = None
        if mask is not None:
            tmask = torch.from_numpy(mask)
            tmask = tmask[:, None] if tmask.ndim == 3 else tmask  # (b, n, m) -> (b, 1, n, m)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=tmask)   # (..., h, n, d_v)
        concat = heads.transpose(-3, -2).flatten(-2)                        # (..., n, h*d_v)
        out = concat @ tw["W_O"]                                            # (..., n, d_model)
        (out * torch.from_numpy(d_out)).sum().backward()
        stored = {"x": x, **weights, "d_out": d_out, "output": out.detach().numpy(),
                  "dx": tx.grad.numpy(), "rope": np.array(use_rope),
                  **{f"d{key}": t.grad.numpy() for key, t in tw.items()}}
        if context is not None:
            stored |= {"context": context, "dcontext": tc.grad.numpy()}
        if mask is not None:
            stored["mask"] = mask
        for key, value in stored.items():
            cases[f"mha/{name}/{key}"] = value

    d_model = 16
    run("self", rng.normal(size=(5, d_model)))
    run("causal", rng.normal(size=(2, 6, d_model)), mask=np.tril(np.ones((6, 6), dtype=bool)))
    lengths = np.array([6, 4, 1])
    run("padding", rng.normal(size=(3, 6, d_model)),
        mask=np.broadcast_to(np.arange(6) < lengths[:, None, None], (3, 6, 6)).copy())
    run("cross", rng.normal(size=(2, 3, d_model)), context=rng.normal(size=(2, 7, d_model)),
        d_v=6)
    run("rope", rng.normal(size=(2, 7, d_model)), mask=np.tril(np.ones((7, 7), dtype=bool)),
        use_rope=True)
    return cases


def main() -> None:
    rng = np.random.default_rng(20261217)
    cases = {**sdpa_cases(rng), **mha_cases(rng)}
    np.savez_compressed(HERE / "backward.npz", torch_version=np.array(torch.__version__), **cases)
    print(f"wrote {HERE / 'backward.npz'} ({len(cases)} arrays) with torch {torch.__version__}")


if __name__ == "__main__":
    main()
