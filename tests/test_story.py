"""One story, kept everywhere: every prop of the detective story means one thing on every page.

`mha.site.terms` holds the story (`STORY`: each prop's row of `TERMS`, its words in each
language and what it stands for) and the words the pages no longer use (`RETIRED`: each with
the contexts where it may stay, and why). This file holds the pages to them: the Markdown of
``docs/zh`` and ``docs/en`` (prose, the code's comments and strings; never an output block,
inline code, a link's target or an anchor) and the companion notebooks' Markdown cells, and the
glossary's notes themselves. It also checks that the home page's table and the glossary carry
every prop, and what the home page promises a reader (the chapters by their navigation labels,
core and deep dives marked, the numbering convention, three paths).

The exceptions live in one place, `RETIRED` (each allowed context with its reason) and
`MENTIONS` (a word in quotation marks is named, not used).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.site

from mha.site.terms import GLOSSES, LANGUAGES, MENTIONS, RETIRED, STORY, TERMS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


# ---- what a page says ----------------------------------------------------------------------

def _blank(match: re.Match) -> str:
    """The match replaced by spaces, its line breaks kept (so line numbers stay right)."""
    return re.sub(r"[^\n]", " ", match.group(0))


def readable(markdown: str) -> str:
    """What a reader reads of a page, with everything else blanked out in place: fenced blocks
    other than Python (outputs, shell commands), maths (the same in both languages: a formula's
    \\operatorname{LayerNorm} is a symbol, not a word), inline code, HTML comments, link targets
    and attribute lists ({ #anchor })."""
    lines = markdown.split("\n")
    fence = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if fence is None:
            opening = re.match(r"(`{3,}|~{3,})\s*(\S*)", stripped)
            if opening:
                fence = (opening.group(1), opening.group(2).lower() not in ("python", "py"))
                lines[i] = " " * len(line)
        elif stripped.startswith(fence[0]) and stripped.strip("`~") == "":
            fence, lines[i] = None, " " * len(line)
        elif fence[1]:
            lines[i] = " " * len(line)
    text = "\n".join(lines)
    for pattern in (r"<!--.*?-->", r"`[^`\n]+`", r"\$\$.*?\$\$", r"(?<![\\$])\$(?!\$)[^$\n]+?\$",
                    r"\]\([^)\s]*\)", r"\{\s*[#.:][^}\n]*\}"):
        text = re.sub(pattern, _blank, text, flags=re.S)
    return text


def notebook_markdown(path: Path) -> str:
    """The Markdown cells of a Jupyter notebook, one after another."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")


def pages(lang: str) -> list[Path]:
    return sorted((DOCS / lang).glob("*.md")) + sorted((DOCS / lang).glob("*.ipynb"))


def page_text(path: Path) -> str:
    if path.suffix == ".ipynb":
        return readable(notebook_markdown(path))
    return readable(path.read_text(encoding="utf-8"))


# ---- the check -----------------------------------------------------------------------------

def spaced(pattern: str) -> str:
    """``pattern`` with each space matching any white space: a phrase may break across lines."""
    return pattern.replace(" ", r"\s")


def allowed_spans(text: str, rule) -> list[tuple[int, int]]:
    contexts = [pattern for pattern, _ in rule.allowed]
    contexts += [pattern.format(word=rule.word) for pattern, _ in MENTIONS]
    return [m.span() for pattern in contexts for m in re.finditer(spaced(pattern), text)]


def violations(text: str, lang: str, skip=lambda rule: False) -> list[str]:
    """Each use of a retired word in ``text`` outside its allowed contexts: 'line: word (why)'."""
    found = []
    for rule in RETIRED:
        if rule.lang != lang or skip(rule):
            continue
        spans = None
        for m in re.finditer(spaced(rule.word), text):
            spans = allowed_spans(text, rule) if spans is None else spans
            if any(start <= m.start() and m.end() <= end for start, end in spans):
                continue
            line = text.count("\n", 0, m.start()) + 1
            found.append((line, f"{line}: {m.group(0)!r} -> {getattr(TERMS[rule.instead], lang)} "
                                f"({rule.why})"))
    return [message for _, message in sorted(found)]


PAGES = [(lang, path.name) for lang in LANGUAGES for path in pages(lang)]


@pytest.mark.parametrize("lang, name", PAGES, ids=[f"{lang}/{name}" for lang, name in PAGES])
def test_page_keeps_the_story(lang, name):
    """No page uses a retired word, or a prop word in another sense, outside the listed
    exceptions (RETIRED in mha/site/terms.py)."""
    found = violations(page_text(DOCS / lang / name), lang)
    assert not found, f"docs/{lang}/{name}:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("lang, name", PAGES, ids=[f"{lang}/{name}" for lang, name in PAGES])
def test_page_glosses_a_term_in_english_at_most_once(lang, name):
    text = page_text(DOCS / lang / name)
    assert [gloss for gloss in GLOSSES[lang] if text.count(gloss) > 1] == []


def test_glossary_notes_keep_the_story():
    """The glossary's notes (the terms file) follow the same rules; another book's name stays
    in the note of the term it names (that is where the glossary lists it)."""
    found = []
    for key, entry in TERMS.items():
        for lang in LANGUAGES:
            note = getattr(entry, lang + "_note")
            own = lambda rule: rule.alias and rule.instead == key  # noqa: E731
            found += [f"{key} ({lang}) {v}" for v in violations(note, lang, skip=own)]
    assert not found, "\n".join(found)


# The lecturer's review quotes these sentences (findings 1-6, 36, 43, 48, 55-57); each must fail
# the check, and its fixed form pass.
CAUGHT = [
    ("zh", "队长把 h 份报告改写成一份 d_model 维的笔记", "队长把 h 份报告改写成一份综合报告"),
    ("zh", "循环神经网络把笔记一路带到下一页", "循环神经网络把小抄一路带到下一页"),
    ("zh", "四位侦探拿着随机的笔记本上岗", "四位侦探拿着随机的办案手册上岗"),
    ("zh", "侦探的笔记不用重抄", "标签和内容不用重抄"),
    ("zh", "在本子上记下它和哪几页有关", "在页边批注里记下它和哪几页有关"),
    ("zh", "先给每件证物盖上页码", "先给每一页盖上页码"),
    ("zh", "把 <s> 当作封面", "把 <s> 当作 0 号页"),
    ("zh", "这个头是书记员", "这位侦探"),
    ("zh", "下文称它为“原文”，原文的类", "下文称它为原讲稿，原讲稿的类，原论文表 3"),
    ("zh", "W^V 给出它的摘要（值）", "W^V 给出它的内容（值）"),
    ("zh", "它写报告是一个词一个词地写", "它生成文本是一个词一个词地写"),
    ("zh", "x = np.random.default_rng(0).normal(size=(8, 16))     # 卷宗：8 个词元",
     "x = np.random.default_rng(0).normal(size=(8, 16))     # 一份随机输入：8 个词元"),
    ("zh", "这个头叫 L1H2", "这个头叫 L1-H2"),
    ("zh", "第 0 页", "0 号页"),
    ("zh", "每个子块外面有残差连接", "每个子层外面有残差连接"),
    ("zh", "8 个 K/V 头；键头和值头", "8 个键值头"),
    ("zh", "再做一次 LayerNorm", "再做一次层归一化（LayerNorm）"),
    ("zh", "批量大小为 32", "批大小为 32；d2l 叫它批量大小"),
    ("zh", "训练时用 teacher forcing", "训练时用强制教学（teacher forcing）"),
    ("zh", "一个归纳头", "一个诱导头"),
    ("en", "rewrites them into one note of width d_model",
     "rewrites them into one combined report"),
    ("en", "carrying its notes forward", "carrying its running note forward"),
    ("en", "the detectives started with random notebooks", "with random handbooks; see the "
     "companion notebook or any Jupyter notebook"),
    ("en", "a clerk", "a detective"),
    ("en", "x = rng.normal(size=(8, 16))  # the case file: 8 tokens",
     "x = rng.normal(size=(8, 16))  # a random input: 8 tokens"),
    ("en", "head L1H2", "head L1-H2"),
    ("en", "4 K/V heads", "4 key/value heads"),
]


@pytest.mark.parametrize("lang, wrong, right", CAUGHT)
def test_the_check_catches_what_the_review_found(lang, wrong, right):
    assert violations(wrong, lang), wrong
    assert not violations(right, lang), violations(right, lang)


def test_readable_blanks_what_no_reader_reads_and_keeps_line_numbers():
    page = ("x 笔记\n```output\n笔记\n```\n`笔记` [a](笔记.md) { #笔记 } <!-- 笔记 -->\n"
            "```python\nx = 1  # 笔记\n```\n$\\text{笔记}$ and\n$$\n\\text{笔记}\n$$\n")
    text = readable(page)
    assert text.count("\n") == page.count("\n")
    assert [text.count("\n", 0, m.start()) + 1 for m in re.finditer("笔记", text)] == [1, 7]


def test_every_exception_says_why_and_every_alias_is_in_the_glossary():
    for rule in RETIRED:
        assert rule.lang in LANGUAGES and rule.instead in TERMS and rule.why, rule
        for pattern, reason in rule.allowed:
            assert pattern and reason, rule
        if rule.alias:  # listed in the glossary: the note of the term it names
            note = getattr(TERMS[rule.instead], rule.lang + "_note")
            assert re.search(rule.word, note), (rule.word, rule.instead)


# ---- the story's rows, on the home page and in the glossary ---------------------------------

def test_every_prop_has_its_words_and_what_it_stands_for():
    # the glossary's last rows, in the home page's order; the two outside the story come last
    assert list(TERMS)[-len(STORY):] == list(STORY)
    assert [prop for prop, meaning in STORY.items() if meaning is None] == list(STORY)[-2:]
    for prop, meaning in STORY.items():
        entry = TERMS[prop]
        assert entry.zh and entry.en and entry.zh_note and entry.en_note, prop
        if meaning is not None:
            assert meaning in TERMS and meaning not in STORY, prop
    words = {lang: [getattr(TERMS[prop], lang) for prop in STORY] for lang in LANGUAGES}
    for lang in LANGUAGES:
        assert len(set(words[lang])) == len(STORY)
    # the props the issue names: a detective's handbook, the KV cache, the RNN's note, a layer
    # and its captain, the Jupyter notebook; what each stands for
    assert {STORY[p] for p in ("handbook", "filing_cabinet", "running_note", "shift",
                               "case_record", "combined_report")} == {
        "projection", "kv_cache", "hidden_state", "layer", "residual_stream",
        "multi_head_attention"}
    assert TERMS["source_document"].zh == "原讲稿" and TERMS["jupyter_notebook"].zh.startswith(
        "Jupyter")


def test_home_page_and_glossary_carry_every_prop():
    from mha.site.plots import TABLES

    for lang in LANGUAGES:
        home = (DOCS / lang / "index.md").read_text(encoding="utf-8")
        case = home.split("{ #the-case }", 1)[1].split("\n## ", 1)[0]
        assert "<!-- mha:table story -->" in case, lang
        assert "<!-- mha:table glossary -->" in (DOCS / lang / "glossary.md").read_text(
            encoding="utf-8"), lang
        table, glossary = TABLES["story"](lang), TABLES["glossary"](lang)
        for prop in STORY:
            entry = TERMS[prop]
            word = getattr(entry, lang)
            assert f"| {word} |" in table.replace("**", ""), (lang, prop)
            assert f"| {getattr(entry, lang + '_note')} |" in table, (lang, prop)
            assert f"**{word}**" in glossary, (lang, prop)
            if entry.symbol:
                assert f"${entry.symbol}$" in table, (lang, prop)


# ---- what the home page promises ------------------------------------------------------------

def nav() -> list[tuple[str, str, str]]:
    """(Chinese label, English label, file) of every page in mkdocs.yml's nav."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    entries = re.findall(r"^  - (.+?): (\S+\.(?:md|ipynb))$",
                         config.split("\nnav:", 1)[1], flags=re.M)
    english = dict(re.findall(r"^ {12}(.+?): (.+)$",
                              config.split("nav_translations:", 1)[1].split("\n  - ", 1)[0],
                              flags=re.M))
    return [(zh, english[zh], page) for zh, page in entries]


def front_matter_level(path: Path) -> str | None:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return None
    found = re.search(r"^level:\s*(\w+)", text.split("---", 2)[1], flags=re.M)
    return found.group(1) if found else None


@pytest.mark.parametrize("lang", LANGUAGES)
def test_home_page_lists_the_chapters_by_their_navigation_labels(lang):
    """Finding 9: the chapter list uses the nav's labels, and marks the deep dives."""
    home = (DOCS / lang / "index.md").read_text(encoding="utf-8")
    chapters = home.split("{ #chapters }", 1)[1].split("\n## ", 1)[0]
    links = dict((page, label) for label, page in
                 re.findall(r"\[([^\]]+)\]\(([\w.-]+\.(?:md|ipynb))(?:#[\w-]+)?\)", chapters))
    column = 0 if lang == "zh" else 1
    for entry in nav():
        page = entry[2]
        if page == "index.md":
            continue
        assert page in links, (lang, page)
        assert links[page] == entry[column], (lang, page, links[page])
    deep = [page for *_, page in nav() if page.endswith(".md")
            and front_matter_level(DOCS / lang / page) == "deep"]
    assert deep, lang
    for page in deep:
        line = next(line for line in chapters.splitlines() if f"]({page}" in line)
        assert ("深入" in line) if lang == "zh" else ("deep dive" in line.lower()), (lang, page)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_home_page_states_the_numbering_and_offers_three_paths(lang):
    home = (DOCS / lang / "index.md").read_text(encoding="utf-8")
    if lang == "zh":
        assert "0 号页" in home and "L1-H3" in home and "第一页" in home
        assert re.search(r"^## 三条路线 \{ #paths \}$", home, flags=re.M)
    else:
        assert re.search(r"count from 0", home) and "L1-H3" in home
        assert re.search(r"^## Three ways through \{ #paths \}$", home, flags=re.M)
    paths = home.split("{ #paths }", 1)[1].split("\n## ", 1)[0]
    assert "teaching.md#paths" in paths
    assert paths.count("\n- ") + paths.count("\n1. ") + paths.count("\n2. ") >= 3
