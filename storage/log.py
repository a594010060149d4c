"""A partition log: segments in Kafka's layout, appends, reads, retention and recovery.

The directory `<topic>-<partition>` holds `<base offset>.log` segments with their `.index`
and `.timeindex`, producer-state `.snapshot` files and `partition.metadata`. Everything here
runs on the event loop and is synchronous; fsync and compaction run on worker threads
driven by the LogManager.
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from protocol.records import (
    CONTROL_BIT,
    HEADER,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    InvalidBatch,
    decode_varint,
    iter_all_records,
    set_log_append_time,
    set_max_timestamp,
)
from storage.checkpoint import fsync_dir
from storage.config import LogConfig
from storage.errors import OffsetOutOfRange, StorageError
from storage.producer_state import ProducerState, list_snapshots, write_snapshot
from storage.segment import LOG_SUFFIX, NO_ROOM, FileRange, Segment, iter_file_batches, segment_name
from storage.txn_index import AbortedTxn

log = structlog.get_logger("kaflet.storage")

LEADER_EPOCH = 0  # a single broker: every partition is led at epoch 0
SWAP_SUFFIX = ".swap"
SWAP_RANGE_SUFFIX = ".swaprange"
_I32 = struct.Struct(">i")
_BASE_LEN_EPOCH = struct.Struct(">qii")
_HEADER_UNPACK = HEADER.unpack_from
_new = tuple.__new__
_INT32_MAX = 0x7FFFFFFF
_SNAPSHOTS_KEPT = 2
# The page cache is released in steps of this much (one fadvise call per step), not per append.
_RELEASE_STEP = 8 * 1024 * 1024
_I16 = struct.Struct(">h")
ABORT, COMMIT = 0, 1


def now_ms() -> int:
    return int(time.time() * 1000)


def control_type(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """0 (ABORT) or 1 (COMMIT) for the marker batch at `pos`, -1 if its key is not a marker's.
    Control batches are never compressed: the first record's key is read in place."""
    try:
        p = pos + HEADER_SIZE
        _length, p = decode_varint(buf, p)
        p += 1  # attributes
        _ts, p = decode_varint(buf, p)
        _delta, p = decode_varint(buf, p)
        key_length, p = decode_varint(buf, p)
        if key_length < 4:
            return -1
        return _I16.unpack_from(buf, p + 2)[0]
    except (IndexError, struct.error, InvalidBatch):
        return -1


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime topics
    log_start_offset: int
    size: int = 0
    duplicate: bool = False


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


MAX_DIR_NAME = 255  # bytes of a file name on every file system kaflet runs on


def renamed_dir_name(topic: str, partition: int, suffix: str) -> str:
    """`<topic>-<partition>.<unique id><suffix>` for a directory set aside (`-delete`, `-stray`),
    with the topic cut so the name fits 255 bytes, as Kafka's LocalLog names them: a legal
    topic name (up to 249 characters) plus the suffix would not fit otherwise."""
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: max(0, MAX_DIR_NAME - len(tail))] + tail


def read_topic_id(directory: Path) -> str | None:
    """The topic id (Kafka's base64 form) in a partition directory's partition.metadata, if any."""
    try:
        text = (directory / "partition.metadata").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "topic_id":
            return value.strip()
    return None


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def kafka_uuid(value: uuid.UUID) -> str:
    """A UUID as Kafka prints it (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


class PartitionLog:
    """One partition's log. Create with `PartitionLog.open(...)`."""

    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig) -> None:
        # Stamped on every batch appended; a cluster bumps it when leadership moves (broker/cluster).
        self.leader_epoch = LEADER_EPOCH
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.name = partition_dir_name(topic, partition)
        self.config = config
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self.next_offset = 0
        self.producers = ProducerState(self.name)
        self._recovered_from: int | None = None  # base offset of the first segment recovery scanned
        self._waiters: set[Callable[[int], None]] = set()
        self.cleaning = False  # a compaction pass is working on the closed segments
        self.corrupt_regions = 0  # regions iter_batches skipped as corrupt (logged at ERROR)
        self.closed = False
        self.deleted = False
        # An empty log not yet on disk (open(defer_create=True)): the first write makes its files.
        self.deferred = False
        self.deferred_topic_id: uuid.UUID | None = None
        self.sync_new_dirs = False  # --fsync always: a materialized log's directory entries fsynced
        # Hooks the LogManager sets: a rolled segment to fsync; the log start moved.
        self.on_roll: Callable[[PartitionLog, Segment], None] | None = None
        self.on_log_start_changed: Callable[[PartitionLog], None] | None = None
        # Set by the LogManager when metrics are on: a histogram of append durations in seconds,
        # any object with a `pending` list its owner folds (broker.metrics.stats.Histogram); fed
        # inline because a call per append costs more than the append to `pending`.
        self.append_histogram: Any = None
        # Set by the LogManager while a fault rule is armed: called before each write, it raises
        # the injected OSError (broker/network/faults.py is the one place faults come from).
        self.check_write: Callable[[str, int], None] | None = None
        # Set by the LogManager (--log-page-cache-bytes): the newest bytes of the active segment
        # kept in the page cache; older pages are handed back once written (0: the OS decides).
        self.page_cache_bytes = 0
        self.run_advice: Callable[..., object] | None = None  # where release_cache's fadvise runs (None: here)

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        topic_id: uuid.UUID | None = None,
        log_start_offset: int = 0,
        recovery_point: int | None = None,
        clean: bool = True,
        defer_create: bool = False,
    ) -> PartitionLog:
        """Open (or create) the log in `directory`. After an unclean shutdown, segments from the
        one holding `recovery_point` onward are validated batch by batch and a bad tail is cut.

        With `defer_create`, a log whose directory does not exist yet is created in memory only:
        its directory and files are made by the first write (`materialize`). A fresh data dir's
        100 internal partitions (__consumer_offsets, __transaction_state) cost nothing on disk
        until a group or transaction lands in one."""
        self = cls(directory, topic, partition, config)
        created = not directory.exists()
        if created and defer_create:
            self._add_segment(Segment.deferred(directory, log_start_offset, config.segment_index_bytes, config.index_interval_bytes))
            self.next_offset = self.log_start_offset = self.recovery_point = log_start_offset
            self.producers.truncate_head(log_start_offset)
            self.deferred_topic_id = topic_id
            self.deferred = True
            return self
        directory.mkdir(parents=True, exist_ok=True)
        if topic_id is not None and (created or not (directory / "partition.metadata").exists()):
            (directory / "partition.metadata").write_text(f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\n")
        if created:
            # A directory this call made holds nothing to clean, recover or replay: one new
            # segment is the whole log (a fresh data dir makes 100 of these for the internal topics).
            self._add_segment(Segment(directory, log_start_offset, config.segment_index_bytes, config.index_interval_bytes, create=True))
            self.next_offset = self.log_start_offset = self.recovery_point = log_start_offset
            self.producers.truncate_head(log_start_offset)
            return self
        self._clean_leftovers()
        bases = sorted(int(p.name[:-4]) for p in os.scandir(directory) if p.name.endswith(LOG_SUFFIX) and p.name[:-4].isdigit())
        index_bytes = config.segment_index_bytes
        for base in bases:
            self._add_segment(Segment(directory, base, index_bytes, config.index_interval_bytes))
        if not self.segments:
            self._add_segment(Segment(directory, log_start_offset, index_bytes, config.index_interval_bytes, create=True))
        self.recovery_point = recovery_point if recovery_point is not None else 0
        trusted = clean and recovery_point is not None
        if not trusted or not self.active.load_tail(config.index_interval_bytes):
            if trusted:
                # A clean shutdown left a tail that is not whole batches: check the active segment.
                self.recovery_point = min(self.recovery_point, self.active.base_offset)
            self._recover()
        self.next_offset = self.active.next_offset
        if self.active.size == 0:
            self.next_offset = self.active.base_offset
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        if self.log_start_offset > self.next_offset:
            # Everything below the checkpointed start is gone: start afresh there (as Kafka does).
            self._truncate_fully_and_start_at(self.log_start_offset)
        self.recovery_point = min(max(self.recovery_point, self.log_start_offset), self.next_offset)
        self._load_producer_state()
        return self

    def materialize(self) -> None:
        """Make the directory and files of a log opened with `defer_create` (before its first
        write). On a full disk what was made is removed again and OSError raised."""
        if not self.deferred:
            return
        seg = self.segments[0]
        made_dir = False
        try:
            self.dir.mkdir(parents=True, exist_ok=False)
            made_dir = True
            if self.deferred_topic_id is not None:
                (self.dir / "partition.metadata").write_text(f"version: 0\ntopic_id: {kafka_uuid(self.deferred_topic_id)}\n")
            seg.create_files()
            if self.sync_new_dirs:
                fsync_dir(self.dir)  # its first segment's entry
                fsync_dir(self.dir.parent)  # the partition directory's entry
        except OSError:
            if made_dir:
                shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.deferred = False

    def _add_segment(self, seg: Segment) -> None:
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    def _clean_leftovers(self) -> None:
        """Finish or undo what a crash interrupted: compaction swaps, temporary files."""
        names = os.listdir(self.dir)
        for name in names:
            if name.endswith((".cleaned", ".deleted", ".tmp")):
                _unlink(self.dir / name)
        for name in names:
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                complete_swap(self.dir, int(name.split(".", 1)[0]))
        for name in os.listdir(self.dir):
            if name.endswith(SWAP_RANGE_SUFFIX):
                _unlink(self.dir / name)

    def _recover(self) -> None:
        """Validate segments from the recovery point on; cut the log at the first bad batch."""
        start = max(0, bisect_right(self._bases, self.recovery_point) - 1)
        interval = self.config.index_interval_bytes
        if start < len(self.segments):
            self._recovered_from = self.segments[start].base_offset
        for i in range(start, len(self.segments)):
            seg = self.segments[i]
            before = seg.size
            dropped = seg.scan(validate=True, index_interval=interval)
            seg.index.write_all()
            seg.time_index.write_all()
            # The transaction index is rebuilt by the producer-state replay (_load_producer_state).
            seg.txn_index.truncate_to(seg.base_offset)
            later = self.segments[i + 1 :]
            if dropped:
                later_bytes = sum(s.size for s in later)
                log.warning(
                    "truncated corrupt log tail",
                    partition=self.name,
                    segment=seg.log_path.name,
                    bytes_dropped=dropped + later_bytes,
                    valid_bytes=before - dropped,
                    next_offset=seg.next_offset,
                )
                for s in later:
                    s.delete()
                del self.segments[i + 1 :]
                del self._bases[i + 1 :]
                break

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self.materialize()
        for seg in self.segments:
            seg.delete()
        self.segments.clear()
        self._bases.clear()
        self._add_segment(Segment(self.dir, offset, self.config.segment_index_bytes, self.config.index_interval_bytes, create=True))
        self.next_offset = offset

    def _load_producer_state(self) -> None:
        """Latest usable snapshot, then the batch headers after it (no later than the first
        recovered segment, whose transaction index the replay rebuilds)."""
        snapshots = list_snapshots(self.dir)
        state = None
        start = self.log_start_offset
        for offset, path in reversed(snapshots):
            if offset > self.next_offset:
                _unlink(path)
                continue
            if self._recovered_from is not None and offset > self._recovered_from:
                continue
            try:
                state = ProducerState.decode(self.name, path.read_bytes())
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable producer snapshot", partition=self.name, file=path.name, reason=str(exc))
                continue
            start = max(offset, self.log_start_offset)
            break
        self.producers = state if state is not None else ProducerState(self.name)
        if start < self.next_offset:
            update = self.producers.update
            for buf, pos, header in self.iter_batches(start):
                if header.producer_id >= 0:
                    last = header.base_offset + header.last_offset_delta
                    update(header, last, header.max_timestamp)
                    if header.attributes & TRANSACTIONAL_BIT:
                        self._track_transaction(header, buf, pos, header.base_offset, last, replaying=True)
        self.producers.truncate_head(self.log_start_offset)
        self._recovered_from = None

    # -- state ------------------------------------------------------------------------------

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.next_offset

    @property
    def high_watermark(self) -> int:
        return self.next_offset  # one replica: everything appended is committed

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark."""
        if self.producers.ongoing:
            return min(self.producers.ongoing.values())
        return self.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, start={self.log_start_offset}, end={self.next_offset})"

    # -- appending --------------------------------------------------------------------------

    def append(
        self,
        batch: bytearray | bytes | memoryview,
        *,
        now: int | None = None,
        check_producer: bool = True,
        max_timestamp: int | None = None,
    ) -> AppendResult:
        """Append one validated batch: assign offsets by patching baseOffset in place, write it to
        the active segment (no fsync), update indexes and producer state, wake fetches. A batch
        that is not a bytearray is not copied (a produced 1 MiB batch): its first 16 bytes
        (base offset, length, leader epoch: outside the CRC) are written patched, the rest as is,
        in one writev. A header rewritten copies: on a LogAppendTime topic (the append time),
        or when validation read a `max_timestamp` from the records other than the header's, or
        the header claims LogAppendTime on a CreateTime topic (Kafka's setMaxTimestamp).

        A batch of an idempotent producer is checked first: a duplicate of one of its last five
        batches is not appended and its original offsets are returned (`duplicate=True`); a
        sequence gap or old epoch raises OutOfOrderSequence / InvalidProducerEpoch."""
        if self.closed:
            raise StorageError(f"log {self.name} is closed")
        if self.deferred:
            self.materialize()
        histogram = self.append_histogram
        started = time.perf_counter() if histogram is not None else 0.0
        config = self.config
        header = _new(BatchHeader, _HEADER_UNPACK(batch, 0))
        # A header that agrees with its records (the usual case) is appended as it came.
        restamp = (
            max_timestamp is not None and not config.log_append_time and (header[8] != max_timestamp or header[5] & TIMESTAMP_TYPE_BIT)
        )
        if (restamp or config.log_append_time) and not isinstance(batch, bytearray):
            batch = bytearray(batch)
        if restamp:
            set_max_timestamp(batch, 0, max_timestamp)  # type: ignore[arg-type]
            header = _new(BatchHeader, _HEADER_UNPACK(batch, 0))
        base = self.next_offset
        pid = header[9]
        if pid >= 0 and check_producer:
            dup = self.producers.check(header, base)
            if dup is not None:
                return AppendResult(dup.first_offset, dup.last_offset, dup.timestamp, self.log_start_offset, 0, True)
        size = len(batch)
        last = base + header[6]
        max_ts = header[8]
        append_time = -1
        if config.log_append_time:
            append_time = now if now is not None else now_ms()
            set_log_append_time(batch, 0, append_time)
            max_ts = append_time
        seg = self.segments[-1]
        if isinstance(batch, bytearray):
            _BASE_LEN_EPOCH.pack_into(batch, 0, base, header[1], self.leader_epoch)
            data: Any = batch
        else:
            data = (_BASE_LEN_EPOCH.pack(base, header[1], self.leader_epoch), memoryview(batch)[_BASE_LEN_EPOCH.size :])
        try:
            if self.check_write is not None:
                self.check_write(self.topic, self.partition)  # an injected disk fault (broker/network/faults.py)
            if seg.size and self._should_roll(seg, size, max_ts, last, now):
                seg = self.roll()
            seg.append(data, last, max_ts, config.index_interval_bytes)
        except OSError as exc:
            # Leave no partial batch behind (e.g. the disk filled up mid-write): the log stays
            # exactly as it was, and the next append once space is freed goes on from there.
            try:
                os.ftruncate(seg.fd, seg.size)
            except OSError:
                pass
            raise StorageError(f"cannot append to {self.name}: {exc}") from exc
        self.next_offset = last + 1
        window = self.page_cache_bytes
        if window and seg.size - seg.cache_released > window + _RELEASE_STEP:
            seg.release_cache(seg.size - window, self.run_advice)
        if pid >= 0:
            self.producers.update(header, last, max_ts)
            if header[5] & TRANSACTIONAL_BIT:
                self._track_transaction(header, batch, 0, base, last)
        if self._waiters:
            for waiter in tuple(self._waiters):
                waiter(size)
        if histogram is not None:
            histogram.pending.append(time.perf_counter() - started)
        return AppendResult(base, last, append_time, self.log_start_offset, size)

    def _track_transaction(self, header: BatchHeader, buf: Any, pos: int, base: int, last: int, replaying: bool = False) -> None:
        """A transactional batch opens its producer's transaction here; a marker closes it, and
        an ABORT marker adds the transaction to the active segment's index (when replaying,
        unless the index already has it)."""
        ongoing = self.producers.ongoing
        pid = header[9]
        if not header[5] & CONTROL_BIT:
            if pid not in ongoing:
                ongoing[pid] = base
            return
        first = ongoing.pop(pid, None)
        if first is None or control_type(buf, pos) != ABORT:
            return  # a marker for a transaction with no data here (or a duplicate) changes nothing
        lso = min(ongoing.values()) if ongoing else last + 1
        seg = self.segments[self._segment_index(last)]
        if replaying and seg.txn_index.last_offset >= last:
            return
        seg.txn_index.append(AbortedTxn(pid, first, last, lso))

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), from the transaction
        indexes of the segment holding `fetch_offset` onward (Kafka's collectAbortedTxns)."""
        out: list[AbortedTxn] = []
        segments = self.segments
        for i in range(self._segment_index(fetch_offset), len(segments)):
            if segments[i].txn_index.collect(fetch_offset, upper_bound, out):
                break
        return out

    def _should_roll(self, seg: Segment, size: int, max_ts: int, last: int, now: int | None) -> bool:
        """Kafka's LogSegment.shouldRoll: size, time since the first batch's timestamp (or the
        segment's creation when it has none), full indexes, offsets beyond a relative int32."""
        config = self.config
        if seg.size > config.segment_bytes - size:
            return True
        first_ts = seg.first_batch_timestamp
        if first_ts is None:
            first_ts = seg.first_timestamp()
        if first_ts >= 0:
            waited = max_ts - first_ts
        else:
            waited = (now if now is not None else now_ms()) - seg.created_ms
        if waited > config.segment_ms:
            return True
        return (
            len(seg.index.keys) >= seg.index.max_entries
            or len(seg.time_index.keys) >= seg.time_index.max_entries
            or last - seg.base_offset > _INT32_MAX
        )

    def roll(self) -> Segment:
        """Close the active segment for appends and start a new one at the log end. On a full
        disk the new segment's files are removed again and OSError raised: nothing changed."""
        old = self.segments[-1]
        if old.size == 0:
            return old
        try:
            old.on_roll()
        except OSError as exc:
            # Its index files can be rebuilt from the log; the entries stay in memory.
            log.warning("cannot write the indexes of a rolled segment", partition=self.name, error=str(exc))
        seg = Segment.create_or_undo(self.dir, self.next_offset, self.config.segment_index_bytes, self.config.index_interval_bytes)
        self._add_segment(seg)
        try:
            self.snapshot_producers()
        except OSError as exc:
            # The producer state is rebuilt from the log when no snapshot covers it.
            log.warning("cannot write a producer snapshot", partition=self.name, error=str(exc))
        if self.on_roll is not None:
            self.on_roll(self, old)
        return seg

    # -- waiting for data -------------------------------------------------------------------

    def add_waiter(self, waiter: Callable[[int], None]) -> None:
        """`waiter(appended_bytes)` is called after each append until removed."""
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: Callable[[int], None]) -> None:
        self._waiters.discard(waiter)

    def wake_waiters(self) -> None:
        """Every waiter answers now, as on a close (`waiter(0)`): who may read this log changed."""
        for waiter in tuple(self._waiters):
            waiter(0)

    # -- reading ----------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    def read(self, offset: int, max_bytes: int, min_one: bool = True, max_offset: int | None = None) -> memoryview | None:
        """Stored bytes of whole batches from the one containing `offset`, up to `max_bytes`; the
        first batch is returned even when larger if `min_one` (Kafka's rule for the first
        partition of a fetch). None at the log end, or at `max_offset` (read_committed reads
        stop at the last stable offset). OffsetOutOfRange outside the log."""
        return self._read(offset, max_bytes, min_one, max_offset, False)  # type: ignore[return-value]

    def read_range(self, offset: int, max_bytes: int, min_one: bool = True, max_offset: int | None = None) -> FileRange | None:
        """The batches `read` would return, as a range of their segment file, not read (Fetch
        sends it with sendfile)."""
        return self._read(offset, max_bytes, min_one, max_offset, True)  # type: ignore[return-value]

    def _read(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None, ranged: bool) -> memoryview | FileRange | None:
        if offset < self.log_start_offset or offset > self.next_offset:
            raise OffsetOutOfRange(
                f"Received request for offset {offset} for partition {self.name}, but we only have log segments "
                f"in the range {self.log_start_offset} to {self.next_offset}."
            )
        if offset == self.next_offset:
            return None
        if max_offset is not None:
            if max_offset >= self.next_offset:
                max_offset = None
            elif offset >= max_offset:
                return None
        segments = self.segments
        for i in range(self._segment_index(offset), len(segments)):
            if max_offset is not None and segments[i].base_offset >= max_offset:
                return None
            data = segments[i].read_range(offset, max_bytes, min_one, max_offset)
            if data is NO_ROOM:
                return None  # the batch at `offset` does not fit: never one from a later segment
            if data is not None:
                if ranged or data.data is not None:
                    return data if ranged else data.data
                return memoryview(data.read())
        return None

    def iter_batches(self, start_offset: int | None = None, *, verify: bool = False) -> Iterator[tuple[bytes, int, BatchHeader]]:
        """(buffer, position, header) of every batch from the log start (or the batch holding
        `start_offset`), reading segments in 5 MiB chunks. Iterate without awaiting in between.

        A region that holds no valid batch (an implausible header, or with `verify` a CRC-32C
        mismatch) is logged at ERROR with its file and position and skipped: the iteration
        goes on at the next valid batch, so one corrupt batch never hides those after it.
        This is the coordinator's replay path: per batch, one `unpack_from` and one tuple."""
        start = self.log_start_offset if start_offset is None else start_offset
        segments = list(self.segments)
        first = self._segment_index(start)
        for i in range(first, len(segments)):
            seg = segments[i]
            fd = seg.fd
            if fd < 0:
                return
            pos = seg.locate(start) if i == first else 0

            def on_bad(at: int, resume: int | None, reason: str, seg: Segment = seg) -> None:
                self.corrupt_regions += 1
                log.error(
                    "skipping corrupt log data",
                    partition=self.name,
                    file=str(seg.log_path),
                    position=at,
                    bytes_skipped=(resume if resume is not None else seg.size) - at,
                    reason=reason,
                )

            batches = iter_file_batches(fd, pos, seg.size, verify=verify, on_bad=on_bad)
            if i == first:
                for item in batches:
                    header = item[2]
                    if header[0] + header[6] >= start:
                        yield item
                        break
            yield from batches

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after `timestamp`, via the time index."""
        start = self.log_start_offset
        for seg in self.segments:
            if seg.largest_timestamp < timestamp:
                continue
            from_offset = max(seg.time_index.lookup(timestamp), start)
            pos = seg.locate(from_offset)
            for buf, p, header in seg.iter_batches(pos, seg.size, chunk=64 * 1024):
                if header.max_timestamp < timestamp or header.base_offset + header.last_offset_delta < start:
                    continue
                for rec in iter_all_records(buf, p, header):
                    if rec.timestamp >= timestamp and rec.offset >= start:
                        return rec.timestamp, rec.offset
            return None
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the earliest record holding the largest timestamp (ListOffsets -3)."""
        best: Segment | None = None
        for seg in self.segments:
            seg.ensure_indexes()
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        target = best.max_timestamp
        for buf, p, header in best.iter_batches(best.locate(best.offset_of_max_timestamp), best.size, chunk=64 * 1024):
            if header.max_timestamp != target:
                continue
            for rec in iter_all_records(buf, p, header):
                if rec.timestamp == target and rec.offset >= self.log_start_offset:
                    return rec.timestamp, rec.offset
        return None

    # -- the log start offset: retention and DeleteRecords -----------------------------------

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset to `offset` (<= high watermark); returns the new start."""
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"Cannot increment the log start offset to {offset} of partition {self.name} since it is larger "
                f"than the high watermark {self.high_watermark}"
                if offset >= 0
                else f"The offset {offset} for partition {self.name} is not valid"
            )
        if offset > self.log_start_offset:
            self._set_log_start(offset)
            if not self.cleaning:  # otherwise the next retention pass deletes them
                self._delete_segments_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset)
        return self.log_start_offset

    def _set_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        self.recovery_point = max(self.recovery_point, offset)
        self.producers.truncate_head(offset)
        if self.on_log_start_changed is not None:
            self.on_log_start_changed(self)

    def delete_old_segments(self, now: int | None = None) -> int:
        """Retention: whole segments below the log start; with cleanup.policy=delete also those
        past retention.bytes and retention.ms (Kafka's order). Returns how many were deleted."""
        if self.cleaning or self.closed:
            return 0
        now = now_ms() if now is None else now
        start = self.log_start_offset
        deleted = self._delete_segments_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= start)
        config = self.config
        if config.delete:
            if config.retention_bytes >= 0:
                diff = self.size_bytes - config.retention_bytes
                if diff > 0:
                    budget = [diff]

                    def over_size(seg: Segment, nxt: Segment | None) -> bool:
                        if budget[0] - seg.size >= 0:
                            budget[0] -= seg.size
                            return True
                        return False

                    deleted += self._delete_segments_while(over_size)
            if config.retention_ms >= 0:
                deleted += self._delete_segments_while(lambda seg, nxt: now - seg.largest_timestamp > config.retention_ms)
        return deleted

    def _delete_segments_while(self, predicate: Callable[[Segment, Segment | None], bool]) -> int:
        """Delete segments from the oldest while `predicate(segment, next)` holds; the active
        segment may go too (a new empty one is rolled first), as in Kafka."""
        segments = self.segments
        count = 0
        while count < len(segments):
            seg = segments[count]
            nxt = segments[count + 1] if count + 1 < len(segments) else None
            if nxt is None and seg.size == 0:
                break
            if not predicate(seg, nxt):
                break
            count += 1
        if not count:
            return 0
        if count == len(segments):
            self.roll()
        doomed = self.segments[:count]
        del self.segments[:count]
        del self._bases[:count]
        for seg in doomed:
            seg.delete()
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self._set_log_start(new_start)
        for offset, path in list_snapshots(self.dir)[:-_SNAPSHOTS_KEPT]:
            if offset < self.log_start_offset:
                _unlink(path)
        return count

    # -- durability -------------------------------------------------------------------------

    def unflushed(self) -> list[tuple[Segment, int]]:
        """Segments holding bytes not yet fsynced, with the size an fsync now would cover."""
        return [(s, s.size) for s in self.segments if s.size > s.flushed_size and s.fd >= 0]

    def flush(self) -> None:
        """fsync everything written so far (synchronously) and advance the recovery point."""
        end = self.next_offset
        for seg, size in self.unflushed():
            os.fsync(seg.fd)
            seg.flushed_size = max(seg.flushed_size, size)
        self.recovery_point = max(self.recovery_point, end)

    def snapshot_producers(self, fsync: bool = False) -> None:
        if self.deferred:
            return  # never written: no producer state, no directory to hold a snapshot
        write_snapshot(self.dir, self.next_offset, self.producers, fsync)
        snapshots = list_snapshots(self.dir)
        for _offset, path in snapshots[:-_SNAPSHOTS_KEPT]:
            _unlink(path)

    # -- lifecycle --------------------------------------------------------------------------

    def replace_segments(self, old: list[Segment], new: list[Segment]) -> None:
        """Swap in compacted segments for the ones they were cleaned from (same offset range)."""
        first = self.segments.index(old[0])
        assert self.segments[first : first + len(old)] == old
        self.segments[first : first + len(old)] = new
        self._bases = [s.base_offset for s in self.segments]

    def close(self) -> None:
        """Clean shutdown: fsync data and indexes, snapshot producer state, close files."""
        if self.closed:
            return
        failure: OSError | None = None
        try:
            self.flush()
            for seg in self.segments:
                seg.on_roll()
                seg.index.fsync()
                seg.time_index.fsync()
                seg.txn_index.fsync()
            self.snapshot_producers(fsync=True)
        except OSError as exc:
            failure = exc  # a full or broken disk: the files still get closed; the next start recovers
        for seg in self.segments:
            try:
                seg.close()
            except OSError as exc:
                failure = failure or exc
                if seg.fd >= 0:
                    seg.release_fd()
        self.closed = True
        self._waiters.clear()
        if failure is not None:
            raise failure

    def close_for_delete(self) -> None:
        """The topic is being deleted: close files without flushing anything."""
        for seg in self.segments:
            if seg.fd >= 0:
                seg.release_fd()  # a fetch still sending from it keeps it open until done
        self.closed = True
        self.deleted = True
        for waiter in tuple(self._waiters):
            waiter(0)
        self._waiters.clear()


def complete_swap(directory: Path, base: int) -> None:
    """Finish a compaction swap a crash interrupted: the `.swap` replaced the segments listed
    in its `.swaprange` file ([base, end)); delete those and rename the swap into place."""
    name = segment_name(base)
    swap = directory / (name + LOG_SUFFIX + SWAP_SUFFIX)
    range_file = directory / (name + SWAP_RANGE_SUFFIX)
    try:
        end = int(range_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        # The range is written before the swap file is created, so without it the swap was
        # never committed: the old segments are intact.
        _unlink(swap)
        return
    for entry in os.listdir(directory):
        stem, _, suffix = entry.partition(".")
        if stem.isdigit() and base <= int(stem) < end and suffix in ("log", "index", "timeindex", "txnindex"):
            _unlink(directory / entry)
    os.replace(swap, directory / (name + LOG_SUFFIX))
    _unlink(range_file)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
