r"""A tiny trainer, readable end to end: attention heads that learn, in plain NumPy.

    python -m mha.site.training                                   # run, print a summary
    python -m mha.site.training --save mha/site/data/training.json  # the run the site shows

(``OPENBLAS_NUM_THREADS=1`` in front of it is faster: see below; the run records it).

Every gradient is computed by hand: `mha.MultiHeadAttention.backward` for the attention layers,
and the few lines below for the embeddings, the readout and the cross-entropy. Adam updates the
weights. Everything is float64 (the gradient check in the tests needs it, and the models are
tiny) and seeded: the same seed gives the same run, bit for bit, on one machine (BLAS may round
differently on another). Run it with ``OPENBLAS_NUM_THREADS=1``: the arrays are small, and
BLAS threads only fight over the cores.

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
(``Model(..., rope=True)`` drops ``P`` and rotates queries and keys instead; the tests check its
gradient too, the kept run does not use it.)

The three measurements
----------------------
1. ``induction`` (`induction_batch`): sequences of ``n`` random tokens made of a random prefix,
   a segment ``A`` of random length ``L`` and ``A`` again (``n = prefix + 2 L``). Since ``L``
   varies, the distance between a token and its copy varies: no head that looks a fixed number
   of places back can copy; copying needs content (an induction head). A two-layer
   attention-only model learns to predict ``A[i+1]`` in the second copy from ``A[i]``, whose
   earlier occurrence is visible: the loss is the cross-entropy on those positions only. The
   prefix and ``A`` are drawn without replacement (all distinct), so each token of the second
   copy has exactly one earlier occurrence; their own next tokens cannot be copied from
   anywhere (only the tokens already seen can be ruled out). Trained on every
   position instead (trials of one seed each, batch 16 or 32, lr 0.01 or 0.02: ``n = 24``,
   ``V = 32``, 1500 steps; ``n = 16``, ``V = 24``, 1000 steps; ``n = 16``, ``V = 16``, 1000
   steps), the models reached 0.19, 0.35 and 0.17 accuracy on the repeated half and no head an
   induction score above 0.2; with ``rope=True`` (``n = 24``, ``V = 32``) 0.03 after 600
   steps. Hence the kept run trains on the repeated half. Measured: accuracy and loss on the
   repeated half, and each head's
   previous-token and induction score (`head_scores`) before and after training; a head is
   named for a score of at least 0.5 (`roles`).
2. ``heads`` (`pair_batch`): one layer; the last position must output both the token at one fixed
   earlier position and the token at another (two readouts), with ``h = 1, 2, 4`` heads of
   ``d_model / h`` (the same parameter count for every ``h``).
3. ``scale``: (a) at initialisation, unit-variance queries and keys, against ``d_k``, with the
   default scale ``1/sqrt(d_k)`` and with ``scale=1.0`` (`scale_init`): the softmax's mean row
   entropy; the gradient summed over the queries (the norm of the gradient reaching ``W_Q``)
   and at the softmax's input (``|dL/dS|``, which does not depend on how the layer is
   written); and query by query (each query's ``|dQ_i|``, each softmax row's gain). (b)
   training curves of the pair task with two heads of ``d_k = 64`` (`scale_training`) in three
   arms (`SCALE_ARMS`): with the scale; without it; and without it with ``W_Q``'s Adam
   learning rate divided by ``sqrt(d_k)``, which is the scaled model started ``sqrt(d_k)``
   times hotter and trained at the same rate (the unscaled layer with ``W_Q`` is the scaled
   layer with ``sqrt(d_k) W_Q``, and Adam's step hardly depends on the gradient's size).

The kept run (``data/training.json``; `kept_run` returns it parsed)
-------------------------------------------------------------------
Spreads are over seeds: ``"std"`` is the sample standard deviation (ddof = 1), and ``"min"``,
``"max"`` are given too. A ``stats`` object is ``{"mean", "std", "min", "max"}`` over the
seeds' values. Curves are evaluated on one fixed evaluation batch at the steps listed in
``"steps"`` (0 = before training; the last is the end of training).

.. code-block:: text

    {
     "version": 1, "date": str, "seconds": float (wall time of the whole run),
     "seconds_per_part": {"induction", "heads", "scale_training", "scale_init": float},
     "machine": {"platform", "processor", "cpu_count"}, "versions": {"python", "numpy"},
     "environment": {"OPENBLAS_NUM_THREADS": str or null},
     "dtype": "float64", "seeds": [0, 1, ...], "spread": "std over seeds, ddof=1",
     "induction": {
      "config": INDUCTION (below: "vocab", "n", "lengths": [L_min, L_max], "d_model", "h",
                 "layers", "steps", "batch", "lr", "eval_batch", "eval_every"),
      "steps": [int, ...],
      "runs": [                                   # one per seed, in the order of "seeds"
       {"seed": int,
        "loss": [float per step],                 # cross-entropy on the repeated half
        "repeat_accuracy": [float per step],      # accuracy on the repeated half
        "first_losses": [float, ...],             # training-batch loss of steps 0..FIRST-1,
                                                  # full precision (the reproduction test)
        "scores_before": {"previous_token": [[per head] per layer], "induction": [[...]]},
        "scores_after":  {"previous_token": [[...]], "induction": [[...]]},
        "previous_token_head": [layer, head],     # the highest previous-token score after
        "induction_head": [layer, head]}          # the highest induction score after
      ],                                          # (roles(run["scores_after"]): all >= 0.5)
      "final": {"loss", "repeat_accuracy",        # at the last step
                "previous_token_best", "induction_best": stats},  # each run's highest score
      "example": {"seed": int, "tokens": [int] * n, "prefix": int, "length": int,
                  "weights_before": [[[n x n] per head] per layer],
                  "weights_after":  [[[n x n] per head] per layer]}
     },
     "heads": {
      "config": HEADS without "hs" ("vocab", "n", "positions": [i, j], "d_model", "steps",
                 "batch", "lr", "eval_batch", "eval_every"),
      "steps": [int, ...],
      "settings": [                               # h = 1, 2, 4
       {"h": int, "d_k": int, "parameters": int,
        "runs": [{"seed", "loss": [per step], "accuracy": [per step],
                  "both_accuracy": [per step], "first_losses": [...],
                  "last_row_weights": [[n] per head],   # the last query's mean weights
                  "weight_on_i_by_token": [[V] per head]}],  # its mean weight on position i,
                                                             # by the token there
        "final": {"loss": stats, "accuracy": stats, "both_accuracy": stats}}
      ]
     },                                           # accuracy: mean of the two readouts';
                                                  # both_accuracy: both tokens right
     "scale": {
      "init": {"n": int, "d_k": [4, ..., 1024], "batch": int, "max_entropy": float (log n),
               "row_gain_floor": float (ROW_GAIN_FLOOR),
               "entropy", "grad_W_Q", "grad_S", "softmax_gain", "row_gain_median",
               "rows_below", "dQ_median", "top_decile_share":
                   {"scaled": stats-of-lists, "unscaled": stats-of-lists},
               "query_ratio", "query_smaller": stats-of-lists},   # unscaled against scaled
               # stats-of-lists: {"mean": [per d_k], "std": [...], "min": [...], "max": [...]}
               # over the seeds of each seed's value (`scale_init` says what each one is)
      "training": {"config": {... as "heads", plus "h", "d_k"}, "steps": [int, ...],
                   "settings": [{"arm": "scaled" | "unscaled" | "unscaled_slow_W_Q",
                                 "scaled": true|false, "lr_W_Q": float,
                                 "runs": [as in "heads"],
                                 "final": {"loss", "accuracy", "both_accuracy": stats}}]}
     }                                            # one setting per arm of SCALE_ARMS, in order
    }

For the chapter: ``from mha.site.training import kept_run`` then, for example,
``kept_run()["heads"]["settings"][0]["final"]["accuracy"]["mean"]``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["KEPT_RUN", "ROLE_THRESHOLD", "ROW_GAIN_FLOOR", "SCALE_ARMS", "Adam", "Model",
           "cross_entropy", "head_scores",
           "heads_experiment", "induction_batch", "induction_experiment", "kept_run",
           "pair_batch", "roles", "scale_init", "scale_training", "train"]

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


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------

class Model:
    """Token + position embeddings, attention layers with residual connections, linear readouts.

    Parameters
    ----------
    vocab : int
        Number of token ids ``V``.
    n : int
        Sequence length (the number of learned positions).
    d_model : int
        Width of the residual stream.
    h : int
        Heads per layer (each of ``d_k = d_v = d_model // h``).
    layers : int
        Number of attention layers.
    readouts : int, default 1
        Number of linear readouts ``r`` (each a ``(d_model, V)`` matrix).
    last_only : bool, default False
        Read out the last position only (else every position).
    seed : int
        Seeds the weights.
    scale : float, optional
        Passed to every `mha.MultiHeadAttention` (None: ``1/sqrt(d_k)``).

    Attributes
    ----------
    E : ndarray of shape ``(V, d_model)``
        Token embedding, entries drawn from N(0, 1/2).
    P : ndarray of shape ``(n, d_model)``
        Position embedding, entries drawn from N(0, 1/2): ``E[t] + P[i]`` has unit variance per
        entry, the input Glorot's ``W_Q`` and ``W_K`` turn into unit-variance queries and keys.
    U : ndarray of shape ``(r, d_model, V)``
        Readouts, entries drawn from N(0, 1/d_model).
    layers : list of `mha.MultiHeadAttention`
    """

    def __init__(self, vocab: int, n: int, d_model: int, h: int, layers: int,
                 readouts: int = 1, last_only: bool = False, seed: int = 0, scale=None,
                 rope: bool = False):
        from ..multihead import MultiHeadAttention
        from ..masks import causal_mask

        rng = np.random.default_rng([seed, 0])
        self.E = rng.normal(0.0, np.sqrt(0.5), size=(vocab, d_model))      # (V, d_model)
        self.P = rng.normal(0.0, np.sqrt(0.5), size=(n, d_model))          # (n, d_model)
        self.rope = rope
        if rope:  # positions enter only through the rotation of queries and keys
            self.P = np.zeros((n, d_model))
        self.layers = [MultiHeadAttention(d_model, h, seed=rng, scale=scale, rope=rope)
                       for _ in range(layers)]
        self.U = rng.normal(0.0, 1 / np.sqrt(d_model), size=(readouts, d_model, vocab))
        self.mask = causal_mask(n)                                         # (n, n)
        self.last_only = last_only

    def parameters(self) -> dict:
        """Every trainable array by name (the arrays themselves: updating them updates the model)."""
        params = {"E": self.E, "U": self.U} if self.rope else {"E": self.E, "P": self.P, "U": self.U}
        for i, layer in enumerate(self.layers):
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                params[f"layers.{i}.{w}"] = getattr(layer, w)
        return params

    def count(self) -> int:
        """The number of trainable numbers."""
        return sum(p.size for p in self.parameters().values())

    def forward(self, tokens):
        """Logits, and the residual stream after each layer (what `backward` needs).

        Parameters
        ----------
        tokens : ndarray of shape ``(b, n)``, int

        Returns
        -------
        logits : ndarray of shape ``(r, b, n_out, V)``
            ``n_out`` is 1 with ``last_only``, else ``n``.
        xs : list of ndarray of shape ``(b, n, d_model)``
            The input to each layer, then the final residual stream.
        """
        x = self.E[tokens] + self.P                                 # (b, n, d_model)
        xs = [x]
        for layer in self.layers:
            x = x + layer(x, mask=self.mask)                        # residual connection
            xs.append(x)
        out = x[:, -1:] if self.last_only else x                    # (b, n_out, d_model)
        logits = np.einsum("bnd,rdv->rbnv", out, self.U)            # (r, b, n_out, V)
        return logits, xs

    def weights(self, tokens) -> list:
        """Every layer's attention weights, each of shape ``(b, h, n, n)``."""
        x = self.E[tokens] + self.P
        result = []
        for layer in self.layers:
            y, w = layer(x, mask=self.mask, return_weights=True)
            result.append(w)
            x = x + y
        return result

    def loss_and_grads(self, tokens, targets):
        """Mean cross-entropy and its gradient for every parameter, all by hand.

        Parameters
        ----------
        tokens : ndarray of shape ``(b, n)``, int
        targets : ndarray of shape ``(r, b, n_out)``, int
            The token each readout should give at each position read; -1 = no target there.

        Returns
        -------
        loss : float
        grads : dict of str to ndarray
            The same names and shapes as `parameters`.
        """
        logits, xs = self.forward(tokens)                           # (r, b, n_out, V)
        loss, d_logits = cross_entropy(logits, targets)
        x = xs[-1]
        out = x[:, -1:] if self.last_only else x                    # (b, n_out, d_model)
        grads = {"U": np.einsum("bnd,rbnv->rdv", out, d_logits)}    # logits = out @ U
        d_out = np.einsum("rbnv,rdv->bnd", d_logits, self.U)        # (b, n_out, d_model)
        dx = np.zeros_like(x)                                       # (b, n, d_model)
        if self.last_only:
            dx[:, -1:] = d_out
        else:
            dx += d_out
        for i in reversed(range(len(self.layers))):
            # x_{i+1} = x_i + layer(x_i): the gradient goes both ways round the residual
            g = self.layers[i].backward(xs[i], dx, mask=self.mask)
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                grads[f"layers.{i}.{w}"] = g[w]
            dx = dx + g["x"]
        if not self.rope:
            grads["P"] = dx.sum(axis=0)                             # x_0 = E[tokens] + P
        dE = np.zeros_like(self.E)
        np.add.at(dE, tokens, dx)                                   # rows of E, summed per use
        grads["E"] = dE
        return loss, grads


def cross_entropy(logits, targets):
    """Mean softmax cross-entropy over the positions that have a target, and its gradient.

    Parameters
    ----------
    logits : ndarray of shape ``(..., V)``
    targets : ndarray of shape ``(...)``, int
        -1 where there is no target.

    Returns
    -------
    loss : float
        ``mean(-log softmax(logits)[target])`` over the ``m`` positions with a target.
    d_logits : ndarray of shape ``(..., V)``
        ``(softmax(logits) - onehot(target)) / m`` there, 0 elsewhere.

    Examples
    --------
    >>> import numpy as np
    >>> loss, d = cross_entropy(np.array([[0.0, np.log(3.0)]]), np.array([1]))  # p = [1/4, 3/4]
    >>> round(loss, 6), d.round(6).tolist()                                      # -log(3/4)
    (0.287682, [[0.25, -0.25]])
    """
    from ..attention import softmax

    keep = targets >= 0                                             # (...)
    m = int(keep.sum())
    t = np.where(keep, targets, 0)[..., None]                       # (..., 1)
    z = logits - logits.max(axis=-1, keepdims=True)                 # (..., V), max 0
    log_p = np.take_along_axis(z, t, axis=-1)[..., 0] - np.log(np.exp(z).sum(axis=-1))
    loss = float(-log_p[keep].sum() / m)                            # log-sum-exp: never inf
    d_logits = softmax(logits, axis=-1)                             # (..., V)
    np.put_along_axis(d_logits, t, np.take_along_axis(d_logits, t, axis=-1) - 1.0, axis=-1)
    d_logits *= keep[..., None] / m
    return loss, d_logits


class Adam:
    """Adam (Kingma and Ba, 2015) on a dict of arrays, updated in place.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, and each parameter moves by
    ``-lr * m_hat / (sqrt(v_hat) + eps)`` with the bias-corrected ``m_hat = m / (1 - b1^t)``
    and ``v_hat = v / (1 - b2^t)``. ``lr_factors`` multiplies the learning rate of the
    parameters it names (``{"layers.0.W_Q": 0.125}``: that one moves with ``lr / 8``); the
    others move with ``lr``.
    """

    def __init__(self, params: dict, lr: float, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, lr_factors: dict | None = None):
        self.params, self.lr, self.b1, self.b2, self.eps = params, lr, b1, b2, eps
        self.lr_factors = dict(lr_factors or {})
        unknown = set(self.lr_factors) - set(params)
        if unknown:
            raise ValueError(f"lr_factors names no parameter: {sorted(unknown)}")
        self.m = {k: np.zeros_like(p) for k, p in params.items()}
        self.v = {k: np.zeros_like(p) for k, p in params.items()}
        self.t = 0

    def step(self, grads: dict) -> None:
        self.t += 1
        for k, p in self.params.items():
            g = grads[k]
            lr = self.lr * self.lr_factors[k] if k in self.lr_factors else self.lr
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * g * g
            m_hat = self.m[k] / (1 - self.b1 ** self.t)
            v_hat = self.v[k] / (1 - self.b2 ** self.t)
            p -= lr * m_hat / (np.sqrt(v_hat) + self.eps)           # in place: the model's array


# --------------------------------------------------------------------------------------------
# The tasks
# --------------------------------------------------------------------------------------------

def induction_batch(rng, b: int, n: int = 24, vocab: int = 32, lengths=(4, 12)):
    """Random prefix, a segment ``A`` of random length ``L``, then ``A`` again: ``n`` tokens.

    The ``n - L`` tokens of the prefix and ``A`` are distinct (drawn without replacement), so a
    token of the second copy has exactly one earlier occurrence.

    Returns
    -------
    tokens : ndarray of shape ``(b, n)``, int
    prefix : ndarray of shape ``(b,)``, int
        ``n - 2 L``: where the first copy starts.
    length : ndarray of shape ``(b,)``, int
        ``L``, uniform in ``lengths`` (both ends included).
    """
    length = rng.integers(lengths[0], lengths[1] + 1, size=b)       # (b,)
    prefix = n - 2 * length
    tokens = np.empty((b, n), dtype=np.int64)
    for row, (r, L) in enumerate(zip(prefix, length)):
        first = rng.permutation(vocab)[: n - L]                     # prefix and A, distinct
        tokens[row] = np.concatenate([first, first[r:]])            # ... A A
    return tokens, prefix, length


def induction_targets(tokens, prefix, length):
    """Next-token targets ``(1, b, n)`` (-1 at the last position) and the repeated half.

    Returns
    -------
    targets : ndarray of shape ``(1, b, n)``, int
    repeat : ndarray of shape ``(b, n)``, bool
        The positions ``t`` of the second copy whose next token ``A[i+1]`` has an earlier
        occurrence: ``prefix + L <= t <= prefix + 2 L - 2``.
    """
    b, n = tokens.shape
    targets = np.full((1, b, n), -1, dtype=np.int64)
    targets[0, :, :-1] = tokens[:, 1:]
    t = np.arange(n)
    repeat = (t >= (prefix + length)[:, None]) & (t <= (prefix + 2 * length - 2)[:, None])
    return targets, repeat


def head_scores(weights, prefix, length) -> dict:
    """Previous-token and induction score of every head, from its attention weights.

    Parameters
    ----------
    weights : ndarray of shape ``(b, h, n, n)``
    prefix, length : ndarray of shape ``(b,)``
        As `induction_batch` returns them.

    Returns
    -------
    dict
        ``"previous_token"``: the mean weight a query ``t >= 1`` puts on ``t - 1``;
        ``"induction"``: the mean weight a query of the second copy (``A[i]`` at ``t``, for
        every ``i``) puts on the token after the earlier occurrence of its token
        (``t - L + 1``). Each an array of shape ``(h,)``.

    Examples
    --------
    >>> import numpy as np
    >>> n = 6                                           # prefix 0, A of 3 tokens, A again
    >>> previous = np.eye(n, k=-1); previous[0, 0] = 1  # every query on the token before it
    >>> weights = previous[None, None]                  # (b=1, h=1, n, n)
    >>> scores = head_scores(weights, np.array([0]), np.array([3]))
    >>> float(scores["previous_token"][0]), float(scores["induction"][0])
    (1.0, 0.0)
    """
    b, h, n, _ = weights.shape
    t = np.arange(1, n)
    previous = weights[:, :, t, t - 1].mean(axis=(0, 2))            # (h,)
    total, count = np.zeros(h), 0
    for row, (r, L) in enumerate(zip(prefix, length)):
        q = np.arange(r + L, r + 2 * L)                             # second copy: A[0..L-1]
        total += weights[row][:, q, q - L + 1].sum(axis=1)
        count += len(q)
    return {"previous_token": previous, "induction": total / count}


#: A head whose score is at least this is named for it (the glossary's rule for the real
#: models' heads: at least half of the attention, on average).
ROLE_THRESHOLD = 0.5


def roles(scores: dict, threshold: float = ROLE_THRESHOLD) -> dict:
    """The heads named by their scores: ``{"previous_token": [[layer, head], ...],
    "induction": [...]}``, every head whose score is at least ``threshold``.

    Parameters
    ----------
    scores : dict
        ``{"previous_token": [[per head] per layer], "induction": [[...]]}`` (as a run keeps
        them in ``"scores_after"``).
    """
    return {key: [[int(i), int(j)] for i, j in np.argwhere(np.asarray(scores[key]) >= threshold)]
            for key in ("previous_token", "induction")}


def pair_batch(rng, b: int, n: int = 8, vocab: int = 16, positions=(2, 5)):
    """Random tokens; the last position must name the tokens at both ``positions``.

    Returns
    -------
    tokens : ndarray of shape ``(b, n)``, int
    targets : ndarray of shape ``(2, b, 1)``, int
        Readout 0 must give ``tokens[:, i]``, readout 1 ``tokens[:, j]``.
    """
    tokens = rng.integers(0, vocab, size=(b, n))
    targets = np.stack([tokens[:, positions[0]], tokens[:, positions[1]]])[:, :, None]
    return tokens, targets


# --------------------------------------------------------------------------------------------
# Training and the three experiments
# --------------------------------------------------------------------------------------------

#: Settings of the kept run. Changing one changes the run: regenerate the JSON after.
INDUCTION = {"vocab": 16, "n": 16, "lengths": [3, 8], "d_model": 32, "h": 2, "layers": 2,
             "steps": 800, "batch": 16, "lr": 1e-2, "eval_batch": 256, "eval_every": 25}
HEADS = {"vocab": 16, "n": 8, "positions": [2, 5], "d_model": 32, "hs": [1, 2, 4],
         "steps": 500, "batch": 32, "lr": 1e-2, "eval_batch": 512, "eval_every": 25}
SCALE_INIT = {"n": 32, "d_k": [4, 8, 16, 32, 64, 128, 256, 512, 1024], "batch": 4}
SCALE_TRAINING = {**HEADS, "d_model": 128, "h": 2, "steps": 300}
SEEDS = (0, 1, 2, 3, 4)
#: How many first training losses each run keeps at full precision (the reproduction test).
FIRST = 5
#: The fixed evaluation batches are drawn from this seed (the same for every run).
EVAL_SEED = 1000


def stats(values) -> dict:
    """``{"mean", "std", "min", "max"}`` over the seeds (sample std, ddof = 1); element-wise
    for lists."""
    a = np.asarray(values, dtype=float)                              # (seeds, ...)
    return {"mean": a.mean(0).tolist(), "std": a.std(0, ddof=1).tolist(),
            "min": a.min(0).tolist(), "max": a.max(0).tolist()}


def train(model: Model, batches, steps: int, lr: float, evaluate, every: int,
          lr_factors: dict | None = None) -> dict:
    """Adam on ``model`` for ``steps`` steps; ``evaluate(model)`` (a dict of numbers) at step
    0 and every ``every`` steps.

    Parameters
    ----------
    batches : callable
        ``batches()`` -> ``(tokens, targets)`` for one step.
    lr_factors : dict, optional
        Passed to `Adam`: a learning-rate multiplier per parameter name.

    Returns
    -------
    dict
        ``"steps"``, ``"first_losses"`` (the first `FIRST` training losses), and one list per
        key of ``evaluate``'s result.
    """
    opt = Adam(model.parameters(), lr, lr_factors=lr_factors)
    curves, first = {"steps": []}, []
    for step in range(steps + 1):
        if step % every == 0 or step == steps:
            curves["steps"].append(step)
            for key, value in evaluate(model).items():
                curves.setdefault(key, []).append(value)
        if step == steps:
            break
        tokens, targets = batches()
        loss, grads = model.loss_and_grads(tokens, targets)
        if step < FIRST:
            first.append(loss)
        opt.step(grads)
    curves["first_losses"] = first
    return curves


def induction_data(rng, b: int, config: dict = INDUCTION):
    """One batch of the induction task: tokens, targets on the repeated half only (-1
    elsewhere), prefix and length."""
    tokens, prefix, length = induction_batch(rng, b, config["n"], config["vocab"],
                                             config["lengths"])
    targets, repeat = induction_targets(tokens, prefix, length)
    return tokens, np.where(repeat[None], targets, -1), prefix, length


def induction_run(seed: int, config: dict = INDUCTION, steps: int | None = None) -> dict:
    """Train the two-layer attention-only model on the induction task; one seed.

    Returns
    -------
    dict
        What `train` returns, plus ``"seed"``, the head scores before and after training on
        the evaluation batch, the heads with the highest score of each kind, and ``"model"``
        (the trained `Model`, which the kept run does not store).
    """
    c = config
    model = Model(c["vocab"], c["n"], c["d_model"], c["h"], c["layers"], seed=seed)
    data_rng = np.random.default_rng([seed, 1])
    ev_tokens, ev_targets, ev_prefix, ev_length = induction_data(
        np.random.default_rng(EVAL_SEED), c["eval_batch"], c)

    def scores():
        per_layer = [head_scores(w, ev_prefix, ev_length) for w in model.weights(ev_tokens)]
        return {k: [s[k].tolist() for s in per_layer] for k in ("previous_token", "induction")}

    def evaluate(m):
        logits, _ = m.forward(ev_tokens)
        keep = ev_targets >= 0
        return {"loss": cross_entropy(logits, ev_targets)[0],
                "repeat_accuracy": float((logits.argmax(-1) == ev_targets)[keep].mean())}

    before = scores()
    run = train(model, lambda: induction_data(data_rng, c["batch"], c)[:2],
                c["steps"] if steps is None else steps, c["lr"], evaluate, c["eval_every"])
    after = scores()
    best = {key: [int(i) for i in np.unravel_index(np.argmax(after[key]),
                                                   (c["layers"], c["h"]))]
            for key in ("previous_token", "induction")}           # [layer, head]
    run.update(seed=seed, scores_before=before, scores_after=after,
               previous_token_head=best["previous_token"], induction_head=best["induction"],
               model=model)
    return run


def induction_experiment(seeds=SEEDS, config: dict = INDUCTION) -> dict:
    """Measurement 1 over ``seeds``; the example's attention maps come from the first seed."""
    runs, example = [], None
    ev_tokens, _, ev_prefix, ev_length = induction_data(np.random.default_rng(EVAL_SEED), 1,
                                                        config)
    for seed in seeds:
        model_before = Model(config["vocab"], config["n"], config["d_model"], config["h"],
                             config["layers"], seed=seed)
        run = induction_run(seed, config)
        model = run.pop("model")
        if example is None:
            example = {"seed": seed, "tokens": ev_tokens[0].tolist(),
                       "prefix": int(ev_prefix[0]), "length": int(ev_length[0]),
                       "weights_before": [w[0].tolist() for w in model_before.weights(ev_tokens)],
                       "weights_after": [w[0].tolist() for w in model.weights(ev_tokens)]}
        runs.append(run)
    steps = runs[0].pop("steps")
    for run in runs[1:]:
        run.pop("steps")
    best = lambda run, key, layer: max(run["scores_after"][key][layer])  # noqa: E731
    return {"config": config, "steps": steps, "runs": runs,
            "final": {"loss": stats([r["loss"][-1] for r in runs]),
                      "repeat_accuracy": stats([r["repeat_accuracy"][-1] for r in runs]),
                      "previous_token_best": stats([max(map(max, r["scores_after"]
                                                            ["previous_token"])) for r in runs]),
                      "induction_best": stats([max(map(max, r["scores_after"]["induction"]))
                                               for r in runs])},
            "example": example}


def pair_run(seed: int, h: int, config: dict = HEADS, steps: int | None = None,
             scale=None, lr_factors: dict | None = None) -> dict:
    """Train the one-layer model with ``h`` heads on the pair task; one seed. ``scale`` goes
    to the attention layer, ``lr_factors`` to `Adam`."""
    c = config
    model = Model(c["vocab"], c["n"], c["d_model"], h, 1, readouts=2, last_only=True,
                  seed=seed, scale=scale)
    data_rng = np.random.default_rng([seed, 1])
    ev_tokens, ev_targets = pair_batch(np.random.default_rng(EVAL_SEED), c["eval_batch"],
                                       c["n"], c["vocab"], c["positions"])

    def evaluate(m):
        logits, _ = m.forward(ev_tokens)                             # (2, b, 1, V)
        right = logits.argmax(-1) == ev_targets                      # (2, b, 1)
        return {"loss": cross_entropy(logits, ev_targets)[0], "accuracy": float(right.mean()),
                "both_accuracy": float(right.all(axis=0).mean())}

    run = train(model, lambda: pair_batch(data_rng, c["batch"], c["n"], c["vocab"],
                                          c["positions"]),
                c["steps"] if steps is None else steps, c["lr"], evaluate, c["eval_every"],
                lr_factors=lr_factors)
    run["seed"] = seed
    run["parameters"] = model.count()
    w = model.weights(ev_tokens)[0][:, :, -1]                        # (b, h, n): last query
    run["last_row_weights"] = w.mean(axis=0).tolist()                # (h, n)
    i = c["positions"][0]
    run["weight_on_i_by_token"] = [[float(w[ev_tokens[:, i] == t, head, i].mean())
                                    for t in range(c["vocab"])] for head in range(h)]  # (h, V)
    return run


def _pair_setting(runs: list) -> dict:
    steps = runs[0].pop("steps")
    for run in runs[1:]:
        run.pop("steps")
    return {"steps": steps, "runs": runs,
            "final": {k: stats([r[k][-1] for r in runs])
                      for k in ("loss", "accuracy", "both_accuracy")}}


def heads_experiment(seeds=SEEDS, config: dict = HEADS) -> dict:
    """Measurement 2: ``h`` = each of ``config["hs"]`` at the same ``d_model``."""
    settings, steps = [], None
    for h in config["hs"]:
        s = _pair_setting([pair_run(seed, h, config) for seed in seeds])
        steps = s.pop("steps")
        parameters = s["runs"][0]["parameters"]
        for run in s["runs"]:
            run.pop("parameters")
        settings.append({"h": h, "d_k": config["d_model"] // h, "parameters": parameters, **s})
    return {"config": {k: v for k, v in config.items() if k != "hs"}, "steps": steps,
            "settings": settings}


#: A softmax row whose gain is below this passes back less than 0.1 % of a gradient: the
#: per-row sign of saturation `scale_init` counts.
ROW_GAIN_FLOOR = 1e-3


def scale_init(seeds=SEEDS, config: dict = SCALE_INIT) -> dict:
    """Measurement 3a: one head at initialisation, with the default scale and with ``scale=1.0``.

    One head (``d_model = d_k``, Glorot weights, inputs drawn from N(0, 1), so queries and keys
    have unit variance per entry) under a loss ``sum(g * output)`` with ``g`` drawn from
    N(0, 1); the same weights, inputs and ``g`` for both versions. Each quantity is computed per
    seed, then summarised over the seeds (`stats`):

    - ``entropy``: the mean row entropy of the weights;
    - ``grad_W_Q``: the norm of the gradient reaching ``W_Q``, summed over every query;
    - ``grad_S``: the norm of ``dL/dS``, the gradient at the softmax's input ``S = scale q k^T``.
      Unlike ``grad_W_Q`` it does not depend on how the layer is written: the unscaled layer
      with ``W_Q`` is the scaled layer with ``sqrt(d_k) W_Q``, whose gradient is
      ``grad_W_Q / sqrt(d_k)``, while ``S`` and ``dL/dS`` are the same;
    - ``softmax_gain``: ``|softmax_backward(w, d_w)| / |d_w|`` over the whole array, for a
      random ``d_w`` drawn from N(0, 1): the share of a gradient arriving at the weights that
      passes back through the softmax to the scores, pooled over every row;
    - ``row_gain_median`` and ``rows_below``: the same gain row by row, its median over the
      rows and the share of rows whose gain is below `ROW_GAIN_FLOOR`;
    - ``dQ_median``: the median over the queries of ``|dQ_i|`` (the row of ``dL/dQ`` of query
      ``i``; ``dW_Q = sum_i x_i^T dQ_i``);
    - ``query_ratio`` (one list, not per version): the median over the queries of
      ``|dQ_i|`` unscaled over ``|dQ_i|`` scaled, query by query; ``query_smaller``: the share
      of queries whose ``|dQ_i|`` is smaller unscaled. Each version's own ``dQ``: written the
      scaled way (``sqrt(d_k) W_Q``), the unscaled layer's would be ``sqrt(d_k)`` times smaller
      for every query, so these favour the unscaled layer by that factor;
    - ``top_decile_share``: the share of ``sum_i |dQ_i|^2`` carried by the tenth of the
      queries with the largest ``|dQ_i|`` (the same in either writing).
    """
    from ..backward import attention_backward, softmax_backward
    from ..multihead import MultiHeadAttention
    from .experiments import row_entropy

    n, b = config["n"], config["batch"]
    kinds = ("scaled", "unscaled")
    per_kind = ("entropy", "grad_W_Q", "grad_S", "softmax_gain", "row_gain_median",
                "rows_below", "dQ_median", "top_decile_share")
    found = {key: {kind: [] for kind in kinds} for key in per_kind}
    found.update(query_ratio=[], query_smaller=[])
    for seed in seeds:
        per = {key: {kind: [] for kind in kinds} for key in per_kind}
        ratio, smaller = [], []
        for d_k in config["d_k"]:
            rng = np.random.default_rng([seed, d_k, 2])
            x = rng.normal(size=(b, n, d_k))                         # (b, n, d_model = d_k)
            g = rng.normal(size=(b, n, d_k))                         # dL/d output
            dq_rows = {}
            for kind, scale in (("scaled", None), ("unscaled", 1.0)):
                layer = MultiHeadAttention(d_k, 1, seed=np.random.SeedSequence([seed, d_k]),
                                           scale=scale)
                t = layer.trace(x)                                   # every stage, (b, 1, ...)
                w = t["weights"]                                     # (b, 1, n, n)
                per["entropy"][kind].append(float(row_entropy(w).mean()))
                per["grad_W_Q"][kind].append(float(np.linalg.norm(layer.backward(x, g)["W_Q"])))
                d_heads = (g @ layer.W_O.T)[:, None]                 # (b, 1, n, d_v): dL/dO
                dq, _, _ = attention_backward(t["q"], t["k"], t["v"], d_heads, scale=scale)
                d_s = softmax_backward(w, d_heads @ t["v"].swapaxes(-1, -2))  # dL/dS (b,1,n,n)
                per["grad_S"][kind].append(float(np.linalg.norm(d_s)))
                rows = np.linalg.norm(dq, axis=-1).ravel()           # (b n,): |dQ_i|
                dq_rows[kind] = rows
                per["dQ_median"][kind].append(float(np.median(rows)))
                top = np.sort(rows ** 2)[::-1]
                per["top_decile_share"][kind].append(float(top[: len(top) // 10].sum()
                                                           / top.sum()))
                d_w = rng.normal(size=w.shape)                       # a random dL/dweights
                back = softmax_backward(w, d_w)
                per["softmax_gain"][kind].append(float(np.linalg.norm(back)
                                                       / np.linalg.norm(d_w)))
                row_gain = np.linalg.norm(back, axis=-1) / np.linalg.norm(d_w, axis=-1)
                per["row_gain_median"][kind].append(float(np.median(row_gain)))
                per["rows_below"][kind].append(float((row_gain < ROW_GAIN_FLOOR).mean()))
            ratio.append(float(np.median(dq_rows["unscaled"] / dq_rows["scaled"])))
            smaller.append(float((dq_rows["unscaled"] < dq_rows["scaled"]).mean()))
        for key in per_kind:
            for kind in kinds:
                found[key][kind].append(per[key][kind])
        found["query_ratio"].append(ratio)
        found["query_smaller"].append(smaller)
    return {"n": n, "d_k": list(config["d_k"]), "batch": b, "max_entropy": float(np.log(n)),
            "row_gain_floor": ROW_GAIN_FLOOR,
            **{key: {kind: stats(found[key][kind]) for kind in kinds} for key in per_kind},
            "query_ratio": stats(found["query_ratio"]),
            "query_smaller": stats(found["query_smaller"])}


#: The three arms of Measurement 3b: the attention layer's scale, and the factor on the Adam
#: learning rate of ``W_Q`` (a function of ``d_k``). The unscaled layer with ``W_Q`` is the
#: scaled layer with ``W_Q' = sqrt(d_k) W_Q``; Adam moves a weight by about ``lr`` whatever its
#: gradient's size, so a step of ``lr`` on ``W_Q`` is a step of ``sqrt(d_k) lr`` on ``W_Q'``.
#: The third arm gives ``W_Q`` the rate ``lr / sqrt(d_k)``: it is the scaled model started
#: ``sqrt(d_k)`` times hotter, trained with the same rate (a hotter start alone: at d_k = 64
#: most rows are not yet saturated); exactly so with Adam's ``eps = 0``, up to ``eps`` over each
#: gradient entry otherwise.
SCALE_ARMS = (("scaled", None, lambda d_k: 1.0),
              ("unscaled", 1.0, lambda d_k: 1.0),
              ("unscaled_slow_W_Q", 1.0, lambda d_k: 1 / np.sqrt(d_k)))


def scale_training(seeds=SEEDS, config: dict = SCALE_TRAINING) -> dict:
    """Measurement 3b: the pair task with ``h`` heads of a large ``d_k``, in the three arms of
    `SCALE_ARMS` (same seeds, batches and evaluation batch)."""
    d_k = config["d_model"] // config["h"]
    settings, steps = [], None
    for arm, scale, factor in SCALE_ARMS:
        f = float(factor(d_k))
        lr_factors = None if f == 1.0 else {"layers.0.W_Q": f}
        s = _pair_setting([pair_run(seed, config["h"], config, scale=scale,
                                    lr_factors=lr_factors) for seed in seeds])
        steps = s.pop("steps")
        for run in s["runs"]:
            run.pop("parameters")
        settings.append({"arm": arm, "scaled": scale is None, "lr_W_Q": config["lr"] * f, **s})
    return {"config": {**{k: v for k, v in config.items() if k != "hs"}, "d_k": d_k},
            "steps": steps, "settings": settings}


def run_all(seeds=SEEDS) -> dict:
    """The whole kept run, timed."""
    import datetime
    import os
    import platform
    import time

    start = time.perf_counter()
    result = {"version": 1,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "dtype": "float64", "seeds": list(seeds), "spread": "std over seeds, ddof=1"}
    timing = {}
    for name, fn in (("induction", induction_experiment), ("heads", heads_experiment),
                     ("scale_training", scale_training)):
        t = time.perf_counter()
        result[name] = fn(seeds)
        timing[name] = time.perf_counter() - t
    t = time.perf_counter()
    result["scale"] = {"init": scale_init(seeds), "training": result.pop("scale_training")}
    timing["scale_init"] = time.perf_counter() - t
    result["seconds"] = time.perf_counter() - start
    result["seconds_per_part"] = timing
    result["machine"] = {"platform": platform.platform(), "processor": platform.machine(),
                         "cpu_count": os.cpu_count()}
    result["versions"] = {"python": platform.python_version(), "numpy": np.__version__}
    result["environment"] = {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")}
    return result


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--save", help="write the run to this JSON file")
    args = parser.parse_args(argv)
    result = run_all()
    print(f"{result['seconds']:.1f} s", {k: round(v, 1)
                                         for k, v in result["seconds_per_part"].items()})
    f = result["induction"]["final"]
    print("induction: repeat accuracy", f["repeat_accuracy"], "loss", f["loss"])
    for s in result["heads"]["settings"]:
        print(f"heads h={s['h']}:", s["final"])
    for s in result["scale"]["training"]["settings"]:
        print(f"scale {s['arm']}:", s["final"])
    if args.save:
        with open(args.save, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=None, separators=(",", ":"))
            out.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
