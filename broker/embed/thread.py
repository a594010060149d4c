"""A broker on its own event loop in a background thread (`Broker.in_thread()`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from broker.cluster.handle import ChaosHandle
    from broker.config import Config
    from broker.server import Broker

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()


class BrokerThread:
    """`with BrokerThread() as b:` (or `Broker.in_thread()`) serves on `b.bootstrap` until the block ends.

    `config` and `overrides` are Broker's: no config means an ephemeral port, a free metrics
    port and a temporary data dir. `run(fn)` calls `fn(broker)` on the broker's loop (the only
    safe place to touch broker state) and returns its result.
    """

    def __init__(self, config: Config | None = None, **overrides: Any) -> None:
        from broker.server import Broker

        self.loop = _new_loop()
        self.broker: Broker = Broker(config, **overrides)
        self.config = self.broker.config
        self._thread = threading.Thread(target=self.loop.run_forever, name="kaflet-broker", daemon=True)

    def start(self, timeout: float = 30) -> BrokerThread:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(timeout)
        except BaseException:
            try:  # release what a half-done start holds (data dir lock, temporary dir)
                asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(10)
            except Exception:
                pass
            self._halt()
            raise
        return self

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def metrics_address(self) -> str | None:
        return self.broker.metrics_address

    @property
    def chaos(self) -> ChaosHandle:
        """The broker's chaos operations, callable from this thread (broker/cluster/handle.py)."""
        from broker.cluster.handle import ChaosHandle

        return ChaosHandle.in_thread(self)

    def run(self, fn: Callable[[Broker], Awaitable[T] | T], timeout: float = 30) -> T:
        """Run `fn(broker)` on the broker's loop and return its result (awaited if a coroutine)."""

        async def call() -> Any:
            result = fn(self.broker)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def stop(self, timeout: float = 30) -> None:
        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(timeout)
            finally:
                self._halt()
        elif not self.loop.is_closed():
            self.loop.close()

    def _halt(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
