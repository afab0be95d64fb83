"""The site: a strict build, the two languages kept in step, every code block collected.

Parity (STYLE.md rule 2): every page exists in both languages with the same anchors, the same
code (comments and string literals set aside, so a Chinese page may comment and print in
Chinese), the same figures and the same display formulas.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path
from types import SimpleNamespace

import pytest

from page_outputs import without_fences

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LANGS = ("zh", "en")
CJK = re.compile(r"[\u4e00-\u9fff]")


# ---- reading the sources -----------------------------------------------------------------------


def import_hook(name: str):
    """The hook module hooks/<name>.py, imported as MkDocs imports it (its folder on sys.path)."""
    import importlib

    sys.path.insert(0, str(ROOT / "hooks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "hooks"))


def pages(lang: str) -> list[str]:
    return sorted(p.relative_to(DOCS / lang).as_posix()
                  for p in (DOCS / lang).rglob("*") if p.suffix in (".md", ".ipynb"))


def fences(text: str) -> list[tuple[str, str]]:
    """Every fenced block of a page as (info string, dedented code), including nested ones."""
    blocks, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        match = re.match(r"^(\s*)(`{3,})(.*)$", lines[i])
        if match:
            indent, ticks, info = match.groups()
            body, i = [], i + 1
            while i < len(lines) and not re.match(rf"^{indent}{ticks}\s*$", lines[i]):
                body.append(lines[i][len(indent):])
                i += 1
            blocks.append((info.strip(), "\n".join(body)))
        i += 1
    return blocks


def language_of(info: str) -> str:
    info = info.strip("{}").split()
    lang = next((word[1:] for word in info if word.startswith(".")), info[0] if info else "")
    return {"py": "python", "python3": "python"}.get(lang, lang)


def python_skeleton(code: str) -> list[str]:
    """Tokens of Python code with comments dropped and every string literal blanked."""
    out = []
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING):
            continue
        if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            out.append("<str>")
        else:
            out.append(token.string)
    return out


def shell_skeleton(code: str) -> list[str]:
    return [re.sub(r"\s+#.*$", "", line).rstrip() for line in code.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def code_skeleton(info: str, code: str):
    lang = language_of(info)
    if lang == "output":  # what a block prints: its words follow the page's language
        return lang, None
    if lang == "python":
        return lang, python_skeleton(code)
    if lang in ("bash", "sh", "shell", "console"):
        return lang, shell_skeleton(code)
    return lang, code


def front_matter(text: str) -> dict:
    """A page's front matter (the YAML between its first two "---" lines), or {} without one."""
    import yaml

    return yaml.safe_load(text.split("---\n")[1]) if text.startswith("---\n") else {}


def page_facts(path: Path) -> dict:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = [python_skeleton("".join(c["source"])) for c in cells if c["cell_type"] == "code"]
        return {"code": code}
    text = path.read_text(encoding="utf-8")
    prose = without_fences(text)
    headings = [line for line in prose.split("\n") if re.match(r"^#{1,6}\s", line)]
    return {
        "anchors": [re.search(r"\{\s*#([\w-]+)", h).group(1) if "{" in h else None
                    for h in headings],
        "code": [code_skeleton(info, code) for info, code in fences(text)],
        "figures": re.findall(r"!\[.*?\]\(([^)\s]+)", prose),
        "formulas": [f.strip() for f in re.findall(r"\$\$(.*?)\$\$", prose, flags=re.S)],
        "layout": front_matter(text).get("layout"),
    }


# ---- parity --------------------------------------------------------------------------------

def test_every_page_exists_in_both_languages():
    assert pages("zh"), "no Chinese pages"
    assert pages("zh") == pages("en")


@pytest.mark.parametrize("page", pages("zh"))
def test_page_twins_match(page):
    zh, en = page_facts(DOCS / "zh" / page), page_facts(DOCS / "en" / page)
    for key in zh:
        assert zh[key] == en[key], f"{page}: {key} differ between zh and en"
    if "anchors" in zh:
        assert None not in zh["anchors"], f"{page}: every heading needs an explicit {{ #id }}"


def test_parity_checks_can_fail(tmp_path):
    def facts(text: str) -> dict:
        path = tmp_path / "page.md"
        path.write_text(text, encoding="utf-8")
        return page_facts(path)

    a = facts("# T { #a }\n```python\nx = 1  # 注释\nprint('你好')\n```\n$$a$$")
    b = facts("# T { #a }\n```python\nx = 1  # comment\nprint('hello')\n```\n$$a$$")
    assert a == b
    c = facts("# T { #a }\n```python\nx = 2\nprint('hello')\n```\n$$a$$")
    assert a["code"] != c["code"]
    d = facts("# T { #b }\n```python\nx = 1\nprint('hello')\n```\n$$b$$")
    assert a["anchors"] != d["anchors"] and a["formulas"] != d["formulas"]
    e = facts("---\nlevel: core\nlayout: long\n---\n# T { #a }\n```python\nx = 1\n"
              "print('hello')\n```\n$$a$$")
    assert e["layout"] == "long" and a["layout"] is None and e["code"] == a["code"]


def test_the_long_layout_marks_only_the_article_and_refuses_what_it_would_break():
    """hooks/long_pages.py: "layout: long" adds its class to Material's article, once; it stops
    the build for another value, for a page without that article, and for a page with code
    annotations (contained paint would cut their tooltips off)."""
    from mkdocs.exceptions import PluginError

    hook = import_hook("long_pages")
    page = lambda **meta: SimpleNamespace(meta=meta, file=SimpleNamespace(src_uri="x.md"))
    html = f"<main><article {hook.ARTICLE}><p>text</p></article></main>"
    assert hook.on_post_page(html, page(), None) == html
    assert hook.on_post_page(html, page(layout="long"), None) == html.replace(
        hook.ARTICLE, hook.LONG)
    assert 'md-typeset--long' in hook.LONG
    for meta, bad, said in (({"layout": "wide"}, html, "must be 'long'"),
                            ({"layout": "long"}, "<article class=other></article>", "needs one"),
                            ({"layout": "long"}, html.replace(
                                "<p>", '<pre><code>x<aside class="md-annotation" tabindex="0">'
                                       "</aside></code></pre><p>"), "annotations")):
        with pytest.raises(PluginError, match=said):
            hook.on_post_page(bad, page(**meta), None)


# ---- code blocks ---------------------------------------------------------------------------

def python_fences() -> list[tuple[Path, str]]:
    return [(path, info) for lang in LANGS for path in sorted((DOCS / lang).rglob("*.md"))
            for info, _ in fences(path.read_text(encoding="utf-8"))
            if language_of(info) == "python"]


#: pytest-markdown-docs' per-block options that skip a block or run it with the one before. No
#: page uses them: every block runs on its own (STYLE.md: "per-block options are explicit and
#: rare"; a skipped block is the anti-pattern).
SKIPPING_OPTIONS = ("notest", "continuation")


def skipping_options(info: str) -> list[str]:
    """The options of `SKIPPING_OPTIONS` that a fence's info string uses."""
    words = re.findall(r"[\w-]+", re.sub(r'"[^"]*"', "", info))  # titles may say anything
    return [option for option in SKIPPING_OPTIONS if option in words]


def test_skipping_options_are_found_in_either_fence_syntax():
    assert skipping_options("python notest") == ["notest"]
    assert skipping_options('{.python continuation title="goes on"}') == ["continuation"]
    assert skipping_options("{ .python notest continuation }") == ["notest", "continuation"]
    assert skipping_options('{.python title="notest: no, a title"}') == []
    assert skipping_options("python") == []


def test_no_block_is_skipped_or_continued():
    used = [(path.relative_to(ROOT).as_posix(), info) for path, info in python_fences()
            if skipping_options(info)]
    assert used == []


def test_every_python_block_is_collected():
    expected = {}
    for path, _ in python_fences():
        key = path.relative_to(ROOT).as_posix()
        expected[key] = expected.get(key, 0) + 1
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "docs"], cwd=ROOT, capture_output=True, text=True)
    collected = {}
    for line in result.stdout.splitlines():
        if ".md::" in line:
            key = line.split("::")[0]
            collected[key] = collected.get(key, 0) + 1
    assert expected, "no Python blocks found in docs/"
    assert collected == expected, result.stdout[-2000:]


# ---- the built site ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(built_site) -> Path:
    """The session's one strict build (``built_site``, tests/conftest.py)."""
    return built_site.dir


def built_page(site: Path, lang: str, page: str) -> Path:
    """Where the built site has the page docs/<lang>/<page> (an index.md is its folder's own)."""
    stem = page.rsplit(".", 1)[0]
    relative = stem.removesuffix("index") if stem.rpartition("/")[2] == "index" else f"{stem}/"
    return site / ("en/" if lang == "en" else "") / relative / "index.html"


def html_pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("index.html") if "assets" not in p.parts)


def test_both_languages_are_built(site):
    for page in pages("zh"):
        assert built_page(site, "zh", page).exists(), page
        assert built_page(site, "en", page).exists(), page


def test_html_lang_and_translated_navigation(site):
    zh = (site / "index.html").read_text(encoding="utf-8")
    en = (site / "en" / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh"' in zh and '<html lang="en"' in en
    assert "注意力分数计算" in zh and "Attention scores" in en


def test_notebook_pages_are_rendered_html_with_a_download(site):
    for prefix in ("", "en/"):
        page = (site / prefix / "python-demo" / "index.html").read_text(encoding="utf-8")
        assert "jp-Cell" in page and '"cell_type"' not in page
        assert "agrees" in page or "一致" in page  # the executed output of the last cell
        assert (site / prefix / "python-demo" / "python-demo.ipynb").exists()
        assert '<a href="python-demo.ipynb" download' in page  # relative: any subpath works


def test_figures_are_built_and_every_image_has_alt_text(site):
    for lang, prefix in (("zh", ""), ("en", "en/")):
        for page in html_pages(site / prefix) if prefix else html_pages(site):
            if not prefix and "en" in page.relative_to(site).parts:
                continue
            html = page.read_text(encoding="utf-8")
            for tag in re.findall(r"<img [^>]*>", html):
                alt = re.search(r'alt="([^"]*)"', tag)
                assert alt and alt.group(1).strip(), f"{page}: {tag}"
                if "figures/" in tag:
                    assert bool(CJK.search(alt.group(1))) == (lang == "zh"), f"{page}: {tag}"
    for lang in ("", "en/"):
        assert (site / lang / "figures" / "scores-scaling.svg").exists()


def test_nothing_is_loaded_from_another_origin(site):
    external = re.compile(
        r"""(?:<(?:script|img|iframe|source|audio|video)\b[^>]*\bsrc|<link\b[^>]*\bhref)"""
        r"""\s*=\s*["'](?:https?:)?//""", re.I)
    css_url = re.compile(r"""(?:url\(|@import\s+)["']?(?:https?:)?//""", re.I)
    for path in site.rglob("*"):
        if path.suffix == ".html":
            text = path.read_text(encoding="utf-8")
            for tag in re.findall(r"<link\b[^>]*>", text):
                if re.search(r'rel="(?:canonical|alternate)"', tag):
                    continue  # addresses of this site, never fetched
                assert not external.search(tag), f"{path}: {tag}"
            text = re.sub(r"<link\b[^>]*>", "", text)
            assert not external.search(text), f"{path}: {external.search(text).group(0)}"
        elif path.suffix == ".css":
            assert not css_url.search(path.read_text(encoding="utf-8")), path
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "repo_url" not in config.replace("# No repo_url", "")
    assert re.search(r"^\s*font: false", config, re.M)


def test_footer_links_to_the_licence_page_everywhere(site):
    for page in html_pages(site):
        html = page.read_text(encoding="utf-8")
        assert re.search(r'href="[./]*(?:en/)?license/"', html), page


def test_glossary_table_comes_from_the_terms_file(site):
    from mha.site.plots import TERMS

    zh = (site / "glossary" / "index.html").read_text(encoding="utf-8")
    en = (site / "en" / "glossary" / "index.html").read_text(encoding="utf-8")
    for entry in TERMS.values():
        assert entry.zh in zh and entry.zh_note.split("，")[0][:6] in zh
        assert entry.en in en
    assert "mha:table" not in zh + en


def test_terms_name_each_idea_once_and_keep_the_one_analogy():
    """The terms file is the glossary: one word per idea in each language, a head is not a
    detective with a specialty, h is the number of heads, axis and dimension are two terms,
    the captain is W_O, and readers of d2l find its names."""
    from mha.site.terms import TERMS

    for lang in LANGS:
        words = [getattr(entry, lang) for entry in TERMS.values()]
        assert len(words) == len(set(words)), lang
    head = TERMS["head"]
    for note in (head.zh_note, head.en_note, TERMS["detective"].zh_note,
                 TERMS["detective"].en_note):
        assert not re.search(r"专攻|专长|specialty\b|one kind of clue", note), note
    assert "分派" in head.zh_note and "assigns" in head.en_note  # roles are found, not given
    assert [key for key, entry in TERMS.items() if entry.symbol == "h"] == ["number_of_heads"]
    assert TERMS["captain"].symbol == TERMS["output_projection"].symbol == "W^O"
    assert (TERMS["axis"].zh, TERMS["dimension"].zh, TERMS["padding_mask"].zh) == (
        "轴", "维度", "填充掩码")
    zh_notes = " ".join(entry.zh_note for entry in TERMS.values())
    en_notes = " ".join(entry.en_note for entry in TERMS.values())
    for d2l_zh, d2l_en in [("注意力汇聚", "attention pooling"), ("评分函数", "scoring function"),
                           ("掩蔽", "masking"), ("有效长度", "valid lengths")]:
        assert d2l_zh in zh_notes and d2l_en in en_notes, d2l_zh


def the_case_section(lang: str) -> str:
    text = (DOCS / lang / "index.md").read_text(encoding="utf-8")
    return text.split("{ #the-case }", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("lang", LANGS)
def test_home_page_maps_the_story_onto_the_model_once(lang):
    """#the-case holds the one mapping every page uses: the story's cast (from the terms file)
    beside the symbols, the captain as W_O; the colours are names, not a table of jobs."""
    from mha.site.terms import TERMS

    from mha.site.plots import TABLES

    section = the_case_section(lang)
    assert "<!-- mha:table story -->" in section  # the story's rows, from the terms file
    table = TABLES["story"](lang)
    for key in ("case_file", "page", "detective", "captain", "question", "label", "content",
                "margin_notes", "report"):
        assert f"**{getattr(TERMS[key], lang)}**" in table, key
    for key in ("query", "key", "value", "attention_weight"):
        assert getattr(TERMS[key], lang).lower() in table.lower(), key
    for symbol in ("$x_i$", "$q_i = x_i W^Q$", "$k_j = x_j W^K$", "$v_j = x_j W^V$",
                   r"$\sum_j a_{ij} v_j$", "$W^O$"):
        assert symbol in table, symbol
    assert not re.search(r"只记录|What the notebook records", section + table)
    assert "real-heads.md#real-heads" in section  # roles in a trained model are measured there


def test_the_case_has_one_embedding_per_word():
    """The home page's claim about the case, against mha.site.plots.case: 8 tokens in each
    language, 6 different English words, 5 shared between the languages."""
    from mha.site.plots.case import CASE_ORDER, CASE_TOKENS, EMBEDDING_ROWS

    assert {lang: len(tokens) for lang, tokens in CASE_TOKENS.items()} == {"zh": 8, "en": 8}
    assert len(set(CASE_ORDER["en"])) == len(set(CASE_TOKENS["en"])) == 6
    assert len(set(CASE_ORDER["zh"])) == len(set(CASE_TOKENS["zh"])) == 8
    assert len(set(CASE_ORDER["zh"]) & set(CASE_ORDER["en"])) == 5
    assert sum(zh is not None and en is not None for zh, en in EMBEDDING_ROWS) == 5
    for lang in LANGS:
        assert "概念" not in the_case_section(lang) and "concepts" not in the_case_section(lang)


def test_chinese_search_keeps_terms_whole(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    text = " ".join(doc["text"] + doc["title"] for doc in index["docs"])
    assert "缩放" in text
    # jieba marks word boundaries with U+200B: a term from the terms file stays one word.
    for word in ("注意力权重", "缩放因子"):
        assert word in text, word
        assert not re.search("\u200b".join(word), text.replace(word, "")), word


MARKER_PAGE = SimpleNamespace(file=SimpleNamespace(src_uri="zh/x.md", locale="zh"))


def test_every_marker_is_a_table_of_the_one_registry(tmp_path, monkeypatch):
    """hooks/markers.py: <!-- mha:table NAME --> reads the table that hooks/draw_figures.py
    wrote from mha.site.plots.TABLES; anything else fails."""
    markers = import_hook("markers")
    from mkdocs.exceptions import PluginError

    from mha.site.plots import TABLES

    assert {"glossary", "benchmark", "head-roles"} <= set(TABLES)
    monkeypatch.setattr(markers, "TABLES", tmp_path)
    (tmp_path / "zh").mkdir()
    for name in ("glossary", "benchmark", "head-roles"):
        (tmp_path / "zh" / f"{name}.md").write_text(f"| {name} |", encoding="utf-8")
    config = {"theme": {"language": "zh"}}

    def page(markdown):
        return markers.on_page_markdown(markdown, MARKER_PAGE, config, None)

    assert page("a\n<!-- mha:table glossary -->\nb") == "a\n| glossary |\nb"
    assert page("<!-- mha:table benchmark -->") == "| benchmark |"
    assert page("<!-- mha:table head-roles -->") == "| head-roles |"
    assert page("<!--mha:table   glossary-->") == "| glossary |"
    with pytest.raises(PluginError, match="unknown marker <!-- mha:glosary -->"):
        page("<!-- mha:glosary -->")
    with pytest.raises(PluginError, match="no table 'head-rolls'"):
        page("<!-- mha:table head-rolls -->")
    with pytest.raises(PluginError, match="no table None"):
        page("<!-- mha:table -->")
    for old in ("<!-- mha:glossary -->", "<!-- mha:benchmark-table -->"):
        with pytest.raises(PluginError, match="unknown marker"):
            page(old)


def test_a_table_dropped_from_the_registry_no_longer_answers_a_marker(tmp_path):
    """hooks/draw_figures.py removes a table file the registry no longer has, so a page that
    still asks for it fails the build instead of showing the last one drawn."""
    stale = tmp_path / ".cache" / "tables" / "zh" / "old-table.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("| old |", encoding="utf-8")
    shutil.copytree(ROOT / "mha", tmp_path / "mha", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, str(ROOT / "hooks" / "draw_figures.py"), "--root",
                    str(tmp_path), "--only", "glossary"], check=True, capture_output=True)
    assert (tmp_path / ".cache" / "tables" / "zh" / "glossary.md").is_file()
    assert not stale.exists()


def page_markers() -> dict[tuple[str, str, str], str]:
    """Every table marker of the pages: (lang, page, table) -> the table it stands for."""
    markers = import_hook("markers")
    found = {}
    for lang in LANGS:
        for page in pages(lang):
            for name, argument in markers.MARKER.findall((DOCS / lang / page).read_text(encoding="utf-8")):
                if name == "repository":
                    continue
                assert name == "table", f"{lang}/{page}: <!-- mha:{name} -->"
                found[(lang, page, argument)] = argument
    return found


def test_pages_ask_for_the_same_tables_in_both_languages():
    """Every table the build writes (mha.site.plots.TABLES) is asked for by a page, and both
    languages ask for the same tables on the same pages."""
    from mha.site.plots import TABLES

    found = page_markers()
    assert {table for (lang, _, _), table in found.items() if lang == "zh"} == set(TABLES)
    assert {(page, t) for (lang, page, _), t in found.items() if lang == "zh"} == {
        (page, t) for (lang, page, _), t in found.items() if lang == "en"}


@pytest.mark.parametrize("origin, expected", [
    ("git@github.com:someone/attention-detectives.git",
     "https://github.com/someone/attention-detectives"),
    ("https://gitee.com/someone/attention-detectives.git",
     "https://gitee.com/someone/attention-detectives"),
    (None, None),  # no remote: the working copy's folder
])
def test_the_repository_address_comes_from_the_build_or_the_working_copy(tmp_path, origin,
                                                                          expected):
    markers = import_hook("markers")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    if origin:
        subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", origin],
                       check=True)
    assert markers.repository_address("", tmp_path) == (expected or str(tmp_path))
    # What the Pages workflow sets (REPO_URL) wins over the working copy.
    assert markers.repository_address("https://github.com/o/r/", tmp_path) == (
        "https://github.com/o/r")


@pytest.mark.parametrize("environ, fails", [
    ({}, False),                                                     # a local build
    ({"SITE_URL": "http://127.0.0.1:8000/"}, False),
    ({"DEPLOY": "true", "SITE_URL": "https://o.github.io/attention-detectives/"}, False),
    ({"DEPLOY": "true"}, True),                                      # no address at all
    ({"DEPLOY": "true", "SITE_URL": ""}, True),
    ({"DEPLOY": "true", "SITE_URL": "https://o.github.io/attention-detectives"}, True),
    ({"DEPLOY": "true", "SITE_URL": "/attention-detectives/"}, True),
])
def test_a_deployment_build_needs_its_site_url(environ, fails):
    from mkdocs.exceptions import PluginError

    check = import_hook("deploy_check").check_deploy
    if fails:
        with pytest.raises(PluginError, match="SITE_URL"):
            check(environ)
    else:
        check(environ)


def test_install_pages_give_the_repository_address(site):
    """Where to get the code, on both install pages: the address the build was given, or this
    working copy's origin (the test build sets no REPO_URL)."""
    markers = import_hook("markers")
    address = markers.repository_address(os.environ.get("REPO_URL", ""))
    for prefix in ("", "en/"):
        html = (site / prefix / "install" / "index.html").read_text(encoding="utf-8")
        assert "repository-url" not in html and "mha:repository" not in html
        assert html.count(address) >= 3, prefix  # the clone, the sentence, the pinned install


def test_each_marker_shows_the_table_mha_computed(site):
    """Every table a page asks for is exactly mha.site.plots.TABLES' output in the page's
    language: its header, its number of rows, its first row's first cell."""
    from mha.site.plots import TABLES

    for (lang, page, _), name in page_markers().items():
        html = built_page(site, lang, page).read_text(encoding="utf-8")
        assert "mha:" not in html, (lang, page)
        table = TABLES[name](lang)
        lines = table.split("\n")
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        rows = [line for line in lines[2:] if line.startswith("|")]
        assert all(f">{cell}</th>" in html for cell in header), (lang, page, header)
        assert html.count("<tr>") >= len(rows) + 1, (lang, page)
        first = rows[0].strip("|").split("|")[0].strip().strip("*")
        assert re.search(rf"<td[^>]*>(?:<strong>)?{re.escape(first)}", html), (lang, page, first)


def test_head_role_table_rows_are_on_the_page(site):
    """The role table on the real-model page, cell by cell in its first row, per language."""
    from mha.site.plots import TABLES

    for prefix, lang in (("", "zh"), ("en/", "en")):
        html = (site / prefix / "real-heads" / "index.html").read_text(encoding="utf-8")
        rows = [line for line in TABLES["head-roles"](lang).split("\n")[2:]
                if line.startswith("|")]
        layer, head, role = (c.strip() for c in rows[0].strip("|").split("|")[:3])
        assert re.search(rf"<td[^>]*>{layer}</td>\s*<td[^>]*>{head}</td>\s*<td[^>]*>"
                         rf"{re.escape(role)}</td>", html), rows[0]


def test_notebook_pages_come_from_the_cache_the_hook_keeps(built_site):
    """The session's build found every language's notebook in the cache (rendered ahead by
    hooks/notebooks.py, or kept from an earlier build), executed none itself, and left each
    entry in its language's folder for the next build."""
    log = built_site.log
    for lang in LANGS:
        assert f"Cache hit: {DOCS / lang / 'python-demo.ipynb'}" in log, log[-2000:]
    assert "Cache miss" not in log
    notebooks = import_hook("notebooks")
    for lang in LANGS:
        assert list(notebooks._cache_dir(lang).glob("*.json")), lang


def copy_of_mha(tmp_path: Path) -> Path:
    package = tmp_path / "mha"
    shutil.copytree(ROOT / "mha", package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def edit(path: Path) -> None:
    """Change a source file the way an author does: its bytes, not its name."""
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        data["results"][0]["seconds"] *= 2
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        path.write_bytes(path.read_bytes() + b"\n# edited\n")


@pytest.mark.parametrize("source", ["site/data/benchmark.json", "attention.py",
                                    "models/encoder.py"])
def test_notebook_cache_folder_follows_every_source_of_mha_and_the_language(
        source, tmp_path, monkeypatch):
    """hooks/notebooks.py: mkdocs-jupyter's cache folder is keyed on mha's sources (data files
    too) and on the language; bytecode does not count."""
    notebooks = import_hook("notebooks")
    monkeypatch.setattr(notebooks, "PACKAGE", copy_of_mha(tmp_path))
    before = {lang: notebooks._cache_dir(lang) for lang in LANGS}
    assert before["zh"].parent == before["en"].parent and before["zh"] != before["en"]
    assert before["en"].parent.parent == ROOT / ".cache" / "notebooks"
    pycache = notebooks.PACKAGE / "__pycache__"
    pycache.mkdir()
    (pycache / "attention.cpython-311.pyc").write_bytes(b"bytecode")
    assert notebooks._cache_dir("en") == before["en"]
    edit(notebooks.PACKAGE / source)
    assert notebooks._cache_dir("en") != before["en"]
    # ...and a build hands that folder to mkdocs-jupyter, per language.
    jupyter = SimpleNamespace(config={})

    class Config(dict):
        plugins = SimpleNamespace(get=lambda name: jupyter)

    monkeypatch.setattr(notebooks, "_start_in_background", lambda config, jupyter: None)
    for lang in LANGS:
        notebooks.on_pre_build(Config(theme={"language": lang}))
        assert jupyter.config["cache_dir"] == str(notebooks._cache_dir(lang))


TABLE_1 = [  # Vaswani et al. (2017), Table 1: complexity, sequential operations, path length
    (r"$O(n^2 \cdot d)$", "$O(1)$", "$O(1)$"),
    (r"$O(n \cdot d^2)$", "$O(n)$", "$O(n)$"),
    (r"$O(k \cdot n \cdot d^2)$", "$O(1)$", r"$O(\log_k(n))$"),
    (r"$O(r \cdot n \cdot d)$", "$O(1)$", "$O(n/r)$"),
]


@pytest.mark.parametrize("lang", LANGS)
def test_long_range_chapter_has_table_1_of_the_paper_exactly(lang):
    text = (DOCS / lang / "long-range.md").read_text(encoding="utf-8")
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|") and "$O(" in line]
    assert [tuple(row[1:]) for row in rows] == TABLE_1


def test_wrong_on_purpose_code_is_labelled_as_such():
    for lang in LANGS:
        for path in sorted((DOCS / lang).rglob("*.md")):
            for info, code in fences(path.read_text(encoding="utf-8")):
                if re.search(r"#.*(?:WRONG|[Ww]rong on purpose|故意|错误示范)", code):
                    assert re.search(r'title="[^"]*(?:[Ww]rong|故意|错误)', info), (path, info)


@pytest.mark.parametrize("lang", LANGS)
def test_misconceptions_page_demonstrates_each_belief(lang):
    text = (DOCS / lang / "misconceptions.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    misconceptions = [s for s in sections if "!!! failure" in s and "!!! success" in s]
    assert len(misconceptions) >= 12
    with_experiment = [s for s in misconceptions if "```python" in s or "{.python" in s]
    assert len(with_experiment) >= 12
    for section in misconceptions:
        has_code = section in with_experiment
        cites = re.search(r"arxiv\.org|Vaswani|Table 3|表 3", section)
        assert has_code or cites, section[:80]


@pytest.mark.parametrize("lang", LANGS)
def test_interview_page_has_enough_answered_questions_with_chapter_links(lang):
    text = (DOCS / lang / "interview.md").read_text(encoding="utf-8")
    questions = re.split(r'^\?\?\? question "', text, flags=re.M)[1:]
    assert len(questions) >= 25
    for question in questions:
        answer = question.split("\n## ")[0]
        assert re.search(r"\]\((?:[\w-]+\.md)?#[\w-]+\)", answer), answer[:80]
    groups = re.findall(r"^## .*\{ #(\w[\w-]*) \}", text, flags=re.M)
    assert {"conceptual", "maths", "complexity", "coding"} <= set(groups)


@pytest.mark.parametrize("lang", LANGS)
def test_front_matter_parses_and_no_line_turns_into_a_stray_heading(lang):
    for path in sorted((DOCS / lang).rglob("*.md")):  # the API reference's folder too
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\n"), path
        meta = front_matter(text)
        assert isinstance(meta, dict) and isinstance(meta.get("description"), str), path
        assert 20 < len(meta["description"]) <= 200, path
        prose = without_fences(text)
        for line in prose.split("\n"):
            assert not re.match(r"^#[^#\s]", line), f"{path}: {line[:60]}"  # '#41508)' etc.


def test_build_time_katex_renders_and_refuses_bad_tex():
    katex = import_hook("katex")
    from mkdocs.exceptions import PluginError

    out = katex.typeset('<p><span class="arithmatex">\\(\\sqrt{d_k}\\)</span></p>'
                        '<div class="arithmatex">\\[a &lt; b\\]</div>', "x.md")
    assert out.count('data-katex="done"') == 2 and 'class="katex-display"' in out
    assert "\\sqrt" not in out.split("<annotation")[0]  # typeset, not left as source
    with pytest.raises(PluginError, match=r"x\.md: maths with the control character '\\t'"):
        katex.typeset('<span class="arithmatex">\\(n \timesn\\)</span>', "x.md")
    with pytest.raises(PluginError, match=r"x\.md: KaTeX cannot typeset '\\\\frac\{1\}'"):
        katex.typeset('<span class="arithmatex">\\(\\frac{1}\\)</span>', "x.md")


def test_pages_with_maths_preload_katex_fonts_that_exist(site):
    """The two fonts most formulas need are fetched with the stylesheets (not after the first
    layout), on pages with maths only, at addresses that exist from that page's depth."""
    for page in (site / "scores" / "index.html", site / "en" / "scores" / "index.html"):
        html = page.read_text(encoding="utf-8")
        preloads = re.findall(r'<link rel="preload" href="([^"]+)" as="font"[^>]*>', html)
        assert sorted(Path(p).name for p in preloads) == [
            "KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2"], page
        for href in preloads:
            assert (page.parent / href).resolve().is_file(), (page, href)
    for page in html_pages(site):
        html = page.read_text(encoding="utf-8")
        assert ('as="font"' in html) == ('class="katex"' in html), page


def test_material_script_waits_for_the_reader(site):
    """overrides/main.html: every page gets Material's script as a placeholder that the first
    interaction loads, and its tables already in Material's scrolling boxes; a page whose code
    has annotation markers ("# (1)!") gets them drawn as Material draws them, and only such a
    page (tests/test_annotations.py opens them in a browser)."""
    sources = {lang: {page: (DOCS / lang / page).read_text(encoding="utf-8")
                      for page in pages(lang)} for lang in LANGS}
    annotated = {(lang, page) for lang in LANGS for page, text in sources[lang].items()
                 if any(re.search(r"#\s*\(\d+\)!", code) for _, code in fences(text))}
    assert {page for _, page in annotated} == {"python.md"}
    for lang in LANGS:
        for page in sources[lang]:
            html = built_page(site, lang, page).read_text(encoding="utf-8")
            bundle = re.findall(r"<script[^>]*javascripts/bundle\.[^>]*>", html)
            assert len(bundle) == 1, (lang, page, bundle)
            assert "data-md-lazy" in bundle[0] and 'type="text/plain"' in bundle[0], page
            assert html.count("<table>") == html.count(
                '<div class="md-typeset__scrollwrap"><div class="md-typeset__table"><table>')
            assert ")!</span>" not in html, (lang, page)
            assert ('data-md-pending="' in html) == ((lang, page) in annotated), (lang, page)


def test_search_index_holds_tex_source_not_katex_markup(site):
    """Formulas are typeset after the search plugin has read the page: the index stays small
    and a reader can find a formula by its TeX (d_k)."""
    index = (site / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "katex-mathml" not in index and "\\\\sqrt{d_k}" in index


def test_page_sources_hold_no_control_characters():
    """A Python string that lost a backslash ("\times" -> tab + "imes") must not reach a page."""
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
               *sorted((ROOT / "docs").rglob("*.ipynb"))]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        bad = re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text)
        assert bad is None, f"{path}: {bad.group(0)!r} at line {text[:bad.start()].count(chr(10)) + 1}"


def test_compiled_templates_are_kept_for_the_next_build(site):
    """hooks/jinja_cache.py: the theme's and mkdocstrings' compiled templates are stored (the
    API reference's before its page is rendered: that is where they are compiled)."""
    import material
    import mkdocstrings_handlers.python
    from jinja2 import FileSystemBytecodeCache

    cache = ROOT / ".cache" / "jinja"
    theme = Path(material.__file__).parent / "templates"
    api = Path(mkdocstrings_handlers.python.__file__).parent / "templates" / "material"
    for folder, name in [(theme, "base.html"), (api, "function.html.jinja"),
                         (api, "docstring.html.jinja")]:
        key = FileSystemBytecodeCache().get_cache_key(name, str(folder / name))
        assert (cache / f"__jinja2_{key}.cache").is_file(), name


def test_search_cache_replaces_materials_method_only_from_startup_to_shutdown():
    """Importing hooks/search_cache.py leaves Material's SearchIndex as it was (MkDocs imports
    hooks, and so do these tests); ``mkdocs build`` and ``serve`` call on_startup, which puts
    the cache in place, and on_shutdown, which puts Material's own method back."""
    from material.plugins.search.plugin import SearchIndex

    material = SearchIndex.add_entry_from_context
    search_cache = import_hook("search_cache")
    assert SearchIndex.add_entry_from_context is material
    try:
        search_cache.on_startup(command="build", dirty=False)
        assert SearchIndex.add_entry_from_context is search_cache.add_entry_from_context
        assert search_cache._parse is material
    finally:
        search_cache.on_shutdown()
    assert SearchIndex.add_entry_from_context is material


@pytest.fixture
def search_cache(monkeypatch):
    """hooks/search_cache.py, in place as during a build; Material's own method is back after
    the test, whatever happens in it."""
    from material.plugins.search.plugin import SearchIndex

    monkeypatch.setattr(SearchIndex, "add_entry_from_context", SearchIndex.add_entry_from_context)
    module = import_hook("search_cache")
    module.on_startup(command="build", dirty=False)
    return module


def test_search_entries_are_reused_only_while_the_page_is_unchanged(search_cache, monkeypatch):
    """hooks/search_cache.py: a page seen before gets the entries Material's own parser gave it
    (copies: an index that edits its entries does not edit the cache); a page whose HTML
    changed is parsed again."""
    from material.plugins.search.plugin import SearchIndex
    from mkdocs.structure.toc import get_toc

    search_cache.on_config({})            # the glossary's words, read as in a build,
    search_cache.jieba_ready()            # and added to jieba as before the first page parsed
    material_parse, parsed = search_cache._parse, []

    def parse(index, page):
        parsed.append(page.url)
        material_parse(index, page)

    monkeypatch.setattr(search_cache, "_parse", parse)
    config = {"lang": ["zh", "en"], "separator": r"[\s\-]+", "pipeline": ["stopWordFilter"],
              "fields": {}}
    toc = get_toc([{"level": 1, "id": "scores", "name": "注意力分数计算", "children": [
        {"level": 2, "id": "why", "name": "为什么要缩放", "children": []}]}])
    page = SimpleNamespace(url="x/", title="注意力分数计算", meta={}, toc=toc, content=(
        '<h1 id="scores">注意力分数计算</h1><p>每个注意力头先打分。</p>'
        '<h2 id="why">为什么要缩放</h2><p>缩放因子让方差回到 1。</p>'))

    def entries(page):
        index = SearchIndex(**config)
        index.add_entry_from_context(page)
        return index.entries

    expected = SearchIndex(**config)
    material_parse(expected, page)  # Material's own, never cached
    assert [e["location"] for e in expected.entries] == ["x/", "x/#why"]
    assert "注意力头" in expected.entries[0]["text"].split("\u200b")  # one word: the glossary's
    first = entries(page)
    assert first == expected.entries and parsed == ["x/"]
    first[0]["text"] = "edited by the index"
    assert entries(page) == expected.entries and parsed == ["x/"]  # from the cache
    page.content = page.content.replace("方差", "标准差")
    assert "标准差" in entries(page)[1]["text"] and parsed == ["x/", "x/"]


def test_jieba_gets_each_glossary_word_once_per_process():
    """Under mkdocs serve every rebuild reads the glossary again and parses some page:
    jieba's frequencies stay put."""
    import jieba

    search_cache = import_hook("search_cache")
    search_cache.on_config({})
    search_cache.jieba_ready()
    state = (len(jieba.dt.FREQ), jieba.dt.total)
    search_cache.on_config({})
    search_cache.jieba_ready()
    assert (len(jieba.dt.FREQ), jieba.dt.total) == state
    assert jieba.dt.FREQ.get("注意力头", 0) > 0


BACKGROUND_RENDER = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
from mkdocs.config import load_config
from mkdocs_jupyter.plugin import _compute_cache_key, _get_cache_path
sys.path.insert(0, "hooks")
import notebooks
out = Path(sys.argv[1])
notebooks._cache_dir = lambda language: out / language
config = load_config("mkdocs.yml")
jupyter = config.plugins["mkdocs-jupyter"]
notebooks._start_in_background(config, jupyter)
notebooks.on_pre_page(SimpleNamespace(file=SimpleNamespace(src_uri="en/x.ipynb")), config, None)
found = {}
for lang in ("zh", "en"):
    notebook = Path("docs") / lang / "python-demo.ipynb"
    key = _compute_cache_key(str(notebook), jupyter.config, jupyter.config["execute"])
    found[lang] = json.loads(_get_cache_path(out / lang, key).read_text(encoding="utf-8"))
print(json.dumps({"left": len(notebooks._background), "found": found}))
"""


def test_notebooks_are_rendered_in_the_background_into_mkdocs_jupyters_cache(tmp_path):
    """hooks/notebooks.py renders every language's notebook ahead of the pages (while the
    figures are drawn), into the cache entries mkdocs-jupyter then finds: same key, same content
    shape. (In a subprocess: the kernel client's sockets outlive a test's warning filters.)"""
    result = subprocess.run([sys.executable, "-c", BACKGROUND_RENDER, str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True,
                            env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["left"] == 0  # the notebook page waited for the thread
    for lang in LANGS:
        entry = report["found"][lang]
        assert "jp-Cell" in entry["content"] and entry["toc_tokens"], lang


# ---- reaches into other packages' internals (each listed in MAINTAINERS.md) ---------------------
# Each test fails when the installed version of the other package no longer matches what the
# hooks and overrides were written against.

def material_template(relative: str) -> str:
    import material

    return (Path(material.__file__).parent / "templates" / relative).read_text(encoding="utf-8")


def template_block(text: str, name: str) -> list[str]:
    """The dedented lines of ``{% block name %} … {% endblock %}``."""
    match = re.search(rf"\{{%-? block {name} -?%\}}\n(.*?)\n[ \t]*\{{%-? endblock", text, re.S)
    assert match, f"no block {name}"
    return textwrap.dedent(match.group(1)).splitlines()


def template_body(text: str) -> list[str]:
    """The lines of a template after its leading {#- … -#} comment."""
    return re.sub(r"^\{#-.*?-#\}\n", "", text, flags=re.S).splitlines()


#: Templates copied from Material 9.8.2 and edited: (ours, Material's, the part compared, and
#: the edit, as the unified diff from Material's text to ours). Material's text + the edit must
#: be ours: any change upstream (a new release, even a patch) shows up as a different diff.
COPIED_TEMPLATES = {
    "overrides/main.html {% block site_meta %}": (
        "overrides/main.html", "base.html", "site_meta", """\
--- material
+++ ours
@@ -22,9 +21,0 @@
-{% if config.extra.alternate is iterable %}
-  {% for alt in config.extra.alternate %}
-    <link rel="alternate" href="{{ alt.link | url }}" hreflang="{{ alt.lang | d(lang.t('language')) }}">
-  {% endfor %}
-{% endif %}
-{% if "rss" in config.plugins %}
-  <link rel="alternate" type="application/rss+xml" title="{{ lang.t('rss.created') }}" href="{{ 'feed_rss_created.xml' | url }}">
-  <link rel="alternate" type="application/rss+xml" title="{{ lang.t('rss.updated') }}" href="{{ 'feed_rss_updated.xml' | url }}">
-{% endif %}
@@ -32 +22,0 @@
-<meta name="generator" content="mkdocs-{{ mkdocs_version }}, mkdocs-material-9.8.2">"""),
    "overrides/partials/search.html": (
        "overrides/partials/search.html", "partials/search.html", None, """\
--- material
+++ ours
@@ -1 +1 @@
-<div class="md-search" data-md-component="search" role="dialog">
+<div class="md-search" data-md-component="search" role="dialog" aria-label="{{ lang.t('search') }}">"""),
}


def template_diff(ours: str, upstream: str, block: str | None) -> str:
    ours_text = (ROOT / ours).read_text(encoding="utf-8")
    upstream_text = material_template(upstream)
    if block is None:
        before, after = template_body(upstream_text), template_body(ours_text)
    else:
        before, after = template_block(upstream_text, block), template_block(ours_text, block)
    return "\n".join(difflib.unified_diff(before, after, "material", "ours", n=0, lineterm=""))


@pytest.mark.parametrize("name", COPIED_TEMPLATES)
def test_copied_material_templates_are_materials_plus_our_edit(name):
    ours, upstream, block, expected = COPIED_TEMPLATES[name]
    assert template_diff(ours, upstream, block) == expected, (
        f"{name} is a copy of Material's templates/{upstream} with one edit, and Material's "
        f"text has changed (a new Material release?): copy it again, make the edit, and record "
        f"the new diff here.")


def test_the_template_check_catches_a_change_upstream(tmp_path, monkeypatch):
    """A line added to Material's block (as a release might) changes the diff."""
    ours, upstream, block, expected = COPIED_TEMPLATES["overrides/main.html {% block site_meta %}"]
    changed = material_template(upstream).replace(
        '<meta charset="utf-8">', '<meta charset="utf-8">\n      <meta name="new">', 1)
    monkeypatch.setitem(globals(), "material_template", lambda relative: changed)
    assert template_diff(ours, upstream, block) != expected


def test_material_is_the_minor_release_the_templates_were_copied_from():
    import tomllib
    from importlib.metadata import version

    docs = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]["docs"]
    assert "mkdocs-material>=9.8.2,<9.9" in docs
    assert version("mkdocs-material").startswith("9.8.")


def test_materials_javascript_still_has_what_overrides_main_html_uses():
    """overrides/main.html sets the palette and waits for the reader using Material's globals
    and markup: its storage helpers (__md_get/__md_set, from Material's inline script), the
    bundle's window.component$ (set once it has run), the palette's storage key and the
    switching attribute, the two boxes its script puts tables in, the annotation markers, and
    its start on DOMContentLoaded (which the loader sends again)."""
    import material

    main = (ROOT / "overrides" / "main.html").read_text(encoding="utf-8")
    inline = material_template("partials/javascripts/base.html")
    bundle = next((Path(material.__file__).parent / "templates" / "assets" / "javascripts")
                  .glob("bundle.*.min.js")).read_text(encoding="utf-8")
    for name in sorted(set(re.findall(r"__md_\w+", main))):
        assert re.search(rf"\b{name}=", inline), name
    used = {"window.component$": "window.component$=",
            '"__palette"': '__md_get("__palette")',
            "data-md-color-switching": "data-md-color-switching",
            "md-typeset__scrollwrap": '{class:"md-typeset__scrollwrap"}',
            "md-typeset__table": '{class:"md-typeset__table"}',
            "md-annotation__index": "md-annotation__index",
            "data-md-annotation-id": "data-md-annotation-id",
            '"DOMContentLoaded"': 'h(document,"DOMContentLoaded"'}
    for in_ours, in_bundle in used.items():
        assert in_ours in main, in_ours
        assert in_bundle in bundle, in_bundle
    assert "<script src=" in material_template("base.html")  # what the scripts block rewrites


def call_keywords(source: str, function: str) -> set[str]:
    """The keyword names of every call to ``…function(…)`` in ``source``."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == function:
            names |= {keyword.arg for keyword in node.keywords}
    return names


def dict_keys_written(source: str) -> set[str]:
    """The string keys of every dict literal passed to ``json.dumps`` in ``source``."""
    import ast

    keys = set()
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "dumps"
                and node.args and isinstance(node.args[0], ast.Dict)):
            keys |= {key.value for key in node.args[0].keys if isinstance(key, ast.Constant)}
    return keys


def test_background_render_is_mkdocs_jupyters_own_render():
    """hooks/notebooks.py renders a notebook the way mkdocs-jupyter's page render does: the
    same call to nb2html (every argument), the same cache entry (keys), and it relies on the
    private helpers and the cache-key inputs it had."""
    import inspect

    from mkdocs_jupyter import plugin

    theirs = inspect.getsource(plugin.Plugin.on_pre_page)
    ours = (ROOT / "hooks" / "notebooks.py").read_text(encoding="utf-8")
    assert call_keywords(ours, "nb2html") == call_keywords(theirs, "nb2html") != set()
    assert dict_keys_written(ours) == dict_keys_written(theirs) == {"content", "toc_tokens",
                                                                     "title"}
    assert "_compute_cache_key(\n                    page.file.abs_src_path, self.config, exec_nb" \
        in theirs  # the key the hook computes with the plugin's config and "execute"
    assert list(inspect.signature(plugin._compute_cache_key).parameters) == [
        "nb_path", "config", "exec_nb"]
    assert list(inspect.signature(plugin._get_cache_path).parameters) == [
        "cache_dir", "cache_key"]
    assert list(inspect.signature(plugin._get_nb_toc_tokens).parameters) == [
        "fpath", "toc_depth"]
    assert list(inspect.signature(plugin.NotebookFile).parameters)[:3] == [
        "file", "use_directory_urls", "site_dir"]


def test_the_render_check_catches_a_new_argument():
    theirs = "convert.nb2html(path, execute=e, theme=t)"
    assert call_keywords(theirs, "nb2html") != call_keywords(theirs.replace(
        "theme=t", "theme=t, new=n"), "nb2html")


def test_mkdocstrings_still_takes_its_locale_where_the_hook_sets_it():
    """The private attribute hooks/api_language.py sets is the one mkdocstrings renders with."""
    import inspect

    from mkdocstrings._internal import extension

    assert "self._handlers._locale" in inspect.getsource(extension)


def test_jinja_cache_reaches_the_environment_mkdocstrings_renders_with(tmp_path, monkeypatch):
    """hooks/jinja_cache.py sets the bytecode cache on mkdocstrings' Python handler's Jinja
    environment: the handler must be one per build (made once, reused) and render through
    that environment."""
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    mkdocstrings = config.plugins["mkdocstrings"]
    mkdocstrings.on_config(config)
    jinja_cache = import_hook("jinja_cache")
    monkeypatch.setattr(jinja_cache, "CACHE", tmp_path)
    jinja_cache.on_nav(None, config, None)
    handler = mkdocstrings.handlers.get_handler("python")
    assert handler is mkdocstrings.handlers.get_handler("python")
    handler.env.get_template("function.html.jinja")
    assert list(tmp_path.glob("__jinja2_*.cache")), "no compiled template was stored"


def test_each_language_gets_its_own_search_index(site):
    """The built site has one index per language: English entries only under en/ (their
    locations relative to en/), Chinese ones only at the root; English pages read theirs."""
    zh = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    en = json.loads((site / "en" / "search" / "search_index.json").read_text(encoding="utf-8"))
    for index in (zh, en):
        assert index["docs"] and not any(d["location"].startswith("en/") for d in index["docs"])
    assert "scores/" in {d["location"] for d in zh["docs"]} & {d["location"] for d in en["docs"]}
    titles_zh = {d["title"].replace("\u200b", "") for d in zh["docs"]  # jieba's word breaks
                 if d["location"] == "scores/"}
    titles_en = {d["title"] for d in en["docs"] if d["location"] == "scores/"}
    assert titles_zh == {"注意力分数计算"} and titles_en == {"Attention scores"}, (titles_zh,
                                                                                titles_en)
    config = re.compile(r'<script id="__config" type="application/json">(.*?)</script>', re.S)
    for path, base in (("en/scores/index.html", "../../en/"), ("en/index.html", "../en/"),
                       ("scores/index.html", "..")):
        html = (site / path).read_text(encoding="utf-8")
        assert json.loads(config.search(html).group(1))["base"] == base, path


def test_search_entries_are_kept_for_the_next_build(search_cache, monkeypatch, tmp_path):
    """hooks/search_cache.py writes the entries of the pages a build indexed to its cache file
    after the build; the next process reads them, so a warm ``mkdocs build`` parses no page,
    nor loads jieba's dictionary, until one changes, or Material does."""
    from material.plugins.search.plugin import SearchIndex

    parsed = []
    monkeypatch.setattr(search_cache, "CACHE", tmp_path / "search" / "entries.json")
    monkeypatch.setattr(search_cache, "_parse", lambda index, page: (
        parsed.append(page.url), index.entries.append({"location": page.url})))
    monkeypatch.setattr(search_cache, "_entries", {})
    monkeypatch.setattr(search_cache, "_used", set())
    page = SimpleNamespace(url="x/", title="T", meta={}, toc=[], content="<p>text</p>")
    index = SearchIndex(lang=["en"], separator=" ", pipeline=[], fields={})
    index.add_entry_from_context(page)
    search_cache.on_post_build({})
    search_cache._entries.clear()                 # a new process
    search_cache._used.clear()
    search_cache.on_startup(command="build", dirty=False)
    index = SearchIndex(lang=["en"], separator=" ", pipeline=[], fields={})
    monkeypatch.setattr(search_cache, "jieba_ready", lambda: parsed.append("jieba"))
    index.add_entry_from_context(page)
    assert parsed == ["x/"] and index.entries == [{"location": "x/"}]  # jieba not even loaded
    monkeypatch.setattr(search_cache, "MATERIAL", "another version")
    index.add_entry_from_context(page)
    assert parsed == ["x/", "jieba", "x/"]


def test_mkdocs_keeps_the_hooks_across_rebuilds():
    """mkdocs serve loads mkdocs.yml again for every rebuild but keeps each hook's module (its
    loader is cached), which the hooks' in-memory caches rely on: figures._last_fingerprint,
    katex._cache, search_cache._entries and _jieba_words."""
    from mkdocs.config import load_config

    first = load_config(str(ROOT / "mkdocs.yml")).plugins
    second = load_config(str(ROOT / "mkdocs.yml")).plugins
    hooks = [name for name in first if name.startswith("hooks/")]
    # Every hook file is loaded (not _fingerprint.py, a helper, nor draw_figures.py, a script).
    assert sorted(hooks) == sorted(f"hooks/{p.name}" for p in (ROOT / "hooks").glob("*.py")
                                   if not p.name.startswith("_") and p.name != "draw_figures.py")
    assert all(first[name] is second[name] for name in hooks)


# ---- the test suites (conftest.py) ---------------------------------------------------------

def root_conftest():
    """The repository's conftest.py as a module of its own name (tests/ has a conftest too)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeItem:
    def __init__(self, path: str, *marks: str):
        self.path, self.nodeid = ROOT / path, path + "::test"
        self.marks = [SimpleNamespace(name=name) for name in marks]

    def iter_markers(self):
        return iter(self.marks)

    def add_marker(self, name):
        self.marks.append(SimpleNamespace(name=name))


def test_every_test_gets_the_suite_of_where_it_lives(monkeypatch):
    conftest = root_conftest()
    expected = {
        "mha/attention.py": "core", "mha/models/minilm.py": "model",
        "mha/site/head_roles.py": "site", "mha/site/plots/speed.py": "site",
        "docs/zh/scores.md": "site", "docs/en/api/core.md": "site",
        "tests/test_minilm.py": "model", "tests/test_head_roles.py": "model",
        "tests/test_site.py": "site", "tests/test_figures.py": "site",
        "tests/test_katex_vendor.py": "site", "tests/test_bench.py": "site",
        "tests/test_packaging.py": "site", "tests/test_browser.py": "browser",
        "tests/test_attention.py": "core", "tests/test_parallel.py": "core",
        "tests/test_edges.py": "core", "tests/test_project.py": "core",
        "tests/test_golden.py": "core",
    }
    items = [FakeItem(path) for path in expected]
    items.append(FakeItem("tests/test_attention.py", "site"))  # a file may choose its own
    monkeypatch.delenv("MHA_TEST_SHARD", raising=False)  # set when dev.py runs two halves
    conftest.pytest_collection_modifyitems(SimpleNamespace(rootpath=ROOT), items)
    assert {item.nodeid.split("::")[0]: conftest.suites_of(item) for item in items[:-1]} == {
        path: [suite] for path, suite in expected.items()}
    assert conftest.suites_of(items[-1]) == ["site"]


@pytest.mark.parametrize("item", [FakeItem("scripts/test_x.py"),
                                  FakeItem("tests/test_x.py", "core", "site")],
                         ids=["no suite", "two suites"])
def test_collection_fails_on_a_test_without_exactly_one_suite(item):
    conftest = root_conftest()
    with pytest.raises(pytest.UsageError, match="exactly one of the suites"):
        conftest.pytest_collection_modifyitems(SimpleNamespace(rootpath=ROOT), [item])

