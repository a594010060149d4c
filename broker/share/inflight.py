"""In-flight records of a share partition (Kafka's RecordState, InFlightState, InFlightBatch and
AcquisitionLockTimerTask).

A share partition keeps, between its start and end offsets, batches of records that have been
delivered at least once. A batch carries one state for all its records until something touches
only part of it (a partial acknowledgement, a per-record delivery limit, a start offset inside
it); then it keeps one state per offset, as Kafka's InFlightBatch does. Every record of an
acquired batch is locked by a member until it is acknowledged, released, or its acquisition
lock times out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

# RecordState ids, as persisted in state batches.
AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVING = 3  # a dead-letter-queue step kaflet does not take
ARCHIVED = 4
STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVING: "ARCHIVING", ARCHIVED: "ARCHIVED"}

# AcknowledgeType ids on the wire.
GAP = 0
ACCEPT = 1
RELEASE = 2
REJECT = 3
RENEW = 4
# An acknowledgement's record state (SharePartition.ACK_TYPE_TO_RECORD_STATE).
ACK_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, RELEASE: AVAILABLE, REJECT: ARCHIVED}

EMPTY_MEMBER_ID = ""

# DeliveryCountOps
INCREASE = 1
NO_OP = 0
DECREASE = -1


def is_terminal(state: int) -> bool:
    return state == ACKNOWLEDGED or state == ARCHIVED


def valid_transition(current: int, new: int) -> bool:
    """RecordState.validateTransition."""
    if current == new or current == ACKNOWLEDGED or current == ARCHIVED:
        return False
    return not (current == AVAILABLE and new != ACQUIRED)


class LockTimer:
    """An acquisition lock (AcquisitionLockTimerTask): fires `handler(member, first, last, self)`
    after `delay_ms` unless cancelled."""

    __slots__ = ("cancelled", "expiration_ms", "expired", "first", "handle", "last", "member_id")

    def __init__(self, delay_ms: float, member_id: str, first: int, last: int, handler: Callable[..., Any]) -> None:
        loop = asyncio.get_running_loop()
        self.expiration_ms = loop.time() * 1000 + delay_ms  # the loop's monotonic clock
        self.member_id = member_id
        self.first = first
        self.last = last
        self.cancelled = False
        self.expired = False
        self.handle = loop.call_later(max(delay_ms, 0) / 1000, self._fire, handler)

    def remaining_ms(self) -> float:
        return self.expiration_ms - asyncio.get_running_loop().time() * 1000

    def _fire(self, handler: Callable[..., Any]) -> None:
        if self.cancelled:
            return
        self.expired = True
        handler(self.member_id, self.first, self.last, self)

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.handle.cancel()


class InFlightState:
    """One state: of a whole batch, or of one offset of a batch tracked per offset."""

    __slots__ = ("delivery_count", "lock", "member_id", "rollback", "state")

    def __init__(self, state: int, delivery_count: int, member_id: str, lock: LockTimer | None = None) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock = lock
        self.rollback: tuple[int, int, str, int] | None = None  # (state, count, member, max delivery count)

    def __repr__(self) -> str:
        return f"InFlightState({STATE_NAMES.get(self.state)}, count={self.delivery_count}, member={self.member_id!r})"

    def set_lock(self, lock: LockTimer) -> None:
        if self.lock is not None:
            raise ValueError("Existing acquisition lock timeout exists, cannot override.")
        self.lock = lock

    def cancel_lock(self) -> None:
        if self.lock is not None:
            self.lock.cancel()
            self.lock = None

    @property
    def in_transition(self) -> bool:
        return self.rollback is not None

    def try_update(self, new_state: int, ops: int, max_delivery_count: int, new_member: str) -> InFlightState | None:
        """tryUpdateState: None when the transition is not allowed. A record released on its
        last delivery is archived instead."""
        if self.rollback is not None:
            return None
        if new_state == AVAILABLE and ops != DECREASE and self.delivery_count >= max_delivery_count:
            new_state = ARCHIVED
        if not valid_transition(self.state, new_state):
            return None
        self.state = new_state
        if new_state != ARCHIVED:
            self.delivery_count += ops
        self.member_id = new_member
        return self

    def start_transition(self, new_state: int, ops: int, max_delivery_count: int, new_member: str) -> InFlightState | None:
        saved = (self.state, self.delivery_count, self.member_id, max_delivery_count)
        updated = self.try_update(new_state, ops, max_delivery_count, new_member)
        if updated is not None:
            self.rollback = saved
        return updated

    def complete_transition(self, commit: bool) -> None:
        """completeStateTransition: keep the new state (the lock goes), or go back to the old one
        (AVAILABLE, or ARCHIVED on its last delivery, when the lock ran out meanwhile)."""
        if self.rollback is None:
            return
        if commit:
            self.cancel_lock()
            self.rollback = None
            return
        state, count, member, max_count = self.rollback
        lock = self.lock
        if lock is not None and lock.expired:
            self.state = ARCHIVED if count >= max_count else AVAILABLE
            self.member_id = EMPTY_MEMBER_ID
            self.cancel_lock()
        else:
            self.state = state
            self.member_id = member
        self.rollback = None

    def archive(self) -> None:
        self.state = ARCHIVED
        self.member_id = EMPTY_MEMBER_ID
        self.cancel_lock()


class InFlightBatch:
    """Records first..last delivered together: one state (`batch`) or one per offset (`offsets`)."""

    __slots__ = ("batch", "first", "last", "offsets")

    def __init__(self, member_id: str, first: int, last: int, state: int, delivery_count: int, lock: LockTimer | None) -> None:
        self.first = first
        self.last = last
        self.batch: InFlightState | None = InFlightState(state, delivery_count, member_id, lock)
        self.offsets: dict[int, InFlightState] | None = None

    def __repr__(self) -> str:
        return f"InFlightBatch({self.first}-{self.last}, {self.batch if self.offsets is None else self.offsets})"

    @property
    def state(self) -> InFlightState:
        if self.batch is None:
            raise RuntimeError("The batch state is not available as the offset state is maintained")
        return self.batch

    def split(self, make_lock: Callable[[str, int, int, float], LockTimer]) -> None:
        """maybeInitializeOffsetStateUpdate(): one state per offset, each with the rest of the batch's lock."""
        if self.offsets is not None:
            return
        batch = self.state
        offsets: dict[int, InFlightState] = {}
        lock = batch.lock
        for offset in range(self.first, self.last + 1):
            state = InFlightState(batch.state, batch.delivery_count, batch.member_id)
            if lock is not None:
                state.lock = make_lock(batch.member_id, offset, offset, lock.remaining_ms())
            offsets[offset] = state
        batch.cancel_lock()
        self.offsets = offsets
        self.batch = None

    def split_at(self, target_offset: int, delay_ms: float, make_lock: Callable[[str, int, int, float], LockTimer]) -> None:
        """maybeInitializeOffsetStateUpdate(target, delay): offsets up to `target` stay as the batch
        is (locked anew); the rest become AVAILABLE with one delivery less (record-limit acquires)."""
        if self.offsets is not None:
            return
        batch = self.state
        offsets: dict[int, InFlightState] = {}
        for offset in range(self.first, self.last + 1):
            if offset <= target_offset:
                state = InFlightState(batch.state, batch.delivery_count, batch.member_id)
                state.lock = make_lock(batch.member_id, offset, offset, delay_ms)
            else:
                state = InFlightState(AVAILABLE, batch.delivery_count - 1, EMPTY_MEMBER_ID)
            offsets[offset] = state
        self.offsets = offsets
        self.batch = None
