"""Issue 11, bug 1: deleting a topic whose name is as long as Kafka allows (249 characters),
and a deletion that fails half way, never leave half a topic behind.

Directories set aside (`-delete`, `-stray`) are named as Kafka's LocalLog names them, the topic
cut so the name fits 255 bytes. A deletion is durable before any directory moves (topics.json
records the doomed id), so a failed rename (injected) or a restart in the middle ends with the
data gone: re-creating the topic starts empty, and the next start-up removes what was left.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest

from broker import Broker, Config
from protocol.errors import ErrorCode
from storage.log import renamed_dir_name
from tests.support import data
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until

LONGEST = "t" * 249
_Topic = CreateTopicsRequest.CreatableTopic


async def create(client: RawClient, name: str, partitions: int = 2) -> None:
    topic = _Topic(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
    resp = await client.request(CreateTopicsRequest[7](topics=[topic], timeout_ms=5000, validate_only=False))
    assert resp.topics[0].error_code == ErrorCode.NONE, resp


async def delete(client: RawClient, name: str) -> None:
    resp = await client.request(DeleteTopicsRequest[5](topic_names=[name], timeout_ms=5000))
    assert [(r.name, r.error_code) for r in resp.responses] == [(name, ErrorCode.NONE)], resp


async def produce(client: RawClient, name: str, partition: int, n: int) -> None:
    resp = await client.request(data.produce(name, partition, data.batch(n)))
    assert data.produce_result(resp).error_code == ErrorCode.NONE


async def end_offset(client: RawClient, name: str, partition: int) -> int:
    resp = await client.request(data.list_offsets(name, partition, -1))
    part = resp.topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE, resp
    return part.offset


def partition_dirs(data_dir: Path, prefix: str) -> list[str]:
    return sorted(e.name for e in os.scandir(data_dir) if e.is_dir() and e.name.startswith(prefix[:200]))


def test_renamed_dir_names_fit_255_bytes() -> None:
    for suffix in ("-delete", "-stray", "-future"):
        for partition in (0, 7, 2_147_483_647):
            name = renamed_dir_name(LONGEST, partition, suffix)
            assert len(name.encode()) == 255 and name.endswith(suffix) and f"-{partition}." in name
    short = renamed_dir_name("short", 3, "-delete")
    assert short.startswith("short-3.") and len(short) == len("short-3.") + 32 + len("-delete")


async def test_longest_topic_name_deletes_and_comes_back_empty(make_config: Any) -> None:
    config: Config = make_config()
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap, "admin")
        try:
            await create(client, LONGEST)
            await produce(client, LONGEST, 0, 5)
            await delete(client, LONGEST)
            assert broker.topics.get(LONGEST) is None
            await async_wait_until(lambda: partition_dirs(broker.datadir.path, LONGEST) == [], timeout=10)
            await create(client, LONGEST)
            assert await end_offset(client, LONGEST, 0) == 0
            await produce(client, LONGEST, 1, 3)
        finally:
            await client.close()
    # A restart with the topic's directories in place, and a stray one of the longest name.
    stray = Path(config.data_dir) / f"{'s' * 249}-0"
    stray.mkdir()
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap, "admin")
        try:
            assert await end_offset(client, LONGEST, 1) == 3
        finally:
            await client.close()
        strays = [n for n in partition_dirs(broker.datadir.path, "s" * 200) if n.endswith("-stray")]
        assert len(strays) == 1 and len(strays[0]) == 255


async def test_a_failed_deletion_never_brings_old_records_back(make_config: Any) -> None:
    config: Config = make_config()
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap, "admin")
        try:
            await create(client, "doomed")
            await produce(client, "doomed", 0, 7)
            broker.faults.fail_renames("doomed", count=1)  # partition 0's rename fails, partition 1's works
            await delete(client, "doomed")  # the topic is gone, as in Kafka, whose data removal is asynchronous
            assert broker.topics.get("doomed") is None
            assert partition_dirs(broker.datadir.path, "doomed-0") == ["doomed-0"]
            # Re-created: the old directory is set aside by its topic id, never reopened.
            await create(client, "doomed")
            assert await end_offset(client, "doomed", 0) == 0
            await delete(client, "doomed")
        finally:
            await client.close()
    # A deletion recorded whose directory never moved (every rename fails, as after a crash
    # between topics.json and the renames), then a restart: start-up removes what was left.
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap, "admin")
        try:
            await create(client, "doomed", 1)
            await produce(client, "doomed", 0, 4)
            broker.faults.fail_renames("doomed", count=None)
            await delete(client, "doomed")
            assert partition_dirs(broker.datadir.path, "doomed-") == ["doomed-0"]
        finally:
            await client.close()
    async with Broker(config) as broker:
        await async_wait_until(lambda: partition_dirs(broker.datadir.path, "doomed") == [], timeout=10)
        assert broker.topics.deleting == {}
        client = await RawClient.connect(broker.bootstrap, "admin")
        try:
            await create(client, "doomed", 1)
            assert await end_offset(client, "doomed", 0) == 0
        finally:
            await client.close()
