r"""A tiny trainer, readable end to end: attention heads that learn, in plain NumPy.

    python -m mha.site.training                                   # run, print a summary
    python -m mha.site.training --save mha/site/data/training.json  # the run the site shows

Every gradient is computed by hand: `mha.MultiHeadAttention.backward` for the attention layers,
and the few lines below for the embeddings, the readout and the cross-entropy. Adam updates the
weights. Everything is float64 (the gradient check in the tests needs it, and the models are
tiny) and seeded: the same seed gives the same run, bit for bit, on one machine.

The model (`Model`)
-------------------
``x = E[tokens] + P``: a token embedding ``E`` ``(V, d_model)`` plus a learned absolute
position embedding ``P`` ``(n, d_model)``; then one or two attention layers with a causal mask
and a residual connection each, ``x = x + layer(x)``; then a linear readout (unembedding)
``logits = x @ U`` ``(d_model, V)`` per readout; softmax cross-entropy. No LayerNorm and no
feed-forward layer: the tasks need neither, and without them every step of the model is one of
the chapter's formulas. Learned absolute positions (not ``rope=True``) because they are the
simplest position scheme to write down and to differentiate (``dP`` is the sum of ``dx`` over the
batch), and they keep the positions in the residual stream, where a head's output can carry them.

The three measurements
----------------------
1. ``induction`` (`induction_batch`): sequences of ``n`` random tokens made of a random prefix,
   a segment ``A`` of random length ``L`` and ``A`` again (``n = prefix + 2 L``). Since ``L``
   varies, the distance between a token and its copy varies: no head that looks a fixed number
   of places back can copy; copying needs content (an induction head). A two-layer
   attention-only model learns next-token prediction; measured: accuracy and loss on the
   repeated half (predicting ``A[i+1]`` in the second copy from ``A[i]``, whose earlier
   occurrence is visible), and each head's previous-token score and induction score
   (`head_scores`) before and after training.
2. ``heads`` (`pair_batch`): one layer; the last position must output both the token at one fixed
   earlier position and the token at another (two readouts), with ``h = 1, 2, 4`` heads of
   ``d_model / h`` (the same parameter count for every ``h``).
3. ``scale``: (a) at initialisation, unit-variance queries and keys: the softmax's mean row
   entropy and the norm of the gradient reaching ``W_Q``, against ``d_k``, with the default
   scale ``1/sqrt(d_k)`` and with ``scale=1.0``; (b) training curves of one setting with a
   large ``d_k``, with and without the scale.

The kept run (``data/training.json``; `kept_run` returns it parsed)
-------------------------------------------------------------------
Spreads are over seeds: ``"std"`` is the sample standard deviation (ddof = 1), and ``"min"``,
``"max"`` are given too. A ``stats`` object is ``{"mean", "std", "min", "max"}`` over the
seeds' values. Curves are evaluated on one fixed evaluation batch at the steps listed in
``"steps"`` (0 = before training).

.. code-block:: text

    {
     "version": 1, "date": str, "seconds": float (wall time of the whole run),
     "machine": {"platform", "processor", "cpu_count"}, "versions": {"python", "numpy"},
     "dtype": "float64", "seeds": [0, 1, ...], "spread": "std over seeds, ddof=1",
     "induction": {
      "config": {"vocab", "n", "lengths": [L_min, L_max], "d_model", "h", "layers", "steps",
                 "batch", "lr", "eval_batch", "eval_every"},
      "steps": [int, ...],
      "runs": [                                   # one per seed, in the order of "seeds"
       {"seed": int,
        "loss": [float per step],                 # all positions, eval batch
        "repeat_loss": [float per step],          # the repeated half only
        "repeat_accuracy": [float per step],      # the repeated half only
        "first_losses": [float, ...],             # training-batch loss of steps 0..k-1, full
                                                  # precision (for the reproduction test)
        "scores_before": {"previous_token": [[per head] per layer], "induction": [[...]]},
        "scores_after":  {"previous_token": [[...]], "induction": [[...]]},
        "previous_token_head": [layer, head],     # the highest previous-token score after
        "induction_head": [layer, head]}          # the highest induction score after
      ],
      "final": {"loss": stats, "repeat_loss": stats, "repeat_accuracy": stats},
      "example": {"seed": int, "tokens": [int] * n, "prefix": int, "length": int,
                  "weights_before": [[[n x n] per head] per layer],
                  "weights_after":  [[[n x n] per head] per layer]}
     },
     "heads": {
      "config": {"vocab", "n", "positions": [i, j], "d_model", "steps", "batch", "lr",
                 "eval_batch", "eval_every"},
      "steps": [int, ...],
      "settings": [                               # h = 1, 2, 4
       {"h": int, "d_k": int, "parameters": int,
        "runs": [{"seed", "loss": [per step], "accuracy": [per step],
                  "both_accuracy": [per step], "first_losses": [...]}],
        "final": {"loss": stats, "accuracy": stats, "both_accuracy": stats}}
      ]
     },                                           # accuracy: mean of the two readouts';
                                                  # both_accuracy: both tokens right
     "scale": {
      "init": {"n": int, "d_k": [4, ..., 256], "samples": int,
               "max_entropy": float (log n),
               "entropy": {"scaled": stats-of-lists, "unscaled": stats-of-lists},
               "grad_W_Q": {"scaled": stats-of-lists, "unscaled": stats-of-lists}},
               # stats-of-lists: {"mean": [per d_k], "std": [...], "min": [...], "max": [...]}
      "training": {"config": {... as "heads", plus "h", "d_k"}, "steps": [int, ...],
                   "settings": [{"scaled": true|false, "runs": [as in "heads"],
                                 "final": {"loss", "accuracy", "both_accuracy": stats}}]}
     }
    }

For the chapter: ``from mha.site.training import kept_run`` then, for example,
``kept_run()["heads"]["settings"][0]["final"]["accuracy"]["mean"]``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["KEPT_RUN", "kept_run"]

#: Where the kept run lives.
KEPT_RUN = Path(__file__).parent / "data" / "training.json"


def kept_run(path=KEPT_RUN) -> dict:
    """The training run the repository keeps (``python -m mha.site.training --save``), parsed.

    Returns
    -------
    dict
        The structure described in the module docstring.
    """
    return json.loads(Path(path).read_text(encoding="utf-8"))
