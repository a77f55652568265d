"""The sweep's HTML page in a real browser: Debian's chromium, headless, driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``, no network, no extra package).

The page must load from disk with no console error, no uncaught exception and no failed
request, reference nothing outside itself, and show every plot: each ``<img>`` decoded with
a nonzero natural size and laid out with a nonzero box.
"""
from __future__ import annotations

import json
import os
import re
import select
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from test_sweep import reference_store   # the tiny preset's store, run once per session
from zoforge.sweep.outputs import write_outputs
from zoforge.sweep.store import Store
from zoforge.sim.toolchain import find_program

CHROMIUM = find_program("chromium") or find_program("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(`apt-get install chromium`; CI's .ci/run installs it)")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--remote-debugging-pipe"]

_IMAGES = """JSON.stringify(Array.from(document.images).map(i => {
  const box = i.getBoundingClientRect();
  return {alt: i.alt, complete: i.complete, natural: [i.naturalWidth, i.naturalHeight],
          box: [box.width, box.height]};
}))"""


class Browser:
    """A headless chromium and a minimal DevTools-protocol client over its pipe."""

    def __init__(self, profile: Path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def onto_3_and_4():      # chromium reads commands on fd 3, writes replies on fd 4
            # (runs before the child closes its other descriptors; pass_fds keeps 3 and 4)
            read, write = os.dup(to_chrome_r), os.dup(from_chrome_w)   # out of the way
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, preexec_fn=onto_3_and_4)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events if e.get("method") == method]
            if found:
                return found[0]
            self.events.append(self._read(deadline - time.monotonic()))

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_chrome], [], [], max(left, 0))
            if not ready:
                raise TimeoutError("no message from chromium")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def load_page(path: Path) -> tuple[list[dict], list[str]]:
    """Open ``path`` in headless chromium: (the images' state, the problems it reported)."""
    with tempfile.TemporaryDirectory(prefix="zoforge-chromium-") as profile:
        browser = Browser(Path(profile))
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget",
                                   {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                browser.send(f"{domain}.enable", session=session)
            browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
            browser.wait_event("Page.loadEventFired")
            value = browser.send("Runtime.evaluate", {"expression": _IMAGES,
                                                      "returnByValue": True},
                                 session=session)["result"]["value"]
            problems = _problems(browser.events)
        finally:
            browser.close()
    return json.loads(value), problems


def _problems(events: list[dict]) -> list[str]:
    out = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            out.append(f"exception: {details.get('text')} "
                       f"{details.get('exception', {}).get('description', '')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append(f"console.{params['type']}: {params.get('args')}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            out.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            out.append(f"request failed: {params.get('errorText')}")
    return out


def test_sweep_page_loads_in_chromium_and_shows_every_plot(tmp_path, tmp_path_factory):
    store = Store(reference_store(tmp_path_factory))
    paths = write_outputs(store, "tiny", tmp_path)
    text = paths["html"].read_text()
    assert not re.search(r"""(src|href)=["'](?!data:)""", text), "an external reference"
    images, problems = load_page(paths["html"])
    assert problems == []
    plots = sorted(p.name for p in paths["plots"].glob("*.png"))
    assert len(images) == len(plots) >= 3      # bits, LUT, dynamic power (BRAM18 all 0)
    for image in images:
        assert image["complete"], image["alt"]
        assert min(image["natural"]) > 0 and min(image["box"]) > 0, image


def test_the_browser_check_catches_a_broken_page(tmp_path):
    """The check is not vacuous: a broken image, a missing file and a script error are all
    reported."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
                    '<img alt="x" src="data:image/png;base64,AAAA">'
                    '<img alt="y" src="missing.png">'
                    "<script>undefinedFunction()</script></body></html>")
    images, problems = load_page(page)
    assert [image["natural"] for image in images] == [[0, 0], [0, 0]]
    assert any("undefinedFunction" in p for p in problems)
    assert any("missing.png" in p or "request failed" in p for p in problems)
