"""Steps the share-group and streams-group heartbeat answers share: the error a coordinator
failure is answered with, and holding the answer until the records it stands on are durable."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.runtime.errors import CoordinatorError, map_append_error
from protocol.errors import ErrorCode


def coordinator_error(exc: CoordinatorError) -> tuple[ErrorCode, str]:
    """The mapped code and its message: the error's own text, unless it only names the code or
    the code was mapped (then the mapped code's message)."""
    code = map_append_error(exc.code)
    message = exc.args[0] if exc.args and exc.args[0] != exc.code.name and code is exc.code else code.message
    return code, message


def when_durable(response: Any, waiter: Awaitable[Any] | None, failed: Callable[[], Any]) -> Any:
    """`response` once `waiter` (the write of its records) is done, else `failed()`'s answer."""
    if waiter is None:
        return response

    async def durable() -> Any:
        try:
            await waiter
        except Exception:
            return failed()
        return response

    return durable()
