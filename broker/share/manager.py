"""The share partitions of a broker and the requests that reach them (Kafka's SharePartitionManager
and DelayedShareFetch, KIP-932).

A share partition (group, topic id, partition) is made on its first ShareFetch and initialized
from the share coordinator. A ShareFetch reads, from each of its partitions that can acquire
records, the log from the partition's next fetch offset (stored batches, never decoded), and
answers once `min_bytes` are there, or parks until an append to one of its logs, a release, an
acknowledgement or a lock timeout of one of its share partitions wakes it, or `max_wait_ms`
passes; then it acquires what it read and answers those records with their acquired ranges.
Acknowledgements (ShareAcknowledge, or piggy-backed on ShareFetch) go to their partitions and
are answered once written (and fsynced with `--fsync always`).

Share sessions live here too (broker/share/sessions.py): a member whose session closes or whose
connection drops has its acquired records released at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from broker.share.partition import AckBatch, Acquired, FetchedBatch, ShareError, SharePartition, scan_batches
from broker.share.sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedSharePartition,
    SessionError,
    ShareSession,
    ShareSessionCache,
    next_epoch,
)
from protocol.errors import ErrorCode
from storage.errors import OffsetOutOfRange

if TYPE_CHECKING:
    from broker.share.partition import SharePersister
    from broker.share.settings import ShareGroupSettingsProvider

log = structlog.get_logger("kaflet.share")

TopicIdPartition = tuple[uuid.UUID, int]
Key = tuple[str, uuid.UUID, int]
_EMPTY = b""


@dataclass(slots=True)
class PartitionFetch:
    """One partition of a ShareFetch answer."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: Any = _EMPTY
    acquired: list[Acquired] = field(default_factory=list)


@dataclass(slots=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    batch_size: int
    record_limit: bool
    read_committed: bool


class ShareContext:
    """ShareSessionContext / FinalContext: which partitions a ShareFetch covers, and which of its
    answers an incremental session leaves out (partitions with no records and no error)."""

    def __init__(
        self, epoch: int, session: ShareSession | None, fetch_data: list[tuple[TopicIdPartition, str | None]] | None, final: bool
    ) -> None:
        self.epoch = epoch
        self.session = session
        self.fetch_data = fetch_data
        self.final = final

    @property
    def subsequent(self) -> bool:
        return self.session is not None

    def partitions(self) -> tuple[dict[TopicIdPartition, ErrorCode], list[tuple[TopicIdPartition, str]]]:
        """getErroneousAndValidTopicIdPartitions: (unknown topic ids, valid (partition, topic name))."""
        erroneous: dict[TopicIdPartition, ErrorCode] = {}
        valid: list[tuple[TopicIdPartition, str]] = []
        if self.final:
            return erroneous, valid
        items = self.fetch_data if self.session is None else [(tip, c.topic) for tip, c in self.session.partitions.items()]
        for tip, topic in items or ():
            if topic is None:
                erroneous[tip] = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                valid.append((tip, topic))
        return erroneous, valid

    def answer(self, updates: dict[TopicIdPartition, PartitionFetch]) -> tuple[ErrorCode, dict[TopicIdPartition, PartitionFetch]]:
        """updateAndGenerateResponseData: the top-level error and the partitions to answer."""
        session = self.session
        if session is None:
            return ErrorCode.NONE, updates
        if session.epoch != next_epoch(self.epoch):
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, {}
        out: dict[TopicIdPartition, PartitionFetch] = {}
        for tip, data in updates.items():
            cached = session.partitions.get(tip)
            size = len(data.records)
            if cached is None or cached.must_respond(size, int(data.error), True):
                out[tip] = data
                if cached is not None and size > 0:
                    session.move_to_end(tip)
        return ErrorCode.NONE, out


class SharePartitionManager:
    def __init__(
        self,
        logs: Any,
        persister: SharePersister,
        settings: ShareGroupSettingsProvider,
        now_ms: Callable[[], float],
        max_sessions: int,
        leader_epoch: Callable[[str, int], int] | None = None,
    ) -> None:
        self.logs = logs
        self.persister = persister
        self.settings = settings
        self.now_ms = now_ms
        self.leader_epoch = leader_epoch or (lambda topic, partition: 0)
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions = ShareSessionCache(max_sessions)
        self.sessions.on_member_leave = self._on_member_leave
        self.sessions.on_group_empty = self._on_group_empty
        self._parked: dict[Key, set[asyncio.Future[None]]] = {}
        self.stopping = False
        # Totals for /metrics beyond the per-partition counters.
        self.fetches = 0
        self.acknowledgements = 0

    # -- share partitions -----------------------------------------------------------------

    def get(self, group: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        return self.partitions.get((group, topic_id, partition))

    def get_or_create(self, group: str, topic_id: uuid.UUID, topic: str, partition: int) -> SharePartition:
        key = (group, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None:
            plog = self.logs.get(topic, partition)
            if plog is None:
                raise ShareError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            sp = SharePartition(
                group,
                topic_id,
                topic,
                partition,
                self.leader_epoch(topic, partition),
                plog,
                self.persister,
                self.settings,
                self.now_ms,
                lambda key=key: self.wake(key),  # type: ignore[misc]
            )
            self.partitions[key] = sp
        return sp

    def remove(self, key: Key) -> None:
        """removeSharePartitionFromCache: fenced; the next fetch loads it again from the share coordinator."""
        sp = self.partitions.pop(key, None)
        if sp is not None:
            sp.close()
            self.wake(key)

    def remove_topic_partition(self, topic_id: uuid.UUID, partition: int | None = None) -> None:
        """A topic partition was deleted, or its leader moved (onDeleted, onBecomingFollower)."""
        for key in [k for k in self.partitions if k[1] == topic_id and (partition is None or k[2] == partition)]:
            self.remove(key)

    def _fenced(self, key: Key, error: ShareError) -> None:
        """fencedSharePartitionHandler."""
        if error.code in (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.FENCED_STATE_EPOCH,
            ErrorCode.GROUP_ID_NOT_FOUND,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ):
            self.remove(key)

    # -- parked fetches --------------------------------------------------------------------

    def wake(self, key: Key) -> None:
        for fut in self._parked.get(key, ()):
            if not fut.done():
                fut.set_result(None)

    def wake_all(self) -> None:
        self.stopping = True
        for futs in self._parked.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(None)

    def parked(self) -> int:
        return sum(1 for futs in self._parked.values() for f in futs if not f.done())

    # -- sessions ---------------------------------------------------------------------------

    def new_context(
        self,
        group: str,
        fetch_data: list[tuple[TopicIdPartition, str | None]],
        forget: list[TopicIdPartition],
        member: str,
        epoch: int,
        acks_present: bool,
        connection: Any,
    ) -> ShareContext:
        """newContext: SessionError with SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
        INVALID_REQUEST or SHARE_SESSION_LIMIT_REACHED."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if epoch == FINAL_EPOCH:
                if self.sessions.get(group, member) is None:
                    raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
                return ShareContext(epoch, None, None, True)
            if acks_present:
                raise SessionError(ErrorCode.INVALID_REQUEST)
            self.sessions.remove(group, member)
            cached = {tip: CachedSharePartition(topic, False) for tip, topic in fetch_data}
            self.sessions.create(group, member, cached, connection)
            return ShareContext(epoch, None, fetch_data, False)
        session = self.sessions.get(group, member)
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session.update(fetch_data, forget)
        session.epoch = next_epoch(session.epoch)
        return ShareContext(epoch, session, None, False)

    def acknowledge_session_update(self, group: str, member: str, epoch: int) -> None:
        """ShareAcknowledge's session check (and epoch bump)."""
        if epoch == INITIAL_EPOCH:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session = self.sessions.get(group, member)
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            return
        if session.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session.epoch = next_epoch(session.epoch)

    def release_session(self, group: str, member: str) -> list[Awaitable[Any]]:
        """The session closes (epoch -1): what the member acquired in its partitions is released."""
        session = self.sessions.get(group, member)
        if session is None:
            return []
        tips = list(session.partitions)
        self.sessions.remove(group, member)
        return self._release(group, member, tips)

    def _release(self, group: str, member: str, tips: list[TopicIdPartition]) -> list[Awaitable[Any]]:
        waiters = []
        for topic_id, partition in tips:
            key = (group, topic_id, partition)
            sp = self.partitions.get(key)
            if sp is None:
                continue
            error, waiter = sp.release_acquired_records(member)
            if error is not None:
                self._fenced(key, error)
            if waiter is not None:
                waiters.append(waiter)
            self.wake(key)
        return waiters

    def _on_member_leave(self, group: str, member: str) -> None:
        session = self.sessions.get(group, member)
        if session is not None:
            self._release(group, member, list(session.partitions))

    def _on_group_empty(self, group: str) -> None:
        for key in [k for k in self.partitions if k[0] == group]:
            self.remove(key)

    def forget_group(self, group: str) -> None:
        """The group was deleted, or its offsets altered or deleted: its partitions load again."""
        self._on_group_empty(group)

    # -- acknowledge ------------------------------------------------------------------------

    def acknowledge(
        self, group: str, member: str, acks: dict[TopicIdPartition, list[AckBatch]]
    ) -> tuple[dict[TopicIdPartition, tuple[ErrorCode, str | None]], list[Awaitable[Any]]]:
        """Each partition's acknowledgements: its (error, message), and the writes' durability waits."""
        results: dict[TopicIdPartition, tuple[ErrorCode, str | None]] = {}
        waiters: list[Awaitable[Any]] = []
        for (topic_id, partition), batches in acks.items():
            key = (group, topic_id, partition)
            sp = self.partitions.get(key)
            if sp is None:
                results[(topic_id, partition)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
                continue
            error, waiter = sp.acknowledge(member, batches)
            self.acknowledgements += 1
            if error is not None:
                self._fenced(key, error)
                results[(topic_id, partition)] = (error.code, error.message)
            else:
                results[(topic_id, partition)] = (ErrorCode.NONE, None)
                if waiter is not None:
                    waiters.append(waiter)
            self.wake(key)
        return results, waiters

    # -- fetch ------------------------------------------------------------------------------

    async def fetch(
        self, group: str, member: str, params: FetchParams, session_epoch: int, tips: list[tuple[TopicIdPartition, str]]
    ) -> dict[TopicIdPartition, PartitionFetch]:
        """fetchMessages + DelayedShareFetch: acquire records of `tips` for `member`, waiting up to
        max_wait_ms for min_bytes."""
        if len(tips) > 1 and session_epoch >= 1:  # PartitionRotateStrategy.ROUND_ROBIN
            at = session_epoch % len(tips)
            tips = tips[at:] + tips[:at]
        if not tips or params.max_records == 0 or params.max_bytes == 0:
            return {}
        self.fetches += 1
        erroneous: dict[TopicIdPartition, PartitionFetch] = {}
        share: dict[TopicIdPartition, SharePartition] = {}
        for tip, topic in tips:
            key = (group, tip[0], tip[1])
            try:
                sp = self.get_or_create(group, tip[0], topic, tip[1])
                sp.maybe_initialize()
            except ShareError as exc:
                if exc.code is not ErrorCode.LEADER_NOT_AVAILABLE:
                    self.remove(key)
                erroneous[tip] = PartitionFetch(exc.code, exc.message)
                continue
            share[tip] = sp
        if not share:
            return erroneous
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(params.max_wait_ms, 0) / 1000
        while True:
            done = self._try_complete(group, member, params, share, force=False)
            if done is not None:
                done.update(erroneous)
                return done
            remaining = deadline - loop.time()
            if remaining <= 0 or self.stopping:
                break
            await self._park(group, share, remaining)
        done = self._try_complete(group, member, params, share, force=True)
        assert done is not None
        done.update(erroneous)
        return done

    async def _park(self, group: str, share: dict[TopicIdPartition, SharePartition], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def on_append(_size: int) -> None:
            if not fut.done():
                fut.set_result(None)

        keys = [(group, tip[0], tip[1]) for tip in share]
        logs = {id(sp.log): sp.log for sp in share.values()}
        for key in keys:
            self._parked.setdefault(key, set()).add(fut)
        for plog in logs.values():
            plog.add_waiter(on_append)
        timer = loop.call_later(timeout, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()
            for key in keys:
                parked = self._parked.get(key)
                if parked is not None:
                    parked.discard(fut)
                    if not parked:
                        del self._parked[key]
            for plog in logs.values():
                plog.remove_waiter(on_append)

    def _try_complete(
        self, group: str, member: str, params: FetchParams, share: dict[TopicIdPartition, SharePartition], force: bool
    ) -> dict[TopicIdPartition, PartitionFetch] | None:
        """tryComplete / onComplete: read the partitions that can acquire; with min_bytes there
        (or an error, or `force`), acquire and answer; None to keep waiting."""
        acquirable = [(tip, sp, sp.next_fetch_offset()) for tip, sp in share.items() if sp.active and sp.can_acquire_records()]
        if not acquirable:
            return {} if force else None
        per_partition = params.max_bytes // len(acquirable)
        extra = params.max_bytes % len(acquirable)
        reads: list[tuple[TopicIdPartition, SharePartition, int, Any, list[tuple[int, int]] | None, ErrorCode]] = []
        total = 0
        errors = False
        min_one = True
        for i, (tip, sp, offset) in enumerate(acquirable):
            plog = sp.log
            limit = per_partition + (extra if i == 0 else 0)
            try:
                max_offset = plog.last_stable_offset if params.read_committed else None
                data = plog.read(offset, limit, min_one, max_offset)
            except OffsetOutOfRange:
                reads.append((tip, sp, offset, None, None, ErrorCode.OFFSET_OUT_OF_RANGE))
                errors = True
                continue
            except Exception as exc:  # a closed or failed log
                log.warning("share fetch read failed", topic=sp.topic, partition=sp.partition, error=str(exc))
                reads.append((tip, sp, offset, None, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                errors = True
                continue
            aborted = None
            if data is not None and len(data):
                total += len(data)
                min_one = False
                if params.read_committed:
                    found = plog.aborted_transactions(offset, _upper_bound(data))
                    aborted = [(a.producer_id, a.first_offset) for a in found] if found else None
            reads.append((tip, sp, offset, data, aborted, ErrorCode.NONE))
        if not (force or errors or total >= params.min_bytes):
            return None
        out: dict[TopicIdPartition, PartitionFetch] = {}
        acquired_total = 0
        for tip, sp, offset, data, aborted, error in reads:
            if error is ErrorCode.OFFSET_OUT_OF_RANGE:
                # The log start moved past the share partition's start: it follows (ShareFetchUtils).
                sp.update_cache_and_offsets(sp.log.log_start_offset)
                out[tip] = PartitionFetch()
                continue
            if error is not ErrorCode.NONE:
                out[tip] = PartitionFetch(error, error.message)
                continue
            if data is None or not len(data):
                out[tip] = PartitionFetch()
                continue
            batches = scan_batches(data)
            acquired, count = sp.acquire(
                member, params.record_limit, params.batch_size, params.max_records - acquired_total, offset, batches, aborted
            )
            if not acquired:
                out[tip] = PartitionFetch()
                continue
            acquired_total += count
            out[tip] = PartitionFetch(records=_slice(data, batches, acquired), acquired=acquired)
        return out


def _upper_bound(data: Any) -> int:
    batches = scan_batches(data)
    return batches[-1].last + 1 if batches else 0


def _slice(data: Any, batches: list[FetchedBatch], acquired: list[Acquired]) -> Any:
    """maybeSliceFetchRecords: only the stored batches that hold acquired records."""
    if len(batches) <= 1:
        return data
    first = acquired[0].first_offset
    last = acquired[-1].last_offset
    start = 0
    end = 0
    for b in batches:
        if b.last < first:
            continue
        if b.base > last:
            break
        if end == 0:
            start = b.pos
        end = b.pos + b.size
    if start == 0 and end == len(data):
        return data
    return data[start:end]
