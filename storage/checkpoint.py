"""Kafka's offset checkpoint files (recovery points, log start offsets, cleaner offsets).

Format, as Kafka writes it: a version line (0), a count line, then `topic partition offset`
lines. Files are replaced atomically (write, fsync, rename, fsync the directory).
"""

from __future__ import annotations

import os
from pathlib import Path

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)  # a full disk: the old file stays whole, no half copy stays behind
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: Path, offsets: dict[TopicPartition, int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomic(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in `path`; an absent file is empty, a malformed one raises ValueError."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"{path}: unknown checkpoint version")
    count = int(lines[1])
    out: dict[TopicPartition, int] = {}
    for line in lines[2 : 2 + count]:
        topic, partition, offset = line.split()
        out[(topic, int(partition))] = int(offset)
    if len(out) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(out)}")
    return out
