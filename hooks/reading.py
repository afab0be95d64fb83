"""MkDocs hook: each page's level and reading time under its title; the teaching page's numbers.

Under the H1 of every Markdown page whose front matter has ``level:`` (``core``, ``deep``,
``practice`` or ``reference``) goes one line: the level, linked to the teaching page's
explanation (``teaching.md#levels``); except on reference pages (looked up, not read through),
the reading time this hook computes from the page's source; and, for the chapters that have
them, the sections of *Dive into Deep Learning* they map to (:data:`D2L`). A page without
``level`` (the home page) gets no line; an unknown level fails the build. Notebook pages are
left alone.

The line is marked ``data-search-exclude``: Material's search leaves it out of the index (a search
for "core" finds the chapters that talk about it, not every page). ``hooks/search_cache.py`` keys
a page's entries on its HTML, which the line is part of, so a changed time is indexed again.

Reading time, the site's own rule (one function, :func:`reading_seconds`):

- English prose: 200 words a minute. Brysbaert (2019, "How many words do we read per minute? A
  review and meta-analysis of reading rate", Journal of Memory and Language 109, 104047) puts
  adults' silent reading of English non-fiction at 238 words a minute on average, most adults
  between 175 and 300; this is technical text with formulas, so the rule sits at the slow end.
- Chinese prose: 300 Han characters a minute. No figure from that meta-analysis applies (it
  measures English words); Brysbaert notes that other languages' rates follow from how much text
  they need for the same message. The rate is set so that a Chinese page and its English twin
  get about the same time: the core chapters held 1.24 Han characters per English word of their
  twins when the rule was set (the teaching page shows the current ratio, ``reading:ratio``),
  and 300 / 200 is close to that, once the Latin words inside Chinese text (W^Q, softmax,
  numbers) are counted at the English rate.
  ``tests/test_teaching.py`` checks that the twins' totals stay within 15% of each other.
- Each code block 30 s, each output block 10 s, each figure 20 s, each display formula 10 s, each
  table the build inserts (``<!-- mha:table … -->``) 30 s; an inline formula counts as one word.
- The exercises (``## … { #exercises }`` up to the next ``## ``) are homework, not reading: left
  out. Self-check answers, though folded, are counted.
- A page's time is rounded to whole minutes (at least 1); a path's total is the sum of its pages'
  rounded minutes, so a table of them adds up.

Markers, replaced on any page (one home for every number the teaching and home pages show):

- ``<!-- reading:time PAGE -->``: PAGE's time ("12 分钟" / "12 min"), PAGE a file stem;
- ``<!-- reading:total WHAT -->``: the total of a path (``course``, ``engineer``, ``interview``,
  :data:`PATHS`) or of pages joined by ``+`` (``overview+projections``);
- ``<!-- reading:plan WHAT -->``: a table of WHAT's pages in order, with each time and the
  running total;
- ``<!-- reading:path WHAT -->``: a numbered list of WHAT's pages, linked, with their times;
- ``<!-- reading:ratio WHAT -->``: Han characters of WHAT's Chinese pages per English word of
  their twins ("1.24"), the measure the Chinese rate is set against;
- ``<!-- reading:homework -->``: every course chapter's self-check questions and exercise
  questions, without their answers (the ``???``/``!!!`` boxes are dropped), for printing.

A marker this hook does not know, or a page it cannot find, fails the build. The pages' sources
are read from disk (a few dozen small files, milliseconds), so a marker's numbers do not depend
on the order MkDocs renders pages in.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

#: The reading paths, in reading order (file stems of docs/<lang>/).
PATHS: dict[str, tuple[str, ...]] = {
    "course": ("walkthrough", "overview", "projections", "scores", "positions", "multihead",
               "long-range", "applications"),
    "engineer": ("overview", "projections", "scores", "multihead", "positions", "long-range",
                 "inference", "speed", "python"),
    "interview": ("overview", "projections", "scores", "multihead", "positions", "long-range",
                  "misconceptions", "interview"),
}

#: The sections of d2l each chapter maps to, shown in the line under its title and linked to the
#: teaching page's table (``teaching.md#d2l-map``, which says what each covers; a test keeps the
#: two in step): Dive into Deep Learning 2.0.0 in Chinese, 1.0.3 in English.
D2L: dict[str, dict[str, tuple[str, ...]]] = {
    "walkthrough": {"zh": ("10.1", "10.7"), "en": ("11.1", "11.7")},
    "overview": {"zh": ("10.1", "10.2", "10.6"), "en": ("11.1", "11.2", "11.6")},
    "projections": {"zh": ("10.5",), "en": ("11.5",)},
    "scores": {"zh": ("10.3",), "en": ("11.3",)},
    "positions": {"zh": ("10.6",), "en": ("11.6",)},
    "multihead": {"zh": ("10.5",), "en": ("11.5",)},
    "long-range": {"zh": ("10.6",), "en": ("11.6",)},
    "applications": {"zh": ("10.4", "10.7"), "en": ("11.4", "11.7", "11.9")},
    "training": {"zh": ("4.7", "10.7"), "en": ("5.3", "11.7")},
    "inference": {"zh": ("10.7",), "en": ("11.7",)},
}
D2L_LINK = "teaching.md#d2l-map"

LEVELS = ("core", "deep", "practice", "reference")
LABELS = {
    "zh": {"core": "核心章节", "deep": "选读·深入", "practice": "练习与自测", "reference": "参考"},
    "en": {"core": "Core chapter", "deep": "Deep dive", "practice": "Practice",
           "reference": "Reference"},
}
#: Level explained, and the reading-time rule stated, on the teaching page.
LEVELS_LINK = "teaching.md#levels"

WORDS_PER_MINUTE = 200
HAN_PER_MINUTE = 300
SECONDS = {"code": 30, "output": 10, "figure": 20, "formula": 10, "table": 30}

FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
FENCE = re.compile(r"^(\s*)(`{3,})(.*)$")
H2 = re.compile(r"^## ")
EXERCISES = re.compile(r"^## .*\{\s*#exercises\s*\}")
CHECK_YOURSELF = re.compile(r"^## .*\{\s*#check-yourself\s*\}")
FIGURE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)[^$\n]+?\$")
TABLE_MARKER = re.compile(r"<!--\s*mha:table\b[^>]*-->")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’.\-]*")
MARKUP = [
    (re.compile(r"\]\([^)]*\)"), "]"),        # link targets
    (re.compile(r"<[^>\n]*>"), " "),           # HTML tags, <https://…> addresses, comments
    (re.compile(r"\{[^}\n]*[#.][^}\n]*\}"), " "),  # attribute lists: { #id }, { .class }
    (re.compile(r"^\s*(\?\?\?\+?|!!!)\s+[\w-]+", re.M), " "),  # a box's type (its title is read)
]
MARKER = re.compile(r"<!--\s*reading:(\w+)(?:\s+([\w+-]+))?\s*-->")
ADMONITION = re.compile(r"^(\s*)(\?\?\?\+?|!!!)\s")
QUESTION_BOX = re.compile(r'^\s*\?\?\?\+?\s+question\s+"(.*)"\s*$')


# ---- reading time -----------------------------------------------------------------------------

def body(text: str) -> str:
    """A page's source without its front matter."""
    return FRONT_MATTER.sub("", text, count=1)


def split_fences(markdown: str) -> tuple[str, list[str]]:
    """The prose of a page (fenced blocks removed) and each fenced block's info string."""
    prose, infos, lines, i = [], [], markdown.split("\n"), 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            prose.append(lines[i])
            i += 1
            continue
        indent, ticks, info = match.groups()
        infos.append(info.strip())
        i += 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}{ticks}\s*$", lines[i]):
            i += 1
        i += 1
    return "\n".join(prose), infos


def split_section(markdown: str, heading: re.Pattern) -> tuple[str, str]:
    """The page without the ``## `` section whose heading matches (up to the next ``## ``), and
    that section's body without its heading ('' if there is none)."""
    outside, inside, within = [], [], False
    for line in markdown.split("\n"):
        if heading.match(line):
            within = True
            continue
        if within and H2.match(line):
            within = False
        (inside if within else outside).append(line)
    return "\n".join(outside), "\n".join(inside)


def without_section(markdown: str, heading: re.Pattern) -> str:
    """The page without the ``## `` section whose heading matches."""
    return split_section(markdown, heading)[0]


def section(markdown: str, heading: re.Pattern) -> str:
    """The ``## `` section whose heading matches, without that heading ('' if none)."""
    return split_section(markdown, heading)[1]


def counts(markdown: str) -> dict[str, int]:
    """What a page's Markdown (without front matter) gives to read, the exercises left out:
    Han characters, other words, and blocks of each kind."""
    markdown = without_section(markdown, EXERCISES)
    prose, infos = split_fences(markdown)
    output = sum("output" in info.split() or info.strip("{} .") == "output" for info in infos)
    code = len(infos) - output
    figures = len(FIGURE.findall(prose))
    tables = len(TABLE_MARKER.findall(prose))
    formulas = len(DISPLAY_MATH.findall(prose))
    prose = DISPLAY_MATH.sub(" ", FIGURE.sub(" ", prose))
    inline = len(INLINE_MATH.findall(prose))
    prose = INLINE_MATH.sub(" ", prose)
    for pattern, replacement in MARKUP:
        prose = pattern.sub(replacement, prose)
    return {"han": len(HAN.findall(prose)),
            "words": len(WORD.findall(HAN.sub(" ", prose))) + inline,
            "code": code, "output": output, "figure": figures, "formula": formulas,
            "table": tables}


def reading_seconds(markdown: str) -> float:
    """Seconds to read a page's Markdown (without front matter), by the rule of the docstring."""
    found = counts(markdown)
    return (60 * found["han"] / HAN_PER_MINUTE + 60 * found["words"] / WORDS_PER_MINUTE
            + sum(SECONDS[kind] * found[kind] for kind in SECONDS))


def minutes(seconds: float) -> int:
    """Whole minutes, rounded half up, at least 1."""
    return max(1, math.floor(seconds / 60 + 0.5))


def page_minutes(path: Path) -> int:
    return minutes(reading_seconds(body(path.read_text(encoding="utf-8"))))


def page_level(meta: dict, where: str) -> str | None:
    level = meta.get("level")
    if level is not None and level not in LEVELS:
        raise PluginError(f"{where}: level {level!r} is not one of {', '.join(LEVELS)}")
    return level


# ---- what the pages show ----------------------------------------------------------------------

def duration(total: int, lang: str) -> str:
    hours, rest = divmod(total, 60)
    if lang == "zh":
        return f"{hours} 小时 {rest} 分钟" if hours else f"{rest} 分钟"
    return f"{hours} h {rest} min" if hours else f"{rest} min"


def badge(level: str, lang: str, page_minutes_: int | None, stem: str = "",
          up: str = "") -> str:
    """The line under the H1 (Markdown inside an HTML block, so the links are checked). ``up``
    leads from the page's folder back to its language's root (``../`` for ``api/core.md``);
    ``stem`` names a chapter for its d2l sections."""
    sep = ' <span class="reading-sep">·</span> '
    label = f"[{LABELS[lang][level]}]({up}{LEVELS_LINK})"
    if page_minutes_ is not None and level != "reference":
        label += sep + (f"阅读约 {page_minutes_} 分钟" if lang == "zh"
                        else f"{page_minutes_} min read")
    if stem in D2L:
        sections = ("、" if lang == "zh" else ", ").join(D2L[stem][lang])
        label += sep + (f"[对应 d2l {sections} 节]({up}{D2L_LINK})" if lang == "zh"
                        else f"[d2l {sections}]({up}{D2L_LINK})")
    return (f'<div class="reading-meta reading-{level}" data-search-exclude markdown>\n'
            f"{label}\n</div>")


def first_h1(markdown: str) -> int | None:
    """The index of the page's H1 line (outside fenced blocks: a Python comment is no title)."""
    lines, fence = markdown.split("\n"), None
    for number, line in enumerate(lines):
        match = FENCE.match(line)
        if fence is None and match:
            fence = re.compile(rf"^{re.escape(match.group(1))}{match.group(2)}\s*$")
        elif fence is not None:
            if fence.match(line):
                fence = None
        elif line.startswith("# "):
            return number
    return None


def with_badge(markdown: str, line: str) -> str:
    """The page with ``line`` right after its H1 (unchanged if it has none)."""
    number = first_h1(markdown)
    if number is None:
        return markdown
    lines = markdown.split("\n")
    return "\n".join(lines[:number + 1] + ["", line, ""] + lines[number + 1:])


def nav_labels(config, lang: str) -> dict[str, str]:
    """{stem: navigation label} for ``lang``: the nav's (Chinese) labels, translated for English
    by the i18n plugin's nav_translations (the nav may already be the translated one). The plan,
    the paths and the homework sheet name a chapter as the navigation does (the lecturer's
    review, finding 9: one chapter, one name)."""
    translations: dict[str, str] = {}
    plugin = config["plugins"].get("i18n") if config.get("plugins") else None
    for language in (plugin.config["languages"] if plugin is not None else ()):
        if language.locale == "en" and language.nav_translations:
            translations = dict(language.nav_translations)
    back = {english: chinese for chinese, english in translations.items()}
    labels: dict[str, str] = {}
    for item in config.get("nav") or ():
        if not isinstance(item, dict):
            continue
        for label, target in item.items():
            if isinstance(target, str) and target.endswith(".md"):
                chinese = back.get(label, label)
                labels[Path(target).stem] = (translations.get(chinese, chinese) if lang == "en"
                                             else chinese)
    return labels


def title(path: Path, labels: dict[str, str] | None = None) -> str:
    """A chapter's name: its navigation label in ``labels`` ({stem: label}, `nav_labels`), or its
    H1 where the nav does not list it."""
    if labels and path.stem in labels:
        return labels[path.stem]
    text = body(path.read_text(encoding="utf-8"))
    number = first_h1(text)
    if number is None:
        raise PluginError(f"{path}: no title (H1)")
    return re.sub(r"\s*\{[^}]*\}\s*$", "", text.split("\n")[number][2:]).strip()


def pages_of(what: str | None, where: str) -> tuple[str, ...]:
    if not what:
        raise PluginError(f"{where}: this reading marker needs a path or pages")
    return PATHS[what] if what in PATHS else tuple(what.split("+"))


def source(folder: Path, stem: str, where: str) -> Path:
    path = folder / f"{stem}.md"
    if not path.is_file():
        raise PluginError(f"{where}: no page {stem!r} for a reading marker ({path})")
    return path


def plan(folder: Path, stems, lang: str, labels: dict[str, str] | None = None) -> str:
    head = ("| 序号 | 章节 | 阅读时间 | 累计 |" if lang == "zh"
            else "| # | Chapter | Reading time | Running total |")
    rows, total = [head, "|---|---|---|---|"], 0
    for number, stem in enumerate(stems, 1):
        path = source(folder, stem, "reading:plan")
        spent = page_minutes(path)
        total += spent
        rows.append(f"| {number} | [{title(path, labels)}]({stem}.md) | {duration(spent, lang)} "
                    f"| {duration(total, lang)} |")
    return "\n".join(rows)


def path_list(folder: Path, stems, lang: str, labels: dict[str, str] | None = None) -> str:
    return "\n".join(f"{number}. [{title(source(folder, stem, 'path'), labels)}]({stem}.md) · "
                     f"{duration(page_minutes(folder / f'{stem}.md'), lang)}"
                     for number, stem in enumerate(stems, 1))


def without_answers(markdown: str) -> str:
    """Markdown with every ``???``/``!!!`` box (its line and its indented body) removed."""
    out, box_indent = [], None
    for line in markdown.split("\n"):
        if box_indent is not None:
            if not line.strip() or len(line) - len(line.lstrip()) > box_indent:
                continue
            box_indent = None
        match = ADMONITION.match(line)
        if match:
            box_indent = len(match.group(1))
            continue
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def homework(folder: Path, lang: str, labels: dict[str, str] | None = None) -> str:
    """Each course chapter's self-check questions and exercises, answers left out."""
    checks = "自测一下" if lang == "zh" else "Check yourself"
    exercises = "练习" if lang == "zh" else "Exercises"
    none = "（这一章还没有练习。）" if lang == "zh" else "(No exercises in this chapter yet.)"
    parts = []
    for number, stem in enumerate(PATHS["course"], 1):
        path = source(folder, stem, "homework")
        text = body(path.read_text(encoding="utf-8"))
        parts.append(f"**{number}. [{title(path, labels)}]({stem}.md)**")
        questions = [match.group(1) for match in map(QUESTION_BOX.match,
                                                     section(text, CHECK_YOURSELF).split("\n"))
                     if match]
        if questions:
            parts.append(f"*{checks}*")
            parts.append("\n".join(f"- {question}" for question in questions))
        tasks = without_answers(section(text, EXERCISES))
        # links to the chapter's own anchors must still reach the chapter from here
        tasks = re.sub(r"\]\(#", f"]({stem}.md#", tasks)
        # its subsection headings become labels: the teaching page keeps its own outline
        tasks = re.sub(r"^###\s+(.*?)\s*(\{[^}]*\})?\s*$", r"\n*\1*\n", tasks, flags=re.M)
        tasks = re.sub(r"\n{3,}", "\n\n", tasks).strip()
        parts.append(tasks if tasks else f"*{exercises}* {none}")
    return "\n\n".join(parts)


def han_per_word(docs: Path, stems, where: str) -> float:
    """Han characters of the Chinese pages per English word of their twins (the exercises left
    out): what the Chinese rate is set against."""
    han = sum(counts(body(source(docs / "zh", stem, where).read_text(encoding="utf-8")))["han"]
              for stem in stems)
    words = sum(counts(body(source(docs / "en", stem, where).read_text(encoding="utf-8")))["words"]
                for stem in stems)
    return han / words


def replace_markers(markdown: str, folder: Path, lang: str, where: str,
                    labels: dict[str, str] | None = None) -> str:
    def replace(match):
        command, what = match.groups()
        if command == "time":
            return duration(page_minutes(source(folder, what or "", where)), lang)
        if command == "total":
            return duration(sum(page_minutes(source(folder, stem, where))
                                for stem in pages_of(what, where)), lang)
        if command == "plan":
            return plan(folder, pages_of(what, where), lang, labels)
        if command == "path":
            return path_list(folder, pages_of(what, where), lang, labels)
        if command == "ratio":
            return f"{han_per_word(folder.parent, pages_of(what, where), where):.2f}"
        if command == "homework" and what is None:
            return homework(folder, lang, labels)
        raise PluginError(f"{where}: unknown marker {match.group(0)}")

    return MARKER.sub(replace, markdown)


# ---- the hook ---------------------------------------------------------------------------------

def page_language(page, config) -> str:
    lang = getattr(page.file, "locale", None) or config["theme"]["language"]
    if lang not in LABELS:
        raise PluginError(f"{page.file.src_uri}: no reading labels for language {lang!r}")
    return lang


def on_page_markdown(markdown, page, config, files):
    if not page.file.src_uri.endswith(".md"):
        return markdown  # notebooks: mkdocs-jupyter renders them
    where = page.file.src_uri
    lang = page_language(page, config)
    path = Path(page.file.abs_src_path)
    markdown = replace_markers(markdown, path.parent, lang, where, nav_labels(config, lang))
    level = page_level(page.meta, where)
    if level is None:
        return markdown
    depth = len(Path(where).parts) - 2  # under the language's folder: 0 for a chapter
    return with_badge(markdown, badge(level, lang, page_minutes(path),
                                      path.stem if depth == 0 else "", "../" * depth))
