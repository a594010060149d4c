"""Issue 11, bug 2: one corrupt batch inside `__consumer_offsets` never hides the commits after it.

The coordinator's load verifies every batch's CRC-32C; a region that holds no valid batch (an
implausible header, or a CRC mismatch) is logged at ERROR with its file and position and skipped,
and the load goes on at the next valid batch (storage/segment.py `resync`). Kafka's recovery
truncates a torn tail of the active segment (tests/crash/test_offsets_torn_tail.py); a bad batch
inside, which a clean shutdown does not re-validate, is skipped rather than silently ending the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.embed import BrokerProcess
from protocol import records as rec
from protocol.javahash import partition_for
from tests.crash.test_offsets_torn_tail import PARTITIONS, _commit_all, _committed

VALUES = list(range(5, 50, 5))  # 5, 10, ..., 45: one OffsetCommit batch each


def _corrupt_header(data: bytearray, pos: int, size: int) -> None:
    data[pos + 8 : pos + 24] = b"\xff" * 16  # length, leader epoch, magic, CRC: an implausible header


def _corrupt_payload(data: bytearray, pos: int, size: int) -> None:
    end = pos + size
    data[end - 16 : end] = bytes(b ^ 0x5A for b in data[end - 16 : end])  # the record's value: a CRC mismatch


@pytest.mark.parametrize("corrupt", [_corrupt_header, _corrupt_payload], ids=["header", "payload"])
def test_corrupt_offsets_batch_is_skipped_and_later_commits_survive(
    broker_proc: Callable[..., BrokerProcess], tmp_path: Path, corrupt: Callable[[bytearray, int, int], None]
) -> None:
    group = "corrupt-group"
    bp = broker_proc()
    bp.wait_for(lambda r: r.get("event") == "coordinator loaded")  # commits before it get COORDINATOR_LOAD_IN_PROGRESS
    asyncio.run(_commit_all(bp.bootstrap, group, VALUES))
    assert bp.stop() == 0  # a clean shutdown: nothing re-validates the segment at the next start
    partition = partition_for(group, PARTITIONS)
    segment = tmp_path / "data" / f"__consumer_offsets-{partition}" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    batches = list(rec.iter_batches(bytes(data)))
    assert len(batches) >= len(VALUES)
    pos, header = batches[-5]  # the commit of 25: four commits follow it
    corrupt(data, pos, header.size)
    segment.write_bytes(bytes(data))

    bp.start()
    # Header damage makes the active segment's tail check fail, so start-up recovery finds the
    # bad region and cuts it out; a CRC mismatch passes that check and the load skips the batch.
    events = ("cutting a corrupt region out of a segment", "skipping corrupt log data")
    error = bp.wait_for(lambda r: r.get("event") in events)
    assert error["level"] == "error"
    assert error["event"] == events[0 if corrupt is _corrupt_header else 1]
    assert error["file"] == str(segment) and error["position"] == pos
    assert error["partition"] == f"__consumer_offsets-{partition}"
    loaded = bp.wait_for(lambda r: r.get("event") == "coordinator loaded")
    assert loaded["failed"] == []
    assert asyncio.run(_committed(bp.bootstrap, group)) == {("t", 0): 45}
    asyncio.run(_commit_all(bp.bootstrap, group, [100]))
    assert asyncio.run(_committed(bp.bootstrap, group)) == {("t", 0): 100}
    assert bp.stop() == 0
    bp.start()
    bp.wait_for(lambda r: r.get("event") == "coordinator loaded")
    assert asyncio.run(_committed(bp.bootstrap, group)) == {("t", 0): 100}
