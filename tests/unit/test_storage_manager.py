"""LogManager: loading, topic events, checkpoints, clean shutdown, fsync policies with group commit."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from protocol import records as r
from storage import manager as manager_mod
from storage.checkpoint import CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE, read_checkpoint
from storage.config import LogConfig
from storage.manager import LogManager


@dataclass
class FakeTopic:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    configs: dict[str, str] = field(default_factory=dict)


class Topics:
    def __init__(self) -> None:
        self.on_created: list[Any] = []
        self.on_deleted: list[Any] = []
        self.on_partitions_added: list[Any] = []


def make(tmp_path: Path, fsync: str = "never") -> LogManager:
    return LogManager(tmp_path, lambda t: LogConfig().with_topic_configs(t.configs), fsync=fsync)


async def test_load_creates_partition_dirs_with_metadata_and_closes_cleanly(tmp_path: Path) -> None:
    topic = FakeTopic("orders", 3)
    m = make(tmp_path)
    m.load([topic])
    await m.start()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["orders-0", "orders-1", "orders-2"]
    assert "topic_id:" in (tmp_path / "orders-1" / "partition.metadata").read_text()
    log = m.get("orders", 1)
    assert log is not None and m.get("orders", 3) is None
    log.append(r.build_batch([(b"k", b"v")] * 3))
    await m.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_FILE)[("orders", 1)] == 3
    again = make(tmp_path)
    again.load([topic])
    assert again.was_clean and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert again.get("orders", 1).log_end_offset == 3  # type: ignore[union-attr]
    await again.close()


async def test_topic_events_create_and_delete_logs(tmp_path: Path) -> None:
    topics = Topics()
    m = make(tmp_path)
    m.load([])
    m.subscribe(topics)
    await m.start()
    t = FakeTopic("events", 1, configs={"segment.bytes": "2048"})
    for cb in topics.on_created:
        cb(t)
    log = m.get("events", 0)
    assert log is not None and log.config.segment_bytes == 2048
    t.partitions = 2
    for cb in topics.on_partitions_added:
        cb(t, 1)
    assert m.get("events", 1) is not None
    log.append(r.build_batch([(b"k", b"v")]))
    for cb in topics.on_deleted:
        cb(t)
    assert m.get("events", 0) is None and log.closed
    await m.close()  # the cleaner thread has removed the renamed directories
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


async def test_unknown_partition_dirs_are_set_aside_not_deleted(tmp_path: Path) -> None:
    (tmp_path / "ghost-0").mkdir()
    (tmp_path / "ghost-0" / "00000000000000000000.log").write_bytes(b"")
    m = make(tmp_path)
    m.load([])
    strays = [p.name for p in tmp_path.iterdir() if p.name.endswith("-stray")]
    assert len(strays) == 1 and strays[0].startswith("ghost-0.")
    await m.close()


async def test_unclean_start_recovers_from_the_recovery_point(tmp_path: Path) -> None:
    topic = FakeTopic("t", 1)
    m = make(tmp_path)
    m.load([topic])
    log = m.get("t", 0)
    assert log is not None
    for _ in range(5):
        log.append(r.build_batch([(b"k", b"v")]))
    os.close(log.active.fd)  # killed: no close, no marker
    with open(log.active.log_path, "ab") as f:
        f.write(b"\x00" * 30)
    again = make(tmp_path)
    again.load([topic])
    assert not again.was_clean
    assert again.get("t", 0).log_end_offset == 5  # type: ignore[union-attr]
    await again.close()


async def test_log_start_offset_is_checkpointed(tmp_path: Path) -> None:
    topic = FakeTopic("t", 1)
    m = make(tmp_path)
    m.load([topic])
    await m.start()
    log = m.get("t", 0)
    assert log is not None
    for _ in range(5):
        log.append(r.build_batch([(b"k", b"v")]))
    log.delete_records(3)
    from tests.support.waiting import async_wait_until

    await async_wait_until(lambda: read_checkpoint(tmp_path / LOG_START_OFFSET_FILE).get(("t", 0)) == 3, message="checkpoint")
    await m.close()


async def test_wait_durable_is_none_unless_always(tmp_path: Path) -> None:
    for mode in ("never", "50"):
        m = make(tmp_path / mode, mode)
        (tmp_path / mode).mkdir()
        m.load([FakeTopic("t", 1)])
        await m.start()
        log = m.get("t", 0)
        assert log is not None
        log.append(r.build_batch([(b"k", b"v")]))
        assert m.wait_durable(log) is None
        await m.close()


async def test_interval_fsync_advances_the_recovery_point(tmp_path: Path) -> None:
    m = make(tmp_path, "20")
    m.load([FakeTopic("t", 1)])
    await m.start()
    log = m.get("t", 0)
    assert log is not None
    log.append(r.build_batch([(b"k", b"v")]))
    from tests.support.waiting import async_wait_until

    await async_wait_until(lambda: log.recovery_point == 1, message="periodic fsync")
    await m.close()


async def test_group_commit_one_fsync_pass_per_loop_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passes: list[int] = []
    real = manager_mod._fsync_fds
    started = threading.Event()
    release = threading.Event()
    release.set()

    def counting(fds: list[int]) -> float:
        passes.append(len(fds))
        started.set()
        release.wait(10)  # a pass the test holds, to append while it runs
        return real(fds)

    monkeypatch.setattr(manager_mod, "_fsync_fds", counting)
    m = make(tmp_path, "always")
    m.load([FakeTopic("t", 3)])
    await m.start()
    logs = [m.get("t", p) for p in range(3)]
    waits = []
    for log in logs * 4:  # twelve appends on three logs within one loop turn
        assert log is not None
        log.append(r.build_batch([(b"k", b"v")]))
        w = m.wait_durable(log)
        assert w is not None
        waits.append(w)
    await asyncio.gather(*waits)
    assert passes == [3]  # one pass, one fsync per log
    assert all(log is not None and log.recovery_point == log.log_end_offset == 4 for log in logs)
    assert m.wait_durable(logs[0]) is None  # nothing new to cover
    # Appends made while a pass is running are covered by the next one.
    release.clear()
    started.clear()
    logs[0].append(r.build_batch([(b"k", b"v")]))  # type: ignore[union-attr]
    first = m.wait_durable(logs[0])  # type: ignore[arg-type]
    await asyncio.to_thread(started.wait, 10)  # the pass covering logs[0] is running, held
    logs[1].append(r.build_batch([(b"k", b"v")]))  # type: ignore[union-attr]
    second = m.wait_durable(logs[1])  # type: ignore[arg-type]
    release.set()
    await first  # type: ignore[misc]
    assert logs[1].recovery_point == 4  # type: ignore[union-attr]  # not covered by the pass that was running
    await second  # type: ignore[misc]
    assert passes == [3, 1, 1] and logs[1].recovery_point == 5  # type: ignore[union-attr]
    await m.close()


async def test_compaction_runs_off_the_loop_and_is_checkpointed(tmp_path: Path) -> None:
    from storage.checkpoint import CLEANER_OFFSET_FILE

    topic = FakeTopic("__consumer_offsets", 1, configs={"cleanup.policy": "compact", "segment.bytes": "1000"})
    m = make(tmp_path)
    m.load([topic])
    await m.start()
    log = m.get("__consumer_offsets", 0)
    assert log is not None
    for i in range(200):
        log.append(r.build_batch([(b"k%d" % (i % 4), b"v%d" % i)]))
    size = log.size_bytes
    assert await m.run_compaction() == 1
    assert log.size_bytes < size / 2
    assert read_checkpoint(tmp_path / CLEANER_OFFSET_FILE) in ({}, {("__consumer_offsets", 0): m.first_dirty[("__consumer_offsets", 0)]})
    await m.close()
    assert read_checkpoint(tmp_path / CLEANER_OFFSET_FILE) == {("__consumer_offsets", 0): m.first_dirty[("__consumer_offsets", 0)]}
