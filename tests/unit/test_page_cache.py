"""--log-page-cache-bytes: the page cache behind each partition's newest bytes is handed back to
the OS once written (storage/segment.py release_cache), never before; reads of released data
come from the disk, intact. Residency is read with mincore(2)."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker import Broker, Config
from broker.config import KAFKA_DEFAULTS, ConfigError
from protocol import records as r
from storage.config import LogConfig
from storage.log import _RELEASE_STEP, PartitionLog

MIB = 1024 * 1024
PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def resident(path: Path, start: int, end: int) -> tuple[int, int]:
    """(pages of [start, end) of the file in the page cache, pages in that range)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
        anchor = ctypes.c_char.from_buffer(mm)
        try:
            pages = (len(mm) + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(len(mm)), vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            first, last = start // PAGE, end // PAGE
            return sum(v & 1 for v in vec[first:last]), last - first
        finally:
            del anchor


def drops_clean_pages(directory: Path) -> bool:
    """Whether this file system lets fadvise drop clean pages (tmpfs keeps them: nothing to test)."""
    probe = directory / "probe"
    probe.write_bytes(bytes(4 * PAGE))
    fd = os.open(probe, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    cached, _ = resident(probe, 0, 4 * PAGE)
    probe.unlink()
    return cached == 0


def open_log(path: Path, window: int) -> PartitionLog:
    log = PartitionLog.open(path / "t-0", "t", 0, LogConfig())
    log.page_cache_bytes = window
    return log


def fill(log: PartitionLog, upto: int) -> list[bytes]:
    """Append 256 KiB batches until the active segment holds `upto` bytes; the batches as sent."""
    sent = []
    value = os.urandom(256 * 1024)
    while log.segments[-1].size < upto:
        batch = bytes(r.build_batch([(b"k%d" % len(sent), value)]))
        log.append(memoryview(batch))  # as a produce hands it over: not copied
        sent.append(batch)
    return sent


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this platform")
@pytest.mark.parametrize("on_a_worker", [False, True], ids=["inline", "worker"])
def test_pages_behind_the_window_are_released_once_written_and_read_back_intact(tmp_path: Path, on_a_worker: bool) -> None:
    if not drops_clean_pages(tmp_path):
        pytest.skip("this file system keeps clean pages cached (tmpfs): nothing is released")
    window = 1 * MIB
    log = open_log(tmp_path, window)
    pool = ThreadPoolExecutor(1) if on_a_worker else None
    if pool is not None:
        log.run_advice = pool.submit  # as the LogManager sets it
    seg = log.segments[-1]
    sent = fill(log, window + _RELEASE_STEP + MIB)
    if pool is not None:
        pool.submit(lambda: None).result()
    # The first release met dirty pages: it started their writeback and dropped none of them
    # unwritten. Once they are on disk, the next release (it reaches back) drops them.
    seg.fsync()
    sent += fill(log, 2 * (window + _RELEASE_STEP) + MIB)
    if pool is not None:
        pool.shutdown(wait=True)
    released = seg.cache_released
    assert released >= seg.size - window - _RELEASE_STEP
    cached, pages = resident(seg.log_path, 0, window + _RELEASE_STEP)
    assert cached == 0, f"{cached} of {pages} pages before the window still cached"
    # The newest bytes stay in the cache for consumers at the head.
    cached, pages = resident(seg.log_path, released, seg.size - PAGE)
    assert cached == pages
    # What was released reads back from the disk as it was appended.
    data = log.read(0, seg.size)
    assert data is not None
    batches = [bytes(data[p : p + h.size]) for p, h in r.iter_batches(data)]
    assert len(batches) == len(sent)
    assert all(got[16:] == want[16:] for got, want in zip(batches, sent, strict=True))
    log.close()


def test_without_a_window_every_page_stays_cached(tmp_path: Path) -> None:
    log = open_log(tmp_path, 0)
    seg = log.segments[-1]
    fill(log, 2 * (MIB + _RELEASE_STEP))
    assert seg.cache_released == 0
    cached, pages = resident(seg.log_path, 0, seg.size - PAGE)
    assert cached == pages
    log.close()


def test_the_setting_reaches_every_log_and_kafka_defaults_turn_it_off(tmp_path: Path) -> None:
    async def logs_window(config: Config) -> int:
        async with Broker(config) as broker:
            broker.topics.create("w", 1)
            log = broker.logs.get("w", 0)
            assert log is not None and log.run_advice is not None  # on the LogManager's worker
            return log.page_cache_bytes

    base = {"port": 0, "metrics": False, "offsets_partitions": 1, "transaction_state_partitions": 1}
    assert asyncio.run(logs_window(Config(data_dir=str(tmp_path / "a"), **base))) == 64 * MIB
    assert asyncio.run(logs_window(Config(data_dir=str(tmp_path / "b"), log_page_cache_bytes=5 * MIB, **base))) == 5 * MIB
    assert KAFKA_DEFAULTS["log_page_cache_bytes"] == 0
    assert Config(kafka_defaults=True).log_page_cache_bytes == 0
    with pytest.raises(ConfigError, match="--log-page-cache-bytes"):
        Config(log_page_cache_bytes=-1).validate()
