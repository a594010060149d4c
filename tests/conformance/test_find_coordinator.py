"""FindCoordinator and the coordinator partition function: spec rules CO-1..CO-10.

CO-1..CO-3 are observed end to end: a commit for group g must land in `__consumer_offsets`
partition p(g), read back from the broker's offsets log.
Not covered here: CO-7 (kaflet creates `__consumer_offsets` before it listens, so the topic
cannot be missing), CO-11 (no authorizer), CO-12 (the service is active whenever the broker
accepts connections).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    COORDINATOR_LOAD_IN_PROGRESS,
    INVALID_REQUEST,
    MESSAGES,
    NONE,
    OFFSETS_TOPIC,
    create_topic,
    groups_on_partition,
    partition_of,
    ready_client,
    serving,
)
from tests.support.offsets_log import OffsetKey, read_all_logs, write_ballast
from tests.support.raw_client import RawClient

# (group id, jhash, p for N=50, p for N=3): the spec's vectors (section 1).
VECTORS = [
    ("", 0, 0, 0),
    ("a", 97, 47, 1),
    ("my-group", -1906497762, 12, 0),
    ("test-group", 627841412, 12, 2),
    ("group1", -1237460590, 40, 1),
    ("kafka-streams-app", -2143363552, 2, 1),
    ("Aa", 2112, 12, 0),
    ("BB", 2112, 12, 0),
    ("été", 227742, 42, 0),
    ("😀grp", 1276929186, 36, 0),
    ("polygenelubricants", -2147483648, 0, 0),
]


async def _partitions_written(make_config: Callable[..., Any], n: int, groups: list[str]) -> dict[str, set[int]]:
    """Commit one offset per group on a broker with N=n; the partitions each group's records are in."""
    async with serving(make_config(offsets_partitions=n)) as served:
        create_topic(served.broker, "t")
        client = await served.ready()
        for group in groups:
            assert await g.commit(client, group, {("t", 0): 1}) == {("t", 0): NONE}
        found: dict[str, set[int]] = {group: set() for group in groups}
        for record in read_all_logs(served.broker):
            key = record.decoded_key
            if isinstance(key, OffsetKey) and key.group in found:
                found[key.group].add(record.partition)
        return found


@pytest.mark.parametrize("n", [50, 3])
async def test_CO_1_group_records_go_to_partition_hash_mod_n(make_config: Callable[..., Any], n: int) -> None:
    groups = [v[0] for v in VECTORS]
    found = await _partitions_written(make_config, n, groups)
    expected = {group: {p50 if n == 50 else p3} for group, _, p50, p3 in VECTORS}
    assert found == expected


async def test_CO_2_hash_counts_utf16_code_units(make_config: Callable[..., Any]) -> None:
    # "été" hashes its BMP code points; the emoji contributes a surrogate pair (two units);
    # "Aa" and "BB" collide (same String.hashCode) and so share a partition.
    groups = ["été", "😀grp", "Aa", "BB"]
    found = await _partitions_written(make_config, 50, groups)
    assert found == {"été": {42}, "😀grp": {36}, "Aa": {12}, "BB": {12}}


async def test_CO_3_abs_of_int_min_is_zero(make_config: Callable[..., Any]) -> None:
    # jhash("polygenelubricants") == Integer.MIN_VALUE: Utils.abs gives 0, so partition 0.
    found = await _partitions_written(make_config, 50, ["polygenelubricants"])
    assert found == {"polygenelubricants": {0}}


async def _answers(client: RawClient, keys: list[str], version: int, key_type: int = 0) -> list[tuple[Any, ...]]:
    """(key, error, message, node id, host, port) per key, whatever the version (v0-3: one request per key)."""
    if version >= 4:
        resp = await g.find_coordinator(client, keys, version=version, key_type=key_type)
        return [(c.key, c.error_code, c.error_message, c.node_id, c.host, c.port) for c in resp.coordinators]
    out = []
    for key in keys:
        resp = await g.find_coordinator(client, [key], version=version, key_type=key_type)
        message = resp.error_message if version >= 1 else None
        out.append((key, resp.error_code, message, resp.node_id, resp.host, resp.port))
    return out


async def test_CO_4_transaction_keys_resolve_to_this_node(broker: Broker, raw: Any) -> None:
    client = await raw()
    keys = ["txn-a", "", "polygenelubricants"]
    node = (broker.config.node_id, broker.advertised_host, broker.advertised_port)
    results = {v: [(a[0], a[1], *a[3:]) for a in await _answers(client, keys, v, key_type=1)] for v in range(1, 7)}
    assert results == {v: [(k, NONE, *node) for k in keys] for v in range(1, 7)}


async def test_CO_5_offsets_partition_count_is_fixed_per_data_dir(broker_proc: Callable[..., Any]) -> None:
    first = broker_proc()  # the fixture starts every broker with --offsets-partitions 5
    first.stop()
    with pytest.raises(RuntimeError) as exc:
        broker_proc("--offsets-partitions", "7")
    message = str(exc.value)
    assert "offsets-partitions" in message and "5" in message and "7" in message, message
    # The original count still starts, and Metadata shows __consumer_offsets with 5 partitions.
    again = broker_proc()
    client = await RawClient.connect(again.bootstrap)
    try:
        resp = await client.request(MetadataRequest[1](topics=[OFFSETS_TOPIC]))
        (topic,) = resp.topics
        assert topic.error_code == NONE and topic.is_internal
        assert sorted(p.partition_index for p in topic.partitions) == list(range(5))
    finally:
        await client.close()


async def test_CO_6_answer_is_this_node_on_the_advertised_endpoint(make_config: Callable[..., Any]) -> None:
    config = make_config(advertised_host="kaflet.example", advertised_port=19092, node_id=7)
    async with serving(config) as served:
        client = await RawClient.connect(f"127.0.0.1:{served.broker.bound_port}")
        served.clients.append(client)
        results = {v: [(a[0], a[1], *a[3:]) for a in await _answers(client, ["co6-group"], v)] for v in range(7)}
        assert results == {v: [("co6-group", NONE, 7, "kaflet.example", 19092)] for v in range(7)}


async def test_CO_8_share_keys_are_invalid(broker: Broker, raw: Any) -> None:
    client = await raw()
    results = {v: await _answers(client, ["s1", "s2"], v, key_type=2) for v in range(1, 7)}
    expected = {}
    for v in range(1, 7):
        # v1-3: SHARE needs v6, the whole (single-key) answer is the error with its default message.
        # v4/v5 (SHARE needs v6) and v6 (no share coordinator): a per-key result of the lookup,
        # whose message Kafka leaves at its default, "".
        message = MESSAGES[INVALID_REQUEST] if v < 4 else ""
        expected[v] = [(k, INVALID_REQUEST, message, -1, "", -1) for k in ("s1", "s2")]
    assert results == expected


async def test_CO_8_unknown_key_type_fails_the_whole_request(broker: Broker, raw: Any) -> None:
    client = await raw()
    keys = ["k1", "", "k1"]
    results = {}
    for v in range(1, 7):
        for key_type in (3, -1, 127):
            results[(v, key_type)] = await _answers(client, keys if v >= 4 else ["k1"], v, key_type=key_type)
    # One entry per key, each with the error and its default message (v1-3: the single answer).
    expected = {
        (v, kt): [(k, INVALID_REQUEST, MESSAGES[INVALID_REQUEST], -1, "", -1) for k in (keys if v >= 4 else ["k1"])] for v, kt in results
    }
    assert results == expected
    # The connection keeps serving.
    assert [a[1] for a in await _answers(client, ["k1"], 6)] == [NONE]


async def test_CO_9_single_key_response_shape_v0_to_v3(broker: Broker, raw: Any) -> None:
    client = await raw()
    results = {}
    for v in range(4):
        resp = await client.request(FindCoordinatorRequest[v](key="group-a", key_type=0))
        message = resp.error_message if v >= 1 else "(absent)"
        throttle = resp.throttle_time_ms if v >= 1 else 0
        results[v] = (resp.error_code, message, resp.node_id, resp.host, resp.port, throttle)
    node = (broker.config.node_id, broker.advertised_host, broker.advertised_port)
    # Kafka fills the message with Errors.NONE.message(), the enum name.
    assert results == {v: (NONE, "NONE" if v >= 1 else "(absent)", *node, 0) for v in range(4)}
    # Errors: NodeId -1, Host "", Port -1 and the error's default message.
    resp = await client.request(FindCoordinatorRequest[2](key="g", key_type=9))
    assert (resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port) == (
        INVALID_REQUEST,
        MESSAGES[INVALID_REQUEST],
        -1,
        "",
        -1,
    )


async def test_CO_10_batched_keys_one_entry_each_in_request_order(broker: Broker, raw: Any) -> None:
    client = await raw()
    keys = ["zeta", "", "alpha", "zeta", "😀grp", "polygenelubricants"]
    node = (broker.config.node_id, broker.advertised_host, broker.advertised_port)
    results = {v: (await _answers(client, keys, v), await _answers(client, [], v)) for v in (4, 5, 6)}
    assert results == dict.fromkeys((4, 5, 6), ([(k, NONE, "", *node) for k in keys], []))


async def test_CO_10_empty_key_is_a_valid_group(broker: Broker, raw: Any) -> None:
    # p("") = 0; the group "" works with the group APIs that accept it (GE-4).
    assert partition_of("", 50) == 0
    create_topic(broker, "t")
    client = await ready_client(raw)
    resp = await g.find_coordinator(client, [""], version=4)
    assert resp.coordinators[0].error_code == NONE
    assert await g.commit(client, "", {("t", 0): 3}) == {("t", 0): NONE}
    assert await g.fetched_offsets(client, "", {"t": [0]}) == {("t", 0): 3}


async def test_CO_6_answered_while_the_group_shard_loads(make_config: Callable[..., Any]) -> None:
    # FindCoordinator does not check loading: never COORDINATOR_LOAD_IN_PROGRESS (needs storage).
    (group,) = groups_on_partition(4, 5, 1, "co6-loading")
    try:
        async with serving(make_config()) as served:
            create_topic(served.broker, "t")
            await served.ready()
            write_ballast(served.broker, 0)
        async with serving(make_config()) as served:
            client = await served.connect()
            find = client.send(FindCoordinatorRequest[4](key_type=0, coordinator_keys=[group]))
            old = client.send(FindCoordinatorRequest[3](key=group, key_type=0))
            probe = client.send(g.DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False))
            (c,) = (await find).coordinators
            assert (c.error_code, c.node_id) == (NONE, served.broker.config.node_id)
            assert ((await old).error_code, (await old).node_id) == (NONE, served.broker.config.node_id)
            # The group's shard was indeed loading.
            assert (await probe).groups[0].error_code == COORDINATOR_LOAD_IN_PROGRESS
    finally:
        shutil.rmtree(make_config().data_dir, ignore_errors=True)
