"""DeleteTopics v0-v6 over the wire: by name, by id, and Kafka's errors for each mix-up."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.admin import DeleteTopicsRequest

from broker import Broker
from protocol.errors import ErrorCode
from tests.support import groups as g
from tests.support.waiting import async_wait_until

_State = DeleteTopicsRequest.DeleteTopicState


def user_topics(broker: Broker) -> list[str]:
    """Topic names without the internal topics the coordinator creates."""
    return [n for n in broker.topics.names() if not n.startswith("__")]


async def delete_names(client: Any, *names: str, version: int = 5) -> Any:
    return await client.request(DeleteTopicsRequest[version](topic_names=list(names), timeout_ms=5000))


async def delete_states(client: Any, *states: tuple[str | None, uuid.UUID | None]) -> Any:
    topics = [_State(name=n, topic_id=i) for n, i in states]
    return await client.request(DeleteTopicsRequest[6](topics=topics, timeout_ms=5000))


@pytest.mark.parametrize("version", range(1, 6))  # v0 is not served (Kafka 4)
async def test_delete_by_name(raw: Any, broker: Broker, version: int) -> None:
    broker.topics.create("gone", 2)
    broker.topics.create("kept", 1)
    deleted: list[str] = []
    broker.topics.on_deleted.append(lambda t: deleted.append(t.name))
    client = await raw()
    resp = await delete_names(client, "gone", version=version)
    assert [(r.name, r.error_code) for r in resp.responses] == [("gone", 0)]
    if version >= 5:
        assert resp.responses[0].error_message is None
    assert user_topics(broker) == ["kept"]
    assert deleted == ["gone"]


async def test_delete_by_id(raw: Any, broker: Broker) -> None:
    created = broker.topics.create("by-id", 1)
    client = await raw()
    resp = await delete_states(client, (None, created.topic_id))
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in resp.responses] == [("by-id", created.topic_id, 0, None)]
    assert broker.topics.get("by-id") is None


async def test_delete_by_name_v6_answers_the_id(raw: Any, broker: Broker) -> None:
    created = broker.topics.create("named", 1)
    client = await raw()
    resp = await delete_states(client, ("named", None))
    assert [(r.name, r.topic_id, r.error_code) for r in resp.responses] == [("named", created.topic_id, 0)]


async def test_unknown_name_and_unknown_id(raw: Any) -> None:
    client = await raw()
    missing = uuid.uuid4()
    resp = await delete_states(client, ("ghost", None), (None, missing))
    results = {(r.name, r.topic_id): (r.error_code, r.error_message) for r in resp.responses}
    assert results == {
        ("ghost", None): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        (None, missing): (ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
    }
    resp = await delete_names(client, "ghost", version=1)
    assert [(r.name, r.error_code) for r in resp.responses] == [("ghost", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


async def test_mixups_get_invalid_request(raw: Any, broker: Broker) -> None:
    a = broker.topics.create("a", 1)
    b = broker.topics.create("b", 1)
    c = broker.topics.create("c", 1)
    client = await raw()
    resp = await delete_states(
        client,
        (None, None),  # neither
        ("a", a.topic_id),  # both
        ("b", None),
        ("b", None),  # name twice
        (None, c.topic_id),
        (None, c.topic_id),  # id twice
    )
    results = sorted((r.name or "", r.error_code, r.error_message) for r in resp.responses)
    assert results == sorted(
        [
            ("", ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
            ("a", ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
            ("b", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
            ("", ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
        ]
    )
    assert sorted(user_topics(broker)) == ["a", "b", "c"]
    assert b.topic_id and c.topic_id


async def test_name_and_id_of_the_same_topic(raw: Any, broker: Broker) -> None:
    t = broker.topics.create("same", 1)
    client = await raw()
    resp = await delete_states(client, (None, t.topic_id), ("same", None))
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in resp.responses] == [
        ("same", t.topic_id, ErrorCode.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")
    ]
    assert broker.topics.get("same") is not None


async def test_internal_topics_are_deleted_as_kafka_does(raw: Any, broker: Broker) -> None:
    client = await raw()
    assert (await g.commit(client, "grp", {}, version=8)) == {}
    broker.topics.create("t", 1)
    assert await g.commit(client, "grp", {("t", 0): 5}) == {("t", 0): 0}
    resp = await delete_names(client, "__consumer_offsets")
    assert [(r.name, r.error_code) for r in resp.responses] == [("__consumer_offsets", 0)]
    assert broker.topics.get("__consumer_offsets") is None
    # Group requests find no coordinator until FindCoordinator re-creates the topic (CO-7), empty.
    assert await g.commit(client, "grp", {("t", 0): 6}) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    first = await g.find_coordinator(client, ["grp"])
    assert first.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert broker.topics.get("__consumer_offsets") is not None

    async def found() -> bool:
        resp = await g.find_coordinator(client, ["grp"])
        return resp.coordinators[0].error_code == 0 and broker.coordinator.all_loaded

    await async_wait_until(found, message="coordinator back after re-creating __consumer_offsets")
    assert await g.fetched_offsets(client, "grp", {"t": [0]}) == {("t", 0): -1}
