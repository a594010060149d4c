"""CreateTopics v0-v7 over the wire: Kafka's checks, messages and per-version fields."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest
from kafka.protocol.metadata import MetadataRequest

from broker import Broker
from broker.config.types import ConfigSource
from protocol.errors import ErrorCode

_Topic = CreateTopicsRequest.CreatableTopic
_Assign = _Topic.CreatableReplicaAssignment
_Config = _Topic.CreatableTopicConfig


def user_topics(broker: Broker) -> list[str]:
    """Topic names without the internal topics the coordinator creates."""
    return [n for n in broker.topics.names() if not n.startswith("__")]


def topic(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str | None] | None = None, assignments: Any = None) -> Any:
    return _Topic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[_Assign(partition_index=p, broker_ids=b) for p, b in (assignments or {}).items()],
        configs=[_Config(name=k, value=v) for k, v in (configs or {}).items()],
    )


async def create(client: Any, *topics: Any, version: int = 7, validate_only: bool = False) -> Any:
    return await client.request(CreateTopicsRequest[version](topics=list(topics), timeout_ms=5000, validate_only=validate_only))


def by_name(resp: Any) -> dict[str, Any]:
    return {t.name: t for t in resp.topics}


@pytest.mark.parametrize("version", range(2, 8))  # v0 and v1 are not served (Kafka 4)
async def test_creates_topic_at_every_version(raw: Any, broker: Broker, version: int) -> None:
    client = await raw()
    resp = await create(client, topic(f"v{version}", partitions=3), version=version)
    (result,) = resp.topics
    assert (result.name, result.error_code) == (f"v{version}", 0)
    created = broker.topics.get(f"v{version}")
    assert created is not None and created.partitions == 3
    if version >= 1:
        assert result.error_message is None
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        assert {c.name for c in result.configs} >= {"retention.ms", "segment.bytes", "cleanup.policy"}
    if version >= 7:
        assert result.topic_id == created.topic_id


async def test_response_configs_are_the_effective_ones_sorted(raw: Any) -> None:
    client = await raw()
    resp = await create(client, topic("cfg", configs={"retention.ms": "1000", "cleanup.policy": " compact , delete "}))
    configs = {c.name: c for c in resp.topics[0].configs}
    assert [c.name for c in resp.topics[0].configs] == sorted(configs)
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", ConfigSource.TOPIC_CONFIG)
    assert configs["cleanup.policy"].value == "compact,delete"
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("1073741824", ConfigSource.DEFAULT_CONFIG)
    assert all(not c.read_only and not c.is_sensitive for c in configs.values())


async def test_validate_only_checks_but_creates_nothing(raw: Any, broker: Broker) -> None:
    client = await raw()
    resp = await create(client, topic("dry", partitions=2, configs={"retention.ms": "5"}), topic("bad#"), validate_only=True)
    results = by_name(resp)
    assert results["dry"].error_code == 0 and results["dry"].num_partitions == 2
    assert results["dry"].topic_id is not None
    assert results["bad#"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert broker.topics.get("dry") is None
    meta = await client.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
    assert [t.name for t in meta.topics if not t.name.startswith("__")] == []


async def test_existing_topic_is_topic_already_exists(raw: Any) -> None:
    client = await raw()
    assert (await create(client, topic("dup"))).topics[0].error_code == 0
    (result,) = (await create(client, topic("dup"))).topics
    assert (result.error_code, result.error_message) == (ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'dup' already exists.")
    assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, [])


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        ("a" * 250, f"Topic name is invalid: the length of '{'a' * 250}' is longer than the max allowed length 249"),
        ("sp ace", "Topic name is invalid: 'sp ace' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ("nl\n", "Topic name is invalid: 'nl\n' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ],
)
async def test_illegal_names(raw: Any, name: str, message: str) -> None:
    client = await raw()
    (result,) = (await create(client, topic(name))).topics
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, message)


async def test_longest_legal_name_is_accepted(raw: Any) -> None:
    client = await raw()
    assert (await create(client, topic("x" * 249))).topics[0].error_code == 0


async def test_dot_underscore_collision(raw: Any) -> None:
    client = await raw()
    assert (await create(client, topic("a.b"))).topics[0].error_code == 0
    (result,) = (await create(client, topic("a_b"))).topics
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topic: a.b")
    # Within one request too, also when only validating.
    results = by_name(await create(client, topic("c_d"), topic("c.d"), validate_only=True))
    assert results["c_d"].error_code == 0
    assert results["c.d"].error_message == "Topic 'c.d' collides with existing topic: c_d"


async def test_duplicate_names_in_one_request(raw: Any, broker: Broker) -> None:
    client = await raw()
    resp = await create(client, topic("twice"), topic("once"), topic("twice"))
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [
        ("once", 0, None),
        ("twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]
    assert broker.topics.get("twice") is None


@pytest.mark.parametrize(
    ("partitions", "rf", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (-2, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value."),
        (1, -2, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value."),
        (
            1,
            3,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 1 broker(s) "
            "are registered or some brokers have all their log directories cordoned.",
        ),
        # The replication factor is checked before the partition count.
        (0, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value."),
    ],
)
async def test_bad_counts(raw: Any, partitions: int, rf: int, code: ErrorCode, message: str) -> None:
    client = await raw()
    (result,) = (await create(client, topic("counts", partitions=partitions, rf=rf))).topics
    assert (result.error_code, result.error_message) == (code, message)


async def test_minus_one_means_broker_defaults(make_config: Any) -> None:
    from tests.support.raw_client import RawClient

    async with Broker(make_config(default_partitions=4)) as broker:
        client = await RawClient.connect(broker.bootstrap)
        try:
            (result,) = (await create(client, topic("defaults", partitions=-1, rf=-1))).topics
        finally:
            await client.close()
        assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 4, 1)
        assert broker.topics.get("defaults").partitions == 4  # type: ignore[union-attr]


async def test_manual_assignment_on_this_node(raw: Any, broker: Broker) -> None:
    client = await raw()
    (result,) = (await create(client, topic("manual", partitions=-1, rf=-1, assignments={0: [1], 1: [1]}))).topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 2, 1)
    assert broker.topics.get("manual").partitions == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("partitions", "rf", "assignments", "code", "message"),
    [
        (
            -1,
            1,
            {0: [1]},
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ),
        (1, -1, {0: [1]}, ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1."),
        (
            -1,
            -1,
            {0: [2]},
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 2, but no such broker is registered.",
        ),
        (
            -1,
            -1,
            {0: [1, 1]},
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (-1, -1, {0: []}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        (-1, -1, {1: [1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"),
    ],
)
async def test_bad_manual_assignments(raw: Any, partitions: int, rf: int, assignments: Any, code: ErrorCode, message: str) -> None:
    client = await raw()
    (result,) = (await create(client, topic("assigned", partitions=partitions, rf=rf, assignments=assignments))).topics
    assert (result.error_code, result.error_message) == (code, message)


async def test_same_partition_assigned_twice(raw: Any) -> None:
    client = await raw()
    request_topic = _Topic(
        name="twice",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[_Assign(partition_index=0, broker_ids=[1]), _Assign(partition_index=0, broker_ids=[1])],
        configs=[],
    )
    (result,) = (await create(client, request_topic)).topics
    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Found multiple manual partition assignments for partition 0",
    )


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"nope": "1"}, "Unknown topic config name: nope"),
        ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ({"segment.bytes": "1000"}, "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"),
        ({"segment.bytes": "2147483648"}, "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
        (
            {"cleanup.policy": "compact,shred"},
            "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            {"message.timestamp.type": "createtime"},
            "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
        ),
        ({"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
        (
            {"min.cleanable.dirty.ratio": "1.5"},
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        ({"retention.ms": None, "segment.ms": None}, "Null value not supported for topic configs: retention.ms,segment.ms"),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
        (
            {"remote.storage.enable": "true"},
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        ),
    ],
)
async def test_bad_configs_are_invalid_config(raw: Any, broker: Broker, configs: dict[str, str | None], message: str) -> None:
    client = await raw()
    (result,) = (await create(client, topic("configured", configs=configs))).topics
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_CONFIG, message)
    assert broker.topics.get("configured") is None


async def test_configs_are_checked_before_counts(raw: Any) -> None:
    client = await raw()
    (result,) = (await create(client, topic("order", partitions=0, configs={"nope": "1"}))).topics
    assert result.error_code == ErrorCode.INVALID_CONFIG


async def test_stored_configs_are_described(raw: Any) -> None:
    client = await raw()
    configs = {"retention.ms": "1000", "retention.bytes": "4096", "segment.bytes": "2097152", "cleanup.policy": "compact"}
    configs |= {"max.message.bytes": "5000", "message.timestamp.type": "LogAppendTime", "min.insync.replicas": "1"}
    assert (await create(client, topic("stored", configs=configs))).topics[0].error_code == 0
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="stored", configuration_keys=list(configs))
    resp = await client.request(DescribeConfigsRequest[4](resources=[resource], include_synonyms=False, include_documentation=False))
    described = {c.name: (c.value, c.config_source) for c in resp.results[0].configs}
    assert described == {name: (value, ConfigSource.TOPIC_CONFIG) for name, value in configs.items()}


async def test_internal_topics_cannot_be_created(raw: Any, broker: Broker) -> None:
    client = await raw()
    resp = await create(client, topic("__cluster_metadata"))
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [
        ("__cluster_metadata", ErrorCode.INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited."),
    ]
    # The coordinators created __consumer_offsets and __transaction_state at start-up, so the answer is Kafka's.
    for name in ("__consumer_offsets", "__transaction_state"):
        (result,) = (await create(client, topic(name))).topics
        assert (result.error_code, result.error_message) == (ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")


async def test_excessively_large_request_fails_whole(raw: Any, broker: Broker) -> None:
    client = await raw()
    resp = await create(client, topic("small"), topic("huge", partitions=20_000))
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [
        ("small", ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation."),
        ("huge", ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation."),
    ]
    assert user_topics(broker) == []
