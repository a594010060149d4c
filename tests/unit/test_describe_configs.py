"""DescribeConfigs v0-v4 over the wire: topic and broker configs, sources, synonyms, errors."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import DescribeConfigsRequest

from broker import Broker
from broker.config.topic_configs import TOPIC_CONFIGS
from broker.config.types import ConfigSource, ConfigType
from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient

_Resource = DescribeConfigsRequest.DescribeConfigsResource
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32


async def describe(
    client: Any, *resources: tuple[int, str, list[str] | None], version: int = 4, synonyms: bool = False, docs: bool = False
) -> Any:
    request = DescribeConfigsRequest[version](
        resources=[_Resource(resource_type=t, resource_name=n, configuration_keys=k) for t, n, k in resources],
        include_synonyms=synonyms,
        include_documentation=docs,
    )
    return await client.request(request)


def configs_of(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


@pytest.mark.parametrize("version", range(1, 5))  # v0 is not served (Kafka 4)
async def test_topic_configs_at_every_version(raw: Any, broker: Broker, version: int) -> None:
    broker.topics.create("t", 1, {"retention.ms": "1000"})
    client = await raw()
    (result,) = (await describe(client, (TOPIC, "t", None), version=version)).results
    assert (result.error_code, result.error_message, result.resource_type, result.resource_name) == (0, "", TOPIC, "t")
    configs = configs_of(result)
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["retention.ms"].value == "1000"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["max.message.bytes"].value == "1048588"
    assert not configs["retention.ms"].read_only
    assert configs["retention.ms"].config_source == ConfigSource.TOPIC_CONFIG
    assert configs["cleanup.policy"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["retention.ms"].synonyms == []
    if version >= 3:
        assert configs["retention.ms"].config_type == ConfigType.LONG
        assert configs["cleanup.policy"].config_type == ConfigType.LIST
        assert configs["retention.ms"].documentation is None


async def test_synonyms_and_documentation(raw: Any, broker: Broker) -> None:
    broker.topics.create("t", 1, {"segment.bytes": "2097152"})
    client = await raw()
    (result,) = (await describe(client, (TOPIC, "t", None), synonyms=True, docs=True)).results
    configs = configs_of(result)
    assert [(s.name, s.value, s.source) for s in configs["segment.bytes"].synonyms] == [
        ("segment.bytes", "2097152", ConfigSource.TOPIC_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    # Kafka lists no synonym for retention.ms left at its default (see topic_configs.default_synonym).
    assert configs["retention.ms"].synonyms == []
    assert [(s.name, s.source) for s in configs["compression.type"].synonyms] == [("compression.type", ConfigSource.DEFAULT_CONFIG)]
    assert all(c.documentation for c in configs.values())


async def test_configuration_keys_filter(raw: Any, broker: Broker) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    (result,) = (await describe(client, (TOPIC, "t", ["retention.ms", "no.such.config", "segment.bytes"]))).results
    assert sorted(c.name for c in result.configs) == ["retention.ms", "segment.bytes"]
    (result,) = (await describe(client, (TOPIC, "t", []))).results
    assert len(result.configs) == len(TOPIC_CONFIGS)


async def test_topic_errors(raw: Any) -> None:
    client = await raw()
    unknown, illegal = (await describe(client, (TOPIC, "ghost", None), (TOPIC, "bad/name", None))).results
    assert (unknown.error_code, unknown.error_message, unknown.configs) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, [])
    assert (illegal.error_code, illegal.error_message) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'",
    )


@pytest.mark.parametrize("version", range(1, 5))  # v0 is not served (Kafka 4)
async def test_broker_configs(raw: Any, broker: Broker, version: int) -> None:
    client = await raw()
    (result,) = (await describe(client, (BROKER, "1", None), version=version)).results
    assert result.error_code == 0
    configs = configs_of(result)
    expected = {
        "broker.id": "1",
        "node.id": "1",
        "num.partitions": "1",
        "default.replication.factor": "1",
        "auto.create.topics.enable": "true",
        "offsets.topic.num.partitions": "5",
        "log.retention.ms": "604800000",
        "log.retention.hours": "168",
        "log.segment.bytes": "1073741824",
        "message.max.bytes": "1048588",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "6000",
        "group.max.session.timeout.ms": "1800000",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker.bound_port}",
    }
    assert {name: configs[name].value for name in expected} == expected
    # The configs kaflet changes at run time (AlterConfigs) are writable, as Kafka's dynamic ones.
    from broker.config.dynamic_configs import DYNAMIC

    assert {n for n, c in configs.items() if not c.read_only} == set(DYNAMIC)
    # The test config sets --offsets-partitions 5: a static setting; the rest are kaflet's defaults.
    assert configs["offsets.topic.num.partitions"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert configs["num.partitions"].config_source == ConfigSource.DEFAULT_CONFIG


async def test_operator_settings_are_static_broker_configs(make_config: Any) -> None:
    config = make_config(log_retention_ms=3_600_000, default_partitions=3, message_max_bytes=2_000_000)
    async with Broker(config) as broker:
        broker.topics.create("t", 1)
        client = await RawClient.connect(broker.bootstrap)
        try:
            topic_result, broker_result = (await describe(client, (TOPIC, "t", None), (BROKER, "1", None), synonyms=True)).results
        finally:
            await client.close()
    topic_configs = configs_of(topic_result)
    assert (topic_configs["retention.ms"].value, topic_configs["retention.ms"].config_source) == (
        "3600000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert [(s.name, s.value, s.source) for s in topic_configs["max.message.bytes"].synonyms] == [
        ("message.max.bytes", "2000000", ConfigSource.STATIC_BROKER_CONFIG),
        ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG),
    ]
    broker_configs = configs_of(broker_result)
    assert (broker_configs["num.partitions"].value, broker_configs["num.partitions"].config_source) == (
        "3",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert [(s.value, s.source) for s in broker_configs["num.partitions"].synonyms] == [
        ("3", ConfigSource.STATIC_BROKER_CONFIG),
        ("1", ConfigSource.DEFAULT_CONFIG),
    ]


async def test_broker_resource_names(raw: Any) -> None:
    client = await raw()
    default, other, word = (await describe(client, (BROKER, "", None), (BROKER, "2", None), (BROKER, "one", None))).results
    assert (default.error_code, default.configs) == (0, [])
    assert (other.error_code, other.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Unexpected broker id, expected 1 or empty string, but received 2",
    )
    assert (word.error_code, word.error_message) == (ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: one")


async def test_broker_logger(raw: Any) -> None:
    client = await raw()
    mine, empty, other = (await describe(client, (BROKER_LOGGER, "1", None), (BROKER_LOGGER, "", None), (BROKER_LOGGER, "2", None))).results
    assert [(c.name, c.value, c.config_source) for c in mine.configs] == [("root", "INFO", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)]
    assert (empty.error_code, empty.error_message) == (ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    assert (other.error_code, other.error_message) == (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 but received 2")


async def test_unsupported_and_unknown_resource_types(raw: Any, broker: Broker) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    metrics, topic = (await describe(client, (16, "m", None), (TOPIC, "t", None))).results
    assert (metrics.error_code, metrics.error_message) == (ErrorCode.INVALID_REQUEST, "Unsupported resource type: CLIENT_METRICS")
    assert topic.error_code == 0
    # An unknown type fails every resource of the request, as Kafka's authorization step does.
    results = (await describe(client, (3, "x", None), (TOPIC, "t", None))).results
    assert [(r.resource_type, r.error_code, r.configs) for r in results] == [
        (3, ErrorCode.INVALID_REQUEST, []),
        (TOPIC, ErrorCode.INVALID_REQUEST, []),
    ]
