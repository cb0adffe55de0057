"""A headless Chromium driven over the DevTools protocol through a pipe (--remote-debugging-pipe: fd 3 in, fd 4
out, messages of JSON ended by NUL; no port, no extra package). It lays a page out at a width of our choosing
(Emulation.setDeviceMetricsOverride: a headless window is at least 500 px wide, a phone is 390) and evaluates a
script in it; the console errors and uncaught exceptions of the page are collected."""
from __future__ import annotations

import json
import os
import select
import subprocess
from typing import Any


class Browser:
    """One Chromium process; use as a context manager."""

    def __init__(self, chromium: str, flags: list[str], timeout: float = 60.0) -> None:
        self.timeout = timeout
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def wire() -> None:                     # in the child: the protocol's fds 3 and 4, kept across exec
            ends = os.dup(to_child), os.dup(from_child)     # copies first: either pipe end may be fd 3 or 4
            for fd, end in zip((3, 4), ends):
                os.dup2(end, fd)
                os.set_inheritable(fd, True)

        self.proc = subprocess.Popen([chromium, *flags, "--remote-debugging-pipe", "about:blank"],
                                     preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._next_id = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._write)
        os.close(self._read)

    def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._read], [], [], self.timeout)
            if not ready:
                raise TimeoutError("Chromium sent nothing")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed its pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Call `method` (in `session`, a page's) and return its result; events on the way are kept."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str, session: str) -> dict[str, Any]:
        for kept in self.events:
            if kept.get("method") == event and kept.get("sessionId") == session:
                return kept
        while True:
            message = self._message()
            self.events.append(message)
            if message.get("method") == event and message.get("sessionId") == session:
                return message

    def open(self, url: str, width: int, height: int) -> str:
        """A new page laid out `width` x `height` CSS px, loaded with `url`; its session."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable", session)
        self.send("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of `expression` in the page (JSON-able)."""
        result = self.send("Runtime.evaluate", session, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"the script threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def console_errors(self, session: str) -> list[str]:
        """The page's console errors and uncaught exceptions so far."""
        out = []
        for event in self.events:
            if event.get("sessionId") != session:
                continue
            params = event.get("params", {})
            if event.get("method") == "Runtime.exceptionThrown":
                out.append(str(params.get("exceptionDetails", {}).get("text")))
            elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        return out
