"""A full disk (issue 11, bug 6): appends that fail with ENOSPC answer KAFKA_STORAGE_ERROR for
their partition, reads go on, nothing written before is damaged (a partial write is cut back),
offset commits answer NOT_COORDINATOR (GE-3) rather than a closed connection, CreateTopics
answers KAFKA_STORAGE_ERROR, and everything works again once space is freed, without a restart.

The data dir is on a small tmpfs the test mounts (root here); where mounting is not allowed,
ENOSPC is injected through the storage layer instead (tests/support/small_fs.py), and the test
ids say which: `[tmpfs]` or `[injected-enospc]`."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest

from broker import Broker
from protocol.errors import ErrorCode
from tests.conftest import test_config as config_for
from tests.support import data as d
from tests.support import groups as g
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient
from tests.support.small_fs import Disk
from tests.support.waiting import async_wait_until


@pytest.fixture
async def on_disk(disk: Disk) -> AsyncIterator[Broker]:
    async with Broker(config_for(disk.path / "data")) as broker:
        yield broker
        disk.free(broker)


async def produce(client: RawClient, topic: str, partition: int, batch: bytes) -> Any:
    return d.produce_result(await client.request(d.produce(topic, partition, batch)))


def fetched(response: Any) -> list[int]:
    return d.fetched_offsets(response.responses[0].partitions[0])


async def test_produce_on_a_full_disk_answers_storage_error_and_recovers(on_disk: Broker, disk: Disk) -> None:
    broker = on_disk
    broker.topics.create("t", 2)
    client = await RawClient.connect(broker.bootstrap)
    try:
        assert (await produce(client, "t", 0, d.batch(5))).base_offset == 0
        assert (await produce(client, "t", 1, d.batch(2))).base_offset == 0
        log0 = broker.logs.get("t", 0)
        assert log0 is not None
        size_before = os.path.getsize(log0.active.log_path)
        disk.fill(broker)
        # Larger than what is left of the segment's last page: the write starts, then fails.
        refused = await produce(client, "t", 0, d.batch(50, value=bytes(300)))
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR and refused.base_offset == -1
        # (A small batch may still fit in the last page a file already has: no new block needed.)
        assert (await produce(client, "t", 1, d.batch(50, value=bytes(300)))).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        # The partial write was cut back: the file and the log are as they were, and readable.
        assert os.path.getsize(log0.active.log_path) == size_before and log0.log_end_offset == 5
        assert fetched(await client.request(d.fetch([("t", 0, 0)]))) == [0, 1, 2, 3, 4]
        disk.free(broker)
        assert (await produce(client, "t", 0, d.batch(3))).base_offset == 5
        assert (await produce(client, "t", 1, d.batch(1))).base_offset == 2
        assert fetched(await client.request(d.fetch([("t", 0, 0)]))) == list(range(8))
    finally:
        await client.close()


async def test_one_failing_partition_leaves_the_others_appending(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 2)
    client: RawClient = await raw()
    rule = broker.faults.fail_appends("t", partition=0, error=errno.ENOSPC)
    assert (await produce(client, "t", 0, d.batch(1))).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (await produce(client, "t", 1, d.batch(1))).base_offset == 0
    broker.faults.remove_append_rule(rule)
    assert (await produce(client, "t", 0, d.batch(1))).base_offset == 0


@pytest.mark.parametrize("fsync", ["never", "always"])  # batched commits, and one append per commit
async def test_commits_on_a_full_disk_answer_not_coordinator_and_lose_nothing(disk: Disk, fsync: str) -> None:
    async with Broker(config_for(disk.path / "data", fsync=fsync)) as broker:
        try:
            await commits_on_a_full_disk(broker, disk)
        finally:
            disk.free(broker)


async def commits_on_a_full_disk(broker: Broker, disk: Disk) -> None:
    broker.topics.create("t", 2)
    client = await RawClient.connect(broker.bootstrap)
    both = [("t", 0), ("t", 1)]
    # Over a page of records, so the append needs a new block (a page a file has already holds a bit more).
    meta = "m" * 3000
    try:
        await wait_ready(client)
        assert await g.commit(client, "grp", dict.fromkeys(both, 7), metadata=meta) == dict.fromkeys(both, 0)
        disk.fill(broker)
        # GE-3: the failed append (KAFKA_STORAGE_ERROR) is answered NOT_COORDINATOR, never a closed connection.
        refused = await g.commit(client, "grp", dict.fromkeys(both, 8), metadata=meta)
        assert refused == dict.fromkeys(both, ErrorCode.NOT_COORDINATOR)

        async def committed_once_loaded(offset: int) -> bool:
            try:
                return await g.fetched_offsets(client, "grp", {"t": [0, 1]}) == dict.fromkeys(both, offset)
            except AssertionError:
                return False  # COORDINATOR_LOAD_IN_PROGRESS while the shard replays its log

        await async_wait_until(lambda: committed_once_loaded(7), message="the acknowledged commit, and only it")
        disk.free(broker)

        async def commit_accepted() -> bool:
            return await g.commit(client, "grp", dict.fromkeys(both, 9), metadata=meta) == dict.fromkeys(both, 0)

        await async_wait_until(commit_accepted, message="a commit accepted once space is freed")
        assert await committed_once_loaded(9)
    finally:
        await client.close()


async def test_create_topics_on_a_full_disk_answers_storage_error(on_disk: Broker, disk: Disk) -> None:
    broker = on_disk
    if not disk.mounted:
        pytest.skip("needs a real full file system (a tmpfs cannot be mounted here): injected ENOSPC covers partition appends only")
    client = await RawClient.connect(broker.bootstrap)
    topic = CreateTopicsRequest.CreatableTopic(name="new", num_partitions=3, replication_factor=1, assignments=[], configs=[])
    try:
        disk.fill(broker)
        resp = await client.request(CreateTopicsRequest[5](topics=[topic], timeout_ms=5000, validate_only=False))
        result = resp.topics[0]
        assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR, result
        assert result.error_message and "No space left on device" in result.error_message
        assert broker.topics.get("new") is None and not any(p.name.startswith("new-") for p in (disk.path / "data").iterdir())
        disk.free(broker)
        resp = await client.request(CreateTopicsRequest[5](topics=[topic], timeout_ms=5000, validate_only=False))
        assert resp.topics[0].error_code == 0 and broker.topics.get("new") is not None
        assert (await produce(client, "new", 2, d.batch(1))).base_offset == 0
        # CreatePartitions likewise: refused whole, nothing of the new partitions left behind.
        disk.fill(broker)
        more = CreatePartitionsRequest.CreatePartitionsTopic(name="new", count=6, assignments=None)
        resp = await client.request(CreatePartitionsRequest[3](topics=[more], timeout_ms=5000, validate_only=False))
        assert resp.results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR, resp
        assert broker.topics.get("new").partitions == 3  # type: ignore[union-attr]
        assert sorted(p.name for p in (disk.path / "data").iterdir() if p.name.startswith("new-")) == ["new-0", "new-1", "new-2"]
        disk.free(broker)
        resp = await client.request(CreatePartitionsRequest[3](topics=[more], timeout_ms=5000, validate_only=False))
        assert resp.results[0].error_code == 0 and broker.topics.get("new").partitions == 6  # type: ignore[union-attr]
    finally:
        await client.close()


async def test_a_restart_after_stopping_on_a_full_disk_keeps_everything(disk: Disk) -> None:
    config = config_for(disk.path / "data")
    async with Broker(config) as broker:
        broker.topics.create("t", 1)
        client = await RawClient.connect(broker.bootstrap)
        await wait_ready(client)
        assert (await produce(client, "t", 0, d.batch(4))).base_offset == 0
        assert await g.commit(client, "grp", {("t", 0): 4}) == {("t", 0): 0}
        disk.fill(broker)
        assert (await produce(client, "t", 0, d.batch(50, value=bytes(300)))).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        await client.close()
        # Stopped while the disk is still full: checkpoints and snapshots may not be written.
    disk.free(broker)
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap)
        assert fetched(await client.request(d.fetch([("t", 0, 0)]))) == [0, 1, 2, 3]
        assert (await produce(client, "t", 0, d.batch(1))).base_offset == 4
        await wait_ready(client)
        assert await g.fetched_offsets(client, "grp", {"t": [0]}) == {("t", 0): 4}
        await client.close()
