"""A share partition: one topic partition as one share group consumes it (Kafka's SharePartition,
KIP-932).

It owns the records between its start offset and its end offset that have been delivered at
least once (broker/share/inflight.py): which member has acquired which, how often each was
delivered, which are acknowledged or archived. ShareFetch acquires records (whole stored batches,
split into acquired ranges of about `batch_size` records, or exactly `max_records` in the record
limit mode of ShareFetch v2), locking them to the member for the group's
`share.record.lock.duration.ms`; ShareAcknowledge (or acknowledgements piggy-backed on ShareFetch)
accepts, releases or rejects them; a lock that runs out makes its records available again, and a
record delivered `share.delivery.count.limit` times is archived instead. Once the records at the
start offset are acknowledged or archived, the start offset moves past them and they are
forgotten. At most `share.partition.max.record.locks` records are in flight at a time.

Every change that must survive a restart (a release, an acknowledgement, a lock timeout, the
start offset) is written to the share coordinator (broker/share/coordinator/) as a state batch
before it is answered; acquisition is not (a restart makes acquired records available again, as
in Kafka). The partition's state is read back from the share coordinator when it is first
fetched after a start. Kafka runs these steps on several threads with an "ongoing transition"
guard between the change and its write; here the write is an in-process append that completes
before any other request runs, so a transition starts, is written, and commits or rolls back in
one step.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import structlog

from broker.share import inflight as inf
from broker.share.inflight import (
    ACCEPT,
    ACK_STATE,
    ACQUIRED,
    ARCHIVED,
    ARCHIVING,
    AVAILABLE,
    EMPTY_MEMBER_ID,
    INCREASE,
    NO_OP,
    RENEW,
    InFlightBatch,
    InFlightState,
    LockTimer,
    is_terminal,
)
from broker.share.offset_reset import OffsetReset
from broker.share.sorted_map import SortedMap
from protocol import records as rec
from protocol.errors import ErrorCode
from storage.share_state_records import StateBatch

log = structlog.get_logger("kaflet.share")

MIN_THROTTLE_DELIVERY_LIMIT = 2

# SharePartitionState
EMPTY, INITIALIZING, ACTIVE, FAILED, FENCED = range(5)


class ShareError(Exception):
    """A per-partition failure with the Kafka error code it is answered with."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message if message is not None else code.message)
        self.code = code
        self.message = message if message is not None else code.message


class AckBatch(NamedTuple):
    """One acknowledgement batch of a request (ShareAcknowledgementBatch)."""

    first_offset: int
    last_offset: int
    types: list[int]


class Acquired(NamedTuple):
    """One acquired range of a ShareFetch answer (AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class FetchedBatch:
    """A stored record batch of what a fetch read: where it is in the read data, and what
    acquisition needs of its header."""

    base: int
    last: int
    pos: int
    size: int
    producer_id: int
    transactional: bool
    control: bool
    abort_marker: bool


def scan_batches(data: Any) -> list[FetchedBatch]:
    """The whole batches of a read (a partial last batch is left out)."""
    out = []
    pos = 0
    n = len(data)
    while n - pos >= rec.HEADER_SIZE:
        h = rec.read_header(data, pos)
        size = h.batch_length + rec.LOG_OVERHEAD
        if pos + size > n:
            break
        control = bool(h.attributes & rec.CONTROL_BIT)
        abort = False
        if control:
            for record in rec.iter_records(data[pos : pos + size]):
                abort = rec.control_record_type(record.key) == 0
                break
        out.append(
            FetchedBatch(
                h.base_offset,
                h.base_offset + h.last_offset_delta,
                pos,
                size,
                h.producer_id,
                bool(h.attributes & rec.TRANSACTIONAL_BIT),
                control,
                abort,
            )
        )
        pos += size
    return out


class SharePersister(Protocol):
    """What a share partition asks of the share coordinator (Kafka's Persister)."""

    def read(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> tuple[Any, Awaitable[Any] | None]: ...

    def write(
        self,
        group: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: list[StateBatch],
    ) -> tuple[Any, Awaitable[Any] | None]: ...


class ShareGroupSettings(Protocol):
    """A share group's configs as a share partition reads them (ShareGroupConfigProvider)."""

    def record_lock_duration_ms(self, group: str) -> int: ...

    def delivery_count_limit(self, group: str) -> int: ...

    def partition_max_record_locks(self, group: str) -> int: ...

    def auto_offset_reset(self, group: str) -> OffsetReset: ...

    def renew_enabled(self, group: str) -> bool: ...


class PartitionLog(Protocol):
    """The offsets of the topic partition a share partition reads (PartitionMetadataProvider)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...


class ShareStats:
    """Counters of one share partition, for /metrics."""

    __slots__ = ("acknowledged", "acquired", "archived", "lock_timeouts", "redeliveries", "rejected", "released")

    def __init__(self) -> None:
        self.acquired = 0  # records acquired by fetches
        self.acknowledged = 0  # ACCEPT
        self.released = 0  # RELEASE (and releases of a leaving member)
        self.rejected = 0  # REJECT
        self.archived = 0  # archived at the delivery limit
        self.lock_timeouts = 0  # records whose acquisition lock ran out
        self.redeliveries = 0  # records acquired again (delivery count > 1)


class SharePartition:
    def __init__(
        self,
        group: str,
        topic_id: uuid.UUID,
        topic: str,
        partition: int,
        leader_epoch: int,
        plog: Any,
        persister: SharePersister,
        settings: ShareGroupSettings,
        now_ms: Callable[[], float],
        wake: Callable[[], None],
    ) -> None:
        self.group = group
        self.topic_id = topic_id
        self.topic = topic
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.log = plog
        self.persister = persister
        self.settings = settings
        self.now_ms = now_ms
        self.wake = wake  # parked ShareFetches may acquire now (DelayedShareFetch's notifier)
        self.state = EMPTY
        self.cached: SortedMap[InFlightBatch] = SortedMap()
        self.start_offset = 0
        self.end_offset = 0
        self.find_next = False
        self.gap_window: list[int] | None = None  # [end offset, gap start offset] after a load with gaps
        self.delivery_complete_count = 0
        self.state_epoch = 0
        self.stats = ShareStats()

    def __repr__(self) -> str:
        return f"SharePartition({self.group}, {self.topic}-{self.partition}, start={self.start_offset}, end={self.end_offset})"

    # -- config ---------------------------------------------------------------------------

    def max_delivery_count(self) -> int:
        return self.settings.delivery_count_limit(self.group)

    def max_in_flight(self) -> int:
        return self.settings.partition_max_record_locks(self.group)

    def lock_duration_ms(self) -> int:
        return self.settings.record_lock_duration_ms(self.group)

    # -- initialization (maybeInitialize) -------------------------------------------------------

    def maybe_initialize(self) -> None:
        """Read the persisted state on first use; ShareError when the partition cannot serve."""
        if self.state == ACTIVE:
            return
        if self.state == FAILED:
            raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Share partition failed to load {self.group}-{self.topic}-{self.partition}")
        if self.state == FENCED:
            raise ShareError(ErrorCode.LEADER_NOT_AVAILABLE, f"Share partition is fenced {self.group}-{self.topic}-{self.partition}")
        self.state = INITIALIZING
        try:
            result, _waiter = self.persister.read(self.group, self.topic_id, self.partition, self.leader_epoch)
            if result.error is not ErrorCode.NONE:
                raise persister_error(result.error, result.message)
            self._load(result)
        except ShareError:
            self.state = FAILED
            raise
        except Exception as exc:
            self.state = FAILED
            log.error("failed to initialize a share partition", group=self.group, topic=self.topic, partition=self.partition, exc_info=True)
            raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc

    def _load(self, result: Any) -> None:
        self.start_offset = self._start_offset_during_initialization(result.start_offset)
        self.state_epoch = result.state_epoch
        gap_start = -1
        previous_last = self.start_offset - 1
        for b in result.batches:
            if b.first_offset < self.start_offset:
                raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to initialize the share partition {self.group}-{self.topic_id}")
            if b.last_offset < b.first_offset:
                raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to initialize the share partition {self.group}-{self.topic_id}")
            if gap_start == -1 and b.first_offset > previous_last + 1:
                gap_start = previous_last + 1
            previous_last = b.last_offset
            state = ARCHIVED if b.delivery_state == ARCHIVING else b.delivery_state  # no dead letter queue here
            if state == ACQUIRED:
                state = AVAILABLE  # never persisted by Kafka; a foreign log's acquisition ended with its broker
            self.cached.put(b.first_offset, InFlightBatch(EMPTY_MEMBER_ID, b.first_offset, b.last_offset, state, b.delivery_count, None))
            if is_terminal(state):
                self.delivery_complete_count += b.last_offset - b.first_offset + 1
        if self.cached:
            self.find_next = True
            self.end_offset = self.cached.last_value().last
            if gap_start != -1:
                self.gap_window = [self.end_offset, gap_start]
            self._maybe_update_cached_state_and_offsets()
        else:
            self.end_offset = self.start_offset
        self.state = ACTIVE

    def _start_offset_during_initialization(self, persisted: int) -> int:
        """share.auto.offset.reset decides where a partition without a persisted start offset starts."""
        if persisted != -1:
            return persisted
        reset = self.settings.auto_offset_reset(self.group)
        if reset.kind == "latest":
            return int(self.log.high_watermark)
        if reset.kind == "earliest":
            return int(self.log.log_start_offset)
        found = self.log.offset_for_timestamp(int(self.now_ms()) - reset.duration_ms)
        return int(found[1]) if found is not None else int(self.log.high_watermark)

    @property
    def active(self) -> bool:
        return self.state == ACTIVE

    def mark_fenced(self) -> None:
        self.state = FENCED

    def close(self) -> None:
        """The partition leaves the cache: its locks are cancelled (its records stay as persisted)."""
        self.state = FENCED
        for batch in self.cached.values():
            if batch.offsets is None:
                if batch.batch is not None:
                    batch.batch.cancel_lock()
            else:
                for s in batch.offsets.values():
                    s.cancel_lock()

    # -- gap window -------------------------------------------------------------------------

    def _gap_active(self) -> bool:
        return self.gap_window is not None and self.gap_window[0] == self.end_offset

    def _maybe_update_gap_start(self, offset: int) -> None:
        gw = self.gap_window
        if gw is not None:
            if gw[0] == self.end_offset and offset <= gw[0]:
                gw[1] = offset
            else:
                self.gap_window = None

    # -- what a fetch reads next ------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first offset a fetch should read: the first available record, or past the end."""
        cached = self.cached
        if not self.find_next:
            if not cached or self.start_offset > cached.last_value().last:
                return self.end_offset
            return self.end_offset + 1
        if not cached or self.start_offset > cached.last_value().last:
            self.find_next = False
            return self.end_offset
        next_offset = -1
        gap_active = self._gap_active()
        gap_start = self.gap_window[1] if gap_active and self.gap_window is not None else -1
        for key, batch in cached.items():
            if gap_active:
                if key > gap_start:
                    next_offset = gap_start
                    break
                gap_start = max(batch.last + 1, gap_start)
            if batch.offsets is None:
                s = batch.state
                if s.state != AVAILABLE or s.in_transition:
                    continue
                next_offset = batch.first
                break
            for offset, s in batch.offsets.items():
                if s.state == AVAILABLE and not s.in_transition:
                    next_offset = offset
                    break
            if next_offset != -1:
                break
        if next_offset == -1:
            self.find_next = False
            next_offset = self.end_offset + 1
        return next_offset

    def in_flight_records(self) -> int:
        return 0 if not self.cached else self.end_offset - self.start_offset + 1

    def can_acquire_records(self) -> bool:
        if self.next_fetch_offset() != self.end_offset + 1:
            return True
        return self.in_flight_records() < self.max_in_flight()

    # -- acquire ----------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        record_limit: bool,
        batch_size: int,
        max_fetch_records: int,
        fetch_offset: int,
        batches: list[FetchedBatch],
        aborted: list[tuple[int, int]] | None,
    ) -> tuple[list[Acquired], int]:
        """Acquire the records of `batches` (read from `fetch_offset`) for `member_id`: the ranges
        acquired and how many records they hold. `aborted` (read_committed): the aborted
        transactions (producer id, first offset) over the read, whose records are archived."""
        if self.state != ACTIVE or max_fetch_records <= 0 or not batches:
            return [], 0
        last_batch = batches[-1]
        if last_batch.last < self.start_offset:
            return [], 0
        last_to_acquire, max_records = self._last_offset_and_max_records(fetch_offset, max_fetch_records, last_batch.last)
        if max_records <= 0:
            return [], 0
        first_batch = batches[0]
        base = first_batch.base
        self._maybe_archive_stale_batches(fetch_offset, base)
        floor = self.cached.floor_key(base)
        if floor is None:
            if base < self.start_offset:
                base = self.start_offset
        elif self.cached.get(floor).last >= base:  # type: ignore[union-attr]
            base = floor
        sub = self.cached.sub_items(min(first_batch.base, base), last_to_acquire)
        if not sub:
            result, count = self._acquire_new(member_id, batches, record_limit, base, last_to_acquire, batch_size, max_records)
            return self._filter_aborted(batches, aborted, result, count)
        result: list[Acquired] = []
        acquired = 0
        gap_start = base
        max_delivery = self.max_delivery_count()
        for key, batch in sub:
            if acquired >= max_records:
                break
            if self._gap_active():
                if gap_start < key:
                    more, n = self._acquire_new(member_id, batches, record_limit, gap_start, key - 1, batch_size, max_records - acquired)
                    result += more
                    acquired += n
                gap_start = batch.last + 1
                if acquired >= max_records:
                    break
            full_match = batch.first >= first_batch.base and batch.last <= last_to_acquire
            remaining = max_records - acquired
            limit_subset = record_limit and batch.last - batch.first + 1 > remaining
            throttle = self._should_throttle(batch, first_batch.base, last_to_acquire)
            if throttle and acquired > 0:
                max_records = 0
                break
            if not full_match or batch.offsets is not None or limit_subset or throttle:
                if batch.offsets is None:
                    s = batch.state
                    if s.state != AVAILABLE or s.in_transition:
                        continue
                    batch.split(self._make_lock)
                n = self._acquire_subset(member_id, record_limit, remaining, first_batch.base, last_to_acquire, batch, result)
                acquired += n
                if throttle and n > 0:
                    max_records = 0
                    break
                continue
            s = batch.state
            if s.state != AVAILABLE or s.in_transition:
                continue
            if s.try_update(ACQUIRED, INCREASE, max_delivery, member_id) is None or s.state != ACQUIRED:
                continue
            s.set_lock(self._make_lock(member_id, batch.first, batch.last, self.lock_duration_ms()))
            result.append(Acquired(batch.first, batch.last, s.delivery_count))
            n = batch.last - batch.first + 1
            acquired += n
            self._count_acquired(n, s.delivery_count)
        if acquired < max_records and sub[-1][1].last < last_to_acquire:
            more, n = self._acquire_new(
                member_id, batches, record_limit, sub[-1][1].last + 1, last_to_acquire, batch_size, max_records - acquired
            )
            result += more
            acquired += n
        if result:
            self._maybe_update_gap_start(result[-1].last_offset + 1)
            return self._filter_aborted(batches, aborted, result, acquired)
        return result, acquired

    def _count_acquired(self, n: int, delivery_count: int) -> None:
        self.stats.acquired += n
        if delivery_count > 1:
            self.stats.redeliveries += n

    def _last_offset_and_max_records(self, fetch_offset: int, max_fetch_records: int, last_offset: int) -> tuple[int, int]:
        """The in-flight limit: beyond it only records already in flight may be acquired again."""
        max_records = min(max_fetch_records, self.max_in_flight() - self.in_flight_records())
        last_to_acquire = last_offset
        if max_records <= 0 and fetch_offset <= self.end_offset:
            max_records = min(max_fetch_records, self.end_offset - fetch_offset + 1)
            last_to_acquire = min(last_offset, self.end_offset)
        return last_to_acquire, max_records

    def _acquire_new(
        self,
        member_id: str,
        batches: list[FetchedBatch],
        record_limit: bool,
        first: int,
        last: int,
        batch_size: int,
        max_fetch_records: int,
    ) -> tuple[list[Acquired], int]:
        """acquireNewBatchRecords: records never delivered, as new in-flight batches."""
        first_acquired = first
        if not self.cached and self.end_offset > first_acquired:
            first_acquired = self.end_offset
        last_acquired = last
        if max_fetch_records < last_acquired - first_acquired + 1:
            last_acquired = _last_offset_of_batch_with(batches, first_acquired + max_fetch_records - 1)
            if self._gap_active() and last_acquired > last:
                last_acquired = last
        acquired = self._create_batches(member_id, batches, record_limit, max_fetch_records, first_acquired, last_acquired, batch_size)
        if self.cached.first_key() == first_acquired:
            self.start_offset = first_acquired
        if last_acquired > self.end_offset:
            self.end_offset = last_acquired
        if record_limit:
            last_acquired = acquired[0].last_offset
        self._maybe_update_gap_start(last_acquired + 1)
        count = last_acquired - first_acquired + 1
        self._count_acquired(count, 1)
        return acquired, count

    def _create_batches(
        self,
        member_id: str,
        batches: list[FetchedBatch],
        record_limit: bool,
        max_fetch_records: int,
        first: int,
        last: int,
        batch_size: int,
    ) -> list[Acquired]:
        result: list[Acquired] = []
        current_first = first
        if not record_limit and last - first + 1 > batch_size:
            for b in batches:
                if b.base > last:
                    break
                if b.base - current_first < batch_size:
                    continue
                result.append(Acquired(current_first, b.base - 1, 1))
                current_first = b.base
        result.append(Acquired(current_first, last, 1))
        if record_limit and result[0].last_offset - result[0].first_offset + 1 > max_fetch_records:
            head = result[0]
            batch = InFlightBatch(member_id, head.first_offset, head.last_offset, ACQUIRED, 1, None)
            limit_last = head.first_offset + max_fetch_records - 1
            batch.split_at(limit_last, self.lock_duration_ms(), self._make_lock)
            self.find_next = True
            self.cached.put(head.first_offset, batch)
            return [Acquired(head.first_offset, limit_last, 1)]
        duration = self.lock_duration_ms()
        for a in result:
            lock = self._make_lock(member_id, a.first_offset, a.last_offset, duration)
            self.cached.put(a.first_offset, InFlightBatch(member_id, a.first_offset, a.last_offset, ACQUIRED, 1, lock))
        return result

    def _acquire_subset(
        self,
        member_id: str,
        record_limit: bool,
        max_fetch_records: int,
        first: int,
        last: int,
        batch: InFlightBatch,
        result: list[Acquired],
    ) -> int:
        """acquireSubsetBatchRecords: the available offsets of a batch tracked per offset. A record
        on its last delivery goes alone; records near the limit go a few at a time."""
        acquired = 0
        throttled_max = -1
        has_throttled = False
        max_delivery = self.max_delivery_count()
        throttle_limit = _throttle_limit(max_delivery)
        offsets = batch.offsets
        assert offsets is not None
        got: list[Acquired] = []
        duration = self.lock_duration_ms()
        for offset, s in offsets.items():
            if offset < first:
                continue
            if offset > last:
                break
            if s.state != AVAILABLE or s.in_transition:
                continue
            count = s.delivery_count
            if max_delivery > MIN_THROTTLE_DELIVERY_LIMIT and count == max_delivery - 1 and acquired > 0:
                break  # on its last delivery attempt: it goes alone in the next fetch
            if count >= throttle_limit and throttled_max < 0:
                throttled_max = max(1, len(offsets) >> (count - throttle_limit + 1))
                has_throttled = True
            if s.try_update(ACQUIRED, INCREASE, max_delivery, member_id) is None or s.state != ACQUIRED:
                continue
            s.set_lock(self._make_lock(member_id, offset, offset, duration))
            got.append(Acquired(offset, offset, s.delivery_count))
            acquired += 1
            self._count_acquired(1, s.delivery_count)
            if s.delivery_count == max_delivery and max_delivery > MIN_THROTTLE_DELIVERY_LIMIT:
                break  # delivered alone in this fetch
            if record_limit and acquired == max_fetch_records:
                break
            if has_throttled and acquired == throttled_max:
                break
        _accumulate(result, got)
        return acquired

    def _should_throttle(self, batch: InFlightBatch, first: int, last: int) -> bool:
        limit = _throttle_limit(self.max_delivery_count())
        if batch.offsets is None:
            s = batch.state
            return s.state == AVAILABLE and not s.in_transition and s.delivery_count >= limit
        counts = [s.delivery_count for o, s in batch.offsets.items() if first <= o <= last and s.state == AVAILABLE and not s.in_transition]
        return max(counts, default=0) >= limit

    def _maybe_archive_stale_batches(self, fetch_offset: int, base: int) -> None:
        """Records between the fetch offset and the first batch read are gone from the log (compacted,
        or skipped): archived if available."""
        if not self.cached or fetch_offset >= base:
            return
        floor_offset = fetch_offset
        floor = self.cached.floor_key(fetch_offset)
        if floor is not None and self.cached.get(floor).last >= fetch_offset:  # type: ignore[union-attr]
            floor_offset = floor
        sub = [(k, b) for k, b in self.cached.sub_items(floor_offset, base - 1)]
        if sub and self._archive_records(fetch_offset, base, sub, AVAILABLE, True):
            self.find_next = True

    def _archive_records(self, start: int, end: int, items: list[tuple[int, InFlightBatch]], initial: int, count_complete: bool) -> bool:
        """archiveRecords: records of `items` in start..end-1 in state `initial` become ARCHIVED."""
        any_archived = False
        for key, batch in items:
            if key >= end:
                break
            full = batch.first >= start and batch.last <= end - 1
            if not full or batch.offsets is not None:
                if batch.offsets is None:
                    if batch.state.state != initial:
                        continue
                    batch.split(self._make_lock)
                for offset, s in batch.offsets.items():  # type: ignore[union-attr]
                    if offset < start:
                        continue
                    if offset > end - 1:
                        break
                    if s.state != initial:
                        continue
                    s.archive()
                    if count_complete:
                        self.delivery_complete_count += 1
                    any_archived = True
                continue
            s = batch.state
            if s.state == initial:
                s.archive()
                if count_complete:
                    self.delivery_complete_count += batch.last - batch.first + 1
                any_archived = True
        return any_archived

    def _filter_aborted(
        self, batches: list[FetchedBatch], aborted: list[tuple[int, int]] | None, acquired: list[Acquired], count: int
    ) -> tuple[list[Acquired], int]:
        """read_committed: records of aborted transactions are archived, not delivered."""
        if not aborted:
            return acquired, count
        to_archive = _aborted_batches(batches, aborted)
        if not to_archive:
            return acquired, count
        for b in to_archive:
            floor = self.cached.floor_key(b.base)
            if floor is None:
                continue
            self._archive_records(b.base, b.last + 1, self.cached.sub_items(floor, b.last), ACQUIRED, True)
        result = _remove_ranges(acquired, to_archive)
        return result, sum(a.last_offset - a.first_offset + 1 for a in result)

    # -- acknowledge ------------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: list[AckBatch]) -> tuple[ShareError | None, Awaitable[Any] | None]:
        """Apply a member's acknowledgements, all or none, and write them: (error, durability wait)."""
        error: ShareError | None = None
        pending: list[tuple[InFlightState, StateBatch, int]] = []
        for batch in batches:
            try:
                ack_types = _ack_type_map(batch)
            except ValueError:
                error = ShareError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type: {batch.types}")
                break
            if batch.last_offset < self.start_offset:
                continue
            try:
                sub = self._sub_map_for_acknowledgement(batch)
            except ShareError as exc:
                error = exc
                break
            error = self._acknowledge_batch(member_id, batch, ack_types, sub, pending)
            if error is not None:
                break
        return self._rollback_or_write(error, pending)

    def _sub_map_for_acknowledgement(self, batch: AckBatch) -> list[tuple[int, InFlightBatch]]:
        floor = self.cached.floor_key(batch.first_offset)
        if floor is None:
            if self._start_within(batch.first_offset, batch.last_offset):
                floor = self.cached.floor_key(self.start_offset)
            if floor is None:
                raise ShareError(
                    ErrorCode.INVALID_RECORD_STATE, "Batch record not found. The request batch offsets are not found in the cache."
                )
        sub = self.cached.sub_items(floor, batch.last_offset)
        if not sub or sub[-1][1].last < batch.first_offset:
            raise ShareError(ErrorCode.INVALID_REQUEST, "Batch record not found. The first offset in request is past acquired records.")
        if batch.last_offset > sub[-1][1].last:
            raise ShareError(ErrorCode.INVALID_REQUEST, "Batch record not found. The last offset in request is past acquired records.")
        return sub

    def _start_within(self, first: int, last: int) -> bool:
        return first < self.start_offset <= last

    def _acknowledge_batch(
        self,
        member_id: str,
        batch: AckBatch,
        ack_types: dict[int, int],
        sub: list[tuple[int, InFlightBatch]],
        pending: list[tuple[InFlightState, StateBatch, int]],
    ) -> ShareError | None:
        for _key, in_flight in sub:
            if in_flight.last < self.start_offset:
                continue
            if in_flight.offsets is None:
                s = in_flight.state
                if s.member_id == EMPTY_MEMBER_ID:
                    return ShareError(
                        ErrorCode.INVALID_RECORD_STATE, "The batch cannot be acknowledged. The batch is not in the acquired state."
                    )
                if s.member_id != member_id:
                    return ShareError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of batch record")
                if s.in_transition:
                    return ShareError(ErrorCode.INVALID_RECORD_STATE)
            full = in_flight.first >= batch.first_offset and in_flight.last <= batch.last_offset
            per_offset_ack = len(batch.types) > 1
            start_moved = self._start_within(in_flight.first, in_flight.last)
            if not full or in_flight.offsets is not None or per_offset_ack or start_moved:
                if in_flight.offsets is None:
                    if in_flight.state.state != ACQUIRED:
                        return ShareError(
                            ErrorCode.INVALID_RECORD_STATE,
                            "The batch cannot be acknowledged. The subset batch is not in the acquired state.",
                        )
                    in_flight.split(self._make_lock)
                error = self._acknowledge_offsets(member_id, batch, in_flight, ack_types, pending)
            else:
                error = self._acknowledge_whole(member_id, in_flight, ack_types[batch.first_offset], pending)
            if error is not None:
                return error
        return None

    def _acknowledge_offsets(
        self,
        member_id: str,
        batch: AckBatch,
        in_flight: InFlightBatch,
        ack_types: dict[int, int],
        pending: list[tuple[InFlightState, StateBatch, int]],
    ) -> ShareError | None:
        max_delivery = self.max_delivery_count()
        for offset, s in in_flight.offsets.items():  # type: ignore[union-attr]
            if offset < batch.first_offset or offset < self.start_offset:
                continue
            if offset > batch.last_offset:
                break
            if s.state != ACQUIRED:
                return ShareError(ErrorCode.INVALID_RECORD_STATE, "The offset cannot be acknowledged. The offset is not acquired.")
            if s.in_transition:
                return ShareError(ErrorCode.INVALID_RECORD_STATE)
            if s.member_id != member_id:
                return ShareError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of offset")
            ack = ack_types[offset] if len(ack_types) > 1 else batch.types[0]
            if ack == RENEW:
                if not self.settings.renew_enabled(self.group):
                    return ShareError(ErrorCode.INVALID_RECORD_STATE, "Renewing acquisition locks is not enabled for the group.")
                s.cancel_lock()
                s.set_lock(self._make_lock(member_id, offset, offset, self.lock_duration_ms()))
                continue
            new_state = ACK_STATE.get(ack)
            if new_state is None:
                return ShareError(ErrorCode.INVALID_REQUEST, f"Unknown acknowledge type id: {ack}")
            if s.start_transition(new_state, NO_OP, max_delivery, EMPTY_MEMBER_ID) is None:
                return ShareError(ErrorCode.INVALID_RECORD_STATE, "Unable to acknowledge records for the batch")
            pending.append((s, StateBatch(offset, offset, s.state, s.delivery_count), ack))
            if is_terminal(s.state):
                self.delivery_complete_count += 1
        return None

    def _acknowledge_whole(
        self, member_id: str, in_flight: InFlightBatch, ack: int, pending: list[tuple[InFlightState, StateBatch, int]]
    ) -> ShareError | None:
        s = in_flight.state
        if s.state != ACQUIRED:
            return ShareError(ErrorCode.INVALID_RECORD_STATE, "The batch cannot be acknowledged. The batch is not in the acquired state.")
        if ack == RENEW:
            if not self.settings.renew_enabled(self.group):
                return ShareError(ErrorCode.INVALID_RECORD_STATE, "Renewing acquisition locks is not enabled for the group.")
            s.cancel_lock()
            s.set_lock(self._make_lock(member_id, in_flight.first, in_flight.last, self.lock_duration_ms()))
            return None
        new_state = ACK_STATE.get(ack)
        if new_state is None:
            return ShareError(ErrorCode.INVALID_REQUEST, f"Unknown acknowledge type id: {ack}")
        if s.start_transition(new_state, NO_OP, self.max_delivery_count(), EMPTY_MEMBER_ID) is None:
            return ShareError(ErrorCode.INVALID_RECORD_STATE, "Unable to acknowledge records for the batch")
        pending.append((s, StateBatch(in_flight.first, in_flight.last, s.state, s.delivery_count), ack))
        if is_terminal(s.state):
            self.delivery_complete_count += in_flight.last - in_flight.first + 1
        return None

    def _rollback_or_write(
        self, error: ShareError | None, pending: list[tuple[InFlightState, StateBatch, int]]
    ) -> tuple[ShareError | None, Awaitable[Any] | None]:
        """rollbackOrProcessStateUpdates: undo on an error; otherwise write the state batches and
        commit the transitions (or undo them when the write fails)."""
        if error is not None:
            self._roll_back(pending)
            return error, None
        if not pending:
            return None, None
        write_error, waiter = self.write_state([b for _, b, _ in pending])
        if write_error is not None:
            self._roll_back(pending)
            return write_error, None
        for s, batch, ack in pending:
            s.complete_transition(True)
            n = batch.last_offset - batch.first_offset + 1
            if s.state == AVAILABLE:
                self.find_next = True
            if ack == ACCEPT:
                self.stats.acknowledged += n
            elif ack == inf.RELEASE:
                self.stats.released += n
                if s.state == ARCHIVED:
                    self.stats.archived += n
            elif ack == inf.REJECT:
                self.stats.rejected += n
        moved = self._maybe_update_cached_state_and_offsets()
        if moved or any(s.state == AVAILABLE for s, _, _ in pending):
            self.wake()
        return None, waiter

    def _roll_back(self, pending: list[tuple[InFlightState, StateBatch, int]]) -> None:
        for s, batch, _ in pending:
            was_terminal = is_terminal(batch.delivery_state)
            s.complete_transition(False)
            if s.state == AVAILABLE:
                self.find_next = True
            if was_terminal and not is_terminal(s.state):
                self.delivery_complete_count -= self._in_flight_in(batch.first_offset, batch.last_offset)

    def _in_flight_in(self, first: int, last: int) -> int:
        if last >= self.start_offset:
            return last - max(self.start_offset, first) + 1
        return 0

    # -- release (a member leaves: its session closes or its connection drops) ------------------------

    def release_acquired_records(self, member_id: str) -> tuple[ShareError | None, Awaitable[Any] | None]:
        """Every record `member_id` holds becomes available again (archived on its last delivery)."""
        pending: list[tuple[InFlightState, StateBatch, int]] = []
        max_delivery = self.max_delivery_count()
        for _key, batch in self.cached.items():
            if batch.offsets is None:
                s = batch.state
                if s.state == ACQUIRED and s.member_id == member_id and self._start_within(batch.first, batch.last):
                    batch.split(self._make_lock)
            if batch.offsets is not None:
                for offset, s in batch.offsets.items():
                    if s.member_id != member_id and s.member_id != EMPTY_MEMBER_ID:
                        continue
                    if s.state != ACQUIRED:
                        continue
                    target = ARCHIVED if offset < self.start_offset else AVAILABLE
                    if s.start_transition(target, NO_OP, max_delivery, EMPTY_MEMBER_ID) is None:
                        return self._rollback_or_write(
                            ShareError(ErrorCode.INVALID_RECORD_STATE, "Unable to release acquired records for the offset"), pending
                        )
                    pending.append((s, StateBatch(offset, offset, s.state, s.delivery_count), inf.RELEASE))
                    if offset >= self.start_offset and is_terminal(s.state):
                        self.delivery_complete_count += 1
                continue
            s = batch.state
            if s.member_id != member_id and s.member_id != EMPTY_MEMBER_ID:
                continue
            if s.state == ACQUIRED:
                target = ARCHIVED if batch.last < self.start_offset else AVAILABLE
                if s.start_transition(target, NO_OP, max_delivery, EMPTY_MEMBER_ID) is None:
                    return self._rollback_or_write(
                        ShareError(ErrorCode.INVALID_RECORD_STATE, "Unable to release acquired records for the batch"), pending
                    )
                pending.append((s, StateBatch(batch.first, batch.last, s.state, s.delivery_count), inf.RELEASE))
                if is_terminal(s.state):
                    self.delivery_complete_count += self._in_flight_in(batch.first, batch.last)
        return self._rollback_or_write(None, pending)

    # -- the start offset ---------------------------------------------------------------------

    def update_cache_and_offsets(self, log_start_offset: int) -> None:
        """The log start offset moved past the start offset (retention, DeleteRecords): records
        below it are gone; available ones are archived."""
        if log_start_offset <= self.start_offset:
            return
        if not self.cached:
            self.start_offset = self.end_offset = log_start_offset
            self.delivery_complete_count = 0
            return
        removed_terminal = self._count_terminal_below(log_start_offset)
        if self._archive_records(self.start_offset, log_start_offset, list(self.cached.items()), AVAILABLE, False):
            self.find_next = True
        self.start_offset = log_start_offset
        self.delivery_complete_count -= removed_terminal
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset

    def _count_terminal_below(self, new_start: int) -> int:
        count = 0
        for _key, batch in self.cached.head_items(new_start):
            if batch.last < self.start_offset:
                continue
            if batch.offsets is None:
                if not is_terminal(batch.state.state):
                    continue
                first = max(self.start_offset, batch.first)
                last = min(new_start - 1, batch.last)
                if first <= last:
                    count += last - first + 1
                continue
            for offset, s in batch.offsets.items():
                if self.start_offset <= offset < new_start and is_terminal(s.state):
                    count += 1
        return count

    def _can_move_start_offset(self) -> bool:
        if not self.cached:
            return False
        floor = self.cached.floor_key(self.start_offset)
        if floor is None:
            return False
        batch = self.cached.get(floor)
        assert batch is not None
        if batch.offsets is None:
            s = batch.state
        else:
            found = batch.offsets.get(self.start_offset)
            if found is None:
                return False
            s = found
        return not s.in_transition and is_terminal(s.state)

    def _last_acknowledged(self) -> tuple[int, int]:
        """findLastOffsetAcknowledgedAndMetadata: the last offset of the terminal run from the
        start, and how many terminal records lie in it at or after the start offset."""
        last = -1
        terminal = 0
        gap = self.gap_window if self._gap_active() else None
        for _key, batch in self.cached.items():
            if gap is not None and batch.last >= gap[1]:
                return last, terminal
            if batch.offsets is None:
                s = batch.state
                if s.in_transition or not is_terminal(s.state):
                    return last, terminal
                last = batch.last
                terminal += self._in_flight_in(batch.first, batch.last)
                continue
            for offset, s in batch.offsets.items():
                if s.in_transition or not is_terminal(s.state):
                    return last, terminal
                last = offset
                if offset >= self.start_offset:
                    terminal += 1
        return last, terminal

    def _maybe_update_cached_state_and_offsets(self) -> bool:
        """The start offset moves past the acknowledged and archived records at its head, which
        are forgotten."""
        if not self._can_move_start_offset():
            return False
        last_acked, terminal = self._last_acknowledged()
        if last_acked == -1:
            return False
        cached = self.cached
        last_cached = cached.last_value().last
        if last_acked == last_cached:
            self.start_offset = self.end_offset = last_cached + 1
            cached.clear()
            self.delivery_complete_count = 0
            return True
        first_key = cached.first_key()
        floor = cached.floor_key(last_acked)
        assert floor is not None
        entry = cached.get(floor)
        assert entry is not None
        if last_acked == entry.last:
            higher = cached.higher_key(last_acked)
            if higher is not None and higher > self.start_offset:
                self.start_offset = higher
            if self._gap_active() and self.gap_window is not None:
                self.start_offset = min(self.gap_window[1], self.start_offset)
            last_key_to_remove = floor
        else:
            if last_acked + 1 > self.start_offset:
                self.start_offset = last_acked + 1
            last_key_to_remove = -1 if floor == first_key else (cached.lower_key(floor) or -1)
        self.delivery_complete_count -= terminal
        if last_key_to_remove != -1:
            cached.remove_range(first_key, last_key_to_remove)
        return True

    # -- the persister --------------------------------------------------------------------

    def write_state(self, batches: list[StateBatch]) -> tuple[ShareError | None, Awaitable[Any] | None]:
        result, waiter = self.persister.write(
            self.group,
            self.topic_id,
            self.partition,
            self.state_epoch,
            self.leader_epoch,
            self.start_offset,
            self.delivery_complete_count,
            batches,
        )
        if result.error is not ErrorCode.NONE:
            return persister_error(result.error, result.message), None
        return None, waiter

    # -- acquisition locks ----------------------------------------------------------------------

    def _make_lock(self, member_id: str, first: int, last: int, delay_ms: float) -> LockTimer:
        return LockTimer(delay_ms, member_id, first, last, self._on_lock_timeout)

    def _on_lock_timeout(self, member_id: str, first: int, last: int, timer: LockTimer) -> None:
        """releaseAcquisitionLockOnTimeout: the records become available again (archived on their
        last delivery), written to the share coordinator."""
        if timer.cancelled or self.state == FENCED:
            return
        floor = self.cached.floor_key(first)
        if floor is None:
            return
        state_batches: list[StateBatch] = []
        max_delivery = self.max_delivery_count()
        timed_out = 0
        for _key, batch in self.cached.sub_items(floor, last):
            if batch.offsets is None and batch.state.state == ACQUIRED and self._start_within(batch.first, batch.last):
                batch.split(self._make_lock)
            if batch.offsets is None:
                s = batch.state
                if s.state != ACQUIRED:
                    continue
                target = ARCHIVED if batch.last < self.start_offset else AVAILABLE
                if s.try_update(target, NO_OP, max_delivery, EMPTY_MEMBER_ID) is None:
                    continue
                s.cancel_lock()
                state_batches.append(StateBatch(batch.first, batch.last, s.state, s.delivery_count))
                n = batch.last - batch.first + 1
                timed_out += n
                if s.state != ARCHIVED:
                    self.find_next = True
                else:
                    self.stats.archived += n
                if is_terminal(s.state):
                    self.delivery_complete_count += self._in_flight_in(batch.first, batch.last)
                continue
            for offset, s in batch.offsets.items():
                if offset < first:
                    continue
                if offset > last:
                    break
                if s.state != ACQUIRED:
                    continue
                target = ARCHIVED if offset < self.start_offset else AVAILABLE
                if s.try_update(target, NO_OP, max_delivery, EMPTY_MEMBER_ID) is None:
                    continue
                s.cancel_lock()
                state_batches.append(StateBatch(offset, offset, s.state, s.delivery_count))
                timed_out += 1
                if s.state != ARCHIVED:
                    self.find_next = True
                else:
                    self.stats.archived += 1
                if offset >= self.start_offset and is_terminal(s.state):
                    self.delivery_complete_count += 1
        self.stats.lock_timeouts += timed_out
        if state_batches:
            self.write_state(state_batches)  # failures are logged by nobody in Kafka either: the state is in memory
            self._maybe_update_cached_state_and_offsets()
            self.wake()

    # -- what DescribeShareGroupOffsets and the metrics read ------------------------------------

    def acquired_records(self) -> int:
        n = 0
        for batch in self.cached.values():
            if batch.offsets is None:
                if batch.state.state == ACQUIRED:
                    n += batch.last - batch.first + 1
            else:
                n += sum(1 for s in batch.offsets.values() if s.state == ACQUIRED)
        return n


def persister_error(code: ErrorCode, message: str | None) -> ShareError:
    """SharePartition.fetchPersisterError: how a share coordinator error reaches the client."""
    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ShareError(ErrorCode.COORDINATOR_NOT_AVAILABLE, message)
    if code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return ShareError(code, message)
    if code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
        return ShareError(ErrorCode.NOT_LEADER_OR_FOLLOWER, message)
    if code in (ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.UNSUPPORTED_VERSION):
        return ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, "Unable to complete operation due to server error.")
    return ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, message)


def _throttle_limit(max_delivery_count: int) -> int:
    return max(MIN_THROTTLE_DELIVERY_LIMIT, math.ceil(max_delivery_count / 2))


def _ack_type_map(batch: AckBatch) -> dict[int, int]:
    """fetchAckTypeMapForBatch: offset -> type; ValueError for an unknown type."""
    out = {}
    for i, t in enumerate(batch.types):
        if t != inf.GAP and t not in (inf.ACCEPT, inf.RELEASE, inf.REJECT, RENEW):
            raise ValueError(t)
        out[batch.first_offset + i] = t
    return out


def _last_offset_of_batch_with(batches: list[FetchedBatch], offset: int) -> int:
    """lastOffsetFromBatchWithRequestOffset: the end of the stored batch holding `offset`."""
    previous = None
    for b in batches:
        if offset < b.base:
            break
        previous = b
    if previous is not None and offset <= previous.last:
        return previous.last
    return offset


def _accumulate(result: list[Acquired], acquired: list[Acquired]) -> None:
    """ShareFetchUtils.accumulateAcquiredRecords: neighbours of one delivery count merge."""
    if not acquired:
        return
    first, last, count = acquired[0]
    for a in acquired[1:]:
        if a.first_offset == last + 1 and a.delivery_count == count:
            last = a.last_offset
            continue
        result.append(Acquired(first, last, count))
        first, last, count = a
    result.append(Acquired(first, last, count))


def _aborted_batches(batches: list[FetchedBatch], aborted: list[tuple[int, int]]) -> list[FetchedBatch]:
    """fetchAbortedTransactionRecordBatches: the transactional batches of aborted transactions."""
    ordered = sorted(aborted, key=lambda a: a[1])
    i = 0
    aborting: set[int] = set()
    out = []
    for b in batches:
        if b.producer_id < 0:
            continue
        while i < len(ordered) and ordered[i][1] <= b.last:
            aborting.add(ordered[i][0])
            i += 1
        if b.abort_marker:
            aborting.discard(b.producer_id)
            continue
        if b.transactional and not b.control and b.producer_id in aborting:
            out.append(b)
    return out


def _remove_ranges(acquired: list[Acquired], remove: list[FetchedBatch]) -> list[Acquired]:
    """filterRecordBatchesFromAcquiredRecords: acquired ranges without the archived batches' offsets."""
    result = []
    for a in acquired:
        pieces = [(a.first_offset, a.last_offset)]
        for b in remove:
            nxt = []
            for first, last in pieces:
                if last < b.base or first > b.last:
                    nxt.append((first, last))
                    continue
                if first < b.base:
                    nxt.append((first, b.base - 1))
                if last > b.last:
                    nxt.append((b.last + 1, last))
            pieces = nxt
        result += [Acquired(first, last, a.delivery_count) for first, last in pieces]
    return result
