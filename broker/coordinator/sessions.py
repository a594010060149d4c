"""Members' session timers, as the share and streams group coordinators keep them: a heartbeat
only moves the member's deadline, and the one timer a member has is re-armed only when it fires
before the deadline, so that a heartbeat costs no timer churn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class MemberSessions:
    def __init__(self, timers: Any, prefix: str, timeout_ms: Callable[[str], int], expired: Callable[[str, str], None]) -> None:
        """`prefix` names the timers ("share-session"); `timeout_ms(group id)` is the group's
        session timeout; `expired(group id, member id)` runs once a deadline has passed."""
        self.timers = timers
        self.prefix = prefix
        self.timeout_ms = timeout_ms
        self.expired = expired
        self._deadlines: dict[tuple[str, str], float] = {}

    def _key(self, group_id: str, member_id: str) -> str:
        return f"{self.prefix}-{group_id}-{member_id}"

    def clear(self) -> None:
        self._deadlines.clear()

    def cancel(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(self._key(group_id, member_id))
        self._deadlines.pop((group_id, member_id), None)

    def schedule(self, group_id: str, member_id: str) -> None:
        """The member's deadline moves to a session timeout from now."""
        timeout = self.timeout_ms(group_id)
        deadline = asyncio.get_running_loop().time() + timeout / 1000
        self._deadlines[(group_id, member_id)] = deadline
        timer = self._key(group_id, member_id)
        armed = self.timers.deadline(timer)
        if armed is None or armed > deadline:
            self.timers.schedule(timer, timeout, lambda: self._check(group_id, member_id), group=group_id)

    def _check(self, group_id: str, member_id: str) -> None:
        deadline = self._deadlines.get((group_id, member_id))
        if deadline is None:
            return
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining > 0:
            self.timers.schedule(self._key(group_id, member_id), remaining * 1000, lambda: self._check(group_id, member_id), group=group_id)
            return
        del self._deadlines[(group_id, member_id)]
        self.expired(group_id, member_id)
