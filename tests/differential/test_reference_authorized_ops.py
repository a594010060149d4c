"""Every authorized-operations field against Apache Kafka 4.4 without an authorizer: Metadata
v8-v12 (topics, found or not, and the cluster in v8-v10), DescribeCluster v0-v1, DescribeGroups
v3-v5 and ConsumerGroupDescribe v0-v1, asked with and without their include flags
(tests/support/authorized_ops.py), answer alike on kaflet and on the reference broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker import Broker
from tests.differential.test_reference_timestamps import _leader_ready
from tests.support.authorized_ops import survey
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient


async def test_authorized_operations_answer_as_kafka_answers(kafka_reference: Any, broker: Broker, raw: Callable[..., Any]) -> None:
    reference = await RawClient.connect(kafka_reference.bootstrap)
    try:
        theirs = await survey(reference, lambda topic: _leader_ready(reference, topic))
    finally:
        await reference.close()
    client = await raw()
    await wait_ready(client)
    mine = await survey(client)
    for api in theirs:
        assert mine[api] == theirs[api], api
