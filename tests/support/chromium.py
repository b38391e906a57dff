"""Debian's Chromium, headless, driven through its DevTools protocol (no browser download).

``make test`` installs it where apt can (see the Makefile); where it cannot, tests that need it
are skipped, saying why. Every wait is for a condition (the browser's answer, a page's state),
bounded by a deadline only so that a broken browser fails the test instead of hanging it.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import websocket

CHROMIUM = Path("/usr/bin/chromium")
#: Flags that work on these machines (no sandbox for root, no GPU, no network but loopback).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
DEADLINE_SECONDS = 60.0

T = TypeVar("T")


def require_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is not installed (Debian's chromium package; `make test` installs it where apt is "
            "available, and this machine has no apt or no access to it)"
        )


class Navigating(AssertionError):
    """The page went away under a call: it is navigating (a form posted, a redirect)."""


#: What DevTools answers a call made while its page is being replaced by the next one.
NAVIGATED = "Inspected target navigated or closed"


def wait_for(what: str, check: Callable[[], T | None]) -> T:
    """``check()``'s first truthy answer; fail naming ``what`` if none comes before the deadline.

    A check that met the page mid-navigation is asked again (the next page is what it waits for).
    """
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        try:
            value = check()
        except Navigating:
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"Chromium: no {what} within {DEADLINE_SECONDS:g} s")


class Page:
    """One tab, over its DevTools WebSocket."""

    def __init__(self, socket: websocket.WebSocket) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call ``method``; its result (events that arrive meanwhile are skipped)."""
        call = next(self._ids)
        self._socket.send(json.dumps({"id": call, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") != call:
                continue
            if "error" in message:
                if message["error"].get("message") == NAVIGATED:
                    raise Navigating(f"Chromium refused {method}: {message['error']}")
                raise AssertionError(f"Chromium refused {method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        answer = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait until its document has loaded."""
        self.send("Page.navigate", url=url)
        wait_for(f"load of {url}", lambda: self.location() == url and self.ready())

    def screenshot(self, path: Path) -> Path:
        """The page as it looks now, as a PNG file at ``path``."""
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def location(self) -> str:
        return str(self.evaluate("document.location.href"))

    def ready(self) -> bool:
        return bool(self.evaluate("document.readyState") == "complete")


@contextmanager
def chromium() -> Iterator[Page]:
    """A fresh headless Chromium (its own profile directory) and its first tab."""
    require_chromium()
    profile = Path(tempfile.mkdtemp(prefix="squadron-chromium-"))
    process = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        active = profile / "DevToolsActivePort"
        port = wait_for(
            "DevTools port", lambda: active.exists() and active.read_text().split("\n")[0].strip()
        )
        targets_url = f"http://127.0.0.1:{port}/json/list"

        def first_page() -> dict[str, Any] | None:
            with urllib.request.urlopen(targets_url, timeout=5) as answer:
                targets = json.loads(answer.read())
            return next((t for t in targets if t.get("type") == "page"), None)

        target = wait_for("page target", first_page)
        socket = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=DEADLINE_SECONDS)
        try:
            page = Page(socket)
            page.send("Page.enable")
            yield page
        finally:
            socket.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)
