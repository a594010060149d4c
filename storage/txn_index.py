"""The transaction index beside each segment: `<base offset>.txnindex`, Kafka's format.

One 34-byte entry per aborted transaction whose ABORT marker is in the segment: version
(int16, 0), producer id (int64), first offset (int64), last offset (the marker's, int64) and
the partition's last stable offset once the transaction completed (int64), big-endian, in the
order the markers were appended. As in Kafka the file exists only once a segment has an entry.

Entries are written with one `write` when the marker is appended (in the page cache before
the marker is acknowledged, like the log itself); recovery truncates entries past the
recovered log end and the producer-state replay re-adds the ones it finds missing.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # loaded on first use

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        # A torn last entry (a crash mid-write) is ignored; the replay re-adds it.
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            if version != VERSION:
                break
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    @property
    def last_offset(self) -> int:
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted transaction at {txn.last_offset} is not after the last one at {entries[-1].last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, ENTRY.pack(VERSION, *txn))
        finally:
            os.close(fd)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after `offset` (the log was cut there)."""
        entries = self.entries
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) == len(entries) and (kept or not self.path.exists()):
            return
        self._entries = kept
        self._rewrite()

    def _rewrite(self) -> None:
        entries = self.entries
        if not entries:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(ENTRY.pack(VERSION, *e) for e in entries))
        os.replace(tmp, self.path)

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Kafka's collectAbortedTxns: entries overlapping [fetch_offset, upper_bound) go to `out`;
        True once an entry shows that later segments cannot hold any more."""
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return True
        return False

    def fsync(self) -> None:
        if self._entries:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self._entries = []
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
