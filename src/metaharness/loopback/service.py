"""Lifecycle shared by the loopback server and the credential proxy.

What belongs here: start/stop on the caller's event loop, or on a private loop in a daemon
thread for synchronous callers (`run_in_thread`, `with`), and the async context manager.
Subclasses supply `_handle(request, responder)`.

Rules it keeps: `url` is set only while serving; `stop()` is idempotent; the thread's loop is
closed when its server stops.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Callable

from .http import HttpServer, Request, Responder


class LocalService:
    def __init__(self, *, port: int = 0) -> None:
        self._http = HttpServer(self._handle, port=port)
        self.url: str = ""
        self._thread_stop: Callable[[], None] | None = None

    async def _handle(self, request: Request, responder: Responder) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def start(self) -> str:
        """Bind 127.0.0.1 and serve; returns the base URL `http://127.0.0.1:PORT`."""
        self.url = await self._http.start()
        return self.url

    async def stop(self) -> None:
        await self._http.stop()

    @property
    def port(self) -> int | None:
        return self._http.port

    async def __aenter__(self) -> "LocalService":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def run_in_thread(self) -> tuple[str, Callable[[], None]]:
        """Serve from a private event loop in a daemon thread; returns (url, stop)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"metaharness-{type(self).__name__}", daemon=True)
        thread.start()
        try:
            url = asyncio.run_coroutine_threadsafe(self.start(), loop).result(10)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()
            raise
        stopped = threading.Event()

        def stop() -> None:
            if stopped.is_set():
                return
            stopped.set()
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()

        self._thread_stop = stop
        return url, stop

    def __enter__(self) -> "LocalService":
        self.run_in_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread_stop is not None:
            self._thread_stop()
            self._thread_stop = None
