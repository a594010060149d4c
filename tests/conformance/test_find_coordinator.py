"""FindCoordinator and the coordinator partition function: spec rules CO-1..CO-10.

CO-1..CO-3 are observed end to end: a commit for group g must land in `__consumer_offsets`
partition p(g), read back from the broker's offsets log.
Not covered here: CO-7 (kaflet creates `__consumer_offsets` before it listens, so the topic
cannot be missing), CO-11 (no authorizer), CO-12 (the service is active whenever the broker
accepts connections).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    INVALID_REQUEST,
    MESSAGES,
    NONE,
    OFFSETS_TOPIC,
    create_topic,
    partition_of,
    ready_client,
    serving,
)
from tests.support.offsets_log import OffsetKey, read_all_logs
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


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
async def test_CO_4_transaction_keys_resolve_to_this_node(broker: Broker, raw: Any, version: int) -> None:
    client = await raw()
    keys = ["txn-a", "", "polygenelubricants"]
    if version >= 4:
        resp = await g.find_coordinator(client, keys, version=version, key_type=1)
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in resp.coordinators] == [
            (k, NONE, broker.config.node_id, broker.advertised_host, broker.advertised_port) for k in keys
        ]
    else:
        for key in keys:
            resp = await g.find_coordinator(client, [key], version=version, key_type=1)
            assert (resp.error_code, resp.node_id, resp.host, resp.port) == (
                NONE,
                broker.config.node_id,
                broker.advertised_host,
                broker.advertised_port,
            )


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


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6])
async def test_CO_6_answer_is_this_node_on_the_advertised_endpoint(make_config: Callable[..., Any], version: int) -> None:
    config = make_config(advertised_host="kaflet.example", advertised_port=19092, node_id=7)
    async with serving(config) as served:
        client = await RawClient.connect(f"127.0.0.1:{served.broker.bound_port}")
        served.clients.append(client)
        group = "co6-group"
        if version >= 4:
            resp = await g.find_coordinator(client, [group], version=version)
            (c,) = resp.coordinators
            assert (c.key, c.error_code, c.node_id, c.host, c.port) == (group, NONE, 7, "kaflet.example", 19092)
        else:
            resp = await g.find_coordinator(client, [group], version=version)
            assert (resp.error_code, resp.node_id, resp.host, resp.port) == (NONE, 7, "kaflet.example", 19092)


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_CO_8_share_key_before_v6_is_invalid_request_v1_to_v3(broker: Broker, raw: Any, version: int) -> None:
    client = await raw()
    resp = await g.find_coordinator(client, ["share-grp"], version=version, key_type=2)
    assert (resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port) == (
        INVALID_REQUEST,
        MESSAGES[INVALID_REQUEST],
        -1,
        "",
        -1,
    )


@pytest.mark.parametrize("version", [4, 5, 6])
async def test_CO_8_share_keys_are_invalid_per_key_v4_plus(broker: Broker, raw: Any, version: int) -> None:
    # v4/v5: SHARE needs v6; v6: kaflet has no share coordinator. Either way a per-key result
    # produced by the lookup: INVALID_REQUEST with a null message and no node.
    client = await raw()
    resp = await g.find_coordinator(client, ["s1", "s2"], version=version, key_type=2)
    assert [(c.key, c.error_code, c.error_message, c.node_id, c.host, c.port) for c in resp.coordinators] == [
        ("s1", INVALID_REQUEST, None, -1, "", -1),
        ("s2", INVALID_REQUEST, None, -1, "", -1),
    ]


@pytest.mark.parametrize("key_type", [3, -1, 127])
@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
async def test_CO_8_unknown_key_type_fails_the_whole_request(broker: Broker, raw: Any, version: int, key_type: int) -> None:
    client = await raw()
    if version >= 4:
        resp = await g.find_coordinator(client, ["k1", "", "k1"], version=version, key_type=key_type)
        assert [(c.key, c.error_code, c.error_message, c.node_id, c.host, c.port) for c in resp.coordinators] == [
            (k, INVALID_REQUEST, MESSAGES[INVALID_REQUEST], -1, "", -1) for k in ["k1", "", "k1"]
        ]
    else:
        resp = await g.find_coordinator(client, ["k1"], version=version, key_type=key_type)
        assert (resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port) == (
            INVALID_REQUEST,
            MESSAGES[INVALID_REQUEST],
            -1,
            "",
            -1,
        )
    # The connection keeps serving.
    ok = await g.find_coordinator(client, ["k1"], version=version, key_type=0)
    assert (ok.coordinators[0].error_code if version >= 4 else ok.error_code) == NONE


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_CO_9_single_key_response_shape_v0_to_v3(broker: Broker, raw: Any, version: int) -> None:
    client = await raw()
    req = FindCoordinatorRequest[version](key="group-a", key_type=0)
    resp = await client.request(req)
    assert resp.error_code == NONE
    assert (resp.node_id, resp.host, resp.port) == (broker.config.node_id, broker.advertised_host, broker.advertised_port)
    if version >= 1:
        # Kafka fills the message with Errors.NONE.message(), the enum name.
        assert resp.error_message == "NONE"
        assert resp.throttle_time_ms == 0


@pytest.mark.parametrize("version", [4, 5, 6])
async def test_CO_10_batched_keys_one_entry_each_in_request_order(broker: Broker, raw: Any, version: int) -> None:
    client = await raw()
    keys = ["zeta", "", "alpha", "zeta", "😀grp", "polygenelubricants"]
    resp = await g.find_coordinator(client, keys, version=version)
    node = (broker.config.node_id, broker.advertised_host, broker.advertised_port)
    assert [(c.key, c.error_code, c.error_message, (c.node_id, c.host, c.port)) for c in resp.coordinators] == [
        (k, NONE, None, node) for k in keys
    ]
    empty = await g.find_coordinator(client, [], version=version)
    assert empty.coordinators == []


async def test_CO_10_empty_key_is_a_valid_group(broker: Broker, raw: Any) -> None:
    # p("") = 0; the group "" works with the group APIs that accept it (GE-4).
    assert partition_of("", 50) == 0
    create_topic(broker, "t")
    client = await ready_client(raw)
    resp = await g.find_coordinator(client, [""], version=4)
    assert resp.coordinators[0].error_code == NONE
    assert await g.commit(client, "", {("t", 0): 3}) == {("t", 0): NONE}
    assert await g.fetched_offsets(client, "", {"t": [0]}) == {("t", 0): 3}


async def test_CO_9_error_shape_uses_no_node_and_default_message(broker: Broker, raw: Any) -> None:
    # v1-3 errors: NodeId -1, Host "", Port -1 and the error's default message.
    client = await raw()
    resp = await client.request(FindCoordinatorRequest[2](key="g", key_type=9))
    assert (resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port) == (
        INVALID_REQUEST,
        MESSAGES[INVALID_REQUEST],
        -1,
        "",
        -1,
    )
