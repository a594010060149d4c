"""AlterConfigs v0-2 and IncrementalAlterConfigs v0-1 (issue 11): topics, dynamic broker configs
and GROUP resources, validated as Kafka validates them, persisted, effective at once, shown by
DescribeConfigs with the right source."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest

from broker import Broker, Config
from protocol import records as r
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support.raw_client import RawClient

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, GROUP_CONFIG = 1, 2, 3, 4, 5, 8

_IR = IncrementalAlterConfigsRequest.AlterConfigsResource
_AR = AlterConfigsRequest.AlterConfigsResource


def incremental(resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], validate_only: bool = False, version: int = 1) -> Any:
    return IncrementalAlterConfigsRequest[version](
        resources=[
            _IR(resource_type=t, resource_name=n, configs=[_IR.AlterableConfig(name=c, config_operation=op, value=v) for c, op, v in cs])
            for t, n, cs in resources
        ],
        validate_only=validate_only,
    )


def legacy(resources: list[tuple[int, str, dict[str, str | None]]], validate_only: bool = False, version: int = 2) -> Any:
    return AlterConfigsRequest[version](
        resources=[
            _AR(resource_type=t, resource_name=n, configs=[_AR.AlterableConfig(name=c, value=v) for c, v in cs.items()])
            for t, n, cs in resources
        ],
        validate_only=validate_only,
    )


def results(response: Any) -> list[tuple[int, str | None]]:
    return [(x.error_code, x.error_message) for x in response.responses]


async def describe(client: RawClient, kind: int, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=keys)
    resp = await client.request(DescribeConfigsRequest[4](resources=[resource], include_synonyms=True, include_documentation=False))
    (result,) = resp.results
    assert result.error_code == 0, result
    return {c.name: c for c in result.configs}


async def test_incremental_operations_on_a_topic(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    ok = await client.request(incremental([(TOPIC, "t", [("cleanup.policy", APPEND, "compact"), ("retention.ms", SET, "60000")])]))
    assert results(ok) == [(0, None)]
    configs = await describe(client, TOPIC, "t")
    assert configs["cleanup.policy"].value == "delete,compact" and configs["cleanup.policy"].config_source == TOPIC_CONFIG
    assert configs["retention.ms"].value == "60000" and configs["retention.ms"].config_source == TOPIC_CONFIG
    log = broker.logs.get("t", 0)
    assert log is not None and log.config.compact and log.config.delete and log.config.retention_ms == 60000
    await client.request(incremental([(TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None)])]))
    configs = await describe(client, TOPIC, "t")
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000) and configs["retention.ms"].config_source == DEFAULT
    assert broker.topics.get("t").configs == {"cleanup.policy": "compact"}  # type: ignore[union-attr]


async def test_refusals_answer_per_resource_with_kafka_messages(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    cases: list[tuple[Any, tuple[int, str | None]]] = [
        ([("retention.ms", APPEND, "5")], (ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: retention.ms")),
        ([("no.such.config", SET, "1")], (ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.config")),
        ([("segment.bytes", SET, "12")], (ErrorCode.INVALID_CONFIG, "Invalid value 12 for configuration segment.bytes: Value must be at least 1048576")),
        ([("retention.ms", SET, "abc")], (ErrorCode.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type LONG")),
        ([("cleanup.policy", SET, "compact,bogus")], (ErrorCode.INVALID_CONFIG, "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete")),
        ([("retention.ms", SET, "1"), ("retention.ms", SET, "2")], (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")),
    ]  # fmt: skip
    for ops, expected in cases:
        assert results(await client.request(incremental([(TOPIC, "t", ops)]))) == [expected], ops
    missing = await client.request(
        incremental([(TOPIC, "nope", [("retention.ms", SET, "1")]), (TOPIC, "t", [("retention.ms", SET, "1000")])])
    )
    assert results(missing) == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."), (0, None)]
    twice = await client.request(incremental([(TOPIC, "t", []), (TOPIC, "t", [])]))
    assert results(twice) == [(ErrorCode.INVALID_REQUEST, "Duplicate resource")] * 2
    assert broker.topics.get("t").configs == {"retention.ms": "1000"}  # type: ignore[union-attr]


async def test_validate_only_changes_nothing_and_legacy_alter_replaces_the_set(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1, {"retention.ms": "1000"})
    client: RawClient = await raw()
    checked = await client.request(legacy([(TOPIC, "t", {"cleanup.policy": "compact"})], validate_only=True))
    assert results(checked) == [(0, None)] and broker.topics.get("t").configs == {"retention.ms": "1000"}  # type: ignore[union-attr]
    bad = await client.request(legacy([(TOPIC, "t", {"cleanup.policy": "shred"})], validate_only=True))
    assert results(bad)[0][0] == ErrorCode.INVALID_CONFIG
    for version in (0, 1, 2):
        done = await client.request(
            legacy([(TOPIC, "t", {"cleanup.policy": "compact", "segment.ms": str(1000 + version)})], version=version)
        )
        assert results(done) == [(0, None)]
    # AlterConfigs replaces the whole set: retention.ms is back to its default.
    assert broker.topics.get("t").configs == {"cleanup.policy": "compact", "segment.ms": "1002"}  # type: ignore[union-attr]


async def test_changes_take_effect_at_once(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    old = int(time.time() * 1000) - 3_600_000
    batch = bytes(r.build_batch([(b"k", b"v")] * 3, timestamp_ms=old))
    assert d.produce_result(await client.request(d.produce("t", 0, batch))).base_offset == 0
    # retention.ms: data older than it goes at once.
    await client.request(incremental([(TOPIC, "t", [("retention.ms", SET, "60000")])]))
    log = broker.logs.get("t", 0)
    assert log is not None and log.log_start_offset == 3
    # message.timestamp.type: the broker's append time from the next batch on.
    await client.request(incremental([(TOPIC, "t", [("message.timestamp.type", SET, "LogAppendTime")])]))
    assert d.produce_result(await client.request(d.produce("t", 0, d.batch(1)))).log_append_time_ms > 0
    # max.message.bytes: a batch over it is refused.
    await client.request(incremental([(TOPIC, "t", [("max.message.bytes", SET, "100")])]))
    assert d.produce_result(await client.request(d.produce("t", 0, d.batch(20)))).error_code == ErrorCode.MESSAGE_TOO_LARGE
    # segment.bytes: the next append past it rolls a segment.
    await client.request(incremental([(TOPIC, "t", [("max.message.bytes", DELETE, None), ("segment.bytes", SET, str(1024 * 1024))])]))
    big = bytes(r.build_batch([(b"k", bytes(700_000))]))
    for _ in range(2):
        assert d.produce_result(await client.request(d.produce("t", 0, big))).error_code == 0
    assert len(log.segments) == 2


async def test_dynamic_broker_configs(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap)
        broker.topics.create("t", 1)
        node = str(broker.config.node_id)
        done = await client.request(
            incremental([(BROKER, node, [("log.retention.ms", SET, "120000")]), (BROKER, "", [("log.segment.bytes", SET, "2097152")])])
        )
        assert results(done) == [(0, None), (0, None)]
        configs = await describe(client, BROKER, node, ["log.retention.ms", "log.segment.bytes", "num.partitions"])
        assert configs["log.retention.ms"].value == "120000" and configs["log.retention.ms"].config_source == DYNAMIC_BROKER
        assert not configs["log.retention.ms"].read_only and configs["num.partitions"].read_only
        assert configs["log.segment.bytes"].config_source == DYNAMIC_DEFAULT
        assert [c.name for c in (await describe(client, BROKER, "")).values()] == ["log.segment.bytes"]
        topic = await describe(client, TOPIC, "t", ["retention.ms", "segment.bytes"])
        assert topic["retention.ms"].value == "120000" and topic["retention.ms"].config_source == DYNAMIC_BROKER
        assert topic["segment.bytes"].value == "2097152" and topic["segment.bytes"].config_source == DYNAMIC_DEFAULT
        log = broker.logs.get("t", 0)
        assert log is not None and log.config.retention_ms == 120000 and log.config.segment_bytes == 2097152
        refused = await client.request(incremental([(BROKER, node, [("num.partitions", SET, "3")])]))
        assert results(refused) == [(ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: Set(num.partitions)")]
        other = await client.request(incremental([(BROKER, "7", [("log.retention.ms", SET, "1")])]))
        assert results(other)[0][0] == ErrorCode.INVALID_REQUEST
        # max.connections applies to the next connection.
        await client.request(incremental([(BROKER, node, [("max.connections", SET, "1")])]))
        extra = await RawClient.connect(broker.bootstrap)
        assert await extra.wait_closed_by_peer(timeout=5)
        await client.request(incremental([(BROKER, node, [("max.connections", DELETE, None)])]))
        await client.close()
    async with Broker(config) as broker:  # persisted in the data dir
        assert broker.config.log_retention_ms == 120000 and broker.config.log_segment_bytes == 2097152
        log = broker.logs.get("t", 0)
        assert log is not None and log.config.retention_ms == 120000


async def test_group_configs(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap)
        done = await client.request(incremental([(GROUP, "g1", [("consumer.session.timeout.ms", SET, "50000")])]))
        assert results(done) == [(0, None)]
        configs = await describe(client, GROUP, "g1")
        assert (
            configs["consumer.session.timeout.ms"].value == "50000" and configs["consumer.session.timeout.ms"].config_source == GROUP_CONFIG
        )
        assert configs["consumer.heartbeat.interval.ms"].config_source == DEFAULT
        assert broker.coordinator.group_configs.get("g1") == {"consumer.session.timeout.ms": 50000}
        cases = [
            ([("consumer.session.timeout.ms", SET, "1000")], "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
            ([("consumer.session.timeout.ms", SET, "90000")], "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
            ([("consumer.heartbeat.interval.ms", SET, "100")], "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
            ([("consumer.heartbeat.interval.ms", SET, "16000")], "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
            ([("group.bogus", SET, "1")], "Unknown group config name: group.bogus"),
        ]  # fmt: skip
        for ops, message in cases:
            assert results(await client.request(incremental([(GROUP, "g1", ops)]))) == [(ErrorCode.INVALID_CONFIG, message)], ops
        legacy_group = await client.request(legacy([(GROUP, "g1", {"consumer.session.timeout.ms": "50000"})]))
        assert results(legacy_group) == [(ErrorCode.INVALID_REQUEST, "Unsupported resource type: GROUP")]
        await client.close()
    async with Broker(config) as broker:
        assert broker.coordinator.group_configs.get("g1", "consumer.session.timeout.ms") == 50000


def test_alter_configs_is_advertised(broker: Broker) -> None:
    from broker.network.registry import served

    keys = {k: (lo, hi) for k, lo, hi in served()}
    assert keys[33] == (0, 2) and keys[44] == (0, 1)


async def kaflet(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "broker", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_kaflet_topics_alter_config(broker: Broker) -> None:
    broker.topics.create("t", 1)
    common = ("--bootstrap-server", broker.bootstrap)
    code, out, _ = await kaflet("topics", "alter-config", "t", "--append", "cleanup.policy=compact", "--set", "retention.ms=60000", *common)
    assert code == 0 and "Altered configs of topic t." in out
    assert broker.topics.get("t").configs == {"cleanup.policy": "delete,compact", "retention.ms": "60000"}  # type: ignore[union-attr]
    code, out, _ = await kaflet("topics", "alter-config", "t", "--delete", "retention.ms", "--validate-only", "--output", "json", *common)
    assert code == 0 and json.loads(out)["altered"] is False
    assert broker.topics.get("t").configs["retention.ms"] == "60000"  # type: ignore[union-attr]
    code, _, err = await kaflet("topics", "alter-config", "t", "--set", "retention.ms=soon", *common)
    assert code == 1 and "Invalid value soon for configuration retention.ms: Not a number of type LONG" in err
    code, _, err = await kaflet("topics", "alter-config", "t", *common)
    assert code == 2 and "at least one of" in err
