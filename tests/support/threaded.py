"""An in-process broker on its own event loop in a background thread, for synchronous clients.

Tests call `run(coro_fn)` to touch broker state safely on the broker's loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import uvloop

from broker import Broker, Config

T = TypeVar("T")


class BrokerThread:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.loop = uvloop.new_event_loop()
        self.broker = Broker(config)
        self._thread = threading.Thread(target=self.loop.run_forever, name="kaflet-broker", daemon=True)

    def start(self) -> BrokerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(30)
        return self

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def run(self, fn: Callable[[Broker], Awaitable[T] | T], timeout: float = 30) -> T:
        """Run `fn(broker)` on the broker's loop and return its result."""

        async def call() -> Any:
            result = fn(self.broker)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()
