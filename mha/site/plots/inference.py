"""Figures and the table of the inference chapter (推理), drawn from the kept benchmark run.

Every function takes the run's ``"decode"`` section (``python -m mha.site.bench --decode-only
--save mha/site/data/benchmark.json``: see `mha.site.bench.measure_decode`) and a language, and
returns a Figure or a Markdown table; nothing here measures.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ._style import COLORS, style
from ..terms import term

__all__ = ["WAYS", "plot_decode", "plot_cache", "decode_step_table"]

#: The two ways of generating, as the run names them, with their colour and marker.
WAYS = {"cached": (COLORS["scaled"], "o"), "recomputed": (COLORS["raw"], "s")}

#: What the key/value head counts of h = 8 are called (the chapter's names).
KV_KINDS = {
    "zh": {"mha": "多头", "gqa": "GQA", "mqa": "MQA"},
    "en": {"mha": "MHA", "gqa": "GQA", "mqa": "MQA"},
}

WORDS = {
    "zh": {
        "cached": "用 {kv_cache}：只算新{token}",
        "recomputed": "不用缓存：每步重算整个前缀",
        "prefix": "前缀长度（新{token}看到的{token}数，含自己）",
        "per_token": "生成一个{token}的时间（毫秒，最快一次）",
        "decode_title": "逐个生成 {n} 个{token}：有缓存 {cached:.2f} 秒，"
                        "重算 {recomputed:.1f} 秒（快 {ratio:.0f} 倍）",
        "kv_heads": "{kv_heads} $h_{{kv}}$（h = {h}）",
        "mib": "一层的 {kv_cache}（MiB）",
        "cache_title": "{n} 个{token}之后，一层的 {kv_cache}（KVCache.nbytes）",
        "formula": "公式 2·n·h_kv·d_head·{itemsize}",
        "note": "{date} · {cpus} 核 · d_model = {d}, h = {h}, {dtype}",
    },
    "en": {
        "cached": "{kv_cache}: only the new {token}",
        "recomputed": "no cache: the whole prefix again",
        "prefix": "prefix length (tokens the new {token} sees, itself included)",
        "per_token": "time to generate one {token} (ms, fastest call)",
        "decode_title": "{n} {token}s one at a time: cached {cached:.2f} s, "
                        "recomputed {recomputed:.1f} s ({ratio:.0f}× faster)",
        "kv_heads": "{kv_heads} $h_{{kv}}$ (h = {h})",
        "mib": "{kv_cache} of one layer (MiB)",
        "cache_title": "One layer's {kv_cache} after {n} {token}s (KVCache.nbytes)",
        "formula": "formula 2·n·h_kv·d_head·{itemsize}",
        "note": "{date} · {cpus} cores · d_model = {d}, h = {h}, {dtype}",
    },
}


def _say(lang: str, key: str, **fields) -> str:
    """The label ``key`` of ``lang``, the glossary's terms and ``fields`` filled in."""
    terms = {name: term(name, lang) for name in ("token", "kv_cache", "kv_heads")}
    return WORDS[lang][key].format(**terms, **fields)


def _kind(kv: int, h: int, lang: str) -> str:
    kinds = KV_KINDS[lang]
    return kinds["mha"] if kv == h else kinds["mqa"] if kv == 1 else kinds["gqa"]


def _note(decode: dict, lang: str) -> str:
    return WORDS[lang]["note"].format(date=decode["date"][:10],
                                      cpus=decode["machine"]["cpu_count"], d=decode["d_model"],
                                      h=decode["h"], dtype=decode["dtype"])


def plot_decode(decode: dict, lang: str) -> Figure:
    """Time of one generated token against the prefix length, with the cache and recomputing
    the prefix (log-log), the whole generation's times and ratio in the title."""
    per_token = decode["per_token"]
    prefixes = per_token["prefix"]
    with style():
        fig = Figure(figsize=(6.4, 4.6), layout="constrained")
        ax = fig.subplots()
        for way, (color, marker) in WAYS.items():
            ax.plot(prefixes, [s * 1e3 for s in per_token[way]], marker=marker, color=color,
                    label=_say(lang, way))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xticks(prefixes, [str(p) for p in prefixes])
        ax.set_xlabel(_say(lang, "prefix"))
        ax.set_ylabel(_say(lang, "per_token"))
        ax.grid(True, alpha=0.3)
        ax.legend(frameon=False, fontsize=9, loc="upper left")
        seconds = decode["seconds"]
        ax.set_title(_say(lang, "decode_title", n=f"{decode['n']:,}", cached=seconds["cached"],
                          recomputed=seconds["recomputed"],
                          ratio=decode["recomputed_over_cached"]), fontsize=10.5)
        fig.suptitle(_note(decode, lang), fontsize=8.5, color=COLORS["neutral"])
    return fig


def plot_cache(decode: dict, lang: str) -> Figure:
    """One layer's cache after all the run's tokens, for each measured ``kv_heads``: a bar of
    ``KVCache.nbytes`` each, and a tick at the formula's value over it."""
    rows = decode["cache"]
    h = decode["h"]
    labels = [f"{r['kv_heads']}\n{_kind(r['kv_heads'], h, lang)}" for r in rows]
    mib = [r["nbytes"] / 2**20 for r in rows]
    formula = [r["formula_bytes"] / 2**20 for r in rows]
    itemsize = {"float32": 4, "float64": 8, "float16": 2}[decode["dtype"]]
    with style():
        fig = Figure(figsize=(5.6, 4.2), layout="constrained")
        ax = fig.subplots()
        positions = range(len(rows))
        ax.bar(positions, mib, color=COLORS["scaled"], width=0.6)
        ax.scatter(positions, formula, marker="_", s=1600, linewidths=3, color=COLORS["raw"],
                   zorder=3, label=_say(lang, "formula", itemsize=itemsize))
        for x, value in zip(positions, mib):
            ax.annotate(f"{value:g} MiB", (x, value), xytext=(0, 4), textcoords="offset points",
                        ha="center", va="bottom", fontsize=10)
        ax.set_xticks(list(positions), labels)
        ax.set_xlabel(_say(lang, "kv_heads", h=h))
        ax.set_ylabel(_say(lang, "mib"))
        ax.set_ylim(0, max(mib) * 1.2)
        ax.legend(frameon=False, fontsize=9, loc="upper right", markerscale=0.5)
        ax.set_title(_say(lang, "cache_title", n=f"{rows[0]['tokens']:,}"), fontsize=10.5)
        fig.suptitle(_note(decode, lang), fontsize=8.5, color=COLORS["neutral"])
    return fig


#: The rows of the decode-step table: the parts of `mha.site.bench.STEP_PARTS`, then the sum.
STEP_ROWS = {
    "zh": {"preparation": "准备：检查输入、权重的形状、结果是否为有限值",
           "projections": "投影：算新{token}的 q、k、v，写进缓存",
           "attention": "注意力：{n} 个键值上的 softmax 加权和",
           "output": "输出投影：乘 $W^O$",
           "sum": "各部分之和",
           "total": "整步（单独计时）"},
    "en": {"preparation": "preparation: checks of the input, the weights' shapes, finite results",
           "projections": "projections: the new {token}'s q, k, v, written to the cache",
           "attention": "attention: softmax-weighted sum over {n} keys and values",
           "output": "output projection: times $W^O$",
           "sum": "sum of the parts",
           "total": "whole step (timed on its own)"},
}
STEP_HEADERS = {
    "zh": ("一步解码（前缀 {n}）", "mha（毫秒）", "PyTorch（毫秒）"),
    "en": ("one decode step (prefix {n})", "mha (ms)", "PyTorch (ms)"),
}
STEP_NOTE = {
    "zh": "d_model = {d}，h = {h}，{dtype}；缓存里已有 {cached} 个{token}，新{token}是第 {n} 个。"
          "每一格是同一进程里 {repeats} 次调用中最快的一次（每段连续调用 {block} 次，各段轮流）。"
          "各部分单独计时，各自的数据留在处理器缓存里，所以加起来比整步少：整步一次要读全部权重"
          "和缓存，读得更慢。mha 的各部分就是 `MultiHeadAttention` 少量词元路径做的事：权重（连同 "
          "$W^O$）按存储的 float64 直接相乘，每个乘积取整成 float32 一次；检查只看输入、权重的类型"
          "和形状，以及新{token}的 q、k、v 和输出是否都是有限值（权重里若有 NaN 或 inf，这些数里"
          "必然也会出现；只有这时才把权重从头读一遍，指出是哪一个）。类承诺改权重立刻生效，所以不留"
          "任何事先准备好的权重。PyTorch：`torch.no_grad()`，预先分配的缓存，`scaled_dot_product_attention`，权重事先"
          "就是 float32 张量（模块参数就是这样），{threads} 个线程。mha 整步是 PyTorch 的 "
          "{ratio:.2f} 倍。{versions}。",
    "en": "d_model = {d}, h = {h}, {dtype}; {cached} {token}s in the cache, the new one is number "
          "{n}. Each cell is the fastest of {repeats} calls in one process (in runs of {block} "
          "calls in a row, the runs interleaved). The parts are timed on their own, their data "
          "staying in the processor's caches, so they add up to less than the whole step, which "
          "reads all the weights and the cache in one go, and more slowly. mha's parts are what "
          "`MultiHeadAttention` does for a few tokens: the products read the float64 weights as "
          "stored, $W^O$ too, each product rounded to float32 once; the checks look at the "
          "input, the weights' types and shapes, and whether the new {token}'s q, k, v and the "
          "output are finite (a NaN or inf in a weight would make them NaN or inf: only then "
          "are the weights read through, to name the one at fault). The class promises that weight "
          "edits take effect at once, so it keeps no prepared weights. PyTorch: "
          "`torch.no_grad()`, a preallocated cache, `scaled_dot_product_attention`, the weights "
          "float32 tensors made beforehand (as a module's parameters are), {threads} threads. "
          "mha's whole step takes {ratio:.2f} times PyTorch's. {versions}.",
}


def decode_step_table(decode: dict, lang: str) -> str:
    """One cached decode step at the run's last prefix, ``mha`` against PyTorch, part by part
    (milliseconds), then the sum of the parts, the whole step, and a note on what each side
    does."""
    from ..bench import STEP_PARTS

    step = decode["step"]
    n, token = step["prefix"], term("token", lang)
    ours, theirs = step["mha"], step.get("torch")
    rows = ["| " + " | ".join(STEP_HEADERS[lang]).format(n=f"{n:,}") + " |", "|---|---:|---:|"]

    def cell(value):
        return "–" if value is None else f"{value * 1e3:.3f}"

    names = STEP_ROWS[lang]
    for part in STEP_PARTS:
        rows.append(f"| {names[part].format(n=f'{n:,}', token=token)} | "
                    f"{cell(ours['parts'][part])} | "
                    f"{cell(theirs['parts'][part] if theirs else None)} |")
    rows.append(f"| {names['sum']} | {cell(ours['sum_of_parts'])} | "
                f"{cell(theirs['sum_of_parts'] if theirs else None)} |")
    rows.append(f"| **{names['total']}** | **{cell(ours['seconds'])}** | "
                f"**{cell(theirs['seconds'] if theirs else None)}** |")
    v = decode["versions"]
    versions = (f"Python {v['python']} · NumPy {v['numpy']}"
                + (f" · PyTorch {v['torch']}" if "torch" in v else "")
                + f" · {decode['machine']['cpu_count']} CPU · {decode['date'][:10]}")
    note = STEP_NOTE[lang].format(d=decode["d_model"], h=decode["h"], dtype=decode["dtype"],
                                  cached=n - 1, n=f"{n:,}", token=token,
                                  repeats=step["step_repeats"], block=step.get("block", 1),
                                  threads=step.get("torch_threads", "–"),
                                  ratio=step.get("mha_over_torch", float("nan")),
                                  versions=versions)
    return "\n".join(rows) + "\n\n" + note
