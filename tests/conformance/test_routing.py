"""Routing and error mapping common to the group APIs: spec rules GE-1..GE-6 (section 2).

Shard states are produced for real, across an in-process restart on the same data dir (these
tests need the partition log on disk, so they wait for storage):
- LOADING: `__consumer_offsets` partition 0 carries ~96 MB of ballast (offsets_log.write_ballast)
  appended to the log before the restart, so requests sent on connect reach a shard of partition
  4 while it is LOADING. Every response is checked, and after the load the group serves normally.
- not hosted: partition 0 gets a record whose key cannot be decoded; its load fails (RL-2),
  so its groups are on a shard this broker does not host (NOT_COORDINATOR).
GE-1's "service not started" (COORDINATOR_NOT_AVAILABLE) is reached in a stopping broker
(classic/test_group_errors.py). Not covered: GE-3's rows for replication, timeouts and storage
errors (no way to make a single-node append fail on demand; MESSAGE_TOO_LARGE is tested), and
GE-7 (no authorizer).
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import MetadataRequest

from tests.support import groups as g
from tests.support.coordinator import (
    COORDINATOR_LOAD_IN_PROGRESS,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    NONE,
    NOT_COORDINATOR,
    UNKNOWN_SERVER_ERROR,
    committed,
    create_topic,
    describe_one,
    groups_on_partition,
    listed,
    partition_of,
    serving,
    wait_ready,
)
from tests.support.offsets_log import append_to_log, build_batch, write_ballast
from tests.support.raw_client import RawClient


@pytest.fixture
def discard_data(make_config: Callable[..., Any]) -> Iterator[None]:
    """Remove the (large) data dir after the test instead of leaving it to pytest's tmp retention."""
    yield
    shutil.rmtree(make_config().data_dir, ignore_errors=True)


async def _prepare(make_config: Callable[..., Any], subjects: list[str], extra: Callable[[Any], None]) -> None:
    """Commit an offset for each subject group, then let `extra` touch the log (before a restart)."""
    async with serving(make_config()) as served:
        create_topic(served.broker, "t", 3)
        client = await served.ready()
        for group in subjects:
            assert await g.commit(client, group, {("t", 0): 42}) == {("t", 0): NONE}
        extra(served.broker)


def _ballast(broker: Any) -> None:
    write_ballast(broker, 0)


def _corrupt(broker: Any) -> None:
    # An OffsetCommit key (type 1) whose group string claims 9 bytes but has 3.
    append_to_log(broker, 0, build_batch([(b"\x00\x01\x00\x09abc", b"\x00\x03")]))


def _group_requests(group: str) -> dict[str, Any]:
    """One request of every group API for `group` (versions with each error placement)."""
    fetch7 = OffsetFetchRequest[7](
        group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])], require_stable=False
    )
    return {
        "commit": g.commit_request(group, {("t", 0): 7, ("t", 1): 8}),
        "fetch8": g.fetch_request(group, {"t": [0]}),
        "fetch7": fetch7,
        "join": g.join_request(group, ""),
        "join-bad-session": g.join_request(group, "", session_timeout_ms=1),
        "sync": g.sync_request(group, "m", 1),
        "heartbeat": g.HeartbeatRequest[4](group_id=group, generation_id=1, member_id="m", group_instance_id=None),
        "leave": g.LeaveGroupRequest[5](
            group_id=group, members=[g.LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None, reason=None)]
        ),
        "describe": g.DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False),
        "delete": g.DeleteGroupsRequest[2](groups_names=[group]),
        "offset-delete": g.OffsetDeleteRequest[0](
            group_id=group,
            topics=[
                g.OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name="t", partitions=[g.OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)]
                )
            ],
        ),
        "list": g.ListGroupsRequest[5](states_filter=[], types_filter=[]),
        "find": g.FindCoordinatorRequest[4](key_type=0, coordinator_keys=[group]),
    }


async def _send_all(client: RawClient, requests: dict[str, Any]) -> dict[str, Any]:
    """Pipeline every request on one connection (written at once) and collect the answers."""
    futures = {name: client.send(req) for name, req in requests.items()}
    return {name: await asyncio.wait_for(f, 30) for name, f in futures.items()}


def _codes(responses: dict[str, Any]) -> dict[str, Any]:
    """The error each API reported for `group`, where that API reports it."""
    r = responses
    return {
        "commit": {p.error_code for t in r["commit"].topics for p in t.partitions},
        "fetch8": (r["fetch8"].groups[0].error_code, r["fetch8"].groups[0].topics),
        "fetch7": (r["fetch7"].error_code, r["fetch7"].topics),
        "join": (r["join"].error_code, r["join"].member_id, r["join"].generation_id),
        "join-bad-session": r["join-bad-session"].error_code,
        "sync": (r["sync"].error_code, r["sync"].assignment),
        "heartbeat": r["heartbeat"].error_code,
        "leave": (r["leave"].error_code, r["leave"].members),
        "describe": [(d.group_id, d.error_code) for d in r["describe"].groups],
        "delete": [(d.group_id, d.error_code) for d in r["delete"].results],
        "offset-delete": (r["offset-delete"].error_code, r["offset-delete"].topics),
        "list": (r["list"].error_code, [x.group_id for x in r["list"].groups]),
        "find": [(c.key, c.error_code) for c in r["find"].coordinators],
    }


# -- GE-1 / GE-2: a loading shard ----------------------------------------------------------------------


async def test_GE_1_loading_shard_answers_coordinator_load_in_progress(make_config: Callable[..., Any], discard_data: None) -> None:
    (subject,) = groups_on_partition(4, 5, 1, "ge1-loading")
    await _prepare(make_config, [subject], _ballast)
    async with serving(make_config()) as served:
        client = await served.connect()
        codes = _codes(await _send_all(client, _group_requests(subject)))
        busy = COORDINATOR_LOAD_IN_PROGRESS
        assert codes == {
            "commit": {busy},
            "fetch8": (busy, []),
            "fetch7": (busy, []),
            "join": (busy, "", -1),
            "join-bad-session": INVALID_SESSION_TIMEOUT,  # GE-5: stateless checks precede routing
            "sync": (busy, b""),
            "heartbeat": NONE,  # GE-2: Heartbeat answers NONE while loading
            "leave": (busy, []),
            "describe": [(subject, busy)],
            "delete": [(subject, busy)],
            "offset-delete": (busy, []),
            "list": (busy, []),  # LI-1: a loading shard fails the whole ListGroups
            "find": [(subject, NONE)],  # CO-6: FindCoordinator does not check loading
        }
        # Once loaded, the same group serves from its replayed state.
        await wait_ready(client)
        assert await committed(client, subject) == {("t", 0): 42}


async def test_GE_2_heartbeat_answers_none_while_loading(make_config: Callable[..., Any], discard_data: None) -> None:
    (subject,) = groups_on_partition(4, 5, 1, "ge2-loading")
    await _prepare(make_config, [subject], _ballast)
    async with serving(make_config()) as served:
        client = await served.connect()
        requests = {
            "heartbeat-v0": g.HeartbeatRequest[0](group_id=subject, generation_id=3, member_id="ghost"),
            "heartbeat-v4": g.HeartbeatRequest[4](group_id=subject, generation_id=3, member_id="ghost", group_instance_id="i"),
            "describe": g.DescribeGroupsRequest[5](groups=[subject], include_authorized_operations=False),
        }
        responses = await _send_all(client, requests)
        # The describe proves the shard was loading when the heartbeats were answered.
        assert responses["describe"].groups[0].error_code == COORDINATOR_LOAD_IN_PROGRESS
        assert responses["heartbeat-v0"].error_code == NONE
        assert responses["heartbeat-v4"].error_code == NONE
        # After loading, the same heartbeat is judged: the group has no such member.
        await wait_ready(client)
        hb = await g.heartbeat(client, subject, "ghost", 3)
        assert hb.error_code != NONE


# -- GE-1: a shard this broker does not host ----------------------------------------------------------


async def test_GE_1_shard_not_hosted_answers_not_coordinator(make_config: Callable[..., Any]) -> None:
    (subject,) = groups_on_partition(0, 5, 1, "ge1-lost")
    (healthy,) = groups_on_partition(2, 5, 1, "ge1-healthy")
    await _prepare(make_config, [subject, healthy], _corrupt)
    async with serving(make_config()) as served:
        client = await served.ready()
        codes = _codes(await _send_all(client, _group_requests(subject)))
        lost = NOT_COORDINATOR
        assert codes == {
            "commit": {lost},
            "fetch8": (lost, []),
            "fetch7": (lost, []),
            "join": (lost, "", -1),
            "join-bad-session": INVALID_SESSION_TIMEOUT,
            "sync": (lost, b""),
            "heartbeat": lost,  # GE-2 converts only COORDINATOR_LOAD_IN_PROGRESS
            "leave": (lost, []),
            "describe": [(subject, lost)],
            "delete": [(subject, lost)],
            "offset-delete": (lost, []),
            "list": (NONE, [healthy]),  # LI-1: a shard not hosted contributes nothing
            "find": [(subject, NONE)],  # CO-6
        }
        # Other shards serve normally.
        assert await committed(client, healthy) == {("t", 0): 42}


# -- GE-3 ------------------------------------------------------------------------------------------


async def test_GE_3_records_too_large_for_a_batch_map_to_unknown_server_error(make_config: Callable[..., Any]) -> None:
    # The commit's records exceed max.message.bytes of __consumer_offsets (the broker default,
    # message.max.bytes): Kafka's runtime fails the write with RecordTooLargeException
    # (MESSAGE_TOO_LARGE), which the coordinator maps to UNKNOWN_SERVER_ERROR.
    async with serving(make_config(message_max_bytes=20_000)) as served:
        create_topic(served.broker, "t", 10)
        client = await served.ready()
        offsets = {("t", p): p for p in range(10)}
        result = await g.commit(client, "ge3", offsets, metadata="m" * 3000)
        assert result == dict.fromkeys(offsets, UNKNOWN_SERVER_ERROR)
        assert await committed(client, "ge3", {"t": list(range(10))}) == {}
        # A commit that fits is accepted.
        assert await g.commit(client, "ge3", {("t", 0): 5}, metadata="m" * 3000) == {("t", 0): NONE}


# -- GE-4 ------------------------------------------------------------------------------------------


async def test_GE_4_empty_group_id_is_invalid_for_classic_group_apis(broker: Any, raw: Any) -> None:
    client = await raw()
    await wait_ready(client)
    results, expected = {}, {}
    for v in range(10):
        resp = await g.join(client, "", "some-member", version=v)
        results[("join", v)] = (resp.error_code, resp.member_id)
        expected[("join", v)] = (INVALID_GROUP_ID, "some-member")
    for v in range(6):
        resp = await g.sync(client, "", "m", 1, version=v)
        results[("sync", v)] = (resp.error_code, resp.assignment)
        expected[("sync", v)] = (INVALID_GROUP_ID, b"")
    for v in range(5):
        results[("heartbeat", v)] = (await g.heartbeat(client, "", "m", 1, version=v)).error_code
        expected[("heartbeat", v)] = INVALID_GROUP_ID
    for v in range(6):
        resp = await g.leave(client, "", [("m", None)], version=v)
        results[("leave", v)] = (resp.error_code, resp.members if v >= 3 else [])
        expected[("leave", v)] = (INVALID_GROUP_ID, [])
    assert results == expected


async def test_GE_4_empty_group_id_is_invalid_for_offset_delete(broker: Any, raw: Any) -> None:
    create_topic(broker, "t")
    client = await raw()
    await wait_ready(client)
    resp = await g.delete_offsets(client, "", {"t": [0]})
    assert (resp.error_code, resp.topics) == (INVALID_GROUP_ID, [])


async def test_GE_4_empty_group_id_is_a_group_for_offsets_and_admin(broker: Any, raw: Any) -> None:
    create_topic(broker, "t")
    client = await raw()
    await wait_ready(client)
    assert await g.commit(client, "", {("t", 0): 9}) == {("t", 0): NONE}
    assert await committed(client, "") == {("t", 0): 9}
    old = await g.fetch(client, "", {"t": [0]}, version=1)
    assert [(p.committed_offset, p.error_code) for t in old.topics for p in t.partitions] == [(9, NONE)]
    described = await describe_one(client, "")
    assert (described.error_code, described.group_state) == (NONE, "Empty")
    assert "" in await listed(client)
    resp = await g.delete_groups(client, [""])
    assert [(r.group_id, r.error_code) for r in resp.results] == [("", NONE)]
    assert await committed(client, "") == {}


# -- GE-5 ------------------------------------------------------------------------------------------


async def test_GE_5_api_layer_checks_come_first(broker: Any, raw: Any) -> None:
    client = await raw()
    await wait_ready(client)
    # SyncGroup v5 without ProtocolType: INCONSISTENT_GROUP_PROTOCOL even for an invalid group id.
    resp = await g.sync(client, "", "m", 1, version=5, protocol_type=None)
    assert resp.error_code == INCONSISTENT_GROUP_PROTOCOL
    resp = await g.sync(client, "", "m", 1, version=5, protocol_name=None)
    assert resp.error_code == INCONSISTENT_GROUP_PROTOCOL


async def test_GE_5_group_id_before_stateless_checks(broker: Any, raw: Any) -> None:
    client = await raw()
    await wait_ready(client)
    # Both the group id and the session timeout are invalid: the group id is checked first.
    resp = await g.join(client, "", "", session_timeout_ms=1)
    assert resp.error_code == INVALID_GROUP_ID
    resp = await g.join(client, "ge5", "", session_timeout_ms=1)
    assert resp.error_code == INVALID_SESSION_TIMEOUT


async def test_GE_5_routing_after_group_id_and_stateless_checks(make_config: Callable[..., Any]) -> None:
    # Partition 0 is not hosted, and p("") = 0: group-id validity is judged before routing.
    assert partition_of("", 5) == 0
    (subject,) = groups_on_partition(0, 5, 1, "ge5-lost")
    await _prepare(make_config, [subject], _corrupt)
    async with serving(make_config()) as served:
        client = await served.ready()
        assert (await g.heartbeat(client, "", "m", 1)).error_code == INVALID_GROUP_ID
        assert (await g.join(client, "", "", session_timeout_ms=1)).error_code == INVALID_GROUP_ID
        assert (await g.join(client, subject, "", session_timeout_ms=1)).error_code == INVALID_SESSION_TIMEOUT
        assert (await g.heartbeat(client, subject, "m", 1)).error_code == NOT_COORDINATOR
        # OffsetCommit to "" reaches routing (a legal id) and gets the shard's error.
        assert await g.commit(client, "", {("t", 0): 1}) == {("t", 0): NOT_COORDINATOR}


# -- GE-6 ------------------------------------------------------------------------------------------


async def test_GE_6_each_commit_is_applied_whole(broker: Any, raw: Any) -> None:
    create_topic(broker, "t", 40)
    writers = [await raw(f"writer-{i}") for i in range(4)]
    reader = await raw("reader")
    await wait_ready(reader)
    partitions = list(range(40))

    async def write(i: int, client: RawClient) -> None:
        for round_ in range(15):
            value = 1000 * (i + 1) + round_
            assert await g.commit(client, "ge6", {("t", p): value for p in partitions}) == dict.fromkeys(
                (("t", p) for p in partitions), NONE
            )

    async def read() -> list[set[int]]:
        seen = []
        while not all(t.done() for t in tasks):
            offsets = await committed(reader, "ge6", {"t": partitions})
            seen.append(set(offsets.values()))
            await asyncio.sleep(0)
        return seen

    tasks = [asyncio.ensure_future(write(i, c)) for i, c in enumerate(writers)]
    seen = await read()
    await asyncio.gather(*tasks)
    # A reader never observes a commit half applied: all 40 partitions carry one request's value.
    assert all(len(values) <= 1 for values in seen), [v for v in seen if len(v) > 1][:3]
    final = await committed(reader, "ge6", {"t": partitions})
    assert len(set(final.values())) == 1 and len(final) == 40


async def test_GE_6_a_failed_write_stores_nothing(make_config: Callable[..., Any]) -> None:
    async with serving(make_config(message_max_bytes=20_000)) as served:
        create_topic(served.broker, "t", 10)
        client = await served.ready()
        assert await g.commit(client, "ge6-atomic", {("t", 9): 1}) == {("t", 9): NONE}
        # Each partition alone would fit; together they exceed the batch limit: nothing is stored.
        offsets = {("t", p): 100 + p for p in range(10)}
        assert await g.commit(client, "ge6-atomic", offsets, metadata="m" * 3000) == dict.fromkeys(offsets, UNKNOWN_SERVER_ERROR)
        assert await committed(client, "ge6-atomic") == {("t", 9): 1}


async def test_GE_6_acknowledged_commits_survive_kill(broker_proc: Callable[..., Any]) -> None:
    proc = broker_proc()
    rng = random.Random(6)
    acked: dict[tuple[str, int], int] = {}
    client = await RawClient.connect(proc.bootstrap)
    try:
        # Topics through Metadata auto-creation (one partition each).
        await client.request(MetadataRequest[4](topics=["t0", "t1", "t2"], allow_auto_topic_creation=True))
        await wait_ready(client)
        for _ in range(60):
            tp = (f"t{rng.randrange(3)}", 0)
            value = rng.randrange(10**9)
            assert await g.commit(client, "ge6-kill", {tp: value}) == {tp: NONE}
            acked[tp] = value
    finally:
        await client.close()
    proc.kill()  # SIGKILL right after the last acknowledgement
    proc.start()
    client = await RawClient.connect(proc.bootstrap)
    try:
        await wait_ready(client)
        assert await committed(client, "ge6-kill", {"t0": [0], "t1": [0], "t2": [0]}) == acked
    finally:
        await client.close()
