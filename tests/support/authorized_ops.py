"""Every authorized-operations field a broker answers, asked every way a client can ask it.

`survey(client, ready)` sets up a topic, a classic group (by an offset commit) and a consumer
group (by a ConsumerGroupHeartbeat), then asks Metadata v8-v12, DescribeCluster v0-v1,
DescribeGroups v3-v5 and ConsumerGroupDescribe v0-v1, with and without the include flags, about
them and about names that do not exist, and returns what each answer says: per entry its error
code and authorized operations (entries sorted: the order of groups in an answer is not at issue). tests/differential/test_reference_authorized_ops.py compares the
survey of kaflet with Kafka 4.4's.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeGroupsRequest
from kafka.protocol.metadata import MetadataRequest

from tests.support import groups as g
from tests.support.consumer_groups import describe, heartbeat
from tests.support.raw_client import RawClient
from tests.support.timestamp_batches import create

TOPIC = "ops-topic"
CLASSIC = "ops-classic"
CONSUMER = "ops-consumer"
MISSING_GROUP = "ops-no-such-group"
MISSING_TOPIC = "ops-no-such-topic"


def _ops(value: Any) -> Any:
    return sorted(value) if isinstance(value, set) else value


async def _metadata(client: RawClient) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = [TOPIC, MISSING_TOPIC, "bad/name"]
    for version in range(8, 13):
        for cluster_ops in (False, True) if version <= 10 else (False,):
            for topic_ops in (False, True):
                kw: dict[str, Any] = {"include_topic_authorized_operations": topic_ops}
                if version <= 10:
                    kw["include_cluster_authorized_operations"] = cluster_ops
                wanted = [MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in names]
                resp = await client.request(MetadataRequest[version](topics=wanted, allow_auto_topic_creation=False, **kw))
                key = f"v{version} cluster={cluster_ops} topics={topic_ops}"
                out[key] = {
                    "cluster": _ops(getattr(resp, "authorized_operations", "absent")),
                    "topics": sorted((t.name, t.error_code, str(_ops(t.authorized_operations))) for t in resp.topics),
                }
                every = await client.request(MetadataRequest[version](topics=None, allow_auto_topic_creation=False, **kw))
                out[key]["all topics"] = sorted(
                    (t.name, t.error_code, str(_ops(t.authorized_operations))) for t in every.topics if t.name == TOPIC
                )
    return out


async def _describe_cluster(client: RawClient) -> dict[str, Any]:
    out = {}
    for version in (0, 1):
        for include in (False, True):
            kw = {"endpoint_type": 1} if version >= 1 else {}
            resp = await client.request(DescribeClusterRequest[version](include_cluster_authorized_operations=include, **kw))
            out[f"v{version} include={include}"] = (resp.error_code, _ops(resp.authorized_operations))
    return out


async def _describe_groups(client: RawClient) -> dict[str, Any]:
    out = {}
    for version in (3, 4, 5):
        for include in (False, True):
            resp = await client.request(
                DescribeGroupsRequest[version](groups=[CLASSIC, MISSING_GROUP, CONSUMER, ""], include_authorized_operations=include)
            )
            out[f"v{version} include={include}"] = sorted((d.group_id, d.error_code, _ops(d.authorized_operations)) for d in resp.groups)
    return out


async def _consumer_group_describe(client: RawClient) -> dict[str, Any]:
    out = {}
    for version in (0, 1):
        for include in (False, True):
            resp = await describe(client, CONSUMER, MISSING_GROUP, CLASSIC, "", version=version, include_ops=include)
            out[f"v{version} include={include}"] = sorted((d.group_id, d.error_code, d.authorized_operations) for d in resp.groups)
    return out


async def survey(client: RawClient, ready: Callable[[str], Awaitable[None]] | None = None) -> dict[str, Any]:
    await create(client, TOPIC, {})
    if ready is not None:
        await ready(TOPIC)
    deadline = time.monotonic() + 30
    while (committed := await g.commit(client, CLASSIC, {(TOPIC, 0): 1})) != {(TOPIC, 0): 0}:
        assert time.monotonic() < deadline, committed  # a coordinator still loading answers retriably
        await asyncio.sleep(0.2)
    joined = await heartbeat(client, CONSUMER, uuid.uuid4().hex[:22], topics=[TOPIC], rebalance_timeout_ms=30_000, owned={})
    assert joined.error_code == 0, joined
    return {
        "Metadata": await _metadata(client),
        "DescribeCluster": await _describe_cluster(client),
        "DescribeGroups": await _describe_groups(client),
        "ConsumerGroupDescribe": await _consumer_group_describe(client),
    }
