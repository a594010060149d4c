"""Corruption at rest: CRC-check every segment and index of a data dir, and optionally repair.

Kafka trusts everything below a partition's recovery point after a clean shutdown, so a byte
flipped in a closed segment is served as data (consumers with check.crcs catch it). A CI cache
that restores a damaged data dir deserves better: `kaflet check DATA_DIR` and
`kaflet serve --verify-on-start` read every batch of every segment of every partition
directory (`-delete` and `-stray` directories are not the broker's any more and are skipped).

Checked per segment: each batch's length, magic (2) and CRC-32C, offsets that never go back,
batches that end exactly at the end of the file; per offset index, that each entry names the
position of a batch whose last offset is the entry's offset; per time index, that timestamps
never decrease and offsets stay inside the segment. Producer snapshots and checkpoints are
not checked (the broker already ignores unreadable ones).

Repair (`--repair`, and always with `--verify-on-start`): a bad region followed by a valid
batch is cut out, a bad region reaching the end of the file is truncated (a torn tail), and
both indexes are rebuilt from the log: what `Segment.scan` does at recovery.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from storage.log import parse_partition_dir
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment, iter_file_batches

DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
INDEX_INTERVAL = 4096  # the index density a rebuilt index gets (Kafka's index.interval.bytes)
INDEX_BYTES = 10 * 1024 * 1024


@dataclass
class Problem:
    file: Path
    kind: str  # "corrupt batch", "torn tail", "offsets go back", "bad index", "bad time index", "missing index"
    position: int
    detail: str
    repaired: bool = False

    def line(self) -> str:
        state = "repaired" if self.repaired else "found"
        return f"{self.file}: {self.kind} at position {self.position}: {self.detail} ({state})"


@dataclass
class Report:
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems

    @property
    def all_repaired(self) -> bool:
        return all(p.repaired for p in self.problems)


def partition_dirs(data_dir: Path) -> list[Path]:
    out = []
    for entry in sorted(os.scandir(data_dir), key=lambda e: e.name):
        if not entry.is_dir() or entry.name.endswith((DELETE_SUFFIX, STRAY_SUFFIX)):
            continue
        if parse_partition_dir(entry.name) is not None:
            out.append(Path(entry.path))
    return out


def check_segment(log_path: Path, report: Report) -> list[Problem]:
    """The problems of one segment and its indexes (nothing is changed)."""
    base = int(log_path.name[: -len(LOG_SUFFIX)])
    problems: list[Problem] = []
    starts: dict[int, int] = {}  # batch position -> its last offset
    last_offset = base - 1
    fd = os.open(log_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size

        def on_bad(at: int, resume: int | None, reason: str) -> None:
            if resume is None:
                problems.append(Problem(log_path, "torn tail", at, f"{size - at} bytes after the last whole batch: {reason}"))
            else:
                problems.append(Problem(log_path, "corrupt batch", at, f"{resume - at} bytes hold no valid batch: {reason}"))

        for _buf, _pos, header in iter_file_batches(fd, 0, size, verify=True, on_bad=on_bad):
            report.batches += 1
            if header.base_offset <= last_offset:
                problems.append(Problem(log_path, "offsets go back", -1, f"batch at offset {header.base_offset} after {last_offset}"))
            last_offset = max(last_offset, header.base_offset + header.last_offset_delta)
        report.bytes += size
        # Positions of the batches, for the index check (a second, header-only walk).
        for pos, last in _batch_positions(fd, size):
            starts[pos] = last
    finally:
        os.close(fd)
    problems += _check_offset_index(log_path.with_suffix(INDEX_SUFFIX), base, starts)
    problems += _check_time_index(log_path.with_suffix(TIME_INDEX_SUFFIX), base, last_offset)
    return problems


def _batch_positions(fd: int, size: int) -> list[tuple[int, int]]:
    """(position, last offset) of every whole batch, walking headers only (stops at a bad one)."""
    out = []
    pos = 0
    while size - pos >= 61:
        head = os.pread(fd, 61, pos)
        base, length = struct.unpack_from(">qi", head)
        (delta,) = struct.unpack_from(">i", head, 23)
        total = length + 12
        if total < 61 or pos + total > size:
            break
        out.append((pos, base + delta))
        pos += total
    return out


def _check_offset_index(path: Path, base: int, starts: dict[int, int]) -> list[Problem]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [Problem(path, "missing index", 0, "the offset index is missing")]
    if len(data) % 8:
        return [Problem(path, "bad index", len(data) - len(data) % 8, f"size {len(data)} is not a multiple of 8")]
    last = (-1, -1)
    for i, (rel, pos) in enumerate(_OFFSET_ENTRY.iter_unpack(data)):
        if rel == 0 and pos == 0 and i:
            break  # Kafka preallocates with zeros
        offset = base + rel
        if (offset, pos) <= last or starts.get(pos) != offset:
            return [Problem(path, "bad index", i * 8, f"entry ({offset}, {pos}) does not name a batch ending at that offset")]
        last = (offset, pos)
    return []


def _check_time_index(path: Path, base: int, last_offset: int) -> list[Problem]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [Problem(path, "missing index", 0, "the time index is missing")]
    if len(data) % 12:
        return [Problem(path, "bad time index", len(data) - len(data) % 12, f"size {len(data)} is not a multiple of 12")]
    last_ts = -(1 << 63)
    for i, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(data)):
        if ts == 0 and rel == 0 and i:
            break
        offset = base + rel
        if ts < last_ts or not base <= offset <= max(base, last_offset):
            return [Problem(path, "bad time index", i * 12, f"entry ({ts}, {offset}) is out of order or outside the segment")]
        last_ts = ts
    return []


def repair_segment(log_path: Path) -> None:
    """Cut corrupt regions out, truncate a torn tail, rebuild both indexes (Segment.scan)."""
    base = int(log_path.name[: -len(LOG_SUFFIX)])
    seg = Segment(log_path.parent, base, INDEX_BYTES, INDEX_INTERVAL)
    try:
        seg.scan(validate=True, index_interval=INDEX_INTERVAL)
        seg.index.write_all()
        seg.time_index.write_all()
        os.fsync(seg.fd)
    finally:
        seg.close()


def check_data_dir(data_dir: Path, *, repair: bool = False, on_problem: Callable[[Problem], None] | None = None) -> Report:
    """Check (and with `repair`, fix) every segment of every partition directory of `data_dir`."""
    report = Report()
    for directory in partition_dirs(data_dir):
        report.partitions += 1
        for name in sorted(n for n in os.listdir(directory) if n.endswith(LOG_SUFFIX) and n[: -len(LOG_SUFFIX)].isdigit()):
            report.segments += 1
            log_path = directory / name
            problems = check_segment(log_path, report)
            if problems and repair:
                repair_segment(log_path)
                for problem in problems:
                    problem.repaired = True
            for problem in problems:
                if on_problem is not None:
                    on_problem(problem)
            report.problems += problems
    return report
