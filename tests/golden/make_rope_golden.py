"""Write ``rope.npz``: rotary position embeddings computed by Hugging Face ``transformers``.
Run once; CI never needs torch.

    python3 -m venv /tmp/refenv && /tmp/refenv/bin/pip install torch==2.13.0 numpy transformers
    /tmp/refenv/bin/python tests/golden/make_rope_golden.py

(Last run with torch 2.13.0 and transformers 5.24.0; the versions are recorded in the file.) It
deliberately does not import ``mha``: the inputs are drawn here with NumPy and the outputs come
from two outside implementations, one for each way of pairing the dimensions.

- RoFormer (Su et al.'s own model): ``RoFormerSinusoidalPositionalEmbedding`` builds the table
  of sines and cosines (sines in the first half of each row, cosines in the second), and
  ``RoFormerSelfAttention.apply_rotary_position_embeddings`` rotates *interleaved* pairs
  ``(2i, 2i+1)``, as ``mha.rope`` does. Keys ``roformer/...``: ``table`` ``(n, d)`` (float32, as
  transformers stores it), ``q``, ``k`` ``(b, h, n, d)`` float64 and ``q_rotated``,
  ``k_rotated``.
- Llama: ``LlamaRotaryEmbedding`` (float32 angles) and ``apply_rotary_pos_emb`` with
  ``rotate_half``, which pairs dimension ``i`` with ``i + d/2``. Keys ``llama{base}/...`` for
  ``base`` 10000 and 500000 (Llama 3's ``rope_theta``): ``positions`` ``(n,)`` (starting past
  0), ``q``, ``k`` ``(b, h, n, d)`` float32 in Llama's layout and ``q_rotated``, ``k_rotated``.
  ``tests/test_positions.py`` maps Llama's layout to ``mha``'s with ``halves_order``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.roformer.modeling_roformer import (RoFormerSelfAttention,
                                                            RoFormerSinusoidalPositionalEmbedding)

HERE = Path(__file__).resolve().parent
torch.set_num_threads(1)


def roformer(rng: np.random.Generator) -> dict[str, np.ndarray]:
    b, h, n, d = 2, 3, 40, 16
    embedding = RoFormerSinusoidalPositionalEmbedding(n, d)
    table = embedding.create_weight()                                  # (n, d) float32
    q, k = rng.normal(size=(b, h, n, d)), rng.normal(size=(b, h, n, d))
    # RoFormerModel slices the table to (1, 1, n, d) and broadcasts it over batch and heads.
    q_rot, k_rot = RoFormerSelfAttention.apply_rotary_position_embeddings(
        table[None, None], torch.from_numpy(q), torch.from_numpy(k))
    return {"roformer/table": table.numpy(), "roformer/q": q, "roformer/k": k,
            "roformer/q_rotated": q_rot.numpy(), "roformer/k_rotated": k_rot.numpy()}


def llama(rng: np.random.Generator, base: float) -> dict[str, np.ndarray]:
    b, h, n, d = 2, 4, 24, 32
    config = LlamaConfig(hidden_size=h * d, num_attention_heads=h, head_dim=d,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    rotary = LlamaRotaryEmbedding(config)
    positions = np.arange(n) + 1000                          # a later stretch of a long text
    q = rng.normal(size=(b, h, n, d)).astype(np.float32)
    k = rng.normal(size=(b, h, n, d)).astype(np.float32)
    tq, tk = torch.from_numpy(q), torch.from_numpy(k)
    cos, sin = rotary(tq, torch.from_numpy(positions)[None].expand(b, n))   # (b, n, d)
    q_rot, k_rot = apply_rotary_pos_emb(tq, tk, cos, sin)
    name = f"llama{int(base)}"
    return {f"{name}/positions": positions, f"{name}/q": q, f"{name}/k": k,
            f"{name}/q_rotated": q_rot.numpy(), f"{name}/k_rotated": k_rot.numpy()}


def main() -> None:
    rng = np.random.default_rng(16)
    with torch.no_grad():
        cases = {**roformer(rng), **llama(rng, 10000.0), **llama(rng, 500000.0)}
    cases["versions"] = np.array([f"torch {torch.__version__}",
                                  f"transformers {transformers.__version__}"])
    np.savez_compressed(HERE / "rope.npz", **cases)
    print(f"wrote {HERE / 'rope.npz'} ({len(cases)} arrays)")


if __name__ == "__main__":
    main()
