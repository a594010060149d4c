"""Streams groups among the other group types, on kaflet and on Apache Kafka 4.4: a streams group id
that is already a consumer or classic group, a classic group of committed offsets only taken over
by a streams group, the classic and consumer APIs on a streams group, ListGroups, DescribeGroups,
DeleteGroups, and offsets committed and fetched by streams members (their epochs checked)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetFetchRequest

from tests.differential.streams.conftest import Both, Side
from tests.support import consumer_groups as cg
from tests.support import groups as classic
from tests.support.kafka_reference import KAFLET_GROUP_SETTINGS
from tests.support.streams_groups import StreamsMember, describe, heartbeat, word_count


def plain(resp: Any) -> dict[str, Any]:
    d = resp.to_dict() if hasattr(resp, "to_dict") else dict(resp.__dict__)
    d.pop("throttle_time_ms", None)
    return d


def listed(resp: Any, prefix: str) -> list[Any]:
    return [
        *sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in resp.groups if g.group_id.startswith(prefix)),
        resp.error_code,
    ]


def classic_described(resp: Any) -> list[Any]:
    # sorted: the order of the answers (coordinator partitions) is pinned by the describe_order scenarios
    return sorted((g.group_id, g.error_code, g.group_state, g.protocol_type, g.protocol_data, len(g.members)) for g in resp.groups)


def deleted(resp: Any) -> list[Any]:
    return sorted((r.group_id, r.error_code) for r in resp.results)


def word_count_topics(prefix: str, app: str, partitions: int = 2) -> dict[str, int]:
    return {f"{prefix}-input": partitions, f"{app}-counts-repartition": partitions, f"{app}-counts-changelog": partitions}


def test_ks_5_ks_28_ks_29_group_ids_of_other_types_and_offsets_only_groups(both: Both) -> None:
    async def scenario(side: Side) -> list[Any]:
        p = side.prefix
        app = f"{p}-app"
        await side.topics(word_count_topics(p, app))
        c = await side.client()
        steps: list[Any] = []
        topo = word_count(p, app)

        # A consumer group (KIP-848) with a member: not a streams group.
        consumer = f"{p}-consumer"
        r = await cg.heartbeat(c, consumer, "cm-1", 0, topics=[f"{p}-input"], rebalance_timeout_ms=30_000, owned={})
        steps.append(("consumer member joins", r.error_code))
        steps.append(("streams heartbeat on a consumer group", plain(await heartbeat(c, consumer, "m1", 0, topology=topo))))
        steps.append(
            ("streams heartbeat on it, member epoch 3", plain(await heartbeat(c, consumer, "m1", 3, active={}, standby={}, warmup={})))
        )
        steps.append(("streams describe of a consumer group", plain(await describe(c, consumer))))

        # A classic group with a member: not a streams group either.
        group = f"{p}-classic"
        first = await classic.join(c, group, "", session_timeout_ms=30_000)
        joined = await classic.join(c, group, first.member_id, session_timeout_ms=30_000)
        steps.append(("classic member joins", joined.error_code))
        steps.append(("streams heartbeat on a classic group", plain(await heartbeat(c, group, "m1", 0, topology=topo))))
        steps.append(("streams describe of a classic group", plain(await describe(c, group))))

        # A classic group of committed offsets only becomes a streams group, its offsets kept.
        offsets_only = f"{p}-offsets"
        committed = await classic.commit(c, offsets_only, {(f"{p}-input", 0): 5, (f"{p}-input", 1): 7})
        steps.append(("offsets committed", sorted(committed.items())))
        steps.append(("listed before", listed(await classic.list_groups(c), offsets_only)))
        m = StreamsMember(c, offsets_only, "m1", topo)
        steps.append(("streams member joins the offsets-only group", plain(await m.beat())))
        steps.append(("listed after", listed(await classic.list_groups(c), offsets_only)))
        steps.append(("offsets kept", sorted((await classic.fetched_offsets(c, offsets_only, {f"{p}-input": [0, 1]})).items())))

        # The classic and consumer APIs on a streams group with a member.
        steps.append(("classic join on a streams group", plain(await classic.join(c, offsets_only, "", session_timeout_ms=30_000))))
        steps.append(("classic heartbeat on a streams group", plain(await classic.heartbeat(c, offsets_only, "x", 1))))
        steps.append(("classic sync on a streams group", plain(await classic.sync(c, offsets_only, "x", 1))))
        steps.append(("classic leave on a streams group", plain(await classic.leave(c, offsets_only, [("x", None)]))))
        r = await cg.heartbeat(c, offsets_only, "cm-1", 0, topics=[f"{p}-input"], rebalance_timeout_ms=30_000, owned={})
        steps.append(("consumer heartbeat on a streams group", (r.error_code, r.error_message)))
        steps.append(("consumer describe of a streams group", plain(await cg.describe(c, offsets_only))))
        steps.append(("describe groups", classic_described(await classic.describe(c, [offsets_only, consumer, group]))))
        steps.append(("delete a non-empty streams group", deleted(await classic.delete_groups(c, [offsets_only]))))
        for types in (["streams"], ["consumer"], ["classic"], ["Streams", "consumer"]):
            steps.append((f"listed {types}", listed(await classic.list_groups(c, types=types), p)))
        for states in (["Stable"], ["NotReady", "Reconciling"], ["Empty"]):
            steps.append((f"listed {states}", listed(await classic.list_groups(c, states=states, types=["streams"]), p)))

        # Empty, it can be deleted, or taken by a classic or a consumer group.
        await m.leave()
        steps.append(("listed when empty", listed(await classic.list_groups(c), offsets_only)))
        steps.append(
            (
                "consumer heartbeat on an empty streams group",
                (await cg.heartbeat(c, offsets_only, "cm-1", 0, topics=[f"{p}-input"], rebalance_timeout_ms=30_000, owned={})).error_code,
            )
        )
        steps.append(
            ("classic join on an empty streams group", (await classic.join(c, offsets_only, "", session_timeout_ms=30_000)).error_code)
        )
        steps.append(("delete the empty streams group", deleted(await classic.delete_groups(c, [offsets_only, f"{p}-nothing"]))))
        steps.append(("describe after delete", plain(await describe(c, offsets_only))))
        steps.append(("offsets after delete", plain(await classic.fetch(c, offsets_only, {f"{p}-input": [0, 1]}))))
        return steps

    both.same(scenario)


def test_ks_27_streams_members_commit_and_fetch_offsets_with_their_epochs(both: Both) -> None:
    async def scenario(side: Side) -> list[Any]:
        p = side.prefix
        app = f"{p}-app"
        g = f"{p}-g"
        await side.topics({**word_count_topics(p, app), f"{p}-elsewhere": 1})
        c = await side.client()
        m = StreamsMember(c, g, "m1", word_count(p, app))
        await m.beat()
        await m.beat()
        steps: list[Any] = [("tasks", m.active)]
        tp = (f"{p}-input", 0)
        cases = [
            ("the member's epoch", dict(generation=m.epoch, member_id="m1")),
            ("a stale epoch", dict(generation=m.epoch - 1, member_id="m1")),
            ("a newer epoch", dict(generation=m.epoch + 1, member_id="m1")),
            ("an unknown member", dict(generation=m.epoch, member_id="nobody")),
            ("no member (admin)", dict(generation=-1, member_id="")),
        ]
        for label, kw in cases:
            steps.append((f"commit with {label}", sorted((await classic.commit(c, g, {tp: 11}, version=9, **kw)).items())))
        steps.append(
            (
                "commit a topic outside the topology",
                sorted((await classic.commit(c, g, {(f"{p}-elsewhere", 0): 1}, version=9, generation=m.epoch, member_id="m1")).items()),
            )
        )
        steps.append(
            (
                "commit the repartition topic",
                sorted(
                    (
                        await classic.commit(c, g, {(f"{app}-counts-repartition", 1): 3}, version=9, generation=m.epoch, member_id="m1")
                    ).items()
                ),
            )
        )
        for label, member, epoch in (
            ("its epoch", "m1", m.epoch),
            ("a stale epoch", "m1", m.epoch - 1),
            ("an unknown member", "nobody", m.epoch),
        ):
            req = OffsetFetchRequest[9](
                groups=[
                    OffsetFetchRequest.OffsetFetchRequestGroup(
                        group_id=g,
                        member_id=member,
                        member_epoch=epoch,
                        topics=[OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=tp[0], partition_indexes=[0])],
                    )
                ],
                require_stable=False,
            )
            steps.append((f"fetch with {label}", plain(await c.request(req))))
        return steps

    both.same(scenario)


def test_ks_25_streams_group_configs_are_validated_and_described_as_kafka_does(both: Both) -> None:
    """The streams.* configs of a GROUP resource (IncrementalAlterConfigs, DescribeConfigs): Kafka's
    names, defaults (from the broker's group.streams.*), bounds and messages."""
    from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    r = IncrementalAlterConfigsRequest.AlterConfigsResource

    async def scenario(side: Side) -> list[Any]:
        c = await side.client()
        g = f"{side.prefix}-g"
        out: list[Any] = []
        cases = [
            {"streams.session.timeout.ms": "5999"},
            {"streams.session.timeout.ms": "60001"},
            {"streams.heartbeat.interval.ms": "100"},
            {"streams.heartbeat.interval.ms": "15001"},
            {"streams.num.standby.replicas": "3"},
            {"streams.num.standby.replicas": "-1"},
            {"streams.initial.rebalance.delay.ms": "-1"},
            {"streams.task.offset.interval.ms": "100"},
            {"streams.num.warmup.replicas": "21"},
            {"streams.assignor.name": "nope"},
            {"streams.unknown": "1"},
            {"streams.session.timeout.ms": "7000", "streams.num.standby.replicas": "1", "streams.heartbeat.interval.ms": "300"},
        ]
        for configs in cases:
            req = IncrementalAlterConfigsRequest[1](
                resources=[
                    r(
                        resource_type=32,
                        resource_name=g,
                        configs=[r.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()],
                    )
                ],
                validate_only=False,
            )
            out.append((configs, [(x.error_code, x.error_message) for x in (await c.request(req)).responses]))
        described = await c.request(
            DescribeConfigsRequest[4](
                resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=g, configuration_keys=None)],
                include_synonyms=False,
                include_documentation=False,
            )
        )
        (res,) = described.results
        # The reference broker has kaflet's group settings in its server.properties, so Kafka says
        # STATIC_BROKER_CONFIG (4) for them where kaflet, running on its defaults, says DEFAULT_CONFIG (5).
        static = {"streams." + k.removeprefix("group.streams.") for k in KAFLET_GROUP_SETTINGS if k.startswith("group.streams.")}
        out.append(
            (
                res.error_code,
                sorted(
                    (x.name, x.value, x.read_only, 5 if x.config_source == 4 and x.name in static else x.config_source, x.is_sensitive)
                    for x in res.configs
                    if x.name.startswith("streams.")
                ),
            )
        )
        return out

    both.same(scenario)
