"""Log compaction (cleanup.policy=compact), after Kafka's LogCleaner.

A pass has three steps:
1. `plan()` on the event loop: pick the closed segments (never the active one), check the
   dirty ratio, and duplicate their descriptors so the thread never races retention.
2. `clean()` on a worker thread: map each key in the dirty range [first dirty, end) to its
   latest offset, then rewrite the segments from the log start up to `end`, keeping a
   record only if it is the latest for its key. Tombstones are kept with a delete horizon
   (now + delete.retention.ms, stored in the batch as KIP-534 does) and dropped by a later
   pass after it. Offsets never change: surviving records keep theirs, rebuilt batches keep
   their base offset and last offset delta, and the last batch of a producer survives empty.
   Small neighbouring segments are merged into one (named by the first's base offset).
3. `swap()` on the loop: commit each group by a `.swaprange` file and a `.log.swap` rename,
   delete the old segments, rename into place (start-up completes an interrupted swap).

Rebuilt batches are written uncompressed; untouched batches keep their bytes. The key map
is a dict held in memory while a pass runs (Kafka bounds it by a dedupe buffer).

Transactions, as in Kafka: nothing at or after the last stable offset is cleaned (an open
transaction's records may still be aborted); records of aborted transactions (found in the
segments' transaction indexes) never count as a key's latest value and are dropped; markers
are kept. So an aborted transactional offset commit can never hide the committed one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from protocol.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, iter_all_records, rebuild_batch
from protocol.records import delete_horizon as batch_delete_horizon
from storage.index import OffsetIndex, TimeIndex
from storage.log import SWAP_RANGE_SUFFIX, SWAP_SUFFIX, PartitionLog
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment, iter_file_batches, segment_name, write_all

log = structlog.get_logger("kaflet.cleaner")
_INT32_MAX = 0x7FFFFFFF
CLEANED = ".cleaned"


class Aborted(Exception):
    pass


@dataclass
class SegmentRef:
    base_offset: int
    fd: int  # a duplicate, closed by the thread
    size: int
    segment: Segment


@dataclass
class CleanPlan:
    log: PartitionLog
    refs: list[SegmentRef]
    first_dirty: int
    end_offset: int
    now: int
    producer_last_offsets: dict[int, int]
    abort: threading.Event = field(default_factory=threading.Event)
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # producer id -> [(first, last offset)]

    def is_aborted(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self.aborted.get(header.producer_id)
        return bool(ranges) and any(first <= header.base_offset <= last for first, last in ranges)


@dataclass
class CleanedGroup:
    old: list[Segment]
    base_offset: int
    range_end: int
    bytes_in: int
    bytes_out: int


@dataclass
class CleanResult:
    groups: list[CleanedGroup]
    records_read: int = 0
    records_kept: int = 0


def dirty_ratio(log_: PartitionLog, first_dirty: int, end_index: int) -> float:
    clean = dirty = 0
    segments = log_.segments
    for i in range(end_index):
        seg = segments[i]
        nxt = segments[i + 1].base_offset
        if nxt <= first_dirty:
            clean += seg.size
        else:
            dirty += seg.size
    total = clean + dirty
    return dirty / total if total else 0.0


def plan(log_: PartitionLog, first_dirty: int, now: int, *, force: bool = False) -> CleanPlan | None:
    """What a pass over `log_` would clean now, or None if nothing is due."""
    config = log_.config
    if not config.compact or log_.cleaning or log_.closed:
        return None
    segments = log_.segments
    end_index = len(segments) - 1  # the active segment is never cleaned
    lag = config.min_compaction_lag_ms
    if lag > 0:
        for i in range(end_index):
            if now - segments[i].largest_timestamp < lag:
                end_index = i
                break
    lso = log_.last_stable_offset
    while end_index > 0 and segments[end_index].base_offset > lso:
        end_index -= 1  # an open transaction may still abort: clean only below it
    if end_index <= 0:
        return None
    end_offset = segments[end_index].base_offset
    first_dirty = max(first_dirty, log_.log_start_offset)
    if first_dirty >= end_offset:
        return None
    if not force and dirty_ratio(log_, first_dirty, end_index) < config.min_cleanable_dirty_ratio:
        return None
    aborted: dict[int, list[tuple[int, int]]] = {}
    for txn in log_.aborted_transactions(log_.log_start_offset, end_offset):
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    refs = [SegmentRef(s.base_offset, os.dup(s.fd), s.size, s) for s in segments[:end_index]]
    log_.cleaning = True
    return CleanPlan(log_, refs, first_dirty, end_offset, now, log_.producers.last_offsets(), aborted=aborted)


class CorruptSegment(Exception):
    """A segment to be cleaned holds a corrupt batch: the pass stops and the log is left as it is
    (Kafka's cleaner likewise marks such a partition uncleanable rather than drop what follows)."""


def _iter_ref(ref: SegmentRef, abort: threading.Event) -> Iterator[tuple[bytes, int, BatchHeader]]:
    count = 0

    def on_bad(at: int, resume: int | None, reason: str) -> None:
        raise CorruptSegment(f"segment {ref.base_offset} of the log holds a corrupt batch at position {at}: {reason}")

    for item in iter_file_batches(ref.fd, 0, ref.size, verify=True, on_bad=on_bad):
        count += 1
        if count % 1024 == 0 and abort.is_set():
            raise Aborted
        yield item


def clean(p: CleanPlan) -> CleanResult:
    """The thread's part: build the key map and write `.cleaned` files. Touches no shared state."""
    try:
        return _clean(p)
    finally:
        for ref in p.refs:
            try:
                os.close(ref.fd)
            except OSError:
                pass


def _clean(p: CleanPlan) -> CleanResult:
    config = p.log.config
    directory = p.log.dir
    latest: dict[bytes, int] = {}
    for ref, nxt in zip(p.refs, [*[r.base_offset for r in p.refs[1:]], p.end_offset], strict=True):
        if nxt <= p.first_dirty:
            continue
        for buf, pos, header in _iter_ref(ref, p.abort):
            if header.base_offset + header.last_offset_delta < p.first_dirty or header.is_control or p.is_aborted(header):
                continue
            for rec in iter_all_records(buf, pos, header):
                if rec.key is not None and rec.offset < p.end_offset:
                    latest[rec.key] = rec.offset
    result = CleanResult([])
    groups = _group(p.refs, p.end_offset, config.segment_bytes, config.segment_index_bytes)
    now = p.now
    horizon_ms = now + config.delete_retention_ms
    for group, range_end in groups:
        base = group[0].base_offset
        name = segment_name(base)
        out_path = directory / (name + LOG_SUFFIX + CLEANED)
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        index = OffsetIndex(directory / (name + INDEX_SUFFIX + CLEANED), base, config.segment_index_bytes)
        tindex = TimeIndex(directory / (name + TIME_INDEX_SUFFIX + CLEANED), base, config.segment_index_bytes)
        out_size = 0
        since = 0
        max_ts, max_ts_offset = -1, -1
        bytes_in = 0
        try:
            for ref in group:
                bytes_in += ref.size
                for buf, pos, header in _iter_ref(ref, p.abort):
                    last = header.base_offset + header.last_offset_delta
                    size = header.batch_length + LOG_OVERHEAD
                    if header.is_control or header.base_offset >= p.end_offset:
                        data: bytes | bytearray | memoryview = memoryview(buf)[pos : pos + size]
                    else:
                        records = list(iter_all_records(buf, pos, header))
                        result.records_read += len(records)
                        aborted_batch = p.is_aborted(header)
                        if aborted_batch:
                            # An aborted transaction's records go; the producer's last batch survives empty.
                            if header.producer_id >= 0 and p.producer_last_offsets.get(header.producer_id) == last:
                                data = rebuild_batch(header, [])
                            else:
                                continue
                            records = []
                        horizon = batch_delete_horizon(header)
                        kept = []
                        has_tombstone = False
                        for rec in records:
                            if rec.key is None or rec.offset < latest.get(rec.key, -1):
                                continue
                            if rec.value is None:
                                if horizon is not None and now >= horizon:
                                    continue
                                has_tombstone = True
                            kept.append(rec)
                        result.records_kept += len(kept)
                        set_horizon = has_tombstone and horizon is None
                        if aborted_batch:
                            pass  # the empty batch built above
                        elif len(kept) == len(records) and not set_horizon:
                            data = memoryview(buf)[pos : pos + size]
                        elif kept:
                            data = rebuild_batch(header, kept, horizon_ms if set_horizon else None)
                        elif header.producer_id >= 0 and p.producer_last_offsets.get(header.producer_id) == last:
                            data = rebuild_batch(header, [])
                        else:
                            continue
                    n = len(data)
                    if n < HEADER_SIZE:
                        continue
                    batch_max_ts = int.from_bytes(bytes(data[35:43]), "big", signed=True)
                    if batch_max_ts > max_ts:
                        max_ts, max_ts_offset = batch_max_ts, last
                    if since > config.index_interval_bytes:
                        index.append(last, out_size)
                        tindex.maybe_append(max_ts, max_ts_offset)
                        since = 0
                    write_all(fd, data)
                    out_size += n
                    since += n
            if max_ts >= 0:
                tindex.maybe_append(max_ts, max_ts_offset)
            os.fsync(fd)
        finally:
            os.close(fd)
        index.write_all()
        tindex.write_all()
        result.groups.append(CleanedGroup([r.segment for r in group], base, range_end, bytes_in, out_size))
    return result


def _group(refs: list[SegmentRef], end_offset: int, max_bytes: int, index_bytes: int) -> list[tuple[list[SegmentRef], int]]:
    """Consecutive segments merged while their total size fits a segment and offsets stay relative."""
    groups: list[tuple[list[SegmentRef], int]] = []
    i = 0
    n = len(refs)
    while i < n:
        group = [refs[i]]
        size = refs[i].size
        j = i + 1
        while j < n:
            nxt_end = refs[j + 1].base_offset if j + 1 < n else end_offset
            if size + refs[j].size > max_bytes or nxt_end - 1 - group[0].base_offset > _INT32_MAX:
                break
            group.append(refs[j])
            size += refs[j].size
            j += 1
        range_end = refs[j].base_offset if j < n else end_offset
        groups.append((group, range_end))
        i = j
    return groups


def swap(p: CleanPlan, result: CleanResult) -> None:
    """On the loop: replace each group's segments by its cleaned file, crash-safely."""
    log_ = p.log
    directory = log_.dir
    try:
        if log_.closed or log_.deleted:
            discard(directory, result)
            return
        for group in result.groups:
            name = segment_name(group.base_offset)
            range_file = directory / (name + SWAP_RANGE_SUFFIX)
            swap_file = directory / (name + LOG_SUFFIX + SWAP_SUFFIX)
            range_file.write_text(f"{group.range_end}\n")
            # Commit point: from here a restart finishes the swap (storage.log.complete_swap).
            os.replace(directory / (name + LOG_SUFFIX + CLEANED), swap_file)
            for seg in group.old:
                seg.delete()
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                os.replace(directory / (name + suffix + CLEANED), directory / (name + suffix))
            os.replace(swap_file, directory / (name + LOG_SUFFIX))
            range_file.unlink()
            new = Segment(directory, group.base_offset, log_.config.segment_index_bytes, log_.config.index_interval_bytes)
            new.ensure_indexes()
            log_.replace_segments(group.old, [new])
    finally:
        log_.cleaning = False


def discard(directory: Path, result: CleanResult) -> None:
    for group in result.groups:
        name = segment_name(group.base_offset)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            try:
                (directory / (name + suffix + CLEANED)).unlink()
            except FileNotFoundError:
                pass


def compact_now(log_: PartitionLog, first_dirty: int, now: int) -> int | None:
    """One whole pass synchronously (tests, tools). Returns the new first dirty offset."""
    p = plan(log_, first_dirty, now, force=True)
    if p is None:
        return None
    try:
        result = clean(p)
    except BaseException:
        log_.cleaning = False
        raise
    swap(p, result)
    return p.end_offset
