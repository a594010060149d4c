"""Keyed timers: scheduling a key replaces its pending timer (Kafka's coordinator timer semantics)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("kaflet.coordinator")


class Timers:
    def __init__(self, guard: Callable[[], bool]) -> None:
        """`guard()` is checked when a timer fires; a False answer (shard unloaded) drops it."""
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self._guard = guard

    def schedule(self, key: str, delay_ms: float, callback: Callable[[], Any]) -> None:
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, callback)

    def _fire(self, key: str, callback: Callable[[], Any]) -> None:
        self._handles.pop(key, None)
        if not self._guard():
            return
        try:
            callback()
        except Exception:
            log.error("coordinator timer failed", timer=key, exc_info=True)

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
