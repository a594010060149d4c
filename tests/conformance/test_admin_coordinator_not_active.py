"""GE-5 for the APIs that name several groups (ConsumerGroupDescribe, ShareGroupDescribe,
StreamsGroupDescribe, DescribeGroups, DeleteGroups): the coordinator's state is checked before the
group ids, so while it is not active every id, a blank one too, is COORDINATOR_NOT_AVAILABLE, in
request order (GroupCoordinatorService's `if (!isActive.get())` before it looks at an id).

The coordinator is made inactive for real, as in classic/test_group_errors.py: the broker stops
while the requests, held by a chaos delay rule before their handlers run, are in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest

from broker import Broker
from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupDescribeRequest
from protocol.kip932 import ShareGroupDescribeRequest
from protocol.kip1071 import StreamsGroupDescribeRequest
from tests.support.classic import COORDINATOR_NOT_AVAILABLE, GroupEnv, stable_group
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until

IDS = ["g", "", "unknown"]  # a Stable classic group, a blank id, an unknown one


def _requests() -> dict[str, tuple[Any, int]]:
    return {
        "consumer": (ConsumerGroupDescribeRequest(version=1, group_ids=IDS, include_authorized_operations=False), 1),
        "share": (ShareGroupDescribeRequest(version=1, group_ids=IDS, include_authorized_operations=False), 1),
        "streams": (
            StreamsGroupDescribeRequest(version=1, group_ids=IDS, include_authorized_operations=False, include_topology_description=False),
            1,
        ),
        "classic": (DescribeGroupsRequest[5](groups=IDS, include_authorized_operations=False), 5),
        "delete": (DeleteGroupsRequest[2](groups_names=IDS), 2),
    }


async def test_GE_5_several_group_apis_coordinator_not_active(make_config: Callable[..., Any]) -> None:
    broker = Broker(make_config())
    await broker.start()
    clients: list[RawClient] = []

    async def connect(client_id: str | None = "raw-client") -> RawClient:
        clients.append(await RawClient.connect(broker.bootstrap, client_id))
        return clients[-1]

    try:
        env = GroupEnv(broker, connect)
        await wait_ready(await env.ctl())
        await stable_group(env, "g", 1)
        requests = _requests()
        rule = broker.faults.add(client_id="held", delay_ms=3000, count=None)
        futures = {name: (await connect("held")).send(req, version) for name, (req, version) in requests.items()}
        await async_wait_until(lambda: rule.hits == len(requests), message="every request held")
        stopping = asyncio.get_running_loop().create_task(broker.stop())
        await async_wait_until(lambda: not broker.coordinator.active, message="the coordinator stopped")
        got = {name: await asyncio.wait_for(f, 30) for name, f in futures.items()}
        await stopping
    finally:
        for c in clients:
            await c.close()
        await broker.stop()
    for name in ("consumer", "share", "streams", "classic"):
        assert [(d.group_id, d.error_code) for d in got[name].groups] == [(g, COORDINATOR_NOT_AVAILABLE) for g in IDS], name
    assert [(r.group_id, r.error_code) for r in got["delete"].results] == [(g, COORDINATOR_NOT_AVAILABLE) for g in IDS]
    # Kafka's error lists: ConsumerGroupDescribe, StreamsGroupDescribe and DescribeGroups set no message; ShareGroupDescribe its error's
    assert [d.error_message for d in got["consumer"].groups] == [None] * len(IDS)
    assert [d.error_message for d in got["streams"].groups] == [None] * len(IDS)
    assert [d.error_message for d in got["share"].groups] == [ErrorCode.COORDINATOR_NOT_AVAILABLE.message] * len(IDS)
