"""Work a coordinator shard runs off the event loop (Kafka's CoordinatorExecutor): a task runs in a
background thread, and its result comes back to the loop as a shard operation, serialized with requests
and timers like any other (GE-6).

Tasks are keyed: a key has at most one task scheduled, and `is_scheduled(key)` tells (Kafka's
`executor.isScheduled`). When the task is done, `on_done(result, error)` runs on the loop and may return
records, which are written as the operation's result (or write them itself, as an operation may); if the shard was unloaded meanwhile (moved,
reloaded, its topic deleted), the result is dropped, as Kafka drops one whose partition is no longer
served. One background thread serves every shard of the process (Kafka's
`group.coordinator.background.threads`): on two cores the loop keeps one and the thread the other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

from broker.runtime.result import CoordinatorResult, Record

log = structlog.get_logger("kaflet.coordinator")

T = TypeVar("T")
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _background() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kaflet-coordinator-background")
        return _pool


async def run_in_background(fn: Callable[[], T]) -> T:
    """Run `fn` in the background thread and wait for it without blocking the loop."""
    return await asyncio.wrap_future(_background().submit(fn))


class CoordinatorExecutor:
    def __init__(self, active: Callable[[], bool], apply: Callable[[CoordinatorResult[Any]], Any]) -> None:
        """`active()`: whether the shard is still served here; `apply(result)` writes an operation's records."""
        self._active = active
        self._apply = apply
        self._scheduled: dict[str, concurrent.futures.Future[Any]] = {}

    def is_scheduled(self, key: str) -> bool:
        return key in self._scheduled

    def schedule(self, key: str, task: Callable[[], T], on_done: Callable[[T | None, BaseException | None], list[Record] | None]) -> bool:
        """Run `task` in the background unless `key` is already scheduled; False if it was."""
        if key in self._scheduled:
            return False
        loop = asyncio.get_running_loop()
        future = _background().submit(task)
        self._scheduled[key] = future

        def done(fut: concurrent.futures.Future[Any]) -> None:
            loop.call_soon_threadsafe(self._complete, key, fut, on_done)

        future.add_done_callback(done)
        return True

    def _complete(self, key: str, fut: concurrent.futures.Future[Any], on_done: Callable[..., list[Record] | None]) -> None:
        if self._scheduled.get(key) is not fut:
            return  # cancelled (the shard unloaded) or replaced
        del self._scheduled[key]
        if not self._active():
            return
        error = fut.exception()
        try:
            records = on_done(None if error is not None else fut.result(), error)
            if records:
                self._apply(CoordinatorResult(records))
        except Exception:
            log.error("coordinator background task's result failed", task=key, exc_info=True)

    def cancel_all(self) -> None:
        for fut in self._scheduled.values():
            fut.cancel()
        self._scheduled.clear()

    def __len__(self) -> int:
        return len(self._scheduled)
