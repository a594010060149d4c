"""Waiting on conditions with deadlines (never bare sleeps)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.02, message: str | Callable[[], str] = "condition"
) -> T:
    """Poll `predicate` until it returns something truthy, or fail after `timeout` seconds.
    `message` may be a callable, to describe the state at the moment of failure."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message() if callable(message) else message}")
        time.sleep(interval)


async def async_wait_until(
    predicate: Callable[[], T | Awaitable[T]], timeout: float = 10.0, interval: float = 0.01, message: str = "condition"
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(interval)
