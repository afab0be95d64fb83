#!/usr/bin/env python3
"""How long one update of the case board's lab takes in Chromium with the CPU throttled 4x.

Issue #20 asks that one lab update take at most 16 ms (one frame) with Chromium's CPU throttled
four times. This script measures it; it is not a test (timings depend on the machine and its
load; run it on an otherwise idle machine). For each language it opens the case board (1280 x 900)
and puts the forward pass on the stage with the most cells (queries, keys and values). The board
draws what is on or near the screen and the rest when it comes near, so each language is measured
twice: scrolled to the lab (the reader moves a control and watches the lab; the forward pass,
further down, waits) and scrolled to the forward pass (the reader keeps the keyboard on the
slider and watches the forward pass; the lab's heatmaps wait). Then it throttles the CPU 4x
through the DevTools protocol and, inside one evaluate in the page, times ``--updates`` updates
that cycle through the controls (temperature slider, mask, mask parameter, number of heads):

    t0 = performance.now(); set the control's value; dispatch its input/change event (the page's
    handler recomputes both layers and redraws the lab and the forward pass synchronously);
    t1 = performance.now(); document.body.offsetHeight (forces style and layout);
    t2 = performance.now()

each update in a task of its own, after the previous update's frame, as a reader's inputs come.

A change of the number of heads builds the forward stage for that number the first time it is
shown (kept afterwards), so the first cycle's head changes are the slowest; they are measured
like the rest. The idle time SETUP waits for is also when the board rehearses a few updates
(caseboard-lab.js, rehearseSoon), as it does while a reader looks at the board before touching
it: the browser compiles the update's code then. The first update is printed on its own too.

The heatmaps' canvases are painted in the handler, so their drawing is included; the browser's
own paint is measured apart: after t2 the update waits for the next frame (a requestAnimationFrame
callback, then a task after it, which runs once that frame's style, layout, observers and paint
are done) and takes t3, so t3 - t2 is the paint and whatever else that frame does for the update
(the ResizeObserver's canvases, the compositing) plus the wait for the frame itself.

Prints, per language, view and control, the handler's time (t1 - t0), the time with style
and layout (t2 - t0), median, 95th percentile and maximum, and the paint (t3 - t2), median
and p95. It exits
non-zero when the handler's maximum exceeds ``--budget`` (16 ms): the issue's measure, the time
around the update. The style and layout that follow are printed beside it, not judged: the
browser does them before the next frame, so a reader feels them too.

Every fifth "update" is a baseline, timed the same way and among the others: arithmetic that
takes 1 ms before the CPU is throttled, about as long as an update's own work, and none of the
board's. Its spread is what this machine adds to any task of that length (throttling pauses
the page's thread in slices, and other processes share the two cores): a maximum close to the
baseline's is the machine's, not the board's.

    .venv/bin/python scripts/caseboard_perf.py                  # builds the site into a temp dir
    .venv/bin/python scripts/caseboard_perf.py --site-dir /tmp/site   # a site already built
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_site import build_site, free_port, serve  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu"]
PAGES = {"zh": "caseboard/", "en": "en/caseboard/"}
#: The forward pass's stage shown while measuring (0-based): Q, K and V, the most cells.
STAGE = 1

#: Where the page is scrolled to while measuring: the id of the part at the top of the window.
VIEWS = {"lab": "caseboard-lab", "forward": "caseboard-forward"}

#: Runs in the page: the forward pass's stage, and the part to show at the top of the window;
#: then waits until the page has settled: a few frames (the observers have seen what is on the
#: screen) and idle time (the board builds the views for the other numbers of heads then).
SETUP = """async ([stage, part]) => {
    const frame = () => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)));
    const idle = () => new Promise(done => requestIdleCallback(done, {timeout: 3000}));
    const settle = async () => {
        for (let i = 0; i < 3; i++) await frame();
        for (let i = 0; i < 4; i++) await idle();
    };
    // Each part is built when it first comes near the screen: show both once.
    for (const id of ['caseboard-lab', 'caseboard-forward']) {
        document.getElementById(id).scrollIntoView({block: 'start'});
        await settle();
    }
    document.querySelectorAll('#caseboard-forward .cblab-stage-button')[stage].click();
    document.getElementById(part).scrollIntoView({block: 'start'});
    await settle();
    // The baseline's work (MEASURE): arithmetic that takes 1 ms here before the CPU is throttled.
    // (Its result is kept, so that the compiler cannot drop the loop; it is compiled first.)
    window.caseBoardPerfWork = loops => {
        let x = 0;
        for (let k = 0; k < loops; k++) x += Math.sqrt(k);
        window.caseBoardPerfSink = x;
    };
    for (let i = 0; i < 50; i++) window.caseBoardPerfWork(20000);
    let loops = 500, took = 0;
    while (took < 1) {  // the median of five timings
        loops *= 2;
        const times = [];
        for (let i = 0; i < 5; i++) {
            const t0 = performance.now();
            window.caseBoardPerfWork(loops);
            times.push(performance.now() - t0);
        }
        took = times.sort((a, b) => a - b)[2];
    }
    window.caseBoardPerfLoops = loops;
}"""

#: Runs in the page: `count` timed updates cycling through the lab's controls, each in a task
#: of its own after the previous one's frame (as a reader's inputs come); for each, the control
#: (0 temperature, 1 mask, 2 mask parameter, 3 heads), the time of the page's handler alone and
#: the time with the style and layout it causes (ms).
MEASURE = """async (count) => {
    const box = document.getElementById('caseboard-lab');
    const [temperature, parameter] = box.querySelectorAll('input[type=range]');
    const mask = box.querySelector('select');
    const heads = [...box.querySelectorAll('input[type=radio]')];
    const masks = ['causal', 'window', 'padding', 'none'];
    const headCycle = ['2', '1', '4'];
    const set = (control, value, type) => {
        control.value = value;
        control.dispatchEvent(new Event(type, {bubbles: true}));
    };
    const actions = [
        i => set(temperature, String((i * 5) % 13), 'input'),
        i => set(mask, masks[Math.floor(i / 5) % masks.length], 'change'),
        i => parameter.closest('[hidden]')
            ? set(temperature, String((i * 7) % 13), 'input')
            : set(parameter, String(Number(parameter.min) + i % (Number(parameter.max)
                                                               - Number(parameter.min) + 1)),
                  'input'),
        i => {
            const radio = heads.find(r => r.value === headCycle[Math.floor(i / 5) % 3]);
            radio.checked = true;
            radio.dispatchEvent(new Event('change', {bubbles: true}));
        },
        // The baseline: 1 ms of arithmetic (unthrottled), none of the board's, timed the same way.
        i => window.caseBoardPerfWork(window.caseBoardPerfLoops),
    ];
    const times = [];
    const frame = () => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)));
    const painted = () => new Promise(done => requestAnimationFrame(
        () => setTimeout(() => done(performance.now()))));
    for (let i = 0; i < count; i++) {
        const t0 = performance.now();
        actions[i % actions.length](i);
        const t1 = performance.now();
        document.body.offsetHeight;  // style and layout, now
        const t2 = performance.now();
        const t3 = await painted();  // the next frame, painted
        times.push([i % actions.length, t1 - t0, t2 - t0, t3 - t2]);
        await frame();
    }
    return times;
}"""

#: The baseline's name: a task of 1 ms of arithmetic (before throttling), timed like the updates:
#: what a task of about an update's length takes, throttled, on this machine at this moment.
BASELINE = "1 ms (baseline)"

#: The controls, in the order of MEASURE's actions.
CONTROLS = ("temperature", "mask", "mask parameter", "heads", BASELINE)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(base_url: str, updates: int, rate: float) -> dict[tuple[str, str], list[float]]:
    from playwright.sync_api import sync_playwright

    out = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for lang, path in PAGES.items():
            for view, part in VIEWS.items():
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(base_url + path, wait_until="load")
                # The board is built when it first comes near the screen: bring it there.
                page.evaluate("() => document.getElementById('caseboard-lab').scrollIntoView()")
                page.wait_for_function("() => window.caseBoardLab !== undefined")
                page.evaluate(SETUP, [STAGE, part])
                page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate",
                                                        {"rate": rate})
                out[lang, view] = page.evaluate(MEASURE, updates)
                page.close()
        browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-dir", help="a built site (default: build one into a temp dir)")
    parser.add_argument("--updates", type=int, default=125,
                        help="updates per language and view (125: 25 per control)")
    parser.add_argument("--rate", type=float, default=4, help="CPU throttling rate (4)")
    parser.add_argument("--budget", type=float, default=16.0, help="most ms an update may take")
    args = parser.parse_args(argv)

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="caseboard-perf-") as temp:
        site_dir = args.site_dir
        if not site_dir:
            site_dir = temp
            print("building the site …", flush=True)
            build_site(site_dir, f"http://127.0.0.1:{port}/")
        with serve(site_dir, port=port, gzip=True) as base_url:
            results = measure(base_url, args.updates, args.rate)

    print(f"one lab update, CPU throttled {args.rate:g}x, {args.updates} updates per language "
          f"and view (ms; budget {args.budget:g}): the handler alone, and with the style and "
          f"layout it causes, and the paint after it (to the next frame)")
    first = ", ".join(f"{lang} {view} {times[0][1]:.1f}"
                      for (lang, view), times in results.items())
    print(f"the first update's handler (ms): {first}")
    print(f"{'language':<10}{'view':<10}{'control':<16}{'handler median':>16}{'max':>8}"
          f"{'+ layout median':>17}{'p95':>8}{'max':>8}{'paint median':>14}{'p95':>8}")
    over = []
    for (lang, view), times in results.items():
        for control, name in enumerate(CONTROLS):
            handler = [t for c, t, _, _ in times if c == control]
            total = [t for c, _, t, _ in times if c == control]
            paint = [t for c, _, _, t in times if c == control]
            print(f"{lang:<10}{view:<10}{name:<16}{statistics.median(handler):>16.2f}"
                  f"{max(handler):>8.2f}{statistics.median(total):>17.2f}"
                  f"{percentile(total, 0.95):>8.2f}{max(total):>8.2f}"
                  f"{statistics.median(paint):>14.2f}{percentile(paint, 0.95):>8.2f}")
            if name != BASELINE and max(handler) > args.budget:
                over.append(f"{lang} ({view}, {name})")
    if over:
        print(f"over budget: {', '.join(over)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
