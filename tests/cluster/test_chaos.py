"""Chaos operations on one broker (broker/cluster/chaos.py, broker/network/faults.py) over real sockets:
per-request rules, librdkafka-style error stacks, latency, black holes, down and up, list and clear."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from broker import Broker
from broker.cluster.chaos import ChaosError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support.raw_client import RawClient


async def produce_code(client: RawClient, topic: str = "t", version: int | None = None) -> int:
    request = d.produce(topic, 0, d.batch())
    return int(d.produce_result(await client.request(request, version=version)).error_code)


def api_versions() -> Any:
    return ApiVersionsRequest[3](client_software_name="t", client_software_version="1")


async def test_error_stack_gives_the_next_requests_their_codes_in_order(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    broker.chaos.push_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", 0, ErrorCode.REQUEST_TIMED_OUT])
    assert [await produce_code(client) for _ in range(4)] == [6, 0, 7, 0]
    assert broker.faults.stacks == []
    assert broker.faults.injected["error_stack"] == 3


async def test_error_stack_of_one_client_leaves_others_alone(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    mine, other = await raw("mine"), await raw("other")
    broker.chaos.push_errors(ApiKey.PRODUCE, [ErrorCode.NOT_ENOUGH_REPLICAS], client_id="mine")
    assert await produce_code(other) == 0
    assert await produce_code(mine) == ErrorCode.NOT_ENOUGH_REPLICAS


async def test_rule_matches_by_api_version_client_id_and_count(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client = await raw("c1")
    broker.chaos.rule("Produce", "NOT_LEADER_OR_FOLLOWER", version=7, count=2)
    broker.chaos.rule("Produce", "KAFKA_STORAGE_ERROR", client_id="someone-else", count=None)
    assert await produce_code(client, version=8) == 0  # another version
    assert await produce_code(client, version=7) == 6
    assert await produce_code(client, version=7) == 6
    assert await produce_code(client, version=7) == 0  # count exhausted
    assert [r.client_id for r in broker.faults.rules] == ["someone-else"]


async def test_latency_delays_every_response_and_keeps_their_order(broker: Broker, raw: Callable[..., Any]) -> None:
    client = await raw()
    broker.chaos.latency(300)
    started = time.monotonic()
    answers = await asyncio.gather(*(client.request(api_versions()) for _ in range(5)))
    assert time.monotonic() - started >= 0.3  # a lower bound only: load can only add to it
    assert all(a.error_code == 0 for a in answers)  # the raw client checks correlation ids in order
    broker.chaos.latency(0)
    assert (await client.request(api_versions())).error_code == 0


async def test_black_hole_by_client_id_holds_then_delivers(broker: Broker, raw: Callable[..., Any]) -> None:
    holed, other = await raw("victim"), await raw("bystander")
    assert (await holed.request(api_versions())).error_code == 0  # the broker now knows its client id
    hole = broker.chaos.hole(client_id="victim")
    pending = holed.send(api_versions())
    late = await raw("victim")  # a connection it opens later falls in too
    late_pending = late.send(api_versions())
    assert (await other.request(api_versions())).error_code == 0
    done, _ = await asyncio.wait([pending, late_pending], timeout=0.5)
    assert not done
    assert holed.writer.is_closing() is False
    assert [c["hole"] for c in broker.chaos.connections() if c["client_id"] == "victim"] == [hole.id, hole.id]
    assert broker.chaos.restore() == 1
    assert (await asyncio.wait_for(pending, 5)).error_code == 0
    assert (await asyncio.wait_for(late_pending, 5)).error_code == 0


async def test_black_hole_of_one_connection_closes_by_itself(broker: Broker, raw: Callable[..., Any]) -> None:
    a, b = await raw("same"), await raw("same")
    assert (await a.request(api_versions())).error_code == 0
    assert (await b.request(api_versions())).error_code == 0
    host, port = a.writer.get_extra_info("sockname")[:2]
    peer_a = f"{host}:{port}"
    broker.chaos.hole(peer=peer_a, duration_ms=400)
    pending = a.send(api_versions())
    assert (await b.request(api_versions())).error_code == 0
    assert not pending.done()
    assert (await asyncio.wait_for(pending, 5)).error_code == 0  # answered once the hole expired
    assert broker.faults.holes == []
    assert broker.faults.operations["hole_closed"] == 1


async def test_down_refuse_then_up_on_the_same_port(broker: Broker, raw: Callable[..., Any]) -> None:
    client = await raw()
    assert (await client.request(api_versions())).error_code == 0
    bootstrap = broker.bootstrap
    broker.chaos.down("refuse")
    assert await client.wait_closed_by_peer()
    with pytest.raises(ConnectionRefusedError):
        await RawClient.connect(bootstrap)
    with pytest.raises(ChaosError):
        broker.chaos.down("hang")
    await broker.chaos.up()
    assert broker.bootstrap == bootstrap
    again = await raw()
    assert (await again.request(api_versions())).error_code == 0


async def test_down_hang_accepts_and_never_answers_until_up(broker: Broker, raw: Callable[..., Any]) -> None:
    old = await raw()
    assert (await old.request(api_versions())).error_code == 0
    broker.chaos.down("hang")
    new = await raw()  # accepted
    pending = [old.send(api_versions()), new.send(api_versions())]
    done, _ = await asyncio.wait(pending, timeout=0.5)
    assert not done
    await broker.chaos.up()
    for fut in pending:
        assert (await asyncio.wait_for(fut, 5)).error_code == 0


async def test_state_lists_everything_and_clear_undoes_it(broker: Broker, raw: Callable[..., Any]) -> None:
    client = await raw("c")
    rule = broker.chaos.rule("Metadata", delay_ms=10, count=None)
    broker.chaos.push_errors("JoinGroup", ["COORDINATOR_NOT_AVAILABLE"])
    broker.chaos.latency(5)
    broker.chaos.hole(client_id="nobody")
    broker.chaos.down("hang")
    state = broker.chaos.state()
    assert [r["id"] for r in state["rules"]] == [rule.id]
    assert state["error_stacks"][0]["errors"] == [{"error": "COORDINATOR_NOT_AVAILABLE", "delay_ms": 0}]
    assert (state["latency_ms"], state["down"], state["holes"][0]["client_id"]) == (5, "hang", "nobody")
    assert state["operations"] == {"rule": 1, "push_errors": 1, "latency": 1, "hole": 1, "down": 1}
    await broker.chaos.clear()
    state = broker.chaos.state()
    assert (state["rules"], state["error_stacks"], state["latency_ms"], state["holes"], state["down"]) == ([], [], 0, [], None)
    assert (await client.request(api_versions())).error_code == 0


async def test_bad_parameters_are_refused(broker: Broker) -> None:
    for op, params in [
        ("rule", {"api": "NoSuchApi", "error": 6}),
        ("rule", {"api": "Produce", "error": "NO_SUCH_ERROR"}),
        ("rule", {"api": "Produce"}),  # neither error, delay nor close
        ("rule", {"api": "Produce", "error": 6, "count": 0}),
        ("push_errors", {"api": "Produce", "errors": []}),
        ("hole", {}),
        ("hole", {"client_id": "a", "peer": "1.2.3.4:5"}),
        ("down", {"mode": "sideways"}),
        ("up", {}),
        ("latency", {"ms": -1}),
        ("nonsense", {}),
        ("state", {"extra": 1}),
    ]:
        with pytest.raises(ChaosError):
            await broker.chaos.apply(op, params)
    assert broker.chaos.state()["rules"] == []
