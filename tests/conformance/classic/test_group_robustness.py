"""Issue 11, bug 5: a member's protocols are a set, and a failing coordinator timer never wedges a group.

- JoinGroup listing the same protocol twice is served as Kafka serves it: the group counts a
  member's protocols by name, so `[range, range]` supports `range` once, and the member's
  metadata for it is the first listed.
- A timer callback that raises (injected with `faults.fail_timers`) is logged at ERROR with its
  group, and the group is reset: parked JoinGroups get NOT_COORDINATOR, and the members rejoin
  into a working group (ClassicRebalancer.recover_group).
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tests.support.classic import NONE, NOT_COORDINATOR, GroupEnv
from tests.support.groups import subscription


@pytest.mark.parametrize("version", [3, 9])
async def test_jg_duplicate_protocol_names_count_once_first_metadata_kept(env: GroupEnv, version: int) -> None:
    first, second = subscription(["t1"]), subscription(["t2"])
    m = env.member(f"dup-{version}", version=version, protocols=[("range", first), ("range", second)])
    resp = await m.join()
    assert resp.error_code == NONE, resp
    assert resp.protocol_name == "range"
    assert resp.leader == resp.member_id
    assert [(x.member_id, bytes(x.metadata)) for x in resp.members] == [(resp.member_id, first)]
    # A rejoin with the same list is the same member's same protocols (JG-12: no rebalance needed).
    again = await m.join()
    assert (again.error_code, again.generation_id) == (NONE, resp.generation_id)


async def test_failed_join_timer_resets_the_group_and_members_rejoin(env: GroupEnv) -> None:
    group = "timer-fails"
    env.broker.faults.fail_timers(group, count=1)
    m = env.member(group, version=9)
    with capture_logs() as logs:
        first = await m.join()  # parks until the initial-rebalance timer, which raises
    assert first.error_code == NOT_COORDINATOR, first
    failed = [e for e in logs if e["event"] == "coordinator timer failed"]
    assert len(failed) == 1 and failed[0]["group"] == group and failed[0]["log_level"] == "error"
    assert [e["group"] for e in logs if e["event"] == "group reset after a failed timer"] == [group]
    assert (await env.describe(group)).state == "Empty"
    # The client's answer to NOT_COORDINATOR: find the coordinator again and rejoin.
    m.member_id = ""
    resp = await m.join()
    assert resp.error_code == NONE, resp
    sync = await m.sync({resp.member_id: b"a"})
    assert sync.error_code == NONE
    await env.wait_state(group, "Stable")


async def test_failed_heartbeat_timer_resets_a_stable_group(env: GroupEnv) -> None:
    group = "hb-timer-fails"
    m = env.member(group, version=9, session_ms=50)
    resp = await m.join()
    assert (await m.sync({resp.member_id: b"a"})).error_code == NONE
    env.broker.faults.fail_timers(group, count=1)
    await env.wait_state(group, "Empty")  # the session timer fired and raised: the group was reset
    m.member_id = ""
    again = await m.join()
    assert again.error_code == NONE and again.generation_id > resp.generation_id
