"""Batch timestamps against Apache Kafka 4.4: the same batches, raw and from Sarama 1.22, go to
the reference broker and to kaflet, and each stores and answers them alike (the stored header,
ListOffsets by timestamp, the produce answer with its per-record errors)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest

from broker import Broker
from protocol import records as r
from tests.clients.test_sarama_timestamps import offsets_for_times, sarama_produce
from tests.support import data as d
from tests.support.raw_client import RawClient
from tests.support.timestamp_batches import CASES, create, observe, recent_now


async def _leader_ready(client: RawClient, topic: str) -> None:
    """Kafka creates a topic's partitions asynchronously: wait until its leader is known."""
    deadline = time.monotonic() + 30
    while True:
        meta = await client.request(
            MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)], allow_auto_topic_creation=False)
        )
        [t] = meta.topics
        if t.error_code == 0 and t.partitions and t.partitions[0].leader_id >= 0:
            return
        assert time.monotonic() < deadline, f"{topic} has no leader on the reference broker"
        await asyncio.sleep(0.1)


async def test_every_case_is_stored_and_answered_as_kafka_does(kafka_reference: Any, broker: Broker, raw: Callable[..., Any]) -> None:
    reference = await RawClient.connect(kafka_reference.bootstrap)
    ours: RawClient = await raw()
    now = recent_now()
    try:
        differences = {}
        for name, case in CASES.items():
            topic = f"ts-{name}"
            theirs = await observe(reference, topic, case, now, lambda t: _leader_ready(reference, t))
            mine = await observe(ours, topic, case, now)
            if mine != theirs:
                differences[name] = {"kafka": theirs, "kaflet": mine}
    finally:
        await reference.close()
    assert not differences, differences


@pytest.mark.parametrize("compression", ["none", "gzip"])
async def test_sarama_batches_are_stored_as_kafka_stores_them(
    kafka_reference: Any, broker: Broker, raw: Callable[..., Any], compression: str
) -> None:
    topic = f"sarama-{compression}"
    t0 = int(time.time() * 1000) - 600_000
    stamps = [t0 + 1000 * i for i in range(4)]
    asked = [t0 - 1, t0 + 500, t0 + 2000, t0 + 2500, t0 + 3000, t0 + 3001]
    seen = {}
    for name, bootstrap in (("kafka", kafka_reference.bootstrap), ("kaflet", broker.bootstrap)):
        client = await RawClient.connect(bootstrap)
        try:
            await create(client, topic, {})
            if name == "kafka":
                await _leader_ready(client, topic)
            offsets = await asyncio.to_thread(sarama_produce, bootstrap, topic, stamps, compression)
            stored = (await client.request(d.fetch([(topic, 0, 0)]))).responses[0].partitions[0].records
            headers = [(h.attributes, h.base_timestamp - t0, h.max_timestamp - t0) for _pos, h in r.iter_batches(stored)]
            found = await asyncio.to_thread(offsets_for_times, bootstrap, topic, asked)
        finally:
            await client.close()
        seen[name] = {"offsets": offsets, "batches": headers, "offsets_for_times": found}
    compressed = 1 if compression == "gzip" else 0
    assert seen["kafka"] == {"offsets": [0, 1, 2, 3], "batches": [(compressed, 0, 3000)], "offsets_for_times": [0, 1, 2, 3, 3, -1]}
    assert seen["kaflet"] == seen["kafka"]
