"""A small durable record log for security metadata (ACLs, SCRAM credentials).

State changes only through records: each mutation appends its records (one line of JSON each,
with a CRC-32 of the line) and fsyncs before it is applied with the same `replay` that rebuilds
the state at start-up. A torn or corrupt tail (a crash mid-write) is cut off at load. When the
log holds many more records than live state, it is rewritten at load as one record per live
entry (atomically: the old log stays whole until the new one replaces it).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import structlog

from broker.node.datadir import write_atomic

log = structlog.get_logger("kaflet.security")


def _line(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return f"{zlib.crc32(body.encode()):08x} {body}\n".encode()


class RecordLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0

    def load(self, replay: Callable[[dict[str, Any]], None]) -> None:
        """Replay every whole record; cut a torn or corrupt tail."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        good = 0
        pos = 0
        while pos < len(data):
            end = data.find(b"\n", pos)
            if end < 0:
                break
            line = data[pos:end]
            try:
                crc, body = line.split(b" ", 1)
                if int(crc, 16) != zlib.crc32(body):
                    raise ValueError("crc")
                record = json.loads(body)
            except ValueError:
                break
            replay(record)
            self.count += 1
            pos = end + 1
            good = pos
        if good < len(data):
            log.warning(
                "security metadata log has a torn tail; cutting it", file=str(self.path), kept_bytes=good, dropped_bytes=len(data) - good
            )
            with open(self.path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write and fsync `records` (all or, after a crash, a prefix the load keeps whole)."""
        data = b"".join(_line(r) for r in records)
        if not data:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        self.count += data.count(b"\n")

    def compact(self, live: list[dict[str, Any]]) -> None:
        """Rewrite the log as `live` records (when it holds at least twice as many)."""
        if self.count < 2 * max(len(live), 16):
            return
        write_atomic(self.path, b"".join(_line(r) for r in live))
        os.chmod(self.path, 0o600)
        self.count = len(live)
