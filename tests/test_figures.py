"""Experiments, plot functions and the figure build: right numbers, right language, no boxes."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from mha.site.experiments import scaling_experiment
from mha.site.plots import CHINESE_TOKENS, DEPENDS, FIGURES, LANGUAGES, TABLES, TERMS, term
from mha.site.plots._style import MissingGlyphError, render_svg, style

ROOT = Path(__file__).resolve().parents[1]
CJK = re.compile(r"[\u4e00-\u9fff]")


def figure_texts(fig: Figure) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


def test_scaling_experiment_measures_what_the_paper_predicts():
    r = scaling_experiment()
    ratio = r.variance_raw / r.d_k
    assert ((0.85 < ratio) & (ratio < 1.15)).all(), ratio          # Var(q.k) = d_k
    assert ((0.85 < r.variance_scaled) & (r.variance_scaled < 1.15)).all()
    assert (np.diff(r.max_weight_raw) > 0).all()                  # sharper and sharper
    assert r.max_weight_raw[0] < 0.35 and r.max_weight_raw[-1] > 0.9
    assert (r.max_weight_scaled < 0.15).all()                     # scaling keeps it spread
    assert (r.entropy_scaled > 0.85 * np.log(r.n_keys)).all()
    assert r.entropy_raw[-1] < 0.25
    again = scaling_experiment()
    np.testing.assert_array_equal(again.max_weight_raw, r.max_weight_raw)  # seeded


def test_every_figure_has_declared_dependencies_that_exist():
    assert set(FIGURES) | set(TABLES) == set(DEPENDS) and not set(FIGURES) & set(TABLES)
    for name, files in DEPENDS.items():
        for relative in files:
            assert (ROOT / "mha" / relative).exists(), (name, relative)


@pytest.mark.parametrize("name", sorted(FIGURES))
@pytest.mark.parametrize("lang", LANGUAGES)
def test_figure_is_labelled_in_its_language_and_draws_every_glyph(name, lang, tmp_path,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    fig = FIGURES[name](lang)
    assert isinstance(fig, Figure)
    assert list(tmp_path.iterdir()) == []  # plot functions never write files
    text = figure_texts(fig)
    if lang == "zh":
        assert CJK.search(text), text
    elif name in CHINESE_TOKENS:  # the tokens of a Chinese sentence, as the model read them
        ticks = {label for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                 for tick in axis.get_major_ticks() for label in (tick.label1, tick.label2)}
        assert any(CJK.search(t.get_text()) for t in ticks)
        others = fig.findobj(lambda a: hasattr(a, "get_text") and a not in ticks)
        assert not CJK.search("\n".join(a.get_text() for a in others))
    else:
        assert not CJK.search(text), text
    svg = render_svg(fig)  # raises MissingGlyphError on any character no font can draw
    assert svg.startswith(b"<?xml")
    if lang == "zh":  # deterministic (one language: the labels are all that differ)
        assert render_svg(FIGURES[name](lang)) == svg


def test_scaling_figure_uses_the_terms_file():
    for lang in LANGUAGES:
        text = figure_texts(FIGURES["scores-scaling"](lang))
        for key in ("variance", "dimension", "attention_weight", "dot_product"):
            assert term(key, lang) in text, (lang, key)


def test_missing_glyph_is_an_error():
    with style():
        fig = Figure()
        fig.subplots().set_title("\u0d85")  # a Sinhala letter: in none of our fonts
    with pytest.raises(MissingGlyphError, match="missing from font"):
        render_svg(fig)


def test_terms_are_unique_per_language():
    for lang in LANGUAGES:
        words = [getattr(t, lang) for t in TERMS.values()]
        assert len(words) == len(set(words)), lang
    with pytest.raises(ValueError, match="lang must be one of"):
        term("query", "fr")
    with pytest.raises(KeyError, match="unknown term"):
        term("no-such-term", "zh")


def import_hook(name: str):
    """The hook module hooks/<name>.py, imported as MkDocs imports it (its folder on sys.path)."""
    import importlib

    sys.path.insert(0, str(ROOT / "hooks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "hooks"))


def copy_of_mha(root: Path) -> Path:
    shutil.copytree(ROOT / "mha", root / "mha", ignore=shutil.ignore_patterns("__pycache__"))
    return root / "mha"


def double_the_benchmark_times(package: Path) -> None:
    """Edit the kept benchmark run as a new run would: other numbers, same shape."""
    path = package / "site" / "data" / "benchmark.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for row in data["results"]:
        row["seconds"] *= 2
    path.write_text(json.dumps(data), encoding="utf-8")


def draw(root: Path, *names: str) -> str:
    """hooks/draw_figures.py on the tree at ``root`` (never the work tree): its report."""
    result = subprocess.run([sys.executable, str(ROOT / "hooks" / "draw_figures.py"),
                             "--root", str(root), "--only", ",".join(names)],
                            check=True, capture_output=True, text=True)
    return result.stdout


def test_draw_script_writes_only_when_bytes_change_and_redraws_what_a_data_file_feeds(tmp_path):
    """In a copy of mha/: a second run draws and writes nothing; a new benchmark run redraws
    the figure and the table made from it, and nothing else."""
    package = copy_of_mha(tmp_path)
    names = ("speed-measured", "speed-blocks", "benchmark")
    assert "2 figures and 1 tables x 2 languages: 6 drawn, 6 files updated" in draw(tmp_path, *names)
    outputs = {name: [tmp_path / "docs" / lang / "figures" / f"{name}.svg" for lang in LANGUAGES]
               for name in names[:2]}
    outputs["benchmark"] = [tmp_path / ".cache" / "tables" / lang / "benchmark.md"
                            for lang in LANGUAGES]
    stamps = {name: [p.stat().st_mtime_ns for p in paths] for name, paths in outputs.items()}
    contents = {name: [p.read_bytes() for p in paths] for name, paths in outputs.items()}
    assert "0 drawn, 0 files updated" in draw(tmp_path, *names)
    assert {name: [p.stat().st_mtime_ns for p in paths] for name, paths in outputs.items()} == stamps
    double_the_benchmark_times(package)
    assert "4 drawn, 4 files updated" in draw(tmp_path, *names)
    for name in ("speed-measured", "benchmark"):
        assert [p.read_bytes() for p in outputs[name]] != contents[name], name
    assert [p.stat().st_mtime_ns for p in outputs["speed-blocks"]] == stamps["speed-blocks"]


def test_figures_are_redrawn_when_their_source_changes(tmp_path):
    # The cache key covers the figure's own files (data too) and the core: change one, get a
    # new key.
    draw_figures = import_hook("draw_figures")
    package = copy_of_mha(tmp_path)
    for name, relative in [("scores-scaling", "site/plots/scores.py"),
                           ("scores-scaling", "attention.py"),
                           ("scores-scaling", "site/terms.py"),
                           ("speed-measured", "site/data/benchmark.json")]:
        depends = DEPENDS[name]
        key = draw_figures.figure_key(name, depends, package)
        assert key == draw_figures.figure_key(name, depends)  # the copy hashes like the original
        original = (package / relative).read_bytes()
        (package / relative).write_bytes(original + b"\n")
        assert draw_figures.figure_key(name, depends, package) != key, relative
        (package / relative).write_bytes(original)
        assert draw_figures.figure_key(name, depends, package) == key


def test_the_build_draws_again_when_any_source_changes_data_included(tmp_path, monkeypatch):
    """hooks/figures.py skips the drawing while mha's sources are unchanged (i18n builds once
    per language; mkdocs serve keeps the hook), and draws again after an edit to any of them:
    a new benchmark run (JSON) as well as a module. (It once hashed *.py only, so under
    mkdocs serve a new benchmark.json changed the page's table but not its figure.)"""
    figures = import_hook("figures")
    package = copy_of_mha(tmp_path)
    drawn = []
    monkeypatch.setattr(figures, "PACKAGE", package)
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    monkeypatch.setattr(figures, "STAMP", tmp_path / ".cache" / "figures" / "drawn.json")
    monkeypatch.setattr(figures, "draw", lambda: drawn.append(True) or [])
    monkeypatch.setattr(figures, "_last_fingerprint", None)
    figures.on_pre_build(None)
    figures.on_pre_build(None)
    assert len(drawn) == 1
    double_the_benchmark_times(package)
    figures.on_pre_build(None)
    assert len(drawn) == 2
    (package / "site" / "plots" / "speed.py").write_text("# edited\n", encoding="utf-8")
    figures.on_pre_build(None)
    assert len(drawn) == 3
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")
    (package / ".speed.py.swp").write_bytes(b"an editor's")
    figures.on_pre_build(None)
    assert len(drawn) == 3


def test_a_fresh_build_skips_the_drawing_only_while_its_files_are_as_it_left_them(tmp_path,
                                                                               monkeypatch):
    """A new process (every ``mkdocs build``) skips the drawing when the last one was of the
    same sources and every file it wrote is as it left it; a deleted or edited figure, a new
    source, or MHA_NO_MODELS changed, draws again. The drawing's note on the real heads is
    logged either way."""
    figures = import_hook("figures")
    package = copy_of_mha(tmp_path)
    figure = tmp_path / "docs" / "en" / "figures" / "scores-scaling.svg"
    note = "real heads: drawn from the kept runs in mha/site/data/ ..."
    drawn = []

    def draw():
        drawn.append(True)
        figure.parent.mkdir(parents=True, exist_ok=True)
        figure.write_text("<svg/>", encoding="utf-8")
        return ["2 figures ... drawn", note]

    monkeypatch.setattr(figures, "PACKAGE", package)
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    monkeypatch.setattr(figures, "STAMP", tmp_path / ".cache" / "figures" / "drawn.json")
    monkeypatch.setattr(figures, "draw", draw)
    logged = []
    monkeypatch.setattr(figures.log, "info", logged.append)

    def fresh_build():
        monkeypatch.setattr(figures, "_last_fingerprint", None)   # a new process
        figures.on_pre_build(None)

    fresh_build()
    # A line before the drawing, its summary with the time it took, and the note.
    assert len(drawn) == 1 and len(logged) == 3 and logged[0].startswith("drawing the figures")
    assert re.fullmatch(r"2 figures \.\.\. drawn in \d+\.\d s", logged[1]) and logged[2] == note
    fresh_build()
    assert len(drawn) == 1 and logged[3:] == [note]               # skipped, the note again
    figure.unlink()
    fresh_build()
    assert len(drawn) == 2
    figure.write_text("<svg>edited</svg>", encoding="utf-8")
    fresh_build()
    assert len(drawn) == 3
    fresh_build()
    assert len(drawn) == 3
    monkeypatch.setenv("MHA_NO_MODELS", "1")
    fresh_build()
    assert len(drawn) == 4
    (package / "site" / "plots" / "speed.py").write_text("# edited\n", encoding="utf-8")
    fresh_build()
    assert len(drawn) == 5


def test_one_word_has_one_embedding_and_only_translations_share_one():
    # Within a language a word has one embedding wherever it stands (the English "the" at its
    # three positions); across languages only the five content words that translate each other
    # share theirs, and every other word (the; 在, 了, 。) has its own.
    from mha.site.experiments import walkthrough
    from mha.site.plots.case import CASE_ORDER, CASE_TOKENS, EMBEDDING_ROWS

    x = {lang: walkthrough(CASE_ORDER[lang], n_layers=1)[0]["x"] for lang in ("zh", "en")}
    for lang, tokens in CASE_TOKENS.items():
        assert len(tokens) == 8
        for i, a in enumerate(tokens):
            for j, b in enumerate(tokens):
                assert np.array_equal(x[lang][i], x[lang][j]) == (a == b), (lang, a, b)
    assert CASE_TOKENS["en"].count("the") == 3 and len(set(CASE_TOKENS["en"])) == 6
    assert len(set(CASE_TOKENS["zh"])) == 8
    shared = [(zh, en) for zh, en in EMBEDDING_ROWS if zh and en]
    assert sorted(en for _, en in shared) == ["desk", "detective", "found", "key", "under"]
    for zh, en in shared:
        np.testing.assert_array_equal(x["zh"][CASE_TOKENS["zh"].index(zh)],
                                      x["en"][CASE_TOKENS["en"].index(en)])
    for i in range(8):
        for j in range(8):
            same_word = (CASE_TOKENS["zh"][i], CASE_TOKENS["en"][j]) in shared
            assert np.array_equal(x["zh"][i], x["en"][j]) == same_word


def test_reordering_one_languages_tokens_only_reorders_every_stage():
    # Permutation equivariance within one language: no positional information, so the case in
    # another order gives the same numbers in the same other order, in every layer.
    from mha.site.experiments import walkthrough
    from mha.site.plots.case import CASE_ORDER, CASE_TOKENS

    for lang in ("zh", "en"):
        order = CASE_ORDER[lang]
        perm = np.random.default_rng(1).permutation(len(order))
        before, after = walkthrough(order), walkthrough([order[p] for p in perm])
        # Two float64 layers (d_model 16, 4 heads, 8 tokens) with the rows and keys in another
        # order: each layer's steps add five gamma(16) = 1.8e-14 of outputs up to 1.8 (see
        # tests/test_bench.py, layer_error), and the second carries the first's on; measured
        # 4.4e-16 (outputs) and 1.2e-16 (weights) under three OpenBLAS kernels. 1e-12 is the
        # two layers' bound with a factor ~25 for the second layer's gain.
        for a, b in zip(before, after):
            np.testing.assert_allclose(b["output"], a["output"][perm], rtol=0, atol=1e-12)
            np.testing.assert_allclose(b["weights"], a["weights"][:, perm][:, :, perm], rtol=0,
                                       atol=1e-12)
    # The same word at several places: the same rows, through every layer.
    the = [i for i, t in enumerate(CASE_TOKENS["en"]) if t == "the"]
    for stages in walkthrough(CASE_ORDER["en"]):   # rows of one product: 1e-12 as above
        np.testing.assert_allclose(stages["output"][the], stages["output"][the[:1]].repeat(3, 0),
                                   rtol=0, atol=1e-12)


def test_shared_projection_boxes_every_tie():
    # With W_Q = W_K each token's own key scores highest; the English "the" has one embedding,
    # so its three rows tie on its three columns, and all three are boxed (8 + 2 * 3 boxes).
    from matplotlib.patches import Rectangle

    boxes = {lang: [sum(type(p) is Rectangle for p in ax.patches)
                    for ax in FIGURES["projections-shared"](lang).axes[:2]]
             for lang in LANGUAGES}
    assert boxes["zh"][0] == 8 and boxes["en"][0] == 8 + 2 * 3
    assert min(boxes["zh"][1], boxes["en"][1]) >= 8


def test_walkthrough_chains_the_layers():
    from mha.site.experiments import walkthrough

    layers = walkthrough(range(8), n_layers=3)
    assert len(layers) == 3
    for before, after in zip(layers, layers[1:]):
        assert after["x"] is before["output"]
    assert not np.allclose(layers[0]["weights"], layers[1]["weights"])  # different weights


def test_a_shared_query_key_matrix_makes_every_token_pick_itself():
    from mha.site.experiments import shared_projection_experiment

    r = shared_projection_experiment()
    assert r.self_first_shared > 0.95              # its own key wins almost every row
    assert r.self_first_separate < 3 * r.chance    # with two matrices: about chance
    assert r.symmetric_shared and not r.symmetric_separate
    np.testing.assert_allclose(r.example_shared, r.example_shared.T)
    eigenvalues = np.linalg.eigvalsh(r.example_shared)
    assert eigenvalues.min() > -1e-9               # positive semi-definite


def test_attention_cost_matches_its_formulas_and_a_direct_count():
    from mha.site.experiments import attention_cost

    c = attention_cost([128, 1024, 8192], d_model=512, h=8)
    # Direct count for n = 128: four (n, d) x (d, d) products, and per head (n, d_k) x (d_k, n)
    # plus (n, n) x (n, d_k); each multiply-add is 2 operations.
    n, d, h = 128, 512, 8
    assert c.projection_flops[0] == 4 * (2 * n * d * d)
    assert c.attention_flops[0] == h * (2 * n * (d // h) * n + 2 * n * n * (d // h))
    assert c.projection_flops[1] == c.attention_flops[1]          # n = 2d
    assert c.attention_flops[2] / c.projection_flops[2] == 8192 / (2 * 512)
    assert c.score_bytes[2] == 2 * 2**30                          # 8 heads x 8192^2 x 4 bytes


def test_reach_grows_by_the_window_each_layer():
    from mha import causal_mask, sliding_window_mask
    from mha.site.experiments import reach

    n, window = 12, 2
    r = reach(sliding_window_mask(n, window), layers=6)
    heard = r[:, -1].sum(axis=1)
    np.testing.assert_array_equal(heard, np.minimum(1 + window * np.arange(1, 7), n))
    first_layer_to_hear_token_0 = int(np.argmax(r[:, -1, 0])) + 1
    assert first_layer_to_hear_token_0 == int(np.ceil((n - 1) / window))  # path length O(n/r)
    assert reach(causal_mask(n), 1)[0, -1].all()                          # path length 1


def test_application_patterns_respect_their_masks():
    from mha.site.experiments import application_patterns

    p = application_patterns(range(8))
    assert (p["bert"][:, 8:] == 0).all()                 # padding keys hidden from everyone
    np.testing.assert_allclose(p["bert"].sum(axis=1), 1)
    assert (np.triu(p["gpt"], 1) == 0).all()             # no peeking at later tokens
    assert p["cross"].shape == (4, 8) and np.allclose(p["cross"].sum(axis=1), 1)


def test_figures_get_their_size_and_past_the_first_section_load_lazily(tmp_path):
    """The figure hook writes each figure's size in CSS px (pt * 4/3, read from the SVG), and
    marks lazy only the figures past the page's first <h2>: those before it may be on the
    first screen."""
    from types import SimpleNamespace

    figures = import_hook("figures")
    (tmp_path / "en" / "figures").mkdir(parents=True)
    for name, (w, h) in {"a.svg": (300, 150), "b.svg": (60, 45)}.items():
        (tmp_path / "en" / "figures" / name).write_text(
            f'<?xml version="1.0"?>\n<svg width="{w}pt" height="{h}pt" viewBox="0 0 {w} {h}"></svg>', encoding="utf-8")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="en/chapter.md"))
    config = {"docs_dir": str(tmp_path)}
    html = ('<h1>T</h1><p><img alt="first" src="figures/a.svg" /></p>'
            '<h2 id="s">S</h2><p><img alt="second" src="../figures/b.svg" /></p>'
            '<p><img alt="sized" src="figures/a.svg" width="10" /></p>')
    images = re.findall(r"<img [^>]*>", figures.on_page_content(html, page, config, None))
    assert images[0] == '<img alt="first" src="figures/a.svg" width="400" height="200" />'
    assert images[1] == ('<img alt="second" src="../figures/b.svg" width="80" height="60"'
                         ' loading="lazy" decoding="async" />')
    assert images[2] == '<img alt="sized" src="figures/a.svg" width="10" />'  # left as written
    # No <h2>: the page is one section, and its figures stay eager.
    one = figures.on_page_content('<p><img alt="x" src="figures/b.svg" /></p>', page, config, None)
    assert "loading" not in one and 'width="80"' in one
