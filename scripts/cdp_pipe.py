"""A minimal client of the Chrome DevTools Protocol over ``--remote-debugging-pipe``, standard
library only (POSIX: the pipe is file descriptors 3 and 4 of the browser).

Why not Playwright here: Playwright turns on the protocol's Network domain in every page and
worker it drives, and Chromium then keeps a copy of every response body in the page's renderer
(for ``Network.getResponseBody``): 23 MB more after the model's files, memory that no reader's
tab has. A memory measurement must come from a browser nobody instruments that way; this
client enables nothing but what it is asked to.

    with Chrome("/usr/bin/chromium") as chrome:
        page = chrome.new_page("http://127.0.0.1:8000/en/caseboard/")
        chrome.evaluate(page, "document.title")
        chrome.memory()          # {pid: {"footprint": MB, "v8": MB, ...}} of every process
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time


class Chrome:
    """A headless Chromium driven through its debugging pipe. Messages are JSON, each ended by
    a NUL byte; replies carry the request's id, events a method and (from a page) a session."""

    def __init__(self, executable: str, args: tuple[str, ...] = ()):
        if os.name != "posix":
            raise OSError("--remote-debugging-pipe is driven through file descriptors 3 and 4: "
                          "POSIX only")
        self.profile = tempfile.mkdtemp(prefix="cdp-pipe-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()

        def onto_3_and_4():   # in the child: dup2 makes them inheritable, os.pipe()'s are not
            read, write = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
             "--no-first-run", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={self.profile}",
             *args, "about:blank"],
            preexec_fn=onto_3_and_4, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.writer = os.fdopen(to_chrome_w, "wb", buffering=0)
        self.reader = os.fdopen(from_chrome_r, "rb", buffering=0)
        self.next_id = 0
        self.replies: dict[int, dict] = {}
        self.events: list[dict] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        pending = b""
        while chunk := self.reader.read(1 << 16):
            pending += chunk
            *messages, pending = pending.split(b"\0")
            with self.changed:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self.replies[message["id"]] = message
                    else:
                        self.events.append(message)
                self.changed.notify_all()

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 600) -> dict:
        """The result of one command (in a page if `session`); RuntimeError on an error."""
        with self.changed:
            self.next_id += 1
            number = self.next_id
        message = {"id": number, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.writer.write(json.dumps(message).encode() + b"\0")
        with self.changed:
            if not self.changed.wait_for(lambda: number in self.replies, timeout):
                raise TimeoutError(f"{method}: no reply in {timeout} s")
            reply = self.replies.pop(number)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def wait_event(self, method: str, session: str | None = None, timeout: float = 60) -> dict:
        """The first event `method` (of `session` if given) not yet taken, waiting for it."""
        end = time.monotonic() + timeout
        with self.changed:
            while True:
                for index, event in enumerate(self.events):
                    if event["method"] == method and session in (None, event.get("sessionId")):
                        return self.events.pop(index)
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {method} in {timeout} s")
                self.changed.wait(left)

    def new_page(self, url: str) -> str:
        """A new page at `url`, loaded: its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        self.send("Page.enable", session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str, timeout: float = 600):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, session, timeout)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def workers(self, session: str, timeout: float = 10) -> list[str]:
        """The sessions of the page's dedicated workers (attached now, flat)."""
        self.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False,
                                           "flatten": True}, session)
        found, end = [], time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                event = self.wait_event("Target.attachedToTarget", session, timeout=0.5)
            except TimeoutError:
                if found:
                    break
                continue
            if event["params"]["targetInfo"]["type"] == "worker":
                found.append(event["params"]["sessionId"])
        return found

    def memory(self) -> dict[int, dict[str, float]]:
        """Every process's private memory footprint (what Chrome's task manager shows as
        "Memory footprint") and its allocators' sizes to two levels ("v8", "v8/workers",
        "partition_alloc/partitions/array_buffer", ...), in MB, from one memory-infra dump."""
        with self.changed:
            self.events = [e for e in self.events if not e["method"].startswith("Tracing.")]
        self.send("Tracing.start", {
            "traceConfig": {"includedCategories": ["disabled-by-default-memory-infra"],
                            "memoryDumpConfig": {"triggers": []}},
            "transferMode": "ReportEvents"})
        self.send("Tracing.requestMemoryDump", {"deterministic": True,
                                                "levelOfDetail": "detailed"})
        self.send("Tracing.end")
        self.wait_event("Tracing.tracingComplete")
        out: dict[int, dict[str, float]] = {}
        with self.changed:
            collected = [e for e in self.events if e["method"] == "Tracing.dataCollected"]
        for event in collected:
            for record in event["params"]["value"]:
                dumps = record.get("args", {}).get("dumps")
                if record.get("ph") != "v" or not dumps:
                    continue
                mine = out.setdefault(record["pid"], {})
                totals = dumps.get("process_totals", {})
                if "private_footprint_bytes" in totals:
                    mine["footprint"] = int(totals["private_footprint_bytes"], 16) / 2**20
                for name, allocator in dumps.get("allocators", {}).items():
                    size = allocator.get("attrs", {}).get("size")
                    if name.count("/") <= 2 and size:
                        mine[name] = int(size["value"], 16) / 2**20
        return out

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chrome":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
