"""A headless Chromium driven over the DevTools protocol (aiohttp's websocket client), for the
browser tests: load a page, wait for it to settle, evaluate JavaScript, collect console errors.

Chromium is Debian's `chromium` package (`.ci/run` installs it); without it the tests skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser")
START_TIMEOUT_S = 30.0


def chromium_binary() -> str | None:
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


class Page:
    """One tab: `load(url)` then `evaluate(js)`; `errors` holds console errors and uncaught exceptions."""

    def __init__(self, binary: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="msbench-chromium-")
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.loop = asyncio.new_event_loop()
        self.errors: list[str] = []
        self._id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._loaded = asyncio.Event()
        self.loop.run_until_complete(self._connect())

    async def _connect(self) -> None:
        import aiohttp

        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"chromium did not start (exit {self.proc.poll()})")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{port}/json/list") as response:
            tabs = [t for t in await response.json() if t.get("type") == "page"]
        self.ws = await self.session.ws_connect(tabs[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self.reader = self.loop.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self._call(f"{domain}.enable")

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
                continue
            method, params = data.get("method"), data.get("params", {})
            if method == "Page.loadEventFired":
                self._loaded.set()
            elif method == "Runtime.exceptionThrown":
                self.errors.append(params["exceptionDetails"].get("exception", {}).get("description")
                                   or params["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                self.errors.append(f"{params['entry'].get('text')} ({params['entry'].get('url', '')})")

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        future = self.loop.create_future()
        self._pending[self._id] = future
        await self.ws.send_str(json.dumps({"id": self._id, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, START_TIMEOUT_S)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def load(self, url: str, timeout: float = 60.0) -> None:
        async def go() -> None:
            self._loaded.clear()
            await self._call("Page.navigate", url=url)
            await asyncio.wait_for(self._loaded.wait(), timeout)
        self.loop.run_until_complete(go())

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        result = self.loop.run_until_complete(self._call("Runtime.evaluate", expression=expression,
                                                         returnByValue=True, awaitPromise=True))
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll until `expression` is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.2)

    def close(self) -> None:
        async def stop() -> None:
            self.reader.cancel()
            await self.ws.close()
            await self.session.close()
        try:
            self.loop.run_until_complete(stop())
        finally:
            self.loop.close()
            os.killpg(self.proc.pid, signal.SIGKILL)      # chromium's renderers and zygote with it
            self.proc.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)
