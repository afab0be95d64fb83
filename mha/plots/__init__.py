"""Figures for the site, drawn from ``mha``. Each plot function takes data and a language.

Plot functions return a :class:`matplotlib.figure.Figure` and never write files: the site's
build hook (``hooks/figures.py``) calls the entries of :data:`FIGURES` and saves them inside
:func:`style`. Importing ``mha`` does not import this module or matplotlib.
"""

from __future__ import annotations

from typing import Callable

from matplotlib.figure import Figure

from ..experiments import scaling_experiment
from ._style import style
from .scores import plot_scaling
from .terms import LANGUAGES, TERMS, term

__all__ = ["FIGURES", "LANGUAGES", "TERMS", "plot_scaling", "style", "term"]

#: Every figure the site shows: file stem -> function of the language returning a Figure.
#: The names of the modules each one depends on (besides the core) are in ``DEPENDS``.
FIGURES: dict[str, Callable[[str], Figure]] = {
    "scores-scaling": lambda lang: plot_scaling(scaling_experiment(), lang),
}

#: Source files under ``mha/`` each figure depends on, besides the core and ``plots/_style.py``
#: and ``plots/terms.py``: the build redraws a figure only when one of them changes.
DEPENDS: dict[str, tuple[str, ...]] = {
    "scores-scaling": ("experiments.py", "plots/scores.py"),
}
