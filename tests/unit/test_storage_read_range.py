"""storage: the fetch read as a range of the segment file (FileRange) returns exactly the batches
the pread path returns, and a pinned range outlives its segment's close and deletion."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from protocol import records as r
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import PartitionLog
from storage.segment import FileRange


def _log(path: Path, **cfg: object) -> PartitionLog:
    return PartitionLog.open(path / "t-0", "t", 0, LogConfig(**cfg), recovery_point=None, clean=True)  # type: ignore[arg-type]


def _fill(log: PartitionLog, seed: int) -> None:
    """Batches from a few bytes to several walk windows (8 KiB) large, over several segments."""
    rnd = random.Random(seed)
    for _ in range(120):
        n = rnd.choice([1, 1, 3, 20])
        size = rnd.choice([10, 200, 3000, 30_000])
        log.append(r.build_batch([(b"k%d" % i, bytes([i % 251]) * size) for i in range(n)], timestamp_ms=1_700_000_000_000))


def _as_bytes(x: FileRange | memoryview | None) -> bytes | None:
    if x is None:
        return None
    return x.read() if isinstance(x, FileRange) else bytes(x)


_BATCHES: dict[tuple[int, int, int], tuple[bytes, list[Any]]] = {}  # the segments _expected read


def _expected(log: PartitionLog, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> bytes | None:
    """Kafka's rule, from every batch of the log: whole batches of one segment from the one
    holding `offset`, while they fit in max_bytes (the first whatever its size with min_one),
    none starting at or after max_offset (below the log end)."""
    if offset >= log.next_offset or (max_offset is not None and max_offset < log.next_offset and offset >= max_offset):
        return None
    bound = max_offset if max_offset is not None and max_offset < log.next_offset else None
    for seg in log.segments:
        key = (id(log), seg.base_offset, seg.size)
        if key not in _BATCHES:
            data = os.pread(seg.fd, seg.size, 0)
            _BATCHES[key] = (data, list(r.iter_batches(data)))
        data, batches = _BATCHES[key]
        out = b""
        for p, h in batches:
            if h.last_offset < offset and not out:
                continue
            if bound is not None and h.base_offset >= bound:
                break
            if len(out) + h.size > max_bytes and not (min_one and not out):
                break
            out += data[p : p + h.size]
        else:
            if not out:
                continue
        return out or None
    return None


@pytest.mark.parametrize("seed", [1, 2])
def test_read_range_returns_kafkas_batches_for_every_offset_limit_and_bound(tmp_path: Path, seed: int) -> None:
    _BATCHES.clear()
    log = _log(tmp_path, segment_bytes=400_000, index_interval_bytes=4096)
    _fill(log, seed)
    assert len(log.segments) > 2
    end = log.next_offset
    rnd = random.Random(seed)
    limits = [0, 1, 61, 100, 5000, 8192, 9000, 40_000, 70_000, 1 << 20]
    checked = 0
    for offset in range(0, end, 3):
        for max_bytes in rnd.sample(limits, 4):
            for min_one in (True, False):
                for max_offset in (None, rnd.randrange(end + 1)):
                    want = _expected(log, offset, max_bytes, min_one, max_offset)
                    got = log.read_range(offset, max_bytes, min_one, max_offset)
                    assert _as_bytes(got) == want, (offset, max_bytes, min_one, max_offset)
                    assert _as_bytes(log.read(offset, max_bytes, min_one, max_offset)) == want  # the pread path
                    if got is not None:
                        last = max(h.last_offset for _p, h in r.iter_batches(got.read()))
                        assert got.last_offset == last
                        assert got.data is None or bytes(got.data) == got.read()
                        checked += 1
    assert checked > 100
    log.close()


def test_a_range_never_crosses_a_segment_boundary(tmp_path: Path) -> None:
    # As with Kafka, one partition's record set comes from one segment: the next fetch goes on.
    log = _log(tmp_path, segment_bytes=50_000)
    for i in range(30):
        log.append(r.build_batch([(b"k", b"x" * 9000)], timestamp_ms=1_700_000_000_000 + i))
    first, second = log.segments[0], log.segments[1]
    rng = log.read_range(0, 1 << 20)
    assert rng is not None and rng.segment is first and rng.position == 0 and rng.length == first.size
    nxt = log.read_range(rng.last_offset + 1, 1 << 20)
    assert nxt is not None and nxt.segment is second and nxt.position == 0
    assert next(h.base_offset for _p, h in r.iter_batches(nxt.read())) == rng.last_offset + 1
    log.close()


def test_a_pinned_range_outlives_the_deletion_of_its_segment(tmp_path: Path) -> None:
    log = _log(tmp_path, segment_bytes=50_000)
    for i in range(30):
        log.append(r.build_batch([(b"k", bytes([i]) * 9000)], timestamp_ms=1_700_000_000_000 + i))
    pinned = log.read_range(0, 1 << 20)
    loose = log.read_range(0, 1 << 20)
    assert pinned is not None and loose is not None and pinned.data is None
    expected = pinned.read()
    pinned.pin()
    seg = pinned.segment
    fd = seg.fd
    log.delete_records(log.segments[1].base_offset)  # the first segment goes
    log.delete_old_segments()
    assert seg not in log.segments and not seg.log_path.exists()
    assert seg.fd == -1
    os.fstat(fd)  # still open: the pin holds it
    assert loose.usable is False
    with pytest.raises(StorageError):
        loose.read()
    assert pinned.usable and pinned.read() == expected
    pinned.release()
    with pytest.raises(OSError):
        os.fstat(fd)  # the last pin closed it
    log.close()


def test_an_unpinned_segment_closes_at_once(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.append(r.build_batch([(b"k", b"v" * 10_000)]))
    rng = log.read_range(0, 1 << 20)
    assert rng is not None
    fd = rng.fd
    log.close()
    with pytest.raises(OSError):
        os.fstat(fd)
    assert not rng.usable


def test_a_batch_too_big_for_what_is_left_returns_nothing_not_the_next_segment(tmp_path: Path) -> None:
    # A later partition of a fetch (min_one False) whose next batch exceeds the bytes left: the
    # pread path used to skip to the next segment's first batch, past the fetch offset.
    log = _log(tmp_path, segment_bytes=20_000)
    for _ in range(6):
        log.append(r.build_batch([(b"k", b"x" * 15_000)]))
    assert len(log.segments) > 2
    assert log.read_range(0, 1000, min_one=False) is None
    assert log.read(0, 1000, min_one=False) is None
    rng = log.read_range(0, 1000, min_one=True)
    assert rng is not None and rng.last_offset == 0
    log.close()


def test_small_batches_are_skipped_with_the_offset_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _log(tmp_path, index_interval_bytes=4096)
    for i in range(6000):  # one-record batches of ~110 bytes, as a producer without linger sends them
        log.append(r.build_batch([(b"k", bytes([i % 251]) * 40)], timestamp_ms=1_700_000_000_000))
    reads = []
    real = os.pread

    def counting(fd: int, n: int, pos: int) -> bytes:
        reads.append(n)
        return real(fd, n, pos)

    _BATCHES.clear()
    for offset, max_bytes, max_offset in ((0, 500_000, None), (17, 300_000, None), (5, 400_000, 2500), (100, 40_000, 5999)):
        want = _expected(log, offset, max_bytes, True, max_offset)
        reads.clear()
        monkeypatch.setattr(os, "pread", counting)
        got = log.read_range(offset, max_bytes, True, max_offset)
        monkeypatch.setattr(os, "pread", real)
        assert got is not None and got.read() == want
        assert got.last_offset == max(h.last_offset for _p, h in r.iter_batches(want))
        assert len(reads) <= 4 and sum(reads) <= 4 * 8192  # not a walk over every batch
    log.close()
