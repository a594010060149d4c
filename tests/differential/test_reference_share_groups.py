"""Share groups (KIP-932) against Apache Kafka 4.4, request by request: the scenarios of
tests/support/share_scenarios.py (every share API, their error paths and bad inputs, the share
group configs) run on the reference broker and on kaflet, each with the same share bounds
(SHARE_TEST_BOUNDS), and every answer must be the same.

Where kaflet decides differently (docs/decisions.md), the scenario leaves the request out and
says so: DescribeShareGroupOffsets of a partition the topic does not have (Kafka 4.4 never
answers it), and the dead-letter-queue group configs (not served by kaflet)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from broker import Broker, Config
from tests.support import share_scenarios as sc
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient
from tests.support.share import SHARE_BOUNDS


@pytest.fixture
async def broker(make_config: Callable[..., Config]) -> AsyncIterator[Broker]:
    async with Broker(make_config(**SHARE_BOUNDS)) as b:
        yield b


async def _both(kafka_reference: Any, raw: Callable[..., Any], scenario: Callable[..., Any]) -> tuple[sc.Lines, sc.Lines]:
    reference = await RawClient.connect(kafka_reference.bootstrap)
    extra: list[RawClient] = []

    async def connect_reference() -> RawClient:
        extra.append(await RawClient.connect(kafka_reference.bootstrap))
        return extra[-1]

    run = uuid.uuid4().hex[:8]  # both sides name their topics and groups alike
    sc.same_names(run)
    try:
        theirs = await (scenario(reference, connect_reference) if scenario is sc.admin_scenario else scenario(reference))
    finally:
        await reference.close()
        for c in extra:
            await c.close()
    client = await raw()
    await wait_ready(client)
    sc.same_names(run)
    mine = await (scenario(client, raw) if scenario is sc.admin_scenario else scenario(client))
    return theirs, mine


def _same(theirs: sc.Lines, mine: sc.Lines) -> None:
    assert [step for step, _ in mine] == [step for step, _ in theirs]
    differing = [(step, k, f) for (step, k), (_, f) in zip(theirs, mine, strict=True) if k != f]
    assert not differing, "\n".join(f"{step}\n  kafka:  {k}\n  kaflet: {f}" for step, k, f in differing)


async def test_share_heartbeat_and_describe_answer_as_kafka(kafka_reference: Any, raw: Callable[..., Any]) -> None:
    _same(*await _both(kafka_reference, raw, sc.heartbeat_scenario))


async def test_share_fetch_and_acknowledge_answer_as_kafka(kafka_reference: Any, raw: Callable[..., Any]) -> None:
    _same(*await _both(kafka_reference, raw, sc.fetch_scenario))


async def test_share_state_apis_answer_as_kafka(kafka_reference: Any, raw: Callable[..., Any]) -> None:
    _same(*await _both(kafka_reference, raw, sc.state_scenario))


async def test_share_admin_and_group_collisions_answer_as_kafka(kafka_reference: Any, raw: Callable[..., Any]) -> None:
    _same(*await _both(kafka_reference, raw, sc.admin_scenario))


async def test_share_group_configs_answer_as_kafka(kafka_reference: Any, raw: Callable[..., Any]) -> None:
    _same(*await _both(kafka_reference, raw, sc.config_scenario))
