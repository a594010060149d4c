"""GE-5 for the APIs that name several groups (ConsumerGroupDescribe, ShareGroupDescribe,
StreamsGroupDescribe, DescribeGroups, DeleteGroups): the coordinator's state is checked before the
group ids, so while it is not active every id, a blank one too, is COORDINATOR_NOT_AVAILABLE, in
request order (GroupCoordinatorService's `if (!isActive.get())` before it looks at an id).

The coordinator is made inactive for real, as in classic/test_group_errors.py: the broker stops
while the requests, held by a chaos delay rule before their handlers run, are in flight."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest

from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupDescribeRequest
from protocol.kip932 import ShareGroupDescribeRequest
from protocol.kip1071 import StreamsGroupDescribeRequest
from tests.support.classic import COORDINATOR_NOT_AVAILABLE, GroupEnv, answers_while_the_coordinator_stops, stable_group

IDS = ["g", "", "unknown"]  # a Stable classic group, a blank id, an unknown one


def _requests() -> dict[str, tuple[Any, int | None]]:
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
    async def requests_of(env: GroupEnv) -> dict[str, tuple[Any, int | None]]:
        await stable_group(env, "g", 1)
        return dict(_requests())

    got = await answers_while_the_coordinator_stops(make_config, requests_of)
    for name in ("consumer", "share", "streams", "classic"):
        assert [(d.group_id, d.error_code) for d in got[name].groups] == [(g, COORDINATOR_NOT_AVAILABLE) for g in IDS], name
    assert [(r.group_id, r.error_code) for r in got["delete"].results] == [(g, COORDINATOR_NOT_AVAILABLE) for g in IDS]
    # Kafka's error lists: ConsumerGroupDescribe, StreamsGroupDescribe and DescribeGroups set no message; ShareGroupDescribe its error's
    assert [d.error_message for d in got["consumer"].groups] == [None] * len(IDS)
    assert [d.error_message for d in got["streams"].groups] == [None] * len(IDS)
    assert [d.error_message for d in got["share"].groups] == [ErrorCode.COORDINATOR_NOT_AVAILABLE.message] * len(IDS)
