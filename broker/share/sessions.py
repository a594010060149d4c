"""Share sessions (Kafka's ShareSession, ShareSessionCache, CachedSharePartition, KIP-932).

A member's ShareFetch requests form a session on the broker: epoch 0 opens one (naming the
partitions to fetch), each following request carries the next epoch and may add partitions or
forget some, and epoch -1 closes it (the member's acquired records are released). A ShareFetch
or ShareAcknowledge with an epoch that does not match gets INVALID_SHARE_SESSION_EPOCH, one
without a session SHARE_SESSION_NOT_FOUND; beyond `group.share.max.share.sessions` sessions a
new one gets SHARE_SESSION_LIMIT_REACHED.

A session belongs to the connection that opened it: when that connection is gone, its member's
acquired records are released at once (the ShareGroupListener's onMemberLeave), and when the
last session of a group goes, the group's share partitions leave the cache (onGroupEmpty).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == INT32_MAX:
        return 1
    return epoch + 1


class SessionError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.message)
        self.code = code


class CachedSharePartition:
    """A partition of a session; `requires_update` makes the next answer name it even when empty."""

    __slots__ = ("requires_update", "topic")

    def __init__(self, topic: str | None, requires_update: bool) -> None:
        self.topic = topic
        self.requires_update = requires_update

    def must_respond(self, records_size: int, error: int, update: bool) -> bool:
        """maybeUpdateResponseData: whether an incremental answer names the partition."""
        must = records_size > 0
        if self.requires_update:
            must = True
            if update:
                self.requires_update = False
        if error != 0:
            if update:
                self.requires_update = True
            must = True
        return must


class ShareSession:
    __slots__ = ("connection", "epoch", "group_id", "member_id", "partitions")

    def __init__(self, group_id: str, member_id: str, partitions: dict[TopicIdPartition, CachedSharePartition], connection: Any) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.partitions = partitions  # in the order answers rotate through them
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.connection = connection

    def update(self, fetch_data: list[tuple[TopicIdPartition, str | None]], forget: list[TopicIdPartition]) -> None:
        for tip, topic in fetch_data:
            if tip not in self.partitions:
                self.partitions[tip] = CachedSharePartition(topic, True)
        for tip in forget:
            self.partitions.pop(tip, None)

    def move_to_end(self, tip: TopicIdPartition) -> None:
        """A partition that returned records goes to the back (fairness across partitions)."""
        cached = self.partitions.pop(tip, None)
        if cached is not None:
            self.partitions[tip] = cached


class ShareSessionCache:
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.members_per_group: dict[str, int] = {}
        self.evictions = 0
        # The share partition manager: releases what a leaving member held, drops an empty group's partitions.
        self.on_member_leave: Callable[[str, str], Any] | None = None
        self.on_group_empty: Callable[[str], Any] | None = None

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def total_partitions(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            count = self.members_per_group.get(group_id, 0) - 1
            self.members_per_group[group_id] = max(count, 0)
            session.connection = None  # stale: its connection's end no longer concerns it
        return session

    def create(
        self, group_id: str, member_id: str, partitions: dict[TopicIdPartition, CachedSharePartition], connection: Any
    ) -> ShareSession:
        """maybeCreateSession: a new session (SHARE_SESSION_LIMIT_REACHED when the cache is full)."""
        if len(self.sessions) >= self.max_entries:
            raise SessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
        session = ShareSession(group_id, member_id, partitions, connection)
        self.sessions[(group_id, member_id)] = session
        self.members_per_group[group_id] = self.members_per_group.get(group_id, 0) + 1
        if connection is not None:
            connection.on_lost.append(lambda: self._connection_lost(session))
        return session

    def _connection_lost(self, session: ShareSession) -> None:
        """ClientConnectionDisconnectListener.onDisconnect."""
        key = (session.group_id, session.member_id)
        if self.sessions.get(key) is session and session.connection is not None:
            self.evictions += 1
            if self.on_member_leave is not None:
                self.on_member_leave(session.group_id, session.member_id)
            self.remove(session.group_id, session.member_id)
        if self.members_per_group.get(session.group_id, 0) == 0:
            self.members_per_group.pop(session.group_id, None)
            if self.on_group_empty is not None:
                self.on_group_empty(session.group_id)

    def remove_all(self) -> None:
        self.sessions.clear()
        self.members_per_group.clear()
