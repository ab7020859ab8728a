"""A headless Chromium driven over the DevTools protocol on a pipe (no websocket library): open a page, wait for a condition, screenshot."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


HARD_LIMIT = 600.0  # seconds one reply may take in all, however busy Chromium stays


def _cpu_seconds(pid: int) -> float:
    """Processor seconds used so far by process `pid` and its descendants (Chromium's renderer and GPU
    processes), read from /proc; 0 where that is not readable."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict = {}
    stats = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, 0.0)
        todo += children.get(p, [])
    return total


class Browser:
    """One headless Chromium; `with Browser(profile_dir) as b: b.open(url); b.wait(js); b.screenshot(path)`."""

    def __init__(self, profile: str, width: int = 1400, height: int = 900):
        self._to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, self._from_chrome_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4 (--remote-debugging-pipe): the
        # shell puts the pipe's ends there.
        r, w = self._to_chrome_r, self._from_chrome_w
        hi = max(r, w, 4) + 1  # through fds that are neither end nor 3 and 4, so no move clobbers another
        args = [chromium(), "--headless=new", "--no-sandbox", "--remote-debugging-pipe", "--disable-gpu",
                "--enable-unsafe-swiftshader", "--use-angle=swiftshader", "--disable-background-networking",
                "--disable-component-update", "--no-first-run", "--disable-sync", f"--user-data-dir={profile}",
                f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec {hi}<&{r} {hi + 1}>&{w}; exec "$@" 3<&{hi} 4>&{hi + 1} {hi}<&- {hi + 1}>&-',
             "chromium", *args],
            pass_fds=(r, w), stdout=subprocess.DEVNULL, stderr=open(f"{profile}.log", "w"))
        os.close(self._to_chrome_r)
        os.close(self._from_chrome_w)
        self._out = os.fdopen(self._to_chrome_w, "wb", buffering=0)
        self._in = os.fdopen(self._from_chrome_r, "rb", buffering=0)
        self._buf = b""
        self._id = 0
        self.session = None
        self.width, self.height = width, height

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30):
        """The reply to one command. `timeout` is how long Chromium may go without using the processor
        before it counts as hung: a machine busy with other jobs slows its start and its paint (a fixed
        30 s deadline failed a CI run under load), so the wait lasts as long as it makes progress, up
        to HARD_LIMIT."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._out.write(json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self, idle: float) -> dict:
        import select

        start = last = time.monotonic()
        used = _cpu_seconds(self.proc.pid)
        while b"\0" not in self._buf:
            if not select.select([self._in], [], [], 1.0)[0]:
                now, busy = time.monotonic(), _cpu_seconds(self.proc.pid)
                if self.proc.poll() is not None:
                    raise EOFError(f"chromium exited ({self.proc.returncode})")
                if busy > used:
                    used, last = busy, now
                if now - last > idle or now - start > HARD_LIMIT:
                    raise TimeoutError(f"no reply from chromium: {now - last:.0f} s without using the processor, "
                                       f"{now - start:.0f} s in all")
                continue
            chunk = os.read(self._in.fileno(), 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False}, self.session)
        self.send("Page.navigate", {"url": url}, self.session)

    def evaluate(self, expression: str):
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        return r.get("result", {}).get("value")

    def wait(self, expression: str, timeout: float = 300, interval: float = 0.5):
        """Poll `expression` until it is truthy; its value, or TimeoutError (a page's script that never
        sets it: the polls themselves get their replies, so this deadline is what bounds a wrong page)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(interval)
        raise TimeoutError(f"not true after {timeout} s: {expression}")

    def screenshot(self, path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"}, self.session)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
