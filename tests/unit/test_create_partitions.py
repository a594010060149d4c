"""CreatePartitions v0-v3 over the wire."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import CreatePartitionsRequest

from broker import Broker
from protocol.errors import ErrorCode

_Topic = CreatePartitionsRequest.CreatePartitionsTopic
_Assign = _Topic.CreatePartitionsAssignment


def grow(name: str, count: int, assignments: list[list[int]] | None = None) -> Any:
    return _Topic(name=name, count=count, assignments=None if assignments is None else [_Assign(broker_ids=a) for a in assignments])


async def send(client: Any, *topics: Any, version: int = 3, validate_only: bool = False) -> Any:
    return await client.request(CreatePartitionsRequest[version](topics=list(topics), timeout_ms=5000, validate_only=validate_only))


@pytest.mark.parametrize("version", range(4))
async def test_adds_partitions(raw: Any, broker: Broker, version: int) -> None:
    broker.topics.create("grow", 1)
    added: list[tuple[str, int, int]] = []
    broker.topics.on_partitions_added.append(lambda t, old: added.append((t.name, old, t.partitions)))
    client = await raw()
    resp = await send(client, grow("grow", 3), version=version)
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [("grow", 0, None)]
    assert broker.topics.get("grow").partitions == 3  # type: ignore[union-attr]
    assert added == [("grow", 1, 3)]


async def test_validate_only_changes_nothing(raw: Any, broker: Broker) -> None:
    broker.topics.create("dry", 1)
    client = await raw()
    resp = await send(client, grow("dry", 4), validate_only=True)
    assert [(r.name, r.error_code) for r in resp.results] == [("dry", 0)]
    assert broker.topics.get("dry").partitions == 1  # type: ignore[union-attr]


async def test_count_must_grow(raw: Any, broker: Broker) -> None:
    broker.topics.create("three", 3)
    client = await raw()
    resp = await send(client, grow("three", 3))
    assert [(r.error_code, r.error_message) for r in resp.results] == [(ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s).")]
    resp = await send(client, grow("three", 2))
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (ErrorCode.INVALID_PARTITIONS, "The topic three currently has 3 partition(s); 2 would not be an increase.")
    ]


async def test_unknown_topic(raw: Any) -> None:
    client = await raw()
    resp = await send(client, grow("ghost", 2))
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [("ghost", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)]


async def test_duplicates_answered_first_and_once(raw: Any, broker: Broker) -> None:
    broker.topics.create("x", 1)
    broker.topics.create("y", 1)
    client = await raw()
    resp = await send(client, grow("y", 2), grow("x", 2), grow("y", 3))
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [
        ("y", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("x", 0, None),
    ]
    assert broker.topics.get("y").partitions == 1  # type: ignore[union-attr]


async def test_assignments(raw: Any, broker: Broker) -> None:
    broker.topics.create("assigned", 1)
    client = await raw()
    resp = await send(client, grow("assigned", 3, [[1], [1]]))
    assert [r.error_code for r in resp.results] == [0]
    cases = [
        ([[1]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        ([[1], [2]], "The manual partition assignment includes broker 2, but no such broker is registered."),
        ([[1], [1, 1]], "The manual partition assignment includes the broker 1 more than once."),
        ([[1], []], "The manual partition assignment includes an empty replica list."),
    ]
    for assignments, message in cases:
        resp = await send(client, grow("assigned", 5, assignments))
        assert [(r.error_code, r.error_message) for r in resp.results] == [(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)]
    assert broker.topics.get("assigned").partitions == 3  # type: ignore[union-attr]


async def test_internal_topics_keep_their_partition_count(raw: Any, broker: Broker) -> None:
    client = await raw()
    resp = await send(client, grow("__consumer_offsets", 6))
    assert [r.error_code for r in resp.results] == [ErrorCode.POLICY_VIOLATION]
    assert broker.topics.get("__consumer_offsets").partitions == 5  # type: ignore[union-attr]


async def test_excessively_large_request_fails_whole(raw: Any, broker: Broker) -> None:
    broker.topics.create("big", 1)
    client = await raw()
    resp = await send(client, grow("big", 20_000))
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
    ]
    assert broker.topics.get("big").partitions == 1  # type: ignore[union-attr]
