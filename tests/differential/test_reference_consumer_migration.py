"""KM-4 against Apache Kafka 4.4: the downgrade path when the last consumer-protocol member, a static one, is
replaced through a classic JoinGroup with its instance id (Kafka's validateOnlineDowngradeWithReplacedMember).
The same raw exchange runs against the reference broker and kaflet; the answers, normalised (ids and epochs
relative to the group's), must be equal."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest

from broker.coordinator.consumer.embedded import parse_assignment
from tests.support import groups as g
from tests.support.consumer_groups import NONE, CgMember, describe_one
from tests.support.coordinator import serving
from tests.support.raw_client import RawClient

RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


async def _create(client: RawClient, topic: str, partitions: int) -> None:
    T = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest[5](
        topics=[T(name=topic, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=30_000,
        validate_only=False,
    )
    resp = await client.request(req, timeout=60)
    assert resp.topics[0].error_code == NONE, resp


async def _until_served(call: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        resp = await call()
        if resp.error_code not in RETRIABLE or time.monotonic() > deadline:
            return resp
        await asyncio.sleep(0.1)


async def static_member_replaced_by_a_classic_join(bootstrap: str) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    group, topic = f"km4-{tag}", f"km4-{tag}"
    client = await RawClient.connect(bootstrap)
    try:
        await _create(client, topic, 4)
        static = CgMember(client, group, [topic], instance_id="inst", assignor="range")
        resp = await _until_served(static.join)
        assert resp.error_code == NONE, resp
        deadline = time.monotonic() + 30
        while sum(len(p) for p in static.owned.values()) < 4:
            assert time.monotonic() < deadline, static.owned
            await asyncio.sleep(0.05)
            assert (await static.beat()).error_code == NONE
        before = await describe_one(client, group)

        classic = await RawClient.connect(bootstrap)
        try:
            joined = await g.join(classic, group, "", instance_id="inst", protocols=[("range", g.subscription([topic]))])
            out: dict[str, Any] = {
                "join": (joined.error_code, joined.protocol_type, joined.protocol_name, joined.leader),
                "join generation - group epoch": joined.generation_id - before.group_epoch,
                "new member id": joined.member_id not in ("", static.member_id),
                "regex described": before.members[0].subscribed_topic_regex,  # "" for none, as Kafka's member builder
            }
            after = await describe_one(client, group)
            out["consumer describe"] = after.error_code
            described = (await g.describe(client, [group])).groups[0]
            out["classic describe"] = (
                described.error_code,
                described.group_state,
                described.protocol_type,
                [(m.member_id == joined.member_id, m.group_instance_id) for m in described.members],
            )
            listed = {x.group_id: x.group_type for x in (await g.list_groups(client)).groups}
            out["type"] = listed.get(group)
            synced = await g.sync(classic, group, joined.member_id, joined.generation_id, instance_id="inst")
            out["sync"] = (
                synced.error_code,
                {t == topic: sorted(ps) for t, ps in parse_assignment(synced.assignment).items()} if not synced.error_code else None,
            )
            # The replaced member is gone: its heartbeat is fenced out.
            out["old member heartbeat"] = (await static.beat()).error_code
            return out
        finally:
            await classic.close()
    finally:
        await client.close()


async def test_km_4_downgrade_when_a_static_member_is_replaced_through_join_group(kafka_reference: Any, make_config: Any) -> None:
    reference = await static_member_replaced_by_a_classic_join(kafka_reference.bootstrap)
    async with serving(make_config()) as served:
        kaflet = await static_member_replaced_by_a_classic_join(served.broker.bootstrap)
    assert reference["classic describe"][0] == NONE and reference["type"] == "classic", reference  # the path under test
    assert kaflet == reference
