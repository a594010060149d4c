"""Group configs: DescribeConfigs v1-v4 and IncrementalAlterConfigs v0-v1 on GROUP resources
(`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms` and the rest Kafka 4.4 knows),
and what a changed config does to a KIP-848 group (KH-11, KH-12)."""

from __future__ import annotations

from typing import Any

from tests.differential.harness import Registry
from tests.differential.scenarios.common import T3, ApiKey, Side

scenarios = Registry()

GROUP = 32
DESCRIBE_VERSIONS = range(1, 5)
ALTER_VERSIONS = (0, 1)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe_fields(
    v: int, resources: list[tuple[int, str, list[str] | None]], synonyms: bool = False, docs: bool = False
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "resources": [{"resource_type": t, "resource_name": n, "configuration_keys": keys} for t, n, keys in resources],
        "include_synonyms": synonyms,
    }
    if v >= 3:
        fields["include_documentation"] = docs
    return fields


async def describe_configs(
    s: Side, v: int, resources: list[tuple[int, str, list[str] | None]], synonyms: bool = False, docs: bool = False
) -> Any:
    return await s.call("ctl", ApiKey.DESCRIBE_CONFIGS, v, **describe_fields(v, resources, synonyms, docs))


async def alter(
    s: Side, v: int, group: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False, rtype: int = GROUP
) -> Any:
    return await s.call(
        "ctl",
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        v,
        resources=[
            {
                "resource_type": rtype,
                "resource_name": group,
                "configs": [{"name": n, "config_operation": op, "value": val} for n, op, val in ops],
            }
        ],
        validate_only=validate_only,
    )


async def visible(s: Side, group: str, name: str, value: str | None) -> None:
    """Until DescribeConfigs shows the group's own `value` for `name` (None: no value of its own).
    Kafka applies a config change through its metadata log, a moment after it answered."""

    async def probe() -> Any:
        return await s.quiet("ctl", ApiKey.DESCRIBE_CONFIGS, 4, **describe_fields(4, [(GROUP, group, [name])]))

    def shown(resp: Any) -> bool:
        (entry,) = resp.results[0].configs
        return (entry.config_source == 8 and entry.value == value) if value is not None else entry.config_source != 8

    await s.until(probe, shown, f"{group}'s {name} = {value}")


@scenarios.versions("cfg_describe_every_group_config", (1, 4))
async def _(s: Side, v: int) -> None:
    # Which configs a group has (their values and sources are compared by the scenarios below,
    # config by config).
    for keys in (None, []):
        resp = await s.quiet("ctl", ApiKey.DESCRIBE_CONFIGS, v, **describe_fields(v, [(GROUP, s.group(), keys)]))
        (result,) = resp.results
        s.note(f"group configs (keys {keys})", (result.error_code, sorted(c.name for c in result.configs)))


@scenarios.versions("cfg_describe_session_timeout", DESCRIBE_VERSIONS, rule="KH-12")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await describe_configs(s, v, [(GROUP, g, ["consumer.session.timeout.ms", "no.such.config"])])
    await describe_configs(s, v, [(GROUP, g, ["consumer.session.timeout.ms"])], synonyms=True, docs=True)


@scenarios.versions("cfg_describe_empty_group_name", (1, 4))
async def _(s: Side, v: int) -> None:
    await describe_configs(s, v, [(GROUP, "", ["consumer.session.timeout.ms"]), (GROUP, s.group(), ["consumer.session.timeout.ms"])])


@scenarios("cfg_describe_heartbeat_interval", rule="KH-11")
async def _(s: Side) -> None:
    await describe_configs(s, 4, [(GROUP, s.group(), ["consumer.heartbeat.interval.ms"])], synonyms=True)


@scenarios.versions("cfg_set_and_delete_session_timeout", ALTER_VERSIONS, rule="KH-12")
async def _(s: Side, v: int) -> None:
    g = s.group()
    await alter(s, v, g, [("consumer.session.timeout.ms", SET, "50000")])
    await visible(s, g, "consumer.session.timeout.ms", "50000")
    await describe_configs(s, 4, [(GROUP, g, ["consumer.session.timeout.ms"])], synonyms=True)
    await alter(s, v, g, [("consumer.session.timeout.ms", DELETE, None)])
    await visible(s, g, "consumer.session.timeout.ms", None)
    await describe_configs(s, 4, [(GROUP, g, ["consumer.session.timeout.ms"])], synonyms=True)
    await alter(s, v, g, [("consumer.session.timeout.ms", DELETE, None)])


@scenarios.versions("cfg_set_out_of_bounds", ALTER_VERSIONS)
async def _(s: Side, v: int) -> None:
    g = s.group()
    for value in ("44999", "60001", "abc", "", "-1", "45000.5"):
        await alter(s, v, g, [("consumer.session.timeout.ms", SET, value)])
    for value in ("249", "15001", "45000"):
        await alter(s, v, g, [("consumer.heartbeat.interval.ms", SET, value)])
    await describe_configs(s, 4, [(GROUP, g, ["consumer.session.timeout.ms"])])


@scenarios("cfg_set_heartbeat_against_the_session_timeout")
async def _(s: Side) -> None:
    g = s.group()
    await alter(s, 1, g, [("consumer.session.timeout.ms", SET, "46000"), ("consumer.heartbeat.interval.ms", SET, "46000")])
    await alter(s, 1, g, [("consumer.session.timeout.ms", SET, "46000"), ("consumer.heartbeat.interval.ms", SET, "15000")])
    await visible(s, g, "consumer.session.timeout.ms", "46000")
    await visible(s, g, "consumer.heartbeat.interval.ms", "15000")
    await describe_configs(s, 4, [(GROUP, g, ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"])])


@scenarios.versions("cfg_set_null_unknown_and_duplicate", ALTER_VERSIONS)
async def _(s: Side, v: int) -> None:
    g = s.group()
    await alter(s, v, g, [("consumer.session.timeout.ms", SET, None)])
    await alter(s, v, g, [("no.such.group.config", SET, "1")])
    await alter(s, v, g, [("consumer.session.timeout.ms", SET, "50000"), ("consumer.session.timeout.ms", SET, "51000")])
    await alter(s, v, g, [("consumer.session.timeout.ms", APPEND, "1")])
    await alter(s, v, g, [("consumer.session.timeout.ms", SUBTRACT, "1")])
    await alter(s, v, g, [("consumer.session.timeout.ms", 9, "1")])
    await describe_configs(s, 4, [(GROUP, g, ["consumer.session.timeout.ms"])])


@scenarios.versions("cfg_validate_only", ALTER_VERSIONS)
async def _(s: Side, v: int) -> None:
    g = s.group()
    await alter(s, v, g, [("consumer.session.timeout.ms", SET, "50000")], validate_only=True)
    await alter(s, v, g, [("consumer.session.timeout.ms", SET, "1")], validate_only=True)
    await describe_configs(s, 4, [(GROUP, g, ["consumer.session.timeout.ms"])])


@scenarios.versions("cfg_empty_group_name", ALTER_VERSIONS)
async def _(s: Side, v: int) -> None:
    await alter(s, v, "", [("consumer.session.timeout.ms", SET, "50000")])


@scenarios("cfg_heartbeat_interval_of_the_group_applies", rule="KH-11")
async def _(s: Side) -> None:
    g = s.group()
    await alter(s, 1, g, [("consumer.heartbeat.interval.ms", SET, "700")])
    await visible(s, g, "consumer.heartbeat.interval.ms", "700")
    joined = await s.call(
        "a",
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=g,
        member_id="a-member-id-of-22ch",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[T3],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )
    await alter(s, 1, g, [("consumer.heartbeat.interval.ms", DELETE, None)])
    await visible(s, g, "consumer.heartbeat.interval.ms", None)
    await s.call(
        "a",
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=g,
        member_id=joined.member_id,
        member_epoch=joined.member_epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=None,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=None,
    )


@scenarios("cfg_kafka_only_group_configs")
async def _(s: Side) -> None:
    g = s.group()
    await alter(s, 1, g, [("consumer.assignment.interval.ms", SET, "0")])
    await alter(s, 1, g, [("errors.deadletterqueue.copy.record.enable", SET, "true")])
