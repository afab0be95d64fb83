"""Figures and tables for the site, drawn from ``mha``. Each function takes data and a language.

Plot functions return a `matplotlib.figure.Figure` and never write files: the site's
build hook (``hooks/figures.py``) calls the entries of `FIGURES` and saves them inside
`style`. Table functions return Markdown; `TABLES` is the one list of the tables pages ask for.
Importing ``mha`` does not import this module or matplotlib.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from matplotlib.figure import Figure

from .. import experiments
from ..model_runs import kept_example, kept_study, kept_word_links
from . import applications, inference, longrange, positions, realheads, speed, tables
from . import intuition
from . import transformer
from . import training as train_plots
from . import walkthrough as walk
from ._style import style
from .case import CASE_ORDER, CAST, EMBEDDING_ROWS, case_tokens
from .projections import plot_shared_projection
from .scores import plot_scaling
from ..terms import LANGUAGES, STORY, TERMS, term

__all__ = ["CAST", "CHINESE_TOKENS", "FIGURES", "LANGUAGES", "TABLES", "TERMS", "case_tokens",
           "plot_scaling", "plot_shared_projection", "style", "term"]


def _case(lang: str) -> list:
    """The running example, in the sentence order of ``lang``, through two layers."""
    return experiments.walkthrough(CASE_ORDER[lang])


def _patterns(lang: str):
    p = experiments.application_patterns(CASE_ORDER[lang])
    return applications.plot_patterns(p["bert"], p["gpt"], p["cross"], case_tokens(lang),
                                      "[PAD]", lang)


def _window(lang: str, n: int = 12, window: int = 2, layers: int = 6):
    from ...masks import sliding_window_mask

    return longrange.plot_window(n, window,
                                 experiments.reach(sliding_window_mask(n, window), layers), lang)


def _word_order(lang: str):
    """The case and the case with "key" and "desk" swapped, for one detective."""
    result = experiments.word_order_experiment(CASE_ORDER[lang], swap=positions.SWAP)
    return positions.plot_word_order(result, lang)


def _benchmark_run() -> dict:
    """The benchmark run the repository keeps (``python -m mha.site.bench --save``)."""
    from ..bench import kept_run

    return kept_run()


def _decode_run() -> dict:
    """The kept benchmark run's decoding section (``python -m mha.site.bench --decode-only``)."""
    return _benchmark_run()["decode"]


def _training_run() -> dict:
    """The training run the repository keeps (``python -m mha.site.training --save``)."""
    from ..training import kept_run

    return kept_run()


def _measured(lang: str):
    return speed.plot_measured(_benchmark_run(), lang)


def _case_shared_projection(lang: str):
    example = experiments.case_embeddings(n_tokens=len(EMBEDDING_ROWS))[CASE_ORDER[lang]]
    return experiments.shared_projection_experiment(example=example)


# The real models' figures and tables are drawn from their kept runs (`mha.site.model_runs`):
# the build loads no model.

def _real_examples(lang: str):
    example = kept_example("minilm")
    return realheads.plot_examples(example.tokens, example.attentions,
                                   realheads.example_heads(kept_study("minilm")), lang)


def _real_roles(lang: str):
    return realheads.plot_roles(kept_study("minilm"), lang)


def _head_role_table(lang: str) -> str:
    return realheads.role_table(kept_study("minilm"), lang)


def _study_zh():
    """multilingual-e5-small's head-role study on the Chinese study set."""
    return kept_study("e5")


def _zh_case(lang: str):
    """The case sentence through multilingual-e5-small: the heads of `realheads.case_heads`,
    the within-word junctions of the case (侦 探) outlined."""
    links = kept_word_links()
    example = kept_example("e5")
    junctions = tuple(q for sentence, q, _ in links.pairs if sentence == 0)  # SENTENCES_ZH[0]
    return realheads.plot_examples(example.tokens, example.attentions,
                                   realheads.case_heads(_study_zh(), links), lang,
                                   special=example.special_tokens, cols=1, junctions=junctions)


#: Every figure the site shows: file stem -> function of the language returning a Figure.
#: The names of the modules each one depends on (besides the core) are in ``DEPENDS``.
FIGURES: dict[str, Callable[[str], Figure]] = {
    "scores-scaling": lambda lang: plot_scaling(experiments.scaling_experiment(), lang),
    "home-shapes": lambda lang: walk.plot_shapes(_case(lang), lang),
    "walk-input": lambda lang: walk.plot_input(_case(lang), lang),
    "walk-qkv": lambda lang: walk.plot_qkv(_case(lang), lang),
    "walk-scores": lambda lang: walk.plot_scores(_case(lang), lang),
    "walk-weights": lambda lang: walk.plot_weights(_case(lang), lang),
    "walk-concat": lambda lang: walk.plot_concat(_case(lang), lang),
    "walk-output": lambda lang: walk.plot_output(_case(lang), lang),
    "walk-layers": lambda lang: walk.plot_layers(_case(lang), lang),
    "overview-one-query": lambda lang: walk.plot_one_query(_case(lang), lang),
    "overview-pooling": lambda lang: intuition.plot_pooling(intuition.pooling_data(), lang),
    "projections-shared": lambda lang: plot_shared_projection(_case_shared_projection(lang), lang),
    "longrange-cost": lambda lang: longrange.plot_cost(
        experiments.attention_cost(2 ** np.arange(7, 16)), lang),
    "longrange-window": _window,
    "applications-patterns": _patterns,
    "transformer-stack": lambda lang: transformer.plot_transformer(
        transformer.ENCODER_LAYER, transformer.DECODER_LAYER, lang),
    "speed-measured": _measured,
    "speed-blocks": lambda lang: speed.plot_blocks(speed.block_map(8 * 64, 64), lang),
    "real-heads-roles": _real_roles,
    "real-heads-examples": _real_examples,
    "real-heads-zh-case": _zh_case,
    "real-heads-zh-roles": lambda lang: realheads.plot_roles(_study_zh(), lang),
    "positions-table": lambda lang: positions.plot_table(
        experiments.position_table_experiment(), lang),
    "positions-rope": lambda lang: positions.plot_relative(
        experiments.relative_scores_experiment(), lang),
    "positions-shuffle": _word_order,
    "training-induction-curves": lambda lang: train_plots.plot_induction_curves(_training_run(),
                                                                                lang),
    "training-induction-maps": lambda lang: train_plots.plot_induction_maps(_training_run(), lang),
    "training-heads": lambda lang: train_plots.plot_heads(_training_run(), lang),
    "training-scale-init": lambda lang: train_plots.plot_scale_init(_training_run(), lang),
    "training-scale-curves": lambda lang: train_plots.plot_scale_curves(_training_run(), lang),
    "inference-decode": lambda lang: inference.plot_decode(_decode_run(), lang),
    "inference-cache": lambda lang: inference.plot_cache(_decode_run(), lang),
}

#: Figures whose tick labels are the tokens of a Chinese sentence in every language (the case
#: read by multilingual-e5-small): their titles and axis labels are in the page's language, the
#: tokens stay as the model read them (the English page glosses them in its text).
CHINESE_TOKENS: frozenset[str] = frozenset({"real-heads-zh-case"})

#: Source files under ``mha/`` each figure and table depends on, besides the core and
#: ``site/plots/_style.py`` and ``site/terms.py``: the build redraws one only when they change.
#: all-MiniLM-L6-v2's figures and table: its kept run (`mha.site.model_runs`; the build never
#: runs the model), the study that summarises it, and the token helpers the study and the
#: figures use (punctuation, Chinese characters, SentencePiece's space mark).
_READ = ("site/model_runs.py", "site/head_roles.py", "models/encoder.py",
         "models/sentencepiece.py", "models/wordpiece.py")
_MODEL = (*_READ, "site/data/minilm.json")
#: multilingual-e5-small's: the same, on its own kept run.
_E5 = (*_READ, "site/data/e5.json")
_WALK = ("site/experiments.py", "site/plots/walkthrough.py", "site/plots/_draw.py",
         "site/plots/case.py")
#: The training chapter's figures and tables read the kept run through ``site/training.py``.
_TRAINING = ("site/plots/training.py", "site/training.py", "site/data/training.json")
DEPENDS: dict[str, tuple[str, ...]] = {
    "scores-scaling": ("site/experiments.py", "site/plots/scores.py"),
    **{name: _WALK for name in ("home-shapes", "walk-input", "walk-qkv", "walk-scores",
                                "walk-weights", "walk-concat", "walk-output", "walk-layers",
                                "overview-one-query")},
    "overview-pooling": ("site/plots/intuition.py",),
    "projections-shared": ("site/experiments.py", "site/plots/projections.py",
                           "site/plots/_draw.py", "site/plots/case.py"),
    "longrange-cost": ("site/experiments.py", "site/plots/longrange.py"),
    "longrange-window": ("site/experiments.py", "site/plots/longrange.py", "site/plots/_draw.py"),
    "applications-patterns": ("site/experiments.py", "site/plots/applications.py",
                              "site/plots/_draw.py", "site/plots/case.py"),
    "transformer-stack": ("site/plots/transformer.py",),
    "speed-measured": ("site/plots/speed.py", "site/data/benchmark.json"),
    "speed-blocks": ("site/plots/speed.py", "site/plots/_draw.py"),
    "real-heads-roles": ("site/plots/realheads.py", *_MODEL),
    "real-heads-examples": ("site/plots/realheads.py", "site/plots/_draw.py", *_MODEL),
    "real-heads-zh-case": ("site/plots/realheads.py", "site/plots/_draw.py", *_E5),
    "real-heads-zh-roles": ("site/plots/realheads.py", *_E5),
    "positions-table": ("site/experiments.py", "site/plots/positions.py", "site/plots/_draw.py",
                        "site/plots/case.py"),
    "positions-rope": ("site/experiments.py", "site/plots/positions.py", "site/plots/_draw.py",
                       "site/plots/case.py"),
    "positions-shuffle": ("site/experiments.py", "site/plots/positions.py", "site/plots/_draw.py",
                          "site/plots/case.py"),
    # Tables are cached by the same hook, on the same kind of key.
    "head-roles": ("site/plots/realheads.py", *_MODEL),
    "head-roles-e5": ("site/plots/realheads.py", *_E5),
    "benchmark": ("site/plots/tables.py", "site/data/benchmark.json"),
    "benchmark-ladder": ("site/plots/tables.py", "site/data/benchmark.json"),
    "glossary": ("site/plots/tables.py",),
    "story": ("site/plots/tables.py",),
    # The training chapter: drawn from the kept run only (the build never trains).
    **{name: _TRAINING for name in ("training-induction-curves", "training-induction-maps",
                                    "training-heads", "training-scale-init",
                                    "training-scale-curves", "training-head-scores",
                                    "training-heads-table", "training-scale-table")},
    # The inference chapter: the decoding section of the kept benchmark run (the table imports
    # the names of the step's parts from the benchmark).
    **{name: ("site/plots/inference.py", "site/data/benchmark.json")
       for name in ("inference-decode", "inference-cache")},
    "decode-step": ("site/plots/inference.py", "site/data/benchmark.json", "site/bench.py"),
}

#: Every generated table the site shows: name (the page's ``<!-- mha:table NAME -->`` marker)
#: -> function of the language returning a Markdown table.
TABLES: dict[str, Callable[[str], str]] = {
    "head-roles": _head_role_table,
    "head-roles-e5": lambda lang: realheads.role_table(_study_zh(), lang),
    "benchmark": lambda lang: tables.benchmark_table(_benchmark_run(), lang),
    "benchmark-ladder": lambda lang: tables.ladder_table(_benchmark_run(), lang),
    "glossary": lambda lang: tables.glossary_table(TERMS, lang),
    "story": lambda lang: tables.story_table(TERMS, STORY, lang),
    "training-head-scores": lambda lang: train_plots.head_scores_table(_training_run(), lang),
    "training-heads-table": lambda lang: train_plots.heads_table(_training_run(), lang),
    "training-scale-table": lambda lang: train_plots.scale_table(_training_run(), lang),
    "decode-step": lambda lang: inference.decode_step_table(_decode_run(), lang),
}
