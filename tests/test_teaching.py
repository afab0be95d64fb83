"""The teacher's page and the line under every title (hooks/reading.py).

The reading time is a function of the page's text (tested on small texts, so the rule itself is
pinned: change the text, the time changes by what the rule says); the line sits under the H1 of
every page with a level; the teaching page's numbers are the hook's, its maps cover every course
chapter, and both languages list it in the navigation right after the home page. One test reads
the session's shared build (``built_site``): the line and the numbers on the built pages, and
the line kept out of the search index.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from helpers import load_file

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LANGS = ("zh", "en")
reading = load_file(ROOT / "hooks" / "reading.py", "reading_hook")
from mkdocs.exceptions import PluginError  # noqa: E402  (after the hook: skipped without mkdocs)

TEACHING_ANCHORS = ("levels", "course-plan", "paths", "d2l-map", "paper-map", "wrong-answers",
                    "answers", "homework")


def level_of(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---\n")[1]).get("level")


def section(text: str, anchor: str) -> str:
    """The ``## … { #anchor }`` section of a page's source, up to the next ``## ``."""
    match = re.search(rf"^## .*\{{\s*#{anchor}\s*\}}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no section #{anchor}"
    return match.group(1)


# ---- the rule ---------------------------------------------------------------------------------

def test_reading_time_is_the_rule_applied_to_the_text():
    seconds = reading.reading_seconds
    words, han = reading.WORDS_PER_MINUTE, reading.HAN_PER_MINUTE
    assert seconds(" ".join(["word"] * words)) == pytest.approx(60)
    assert seconds("注" * han) == pytest.approx(60)
    assert seconds("注" * han + " softmax") == pytest.approx(60 + 60 / words)
    base = "# Title { #t }\n\nSome prose here.\n"
    plain = seconds(base)
    code = "```python\nx = 1  # not prose, however many words it has\n```\n"
    output = "```output\n1\n```\n"
    figure = "![what it shows](figures/x.svg)\n"
    formula = "$$\na = b\n$$\n"
    assert seconds(base + code) == pytest.approx(plain + reading.SECONDS["code"])
    assert seconds(base + code + output) == pytest.approx(
        plain + reading.SECONDS["code"] + reading.SECONDS["output"])
    assert seconds(base + figure) == pytest.approx(plain + reading.SECONDS["figure"])
    assert seconds(base + formula) == pytest.approx(plain + reading.SECONDS["formula"])
    # a block inside a folded answer is a block too; the answer's words are read
    answer = '??? question "Why?"\n\n    Because.\n\n    ```python\n    y = 2\n    ```\n'
    assert seconds(base + answer) == pytest.approx(
        plain + 60 * 2 / words + reading.SECONDS["code"])
    # the exercises are homework: not read, however long
    exercises = ("## Exercises { #exercises }\n\n" + "word " * 500 + "\n" + code
                 + "\n## Sources { #sources }\n\n- one\n")
    sources = "## Sources { #sources }\n\n- one\n"
    assert seconds(base + exercises) == pytest.approx(seconds(base + sources))


def test_more_text_more_minutes_on_a_real_chapter(tmp_path):
    page = tmp_path / "scores.md"
    text = (DOCS / "en" / "scores.md").read_text(encoding="utf-8")
    page.write_text(text, encoding="utf-8")
    before = reading.page_minutes(page)
    page.write_text(text + "\n" + "more words " * 1000 + "\n", encoding="utf-8")
    assert reading.page_minutes(page) == before + 10  # 2000 words at 200 a minute
    assert reading.minutes(0) == 1 and reading.minutes(89) == 1 and reading.minutes(90) == 2


def test_a_chapter_and_its_twin_read_in_about_the_same_time():
    """The Chinese rate is set so that the two languages agree (the hook's docstring)."""
    for name, stems in reading.PATHS.items():
        zh, en = (sum(reading.page_minutes(DOCS / lang / f"{stem}.md") for stem in stems)
                  for lang in LANGS)
        assert abs(zh - en) <= 0.15 * en, (name, zh, en)


# ---- the line under the title -----------------------------------------------------------------

def page(tmp_path, lang: str, name: str, text: str, meta: dict):
    path = tmp_path / lang / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return SimpleNamespace(meta=meta, file=SimpleNamespace(
        src_uri=f"{lang}/{name}", locale=lang, abs_src_path=str(path)))


@pytest.mark.parametrize("lang", LANGS)
def test_the_line_goes_under_the_title_with_level_and_minutes(tmp_path, lang):
    text = "# A chapter { #a }\n\n" + "word " * 600 + "\n\n## More { #more }\n"
    config = {"theme": {"language": "zh"}}
    out = reading.on_page_markdown(text, page(tmp_path, lang, "a.md", text, {"level": "core"}),
                                   config, None)
    title, rest = out.split("\n", 1)
    assert title == "# A chapter { #a }"
    line = rest.strip().split("\n</div>")[0]
    assert "data-search-exclude" in line and reading.LEVELS_LINK in line
    assert reading.LABELS[lang]["core"] in line
    assert ("阅读约 3 分钟" if lang == "zh" else "3 min read") in line
    assert out.endswith("## More { #more }\n")
    # a reference page shows its level only; a page without a level is left alone
    ref = reading.on_page_markdown(text, page(tmp_path, lang, "r.md", text, {"level": "reference"}),
                                   config, None)
    assert reading.LABELS[lang]["reference"] in ref and "3" not in ref.split("</div>")[0]
    home = page(tmp_path, lang, "h.md", text, {})
    assert reading.on_page_markdown(text, home, config, None) == text
    with pytest.raises(PluginError, match="level 'kore'"):
        reading.on_page_markdown(text, page(tmp_path, lang, "k.md", text, {"level": "kore"}),
                                 config, None)


def test_a_comment_in_a_code_block_is_no_title():
    text = "```python\n# a comment\n```\n\n# The title { #t }\n\nText.\n"
    out = reading.with_badge(text, "LINE")
    assert out.split("\n")[:7] == ["```python", "# a comment", "```", "", "# The title { #t }",
                                    "", "LINE"]
    assert reading.with_badge("No title.\n", "LINE") == "No title.\n"


def test_notebooks_are_left_to_mkdocs_jupyter(tmp_path):
    notebook = SimpleNamespace(meta={"level": "core"},
                               file=SimpleNamespace(src_uri="zh/x.ipynb", locale="zh"))
    assert reading.on_page_markdown("# x", notebook, {}, None) == "# x"


def test_every_page_has_a_known_level_except_the_home_page():
    for lang in LANGS:
        for path in sorted((DOCS / lang).glob("*.md")):
            level = level_of(path)
            if path.name == "index.md":
                continue
            assert level in reading.LEVELS, f"{path}: level {level!r}"
    levels = {path.stem: level_of(path) for path in (DOCS / "en").glob("*.md")}
    core = {stem for stem, level in levels.items() if level == "core"}
    assert core == set(reading.PATHS["course"])
    assert {stem for stem, level in levels.items() if level == "deep"} == {
        "training", "real-heads", "speed", "inference"}


# ---- the markers ------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGS)
def test_markers_give_the_hooks_numbers_and_refuse_what_they_do_not_know(lang):
    folder = DOCS / lang
    course = [reading.page_minutes(folder / f"{stem}.md") for stem in reading.PATHS["course"]]
    total = reading.replace_markers("<!-- reading:total course -->", folder, lang, "t")
    assert total == reading.duration(sum(course), lang)
    plan = reading.replace_markers("<!-- reading:plan course -->", folder, lang, "t")
    rows = plan.split("\n")[2:]
    assert len(rows) == len(course)
    assert rows[-1].rstrip(" |").endswith(reading.duration(sum(course), lang))  # it adds up
    pair = reading.replace_markers("<!-- reading:total scores+positions -->", folder, lang, "t")
    assert pair == reading.duration(course[3] + course[4], lang)
    assert reading.replace_markers("<!-- reading:time scores -->", folder, lang, "t") == \
        reading.duration(course[3], lang)
    listed = reading.replace_markers("<!-- reading:path engineer -->", folder, lang, "t")
    assert [re.search(r"\]\(([\w-]+)\.md\)", line).group(1) for line in listed.split("\n")] == \
        list(reading.PATHS["engineer"])
    ratio = reading.replace_markers("<!-- reading:ratio course -->", folder, lang, "t")
    assert 1.0 < float(ratio) < 1.5  # Han characters per English word of the twin
    with pytest.raises(PluginError, match="unknown marker"):
        reading.replace_markers("<!-- reading:totl course -->", folder, lang, "t")
    with pytest.raises(PluginError, match="no page 'scors'"):
        reading.replace_markers("<!-- reading:total scors+positions -->", folder, lang, "t")


def test_homework_keeps_questions_and_drops_answers():
    exercises = (
        "## Exercises { #exercises }\n\n### Concepts { #exercises-concepts }\n\n"
        "1. **Why is the sky blue? See [the scores](#why-scale).**\n\n"
        '    ??? success "Answer"\n\n        Rayleigh.\n\n        ```python\n'
        "        assert True\n        ```\n\n"
        "2. **And the sea?**\n\n"
        '    ??? success "Answer"\n        Also blue.\n\n## Sources { #sources }\n'
    )
    kept = reading.without_answers(reading.section(exercises, reading.EXERCISES))
    assert "Why is the sky blue?" in kept and "And the sea?" in kept
    assert "Rayleigh" not in kept and "Also blue" not in kept and "assert" not in kept
    assert "Sources" not in kept


@pytest.mark.parametrize("lang", LANGS)
def test_the_homework_sheet_has_every_chapters_questions_and_no_answer(lang):
    sheet = reading.homework(DOCS / lang, lang)
    for stem in reading.PATHS["course"]:
        assert f"]({stem}.md)**" in sheet
        text = (DOCS / lang / f"{stem}.md").read_text(encoding="utf-8")
        for title in re.findall(r'^\s*\?\?\? question "(.*)"', text, re.M):
            assert f"- {title}" in sheet
    assert "??? " not in sheet and "!!! " not in sheet
    assert not re.search(r"\]\(#", sheet)  # a chapter's own anchors now name the chapter
    assert "没有练习" not in sheet and "No exercises" not in sheet  # every chapter has some
    for stem in reading.PATHS["course"]:
        exercises = reading.section(
            (DOCS / lang / f"{stem}.md").read_text(encoding="utf-8"), reading.EXERCISES)
        # every question is on the sheet, and no line of any answer
        asked = re.findall(r"^(?:\d+\.|\*\*\d+\.\*\*)\s+(.{12,})$", exercises, re.M)
        assert asked, stem
        for question in asked:
            assert question.strip().replace("](#", f"]({stem}.md#") in sheet, (stem, question)
        in_box, answers = None, []
        for line in exercises.split("\n"):
            indent = len(line) - len(line.lstrip())
            if in_box is not None and line.strip() and indent <= in_box:
                in_box = None
            if in_box is not None and len(line.strip()) > 20:
                answers.append(line.strip())
            if reading.ADMONITION.match(line):
                in_box = indent
        assert answers, stem
        leaked = [a for a in answers if a in sheet and not re.fullmatch(r"[`\s\w().,=-]*", a)]
        assert not leaked, (stem, leaked[:3])


# ---- the teaching page ------------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGS)
def test_teaching_page_has_its_sections_and_takes_its_numbers_from_the_hook(lang):
    text = (DOCS / lang / "teaching.md").read_text(encoding="utf-8")
    for anchor in TEACHING_ANCHORS:
        assert re.search(rf"^## .*\{{\s*#{anchor}\s*\}}", text, re.M), anchor
    assert "<!-- reading:plan course -->" in section(text, "course-plan")
    assert "<!-- reading:homework -->" in section(text, "homework")
    for name in reading.PATHS:
        assert f"<!-- reading:path {name} -->" in section(text, "paths")
    # no reading time written by hand: every "N 分钟" / "N min" is a marker's, except the
    # length of a class session (two periods, 90 minutes)
    prose = re.sub(r"<!--.*?-->", "", text)
    assert set(re.findall(r"(\d+)\s*(?:分钟|min\b|minutes)", prose)) <= {"90"}


@pytest.mark.parametrize("lang", LANGS)
def test_the_page_states_the_rule_the_hook_applies(lang):
    levels = section((DOCS / lang / "teaching.md").read_text(encoding="utf-8"), "levels")
    unit = "秒" if lang == "zh" else ""
    stated = {int(n) for n in re.findall(r"(\d+)\s*(?:个词|个汉字|words|Han)", levels)}
    assert {reading.WORDS_PER_MINUTE, reading.HAN_PER_MINUTE} <= stated
    for kind in ("code", "output", "figure", "formula"):
        assert re.search(rf"\b{reading.SECONDS[kind]}\s*{unit}", levels), kind


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("anchor", ["d2l-map", "paper-map"])
def test_the_maps_cover_every_course_chapter(lang, anchor):
    rows = [line for line in section((DOCS / lang / "teaching.md").read_text(encoding="utf-8"),
                                     anchor).split("\n") if line.startswith("| [")]
    first_links = [re.match(r"\| \[[^\]]+\]\(([\w-]+)\.md\)", row).group(1) for row in rows]
    assert set(reading.PATHS["course"]) <= set(first_links)
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert all(cells), row  # every column filled in
    if anchor == "d2l-map":
        for row in rows:
            assert re.search(r"\b1[01]\.\d", row) or re.search(r"\b[45]\.\d", row), row


@pytest.mark.parametrize("lang", LANGS)
def test_the_d2l_sections_under_each_title_are_the_teaching_pages(lang):
    """The line under a chapter's title names the d2l sections of the teaching page's table
    (column 2: this language's edition; column 3: the other one's)."""
    rows = {re.match(r"\| \[[^\]]+\]\(([\w-]+)\.md\)", line).group(1): line.strip("|").split("|")
            for line in section((DOCS / lang / "teaching.md").read_text(encoding="utf-8"),
                                "d2l-map").split("\n") if line.startswith("| [")}
    other = "en" if lang == "zh" else "zh"
    assert set(reading.D2L) == set(rows)
    for stem, sections in reading.D2L.items():
        for edition, cell in ((lang, rows[stem][1]), (other, rows[stem][2])):
            found = re.findall(r"(?<![\d.])(\d+\.\d+)(?![\d.])", cell)
            assert set(sections[edition]) == set(found), (stem, edition, cell)
    line = reading.badge("core", lang, 12, "scores")
    assert f"{reading.D2L['scores'][lang][0]}" in line and reading.D2L_LINK in line


@pytest.mark.parametrize("lang", LANGS)
def test_every_wrong_answer_says_where_it_is_answered(lang):
    rows = [line for line in section((DOCS / lang / "teaching.md").read_text(encoding="utf-8"),
                                     "wrong-answers").split("\n") if line.startswith("| ")][2:]
    assert len(rows) >= 15
    for row in rows:
        where = row.strip("|").split("|")[-1]
        assert re.search(r"\]\([\w-]+\.md#[\w-]+\)", where), row


def test_the_navigation_lists_the_teaching_page_after_the_home_page_in_both_languages():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"),
                       Loader=yaml.BaseLoader)  # BaseLoader: mkdocs.yml's !ENV tags as text
    nav = [next(iter(item.items())) for item in config["nav"]]
    assert nav[0] == ("首页", "index.md") and nav[1] == ("教学指南", "teaching.md")
    i18n = next(plugin["i18n"] for plugin in config["plugins"]
                if isinstance(plugin, dict) and "i18n" in plugin)
    english = next(language for language in i18n["languages"] if language["locale"] == "en")
    assert english["nav_translations"]["教学指南"] == "For teachers"
    assert any("hooks/reading.py" in hook for hook in config["hooks"])


# ---- the built site ---------------------------------------------------------------------------

def built(site: Path, lang: str, stem: str) -> str:
    return (site / ("en" if lang == "en" else "") / stem / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("lang", LANGS)
def test_built_pages_show_the_line_and_the_numbers_but_search_does_not(built_site, lang):
    site = built_site.dir
    minutes = reading.page_minutes(DOCS / lang / "scores.md")
    html = built(site, lang, "scores")
    line = re.search(r'<div class="reading-meta reading-core"[^>]*>(.*?)</div>', html, re.S)
    assert line, "no reading line on the scores chapter"
    assert 'href="../teaching/#levels"' in line.group(1)
    assert reading.LABELS[lang]["core"] in line.group(1)
    assert (f"阅读约 {minutes} 分钟" if lang == "zh" else f"{minutes} min read") in line.group(1)
    assert html.index("reading-meta") > html.index("<h1")
    teaching = built(site, lang, "teaching")
    assert "reading:" not in teaching  # every marker replaced
    total = sum(reading.page_minutes(DOCS / lang / f"{stem}.md")
                for stem in reading.PATHS["course"])
    assert reading.duration(total, lang) in teaching
    index = json.loads((site / ("en" if lang == "en" else "") / "search" /
                        "search_index.json").read_text(encoding="utf-8"))
    words = "阅读约" if lang == "zh" else "min read"
    assert not any(words in doc["text"] for doc in index["docs"])


def test_the_plan_names_chapters_by_their_navigation_labels():
    """One chapter, one name (the lecturer's review, finding 9): the plan, the paths and the
    homework sheet take the nav's label, translated for English, not the page's H1."""
    from types import SimpleNamespace

    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    zh, en = reading.nav_labels(config, "zh"), reading.nav_labels(config, "en")
    assert zh["inference"] == "推理与 KV 缓存" and en["inference"] == "Inference and the KV cache"
    assert zh["positions"] == "词序与位置编码" and en["positions"] == "Positions"
    # the nav may already be the translated one when the English side is built
    english_nav = dict(config, nav=[{en["positions"]: "positions.md"}])
    assert reading.nav_labels(english_nav, "zh") == {"positions": zh["positions"]}
    plugin = SimpleNamespace(config={"languages": []})
    assert reading.nav_labels({"nav": [{"标题": "x.md"}], "plugins": {"i18n": plugin}},
                              "en") == {"x": "标题"}
    plan = reading.plan(ROOT / "docs" / "zh", ("positions",), "zh", zh)
    assert "[词序与位置编码](positions.md)" in plan
