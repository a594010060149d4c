"""Idempotent producers, per partition: the last five batches of each producer id and epoch.

The checks follow Kafka's ProducerStateManager: a batch whose sequence range equals one of
the last five of its producer (same epoch) is a duplicate and is answered with the original
offsets; an older epoch is INVALID_PRODUCER_EPOCH; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER;
a new epoch must start at sequence 0; an unknown producer may start anywhere.

Transactions: `ongoing` maps each producer with an open transaction in this partition to the
offset of its first transactional batch; the smallest of those is the last stable offset
(Kafka's `firstUnstableOffset`). A COMMIT or ABORT marker closes the producer's transaction.

The state is snapshotted to `<offset>.snapshot` at segment roll and clean shutdown and
rebuilt at load from the latest snapshot plus the batch headers after it. The snapshot
layout is kaflet's own (version 102; 101 is still read): unlike Kafka's (which keeps one
batch per producer) it keeps all five, so retries after a restart are still recognised, and
the first offset of each producer's open transaction (-1 for none).
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader, crc32c
from storage.errors import InvalidProducerEpoch, OutOfOrderSequence

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 102
_OLD_SNAPSHOT_VERSION = 101
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhqb")
_TXN = struct.Struct(">q")
_BATCH = struct.Struct(">iiqiq")
_INT32_MAX = 0x7FFFFFFF


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerEntry:
    __slots__ = ("batches", "epoch", "last_timestamp", "producer_id")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerState:
    def __init__(self, name: str) -> None:
        self.name = name  # "topic-partition", for messages
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def first_unstable_offset(self) -> int | None:
        ongoing = self.ongoing
        if not ongoing:
            return None
        return min(ongoing.values())

    def check(self, header: BatchHeader, offset: int) -> BatchMetadata | None:
        """Validate a client batch before it is appended; returns the original of a duplicate."""
        pid = header.producer_id
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        entry = self.producers.get(pid)
        if header.is_control:
            # Transaction markers carry no sequence; Kafka checks only their epoch.
            if entry is not None and epoch < entry.epoch:
                raise InvalidProducerEpoch(
                    f"Epoch of producer {pid} at offset {offset} in {self.name} is {epoch}, which is smaller than the last seen epoch {entry.epoch}"
                )
            return None
        if entry is not None:
            dup = entry.find_duplicate(epoch, first_seq, header.last_sequence)
            if dup is not None:
                return dup
            if epoch < entry.epoch:
                raise InvalidProducerEpoch(
                    f"Epoch of producer {pid} at offset {offset} in {self.name} is {epoch}, which is smaller than the last seen epoch {entry.epoch}"
                )
        if entry is None or entry.epoch == NO_PRODUCER_EPOCH:
            return None  # unknown producer (or one whose records are gone): any sequence starts it
        if epoch != entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequence(
                    f"Invalid sequence number for new epoch of producer {pid} at offset {offset} in partition {self.name}: "
                    f"{epoch} (request epoch), {first_seq} (seq. number), {entry.epoch} (current producer epoch)"
                )
        elif not _in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequence(
                f"Out of order sequence number for producer {pid} at offset {offset} in partition {self.name}: "
                f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence number)"
            )
        return None

    def update(self, header: BatchHeader, last_offset: int, timestamp: int) -> None:
        """Record an appended batch (or one replayed from the log)."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, header.producer_epoch)
        elif header.producer_epoch != entry.epoch:
            if header.producer_epoch < entry.epoch:
                return  # a replayed batch of a fenced epoch changes nothing
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(header.base_sequence, header.last_sequence, last_offset, header.last_offset_delta, timestamp)
            )
        entry.last_timestamp = timestamp

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch is below the log start (Kafka does the same)."""
        gone = [pid for pid, e in self.producers.items() if 0 <= e.last_offset < log_start_offset and pid not in self.ongoing]
        for pid in gone:
            del self.producers[pid]

    def expire(self, now_ms: int, expiration_ms: int) -> None:
        gone = [pid for pid, e in self.producers.items() if now_ms - e.last_timestamp >= expiration_ms and pid not in self.ongoing]
        for pid in gone:
            del self.producers[pid]

    def last_offsets(self) -> dict[int, int]:
        return {pid: e.last_offset for pid, e in self.producers.items()}

    # -- snapshots ------------------------------------------------------------------------

    def encode(self) -> bytes:
        body = bytearray(_HEAD.size)
        for pid, e in self.producers.items():
            body += _ENTRY.pack(pid, e.epoch, e.last_timestamp, len(e.batches))
            for m in e.batches:
                body += _BATCH.pack(m.first_seq, m.last_seq, m.last_offset, m.offset_delta, m.timestamp)
            body += _TXN.pack(self.ongoing.get(pid, -1))
        struct.pack_into(">i", body, 6, len(self.producers))
        struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, crc32c(memoryview(body)[6:]))
        return bytes(body)

    @classmethod
    def decode(cls, name: str, data: bytes) -> ProducerState:
        if len(data) < _HEAD.size:
            raise ValueError("snapshot too short")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version not in (SNAPSHOT_VERSION, _OLD_SNAPSHOT_VERSION):
            raise ValueError(f"snapshot version {version} is not {SNAPSHOT_VERSION}")
        if crc != crc32c(memoryview(data)[6:]):
            raise ValueError("snapshot CRC mismatch")
        state = cls(name)
        p = _HEAD.size
        for _ in range(count):
            pid, epoch, last_ts, n = _ENTRY.unpack_from(data, p)
            p += _ENTRY.size
            entry = ProducerEntry(pid, epoch)
            entry.last_timestamp = last_ts
            for _b in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, p)))
                p += _BATCH.size
            if version == SNAPSHOT_VERSION:
                first = _TXN.unpack_from(data, p)[0]
                p += _TXN.size
                if first >= 0:
                    state.ongoing[pid] = first
            state.producers[pid] = entry
        if p != len(data):
            raise ValueError("snapshot has trailing bytes")
        return state


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(SNAPSHOT_SUFFIX) and name[:-9].isdigit():
            out.append((int(name[:-9]), Path(entry.path)))
    return sorted(out)


def write_snapshot(directory: Path, offset: int, state: ProducerState, fsync: bool = False) -> None:
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(state.encode())
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
