"""Keyed timers of a coordinator partition (Kafka's CoordinatorTimer): scheduling a key replaces
its pending timer, and a timer fires only while its partition is served here.

A timer's operation runs on the event loop like a request, so timers are serialized with
requests. It may return a CoordinatorResult, whose records the runtime writes (the expiry
sweep's tombstones); an operation that raises is logged at ERROR with its key and the group it
belongs to, and the shard's `on_timer_failed(group_id, key)` recovers that group (Kafka's
runtime reverts a failed timer operation's uncommitted state; see
ClassicRebalancer.recover_group), so a bug in one timer never leaves a group parked for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from broker.runtime.result import CoordinatorResult

log = structlog.get_logger("kaflet.coordinator")


class CoordinatorTimer:
    def __init__(
        self,
        guard: Callable[[], bool],
        on_failure: Callable[[str, str], Any] | None = None,
        before_fire: Callable[[str | None, str], None] | None = None,
        on_result: Callable[[CoordinatorResult[Any]], Any] | None = None,
    ) -> None:
        """`guard()` is checked when a timer fires; a False answer (shard unloaded) drops it.
        `on_failure(group_id, key)` is called after a group's timer operation raised.
        `before_fire(group_id, key)`: the fault injector's check (broker/network/faults.py), or None.
        `on_result(result)` writes what an operation returned."""
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self._guard = guard
        self.on_failure = on_failure
        self.before_fire = before_fire
        self.on_result = on_result

    def schedule(self, key: str, delay_ms: float, callback: Callable[[], Any], *, group: str | None = None) -> None:
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, callback, group)

    def _fire(self, key: str, callback: Callable[[], Any], group: str | None) -> None:
        self._handles.pop(key, None)
        if not self._guard():
            return
        try:
            if self.before_fire is not None:
                self.before_fire(group, key)
            result = callback()
            if isinstance(result, CoordinatorResult) and self.on_result is not None:
                self.on_result(result)
        except Exception:
            log.error("coordinator timer failed", timer=key, group=group, exc_info=True)
            if group is not None and self.on_failure is not None:
                try:
                    self.on_failure(group, key)
                except Exception:
                    log.error("recovering a group after a failed timer failed", timer=key, group=group, exc_info=True)

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._handles

    def deadline(self, key: str) -> float | None:
        """Loop time at which `key` fires, or None."""
        handle = self._handles.get(key)
        return handle.when() if handle is not None else None

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def __len__(self) -> int:
        return len(self._handles)
