"""A small synchronous Chrome DevTools Protocol client for tests.

    with launch(["--proxy-server=127.0.0.1:8080"]) as browser:
        browser.goto("https://shop.test/")
        browser.click("input[type=search]")
        browser.type("kettle")
        assert browser.eval("document.title") == "shop.test"

`launch` starts Debian's Chromium headless with a fresh profile in a temporary folder and
drives its first tab over one WebSocket (websockets' sync client, no event loop). `close()`
(also on leaving the `with` block, on garbage collection and at interpreter exit) ends
Chromium and every helper process it started, then deletes the profile folder.

Chromium never sends 127.0.0.1/localhost through a proxy unless told to: pass
`--proxy-bypass-list=<-loopback>` with `--proxy-server` to route loopback URLs through it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections import deque
from pathlib import Path

from websockets.sync.client import connect

CHROMIUM = "/usr/bin/chromium"

# Headless, no sandbox (tests may run as root), and nothing the browser does on its own.
DEFAULT_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-dev-shm-usage",
    "--metrics-recording-only",
    "--mute-audio",
    "--password-store=basic",
    "--use-mock-keychain",
    "--window-size=1280,900",
]

# Input.dispatchKeyEvent fields for the non-character keys `press` knows.
KEYS = {
    "Enter": {"code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"},
    "Tab": {"code": "Tab", "windowsVirtualKeyCode": 9},
    "Escape": {"code": "Escape", "windowsVirtualKeyCode": 27},
    "Backspace": {"code": "Backspace", "windowsVirtualKeyCode": 8},
    "ArrowDown": {"code": "ArrowDown", "windowsVirtualKeyCode": 40},
    "ArrowUp": {"code": "ArrowUp", "windowsVirtualKeyCode": 38},
}


class CDPError(RuntimeError):
    """Chromium did not start, a command failed, or something did not happen in time."""


def launch(args: list[str] | tuple[str, ...] = (), executable: str = CHROMIUM,
           timeout: float = 20.0) -> Browser:
    """Start Chromium with DEFAULT_ARGS + `args` and a throwaway profile; a Browser on its first tab."""
    profile = Path(tempfile.mkdtemp(prefix="spillage-chromium-"))
    log = open(profile / "chromium.log", "wb")  # noqa: SIM115 - closed by _cleanup
    try:
        process = subprocess.Popen(
            [executable, *DEFAULT_ARGS, *args, f"--user-data-dir={profile / 'profile'}",
             "--remote-debugging-port=0", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: close() ends every helper process
        )
    except OSError as e:
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
        raise CDPError(f"cannot start {executable}: {e}") from e
    browser = Browser(process, profile, log)
    try:
        browser._attach(timeout)
    except BaseException:
        browser.close()
        raise
    return browser


def _cleanup(process: subprocess.Popen, profile: Path, log) -> None:
    """End Chromium's process group, then remove its profile folder (idempotent)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    try:  # helpers (zygote, renderers) still alive in the group Chromium led
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    log.close()
    shutil.rmtree(profile, ignore_errors=True)


class Browser:
    """One Chromium process and one attached tab. Not thread-safe."""

    def __init__(self, process: subprocess.Popen, profile: Path, log):
        self.process = process
        self.profile = profile
        self.ws = None
        self.session: str | None = None
        self.events: deque[dict] = deque(maxlen=10_000)
        self._next_id = 0
        self._finalizer = weakref.finalize(self, _cleanup, process, profile, log)

    # --- connection ---------------------------------------------------------------------

    def _attach(self, timeout: float) -> None:
        active = self.profile / "profile" / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not active.is_file() or len(active.read_text().splitlines()) < 2:
            if self.process.poll() is not None:
                raise CDPError(f"chromium exited with {self.process.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise CDPError(f"chromium did not open its DevTools port in {timeout}s: {self.log_tail()}")
            time.sleep(0.05)
        port, path = active.read_text().splitlines()[:2]
        self.ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=timeout)
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        pages = [t["targetId"] for t in targets if t["type"] == "page"]
        target = pages[0] if pages else self.send("Target.createTarget", {"url": "about:blank"},
                                                  session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.send("Page.enable")
        # Behave as the focused window: focus/blur events fire as for a user at the keyboard.
        self.send("Emulation.setFocusEmulationEnabled", {"enabled": True})

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return (self.profile / "chromium.log").read_bytes()[-chars:].decode("utf-8", "replace")
        except OSError:
            return ""

    def send(self, method: str, params: dict | None = None, session: bool = True,
             timeout: float = 30.0) -> dict:
        """Send one command (to the tab unless session=False) and return its result."""
        if self.ws is None:
            raise CDPError("browser is closed")
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline, f"reply to {method}")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error'].get('message')} {reply['error'].get('data', '')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def _receive(self, deadline: float, what: str) -> dict:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CDPError(f"timed out waiting for {what}")
        try:
            return json.loads(self.ws.recv(timeout=remaining))
        except TimeoutError:
            raise CDPError(f"timed out waiting for {what}") from None

    def wait_event(self, method: str, timeout: float = 15.0, predicate=None) -> dict:
        """The params of the first buffered or coming event `method` (matching `predicate`); removed from the buffer."""
        deadline = time.monotonic() + timeout
        while True:
            for event in list(self.events):
                if event["method"] == method and (predicate is None or predicate(event["params"])):
                    self.events.remove(event)
                    return event["params"]
            message = self._receive(deadline, method)
            if "method" in message:
                self.events.append(message)

    # --- page -----------------------------------------------------------------------------

    def goto(self, url: str, timeout: float = 15.0) -> None:
        """Navigate the tab to `url` and wait until it is loaded there (a URL that redirects times out)."""
        self.events.clear()
        result = self.send("Page.navigate", {"url": url}, timeout=timeout)
        if result.get("errorText"):
            raise CDPError(f"navigation to {url} failed: {result['errorText']}")
        self.wait_event("Page.loadEventFired", timeout=timeout)
        # A load event of the page before can arrive after the buffer was cleared: wait until
        # the tab really shows `url`, fully loaded.
        self.wait_for(f"location.href === new URL({json.dumps(url)}).href && document.readyState === 'complete'",
                      timeout=timeout)

    def eval(self, expression: str, timeout: float = 15.0):
        """Evaluate `expression` in the page (awaiting a promise) and return its JSON value."""
        result = self.send("Runtime.evaluate", {
            "expression": expression, "awaitPromise": True, "returnByValue": True,
            "userGesture": True,
        }, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CDPError(f"{expression[:80]!r} threw: {text}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10.0, interval: float = 0.05):
        """Poll `expression` until it is truthy; return its value. An expression that throws
        (the page is between documents while it navigates) counts as falsy until the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value, problem = self.eval(expression), "still falsy"
            except CDPError as e:
                value, problem = None, str(e)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CDPError(f"{expression[:80]!r} {problem} after {timeout}s")
            time.sleep(interval)

    def click(self, selector: str) -> None:
        """Scroll the first element matching `selector` into view and click its centre with the mouse."""
        box = self.eval(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (!el) return null; el.scrollIntoView({block: 'center'});"
            " const r = el.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()")
        if box is None:
            raise CDPError(f"no element matches {selector!r}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"],
                                                   "button": "left", "clickCount": 1})

    def type(self, text: str, delay: float = 0.0) -> None:
        """Type `text` into the focused element one key at a time ("\\n" presses Enter)."""
        for char in text:
            if char == "\n":
                self.press("Enter")
            else:
                self.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": char, "text": char})
                self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": char})
            if delay:
                time.sleep(delay)

    def press(self, key: str) -> None:
        """Press and release a named key (see KEYS)."""
        fields = {"key": key, **KEYS[key]}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", **fields})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **{k: v for k, v in fields.items() if k != "text"}})

    # --- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the browser, kill whatever is left of it, delete the profile (safe to call twice)."""
        if self.ws is not None:
            try:
                self.send("Browser.close", session=False, timeout=3)
            except Exception:  # closing drops the socket before or instead of replying
                pass
            try:
                self.ws.close()
            except Exception:
                pass
            self.ws = None
        self._finalizer()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
