"""One log segment: `<base offset>.log` with record batches back to back, plus its two indexes.

Batches are written with one `write` on a file opened O_APPEND, so a batch is in the file
(the page cache) before its producer hears about it. Reads use `pread` on the same
descriptor and return slices of what was read, never decoded batches.

Fetch reads (`read_range`) do not read the batches at all: they walk the batch headers with
small preads and return a `FileRange` (descriptor, position, length) that the connection sends
with `sendfile`, as Kafka sends a FileRecords slice. A range that must outlive the loop turn
(its socket was full) pins its segment: closing or deleting a pinned segment closes its
descriptor only when the last pin goes, as Kafka's delayed segment deletion lets a fetch in
flight finish.
"""

from __future__ import annotations

import errno
import os
import struct
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog

from protocol.records import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader, crc32c
from storage.errors import StorageError
from storage.index import IndexCorrupt, OffsetIndex, TimeIndex
from storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = structlog.get_logger("kaflet.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CHUNK = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size
_BASE_LEN = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32U = struct.Struct(">I")
_LAST_DELTA_AT = 23
_MAX_TS_AT = 35
# release_cache reaches this far back behind where the last call ended: pages that were still
# dirty or being written back then (fadvise drops only clean pages) are caught by a later call.
_RELEASE_LOOKBACK = 32 * 1024 * 1024
_FADVISE = getattr(os, "posix_fadvise", None)  # not on macOS: releasing is then a no-op
_WALK_WINDOW = 8 * 1024  # bytes of headers read per pread while walking a fetch range


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    written = os.write(fd, data)
    if written != len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


class Segment:
    """A segment and what is known about it. Only the last segment of a log is appended to."""

    def __init__(
        self, directory: Path, base_offset: int, index_bytes: int, index_interval: int = 4096, *, create: bool = False, defer: bool = False
    ) -> None:
        """An existing segment, a new one (`create`), or a new one whose files are made later (`defer`)."""
        self.dir = directory
        self.index_interval = index_interval
        self.base_offset = base_offset
        name = segment_name(base_offset)
        self.log_path = directory / (name + LOG_SUFFIX)
        self.fd = -1
        self.size = 0
        if not defer:
            flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
            self.fd = os.open(self.log_path, flags, 0o644)
            self.size = os.fstat(self.fd).st_size
        self.created_ms = int(time.time() * 1000)
        self.flushed_size = self.size
        self.cache_released = 0  # release_cache has handed the pages before this position back
        self.index = OffsetIndex(directory / (name + INDEX_SUFFIX), base_offset, index_bytes)
        self.time_index = TimeIndex(directory / (name + TIME_INDEX_SUFFIX), base_offset, index_bytes)
        self.txn_index = TransactionIndex(directory / (name + TXN_INDEX_SUFFIX))
        self.indexes_loaded = create or defer
        # What the tail holds; exact for the active segment, lazily known for older ones.
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = -1 if create or defer else None
        self.bytes_since_index = 0
        self.pins = 0  # FileRanges waiting to be sent from this segment's descriptor
        self._unpinned_close = -1  # a descriptor closed while pinned: closed by the last unpin
        if create:
            self._create_index_files()

    @classmethod
    def deferred(cls, directory: Path, base_offset: int, index_bytes: int, index_interval: int = 4096) -> Segment:
        """An empty new segment whose files do not exist yet (fd -1): `create_files` makes them."""
        return cls(directory, base_offset, index_bytes, index_interval, defer=True)

    def create_files(self) -> None:
        """The files of a `deferred` segment (its directory exists)."""
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        self._create_index_files()

    def _create_index_files(self) -> None:
        """Empty index files beside a new log file; the log's descriptor is closed if they cannot be made."""
        try:
            for index in (self.index, self.time_index):
                index.path.write_bytes(b"")
        except OSError:
            os.close(self.fd)
            self.fd = -1
            raise

    @classmethod
    def create_or_undo(cls, directory: Path, base_offset: int, index_bytes: int, index_interval: int) -> Segment:
        """A new segment; if its files cannot all be made (a full disk), those that were are
        removed again, so that a later attempt at the same base offset can succeed."""
        try:
            return cls(directory, base_offset, index_bytes, index_interval, create=True)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise  # not ours to remove
            name = segment_name(base_offset)
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                try:
                    (directory / (name + suffix)).unlink()
                except OSError:
                    pass
            raise

    def __repr__(self) -> str:
        return f"Segment({self.log_path.name}, size={self.size})"

    @property
    def mtime_ms(self) -> int:
        """The log file's last-modified time, read afresh as Kafka's LogSegment.lastModified is."""
        try:
            st = os.fstat(self.fd) if self.fd >= 0 else os.stat(self.log_path)
        except FileNotFoundError:
            return self.created_ms  # a deferred segment: not on disk yet
        return int(st.st_mtime * 1000)

    # -- indexes --------------------------------------------------------------------------

    def ensure_indexes(self, limit_offset: int | None = None) -> None:
        """Load the index files, rebuilding them from the log when missing or inconsistent."""
        if self.indexes_loaded:
            return
        try:
            self.index.load(self.size, limit_offset)
            self.time_index.load(limit_offset)
            if self.time_index.keys:
                self.max_timestamp = self.time_index.last_timestamp
                self.offset_of_max_timestamp = self.time_index.last_offset
        except (FileNotFoundError, IndexCorrupt):
            self.scan(validate=False, index_interval=self.index_interval)
            self.index.write_all()
            self.time_index.write_all()
        self.indexes_loaded = True

    def load_tail(self, index_interval: int) -> bool:
        """For the active segment after a clean shutdown: find the next offset and max timestamp
        by scanning from the last index entry to the end of the file. False when the batches do
        not end exactly at the end of the file (then the caller recovers the segment)."""
        self.ensure_indexes()
        pos = self.index.values[-1] if len(self.index) else 0
        since = 0
        end = pos
        for _buf, _p, header in self.iter_batches(pos):
            self.next_offset = header.base_offset + header.last_offset_delta + 1
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = self.next_offset - 1
            size = header.batch_length + LOG_OVERHEAD
            since += size
            end += size
        self.bytes_since_index = since
        if self.size == 0:
            self.next_offset = self.base_offset
        return end == self.size

    def scan(self, validate: bool, index_interval: int) -> int:
        """Rebuild indexes and tail facts by reading every batch. With `validate`, each batch is
        checked (length, magic, CRC-32C, increasing offsets). A bad region followed by a valid
        batch is cut out of the file (logged at ERROR with the file and position): never lose
        what follows a corrupt batch. A bad region that reaches the end is a torn tail: the file
        is truncated there, as Kafka's recovery does. Returns the number of tail bytes truncated."""
        while True:
            bad_at = self._scan_once(validate, index_interval)
            if bad_at < 0 or not validate:
                return 0
            resume = resync(self.fd, bad_at + 1, self.size)
            if resume is None:
                dropped = self.size - bad_at
                self.truncate_to(bad_at)
                return dropped
            log.error(
                "cutting a corrupt region out of a segment",
                partition=self.dir.name,
                file=str(self.log_path),
                position=bad_at,
                bytes_cut=resume - bad_at,
            )
            self.cut(bad_at, resume)

    def cut(self, start: int, end: int) -> None:
        """Rewrite the file without bytes [start, end): a copy fsynced, then renamed over it (a
        crash leaves the old file and a `.tmp` that the next open removes)."""
        tmp = self.log_path.with_name(self.log_path.name + ".tmp")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for a, b in ((0, start), (end, self.size)):
                while a < b:
                    piece = os.pread(self.fd, min(CHUNK, b - a), a)
                    if not piece:
                        break
                    write_all(out, piece)
                    a += len(piece)
            os.fsync(out)
        finally:
            os.close(out)
        os.replace(tmp, self.log_path)
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        os.close(self.fd)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND)
        self.size = self.flushed_size = os.fstat(self.fd).st_size
        self.index.clear()
        self.time_index.clear()

    def _scan_once(self, validate: bool, index_interval: int) -> int:
        """One pass of scan(): the position of the first bad batch (validate), or -1."""
        self.index.clear()
        self.time_index.clear()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1
        since = 0
        pos = 0
        end = self.size
        bad_at = -1
        fd = self.fd
        unpack = HEADER.unpack_from
        next_offset = self.base_offset
        max_ts, max_ts_offset = -1, -1
        first_ts: int | None = None
        buf = b""
        buf_len = 0
        buf_start = 0  # buf holds the file from buf_start
        index_append = self.index.append
        time_index_append = self.time_index.maybe_append
        while pos < end:
            off = pos - buf_start
            if buf_len - off < HEADER_SIZE:
                buf, buf_start, off = os.pread(fd, min(CHUNK, end - pos), pos), pos, 0
                buf_len = len(buf)
                if buf_len < HEADER_SIZE:
                    bad_at = pos
                    break
            header = unpack(buf, off)
            size = header[1] + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > end:
                bad_at = pos
                break
            if buf_len - off < size:
                buf, buf_start, off = os.pread(fd, max(size, min(CHUNK, end - pos)), pos), pos, 0
                buf_len = len(buf)
                if buf_len < size:
                    bad_at = pos
                    break
            if (
                validate
                and (
                    header[3] != 2  # magic
                    or header[12] < 0  # record count
                    or header[6] < 0  # last offset delta
                    or header[0] < next_offset  # offsets must increase
                    or header[4] != crc32c(memoryview(buf)[off + CRC_START : off + size])
                )
            ):
                bad_at = pos
                break
            last = header[0] + header[6]
            ts = header[8]
            if ts > max_ts:
                max_ts = ts
                max_ts_offset = last
            if first_ts is None:
                first_ts = ts
            if since > index_interval:
                index_append(last, pos)
                time_index_append(max_ts, max_ts_offset)
                since = 0
            since += size
            next_offset = last + 1
            pos += size
        self.next_offset = next_offset
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = max_ts_offset
        self.first_batch_timestamp = -1 if first_ts is None else first_ts
        self.bytes_since_index = since
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.indexes_loaded = True
        return bad_at if validate else -1

    # -- appending ------------------------------------------------------------------------

    def append(
        self, data: bytes | bytearray | memoryview | tuple[bytes, memoryview], last_offset: int, max_timestamp: int, index_interval: int
    ) -> int:
        """Write one batch (or its patched head and the rest, in one writev); returns its file position."""
        pos = self.size
        if isinstance(data, tuple):
            head, rest = data
            size = len(head) + len(rest)
            written = os.writev(self.fd, data)
            if written != size:
                write_all(self.fd, (head + bytes(rest))[written:])
        else:
            write_all(self.fd, data)
            size = len(data)
        self.size = pos + size
        if self.first_batch_timestamp == -1 or (self.first_batch_timestamp is None and pos == 0):
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_index > index_interval:
            self.index.append(last_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        self.next_offset = last_offset + 1
        return pos

    def release_cache(self, upto: int, run: Callable[..., object] | None = None) -> None:
        """Hand the page-cache pages of the file before `upto` back to the OS (--log-page-cache-bytes),
        with `run(function, *args)` (a worker thread's submit) or here and now.

        POSIX_FADV_DONTNEED never loses data: it starts the writeback of dirty pages and drops
        only clean ones, so each call also reaches back over the range of the calls before it.
        A later read of a dropped range reads the disk. Errors are ignored: this is advice (on
        a worker, a segment closed meanwhile makes it EBADF, or at worst advice about the clean
        pages of whichever file got its descriptor number)."""
        start = max(0, self.cache_released - _RELEASE_LOOKBACK)
        self.cache_released = upto
        if _FADVISE is None or upto <= start or self.fd < 0:
            return
        if run is None:
            _advise(self.fd, start, upto - start)
        else:
            run(_advise, self.fd, start, upto - start)

    def truncate_to(self, position: int) -> None:
        os.ftruncate(self.fd, position)
        self.size = position
        self.flushed_size = min(self.flushed_size, position)
        self.index.truncate_after_position(position)

    def on_roll(self) -> None:
        """No more appends: the time index gets its final entry; both indexes reach the disk."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.flush()
        self.time_index.flush()

    # -- reading --------------------------------------------------------------------------

    def first_timestamp(self) -> int:
        """maxTimestamp of the first batch (Kafka rolls by time from it), -1 when empty."""
        if self.first_batch_timestamp is None:
            if self.size < HEADER_SIZE:
                self.first_batch_timestamp = -1
            else:
                self.first_batch_timestamp = _I64.unpack_from(os.pread(self.fd, HEADER_SIZE, 0), _MAX_TS_AT)[0]
        return self.first_batch_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares: the max record timestamp, or the file's mtime if none."""
        self.ensure_indexes()
        return self.max_timestamp if self.max_timestamp >= 0 else self.mtime_ms

    def locate(self, offset: int) -> int:
        """File position to start scanning from for `offset`."""
        self.ensure_indexes()
        return self.index.lookup(offset)

    def read(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None = None) -> memoryview | None:
        """Whole batches from the one containing `offset` (or the first after it), at most
        `max_bytes` of them, except that with `min_one` the first batch comes whatever its size.
        With `max_offset` (read_committed: the last stable offset) no batch starting at or after
        it is returned. The bytes of `read_range`, read."""
        rng = self.read_range(offset, max_bytes, min_one, max_offset)
        if rng is None or rng is NO_ROOM:
            return None
        return rng.data if rng.data is not None else memoryview(rng.read())

    def read_range(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None = None) -> FileRange | None:
        """What `read` returns, as a range of the file: the batch headers are walked with small
        preads and the batches themselves are not read (the connection sends them with
        sendfile). A range that fits in the last window read carries those bytes (`data`).
        NO_ROOM (not None) when the batch to return is here but larger than max_bytes."""
        end = self.size
        pos = self.locate(offset)
        fd = self.fd
        unpack_base = _BASE_LEN.unpack_from
        unpack_i32 = _I32.unpack_from
        # The batch holding `offset` (or the first after it).
        while True:
            if end - pos < HEADER_SIZE:
                return None
            buf = os.pread(fd, min(end - pos, _WALK_WINDOW), pos)
            n = len(buf)
            p = 0
            found = -1
            size = 0
            while n - p >= HEADER_SIZE:
                base, length = unpack_base(buf, p)
                size = length + LOG_OVERHEAD
                if size < HEADER_SIZE:
                    return None
                last = base + unpack_i32(buf, p + _LAST_DELTA_AT)[0]
                if last >= offset:
                    if max_offset is not None and base >= max_offset:
                        return None
                    found = p
                    break
                p += size
            if found >= 0:
                break
            if p == 0:
                return None
            pos += p
        start = pos + found
        if start + size > end:
            return None
        if size > max_bytes and not min_one:
            return NO_ROOM  # the next batch is here but too big: not one from the next segment
        # Whole batches from there while they fit in max_bytes (and start before max_offset).
        stop = start + max(max_bytes, size)
        q = start + size
        buf_at = pos  # file position of buf[0]
        if stop - q > 2 * _WALK_WINDOW:
            # Skip the walk over batches the offset index shows to be whole and inside the
            # limit: from the second-to-last indexed batch before `stop` (whose batch is followed
            # by another indexed one that starts at or before `stop`), with offsets below
            # max_offset. The walk from there reads the exact last offset.
            values = self.index.values
            i = bisect_right(values, stop) - 2
            if max_offset is not None:
                i = min(i, bisect_left(self.index.keys, max_offset) - 1)
            if i >= 0 and values[i] > q:
                q = values[i]
        while end - q >= LOG_OVERHEAD:
            at = q - buf_at
            if n - at < HEADER_SIZE:
                buf_at = q
                buf = os.pread(fd, min(end - q, _WALK_WINDOW), q)
                n = len(buf)
                at = 0
                if n < HEADER_SIZE:
                    break
            base, length = unpack_base(buf, at)
            size = length + LOG_OVERHEAD
            if size < HEADER_SIZE or q + size > stop or q + size > end:
                break
            if max_offset is not None and base >= max_offset:
                break
            last = base + unpack_i32(buf, at + _LAST_DELTA_AT)[0]
            q += size
        rng = FileRange(self, fd, start, q - start, last)
        if buf_at <= start and q - buf_at <= n:
            rng.data = memoryview(buf)[start - buf_at : q - buf_at]
        return rng

    def pin(self) -> None:
        self.pins += 1

    def unpin(self) -> None:
        self.pins -= 1
        if self.pins <= 0:
            self.pins = 0
            fd, self._unpinned_close = self._unpinned_close, -1
            if fd >= 0:
                os.close(fd)

    def release_fd(self) -> None:
        """Close the descriptor, or hand it to the last unpin while a FileRange pins it."""
        fd, self.fd = self.fd, -1
        if self.pins:
            self._unpinned_close = fd  # a fetch still sends from it: the last unpin closes it
        else:
            os.close(fd)

    def iter_batches(self, start_pos: int = 0, end: int | None = None, chunk: int = CHUNK) -> Iterator[tuple[bytes, int, BatchHeader]]:
        """(buffer, position in buffer, header) of every whole batch from `start_pos`, read in chunks."""
        return iter_file_batches(self.fd, start_pos, self.size if end is None else end, chunk)

    # -- lifecycle ------------------------------------------------------------------------

    def fsync(self) -> None:
        os.fsync(self.fd)
        self.flushed_size = self.size

    def close(self) -> None:
        if self.fd >= 0:
            self.on_roll()
            self.release_fd()

    def delete(self) -> None:
        if self.fd >= 0:
            self.release_fd()
        self.txn_index.delete()
        for path in (self.log_path, self.index.path, self.time_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass


class _NoRoom:
    def __repr__(self) -> str:
        return "NO_ROOM"


# Segment.read_range's answer when the next batch is in this segment but does not fit: the log
# must then return nothing, not the first batch of the next segment (which would skip offsets).
NO_ROOM: FileRange = _NoRoom()  # type: ignore[assignment]


class FileRange:
    """Whole batches of one segment file: `length` bytes at `position` of descriptor `fd`, the
    last of them ending at offset `last_offset`. `len()` is the length, so a response can be
    sized without reading it. `data`: the bytes, when the walk read them anyway."""

    __slots__ = ("data", "fd", "last_offset", "length", "pinned", "position", "segment")

    def __init__(self, segment: Segment, fd: int, position: int, length: int, last_offset: int) -> None:
        self.segment = segment
        self.fd = fd
        self.position = position
        self.length = length
        self.last_offset = last_offset
        self.data: memoryview | None = None
        self.pinned = False

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRange({self.segment.log_path.name}, {self.position}+{self.length})"

    @property
    def usable(self) -> bool:
        """The descriptor still names the segment (it was not closed, or a pin holds it open)."""
        return self.pinned or self.segment.fd == self.fd

    def pin(self) -> None:
        """Keep the descriptor open past a close or delete of the segment, until `release`."""
        if not self.pinned:
            self.segment.pin()
            self.pinned = True

    def release(self) -> None:
        if self.pinned:
            self.pinned = False
            self.segment.unpin()

    def advance(self, n: int) -> None:
        """`n` bytes of the front were sent."""
        self.position += n
        self.length -= n
        if self.data is not None:
            self.data = self.data[n:]

    def read(self, n: int | None = None) -> bytes:
        """The first `n` bytes (all by default) by pread; StorageError when they are no longer
        there (the segment was closed, or the file is shorter)."""
        n = self.length if n is None else min(n, self.length)
        if self.data is not None:
            return bytes(self.data[:n])
        if not self.usable:
            raise StorageError(f"{self.segment.log_path.name} was closed before {n} bytes at {self.position} were sent")
        out = os.pread(self.fd, n, self.position)
        if len(out) != n:
            raise StorageError(f"{self.segment.log_path.name}: {len(out)} of {n} bytes at {self.position}")
        return out


def _advise(fd: int, start: int, length: int) -> None:
    try:
        _FADVISE(fd, start, length, os.POSIX_FADV_DONTNEED)  # type: ignore[misc]
    except OSError:
        pass


# on_bad(position, resume_position or None, reason): a region that holds no valid batch.
BadRegion = Callable[[int, "int | None", str], None]
_MAGIC_AT = 16


def _check(buf: bytes, p: int, end_in_buf: int, verify: bool) -> str | None:
    """Why the batch at `p` of `buf` is not whole and valid (None if it is)."""
    size = _I32.unpack_from(buf, p + 8)[0] + LOG_OVERHEAD
    if size < HEADER_SIZE:
        return f"batch length {size - LOG_OVERHEAD} is too small"
    if buf[p + _MAGIC_AT] != 2:
        return f"magic {buf[p + _MAGIC_AT]} is not 2"
    if p + size > end_in_buf:
        return "batch extends past the end of the segment"
    if verify and _I32U.unpack_from(buf, p + CRC_START - 4)[0] != crc32c(memoryview(buf)[p + CRC_START : p + size]):
        return "CRC-32C mismatch"
    return None


def resync(fd: int, pos: int, end: int, chunk: int = CHUNK) -> int | None:
    """The position of the next whole batch with a valid CRC at or after `pos`, or None."""
    while end - pos >= HEADER_SIZE:
        buf = os.pread(fd, min(chunk, end - pos), pos)
        n = len(buf)
        q = buf.find(b"\x02", _MAGIC_AT)
        while q >= 0 and q - _MAGIC_AT + HEADER_SIZE <= n:
            p = q - _MAGIC_AT
            size = _I32.unpack_from(buf, p + 8)[0] + LOG_OVERHEAD
            if HEADER_SIZE <= size <= end - (pos + p):
                whole = buf if p + size <= n else os.pread(fd, size, pos + p)
                at = p if whole is buf else 0
                if len(whole) >= at + size and _check(whole, at, at + size, True) is None:
                    return pos + p
            q = buf.find(b"\x02", q + 1)
        if n <= HEADER_SIZE:
            return None
        pos += n - HEADER_SIZE + 1  # candidates straddling the chunk's end are seen next time
    return None


def iter_file_batches(
    fd: int,
    pos: int,
    end: int,
    chunk: int = CHUNK,
    *,
    verify: bool = False,
    on_bad: BadRegion | None = None,
) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """Whole batches of a log file between `pos` and `end`, read with `pread` in chunks.

    Without `on_bad` the iteration ends at the first batch that is not whole (a torn tail).
    With it, a bad batch (implausible header, past the end, or with `verify` a CRC-32C
    mismatch) is reported as `on_bad(position, resume, reason)` and skipped: the iteration
    resumes at the next valid batch (`resync`), so one corrupt batch never hides the rest."""
    unpack = HEADER.unpack_from
    new = tuple.__new__
    while end - pos >= HEADER_SIZE:
        buf = os.pread(fd, min(chunk, end - pos), pos)
        n = len(buf)
        p = 0
        bad: str | None = None
        while n - p >= HEADER_SIZE:
            header = new(BatchHeader, unpack(buf, p))
            size = header[1] + LOG_OVERHEAD
            if size < HEADER_SIZE or header[3] != 2 or pos + p + size > end:
                bad = _check(buf, p, end - pos, False) or "bad batch header"
                break
            if p + size > n:
                break
            if verify and header[4] != crc32c(memoryview(buf)[p + CRC_START : p + size]):
                bad = "CRC-32C mismatch"
                break
            yield buf, p, header
            p += size
        if bad is None and p == 0:
            if n < HEADER_SIZE:
                return
            # One batch larger than a chunk (its header was checked above).
            size = _I32.unpack_from(buf, 8)[0] + LOG_OVERHEAD
            buf = os.pread(fd, size, pos)
            if len(buf) < size:
                return
            if verify and _check(buf, 0, size, True) is not None:
                bad = "CRC-32C mismatch"
            else:
                yield buf, 0, new(BatchHeader, unpack(buf, 0))
                p = size
        if bad is not None:
            if on_bad is None:
                return
            at = pos + p
            resume = resync(fd, at + 1, end, chunk)
            on_bad(at, resume, bad)
            if resume is None:
                return
            pos = resume
            continue
        pos += p
