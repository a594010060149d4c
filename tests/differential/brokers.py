"""The two brokers of the differential suite, made ready for scenarios: shared topics created on
both (the same names and partition counts) and every topic id known, for normalize.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from protocol.apis import ApiKey
from tests.differential.harness import Side, Target, build_request
from tests.support.raw_client import RawClient


async def create_topics(broker: Target, topics: dict[str, int], client: RawClient | None = None) -> None:
    """Create `topics` ({name: partitions}) and wait until each has a leader for every partition."""
    own = client is None
    client = client or await RawClient.connect(broker.bootstrap, "diff-setup")
    try:
        req = build_request(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []} for n, p in topics.items()
                ],
                "timeout_ms": 30_000,
                "validate_only": False,
            },
        )
        resp = await client.request(req, timeout=40)
        for t in resp.topics:
            if t.error_code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
                raise RuntimeError(f"{broker.name}: cannot create {t.name}: {t.error_code} {t.error_message}")
        deadline = time.monotonic() + 30
        while True:
            meta = await client.request(
                build_request(ApiKey.METADATA, 12, {"topics": [{"name": n} for n in topics], "allow_auto_topic_creation": False})
            )
            ready = [
                t
                for t in meta.topics
                if t.error_code == 0 and len(t.partitions) == topics[t.name] and all(p.leader_id >= 0 for p in t.partitions)
            ]
            for t in ready:
                broker.topic_ids[t.topic_id] = t.name
            if len(ready) == len(topics):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{broker.name}: topics {sorted(topics)} not ready: {meta}")
            await asyncio.sleep(0.05)
    finally:
        if own:
            await client.close()


async def create_topic(side: Side, partitions: int = 1, tag: str = "") -> str:
    """A topic of the scenario's own (quietly: its creation is not compared)."""
    name = side.topic(tag)
    await create_topics(side.broker, {name: partitions}, await side.conn("setup"))
    return name


async def producer_ids_ready(broker: Target) -> None:
    """Until an idempotent InitProducerId succeeds: a fresh Kafka answers its first ones
    COORDINATOR_LOAD_IN_PROGRESS while its controller hands it a first block of producer ids,
    which is start-up, not behaviour a scenario compares."""
    client = await RawClient.connect(broker.bootstrap, "diff-setup")
    try:
        deadline = time.monotonic() + 30
        while True:
            resp = await client.request(build_request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": -1}))
            if resp.error_code == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{broker.name}: InitProducerId still fails: {resp}")
            await asyncio.sleep(0.05)
    finally:
        await client.close()


async def groups_see_topics(broker: Target, topics: dict[str, int]) -> None:
    """Until a KIP-848 group is assigned every partition of `topics`: Kafka's group coordinator
    learns of new topics from its metadata image a moment after Metadata shows them."""
    client = await RawClient.connect(broker.bootstrap, "diff-setup")
    group, member = "diff-setup.topics", "diff-setup-member-id-0"
    try:
        deadline = time.monotonic() + 60
        while True:
            fields = {
                "group_id": group,
                "member_id": member,
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout_ms": 30_000,
                "subscribed_topic_names": sorted(topics),
                "subscribed_topic_regex": None,
                "server_assignor": None,
                "topic_partitions": [],
            }
            resp = await client.request(build_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, fields))
            assigned = sum(len(tp.partitions) for tp in resp.assignment.topic_partitions) if resp.assignment else 0
            left = await client.request(build_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {**fields, "member_epoch": -1}))
            if resp.error_code == 0 and assigned == sum(topics.values()):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{broker.name}: a consumer group is still not assigned {sorted(topics)}: {resp}; leaving: {left}")
            await asyncio.sleep(0.05)
    finally:
        await client.close()


def prepare(brokers: list[Target], topics: dict[str, int]) -> None:
    async def one(broker: Target) -> None:
        await create_topics(broker, topics)
        await asyncio.gather(groups_see_topics(broker, topics), producer_ids_ready(broker))

    async def both() -> Any:
        await asyncio.gather(*(one(b) for b in brokers))

    asyncio.run(both())
