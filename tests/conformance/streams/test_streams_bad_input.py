"""KS-4 and the rest under bad input: thousands of seeded StreamsGroupHeartbeats that are valid on
the wire but not in meaning -- topologies naming missing, conflicting or Kafka-internal topics,
copartition groups pointing nowhere, repartition loops, duplicate sub-topologies, tasks outside
the topology, duplicate task offsets, unknown members and instance ids, stale and future epochs,
group ids that are consumer or classic groups -- mixed with members that behave. Every answer is
one of Kafka's error codes or statuses; nothing is logged at error level, no handler fails, and a
well-behaved group still reaches Stable afterwards."""

from __future__ import annotations

import random
from typing import Any

from broker import Broker
from tests.support import consumer_groups as cg
from tests.support import groups as classic
from tests.support.streams_groups import (
    NONE,
    R,
    StreamsMember,
    converge,
    heartbeat,
    subtopology,
    topic_info,
    topology,
    word_count,
)
from tests.support.waiting import async_wait_until

ANSWERS = {
    0,  # NONE
    -1,  # UNKNOWN_SERVER_ERROR: where Kafka's coordinator throws on what it was sent (no message)
    24,  # INVALID_GROUP_ID
    25,  # UNKNOWN_MEMBER_ID
    42,  # INVALID_REQUEST
    69,  # GROUP_ID_NOT_FOUND
    81,  # GROUP_MAX_SIZE_REACHED
    82,  # FENCED_INSTANCE_ID
    110,  # FENCED_MEMBER_EPOCH
    111,  # UNRELEASED_INSTANCE_ID
    130,  # STREAMS_INVALID_TOPOLOGY
}
TOPICS = {"t1": 2, "t2": 3, "t3": 2}


def _names(rng: random.Random, k: int) -> list[str]:
    pool = ["t1", "t2", "t3", "missing", "r1", "r2", "c1-changelog"] * 4 + ["__consumer_offsets", "bad name", ""]
    return [rng.choice(pool) for _ in range(rng.randint(0, k))]


def _topic(rng: random.Random, name: str) -> Any:
    configs = rng.choice([{}, {"cleanup.policy": "compact"}, {"cleanup.policy": "bogus"}, {"retention.ms": "-7"}, {"x": "y"}])
    return topic_info(name, rng.choice([0, 0, 1, 2, 3, -1]), configs=configs, replication_factor=rng.choice([0, 1, 3]))


def random_topology(rng: random.Random) -> Any:
    subs = []
    for _ in range(rng.randint(0, 3)):
        sid = rng.choice(["0", "1", "2", "x", ""])
        repartitions = [_topic(rng, n) for n in _names(rng, 2)]
        copartition = [
            ([rng.randint(-1, 3) for _ in range(rng.randint(0, 2))], [rng.randint(-1, 3) for _ in range(rng.randint(0, 2))])
            for _ in range(rng.randint(0, 2))
        ]
        subs.append(
            subtopology(
                sid,
                _names(rng, 3),
                changelogs=[_topic(rng, n) for n in _names(rng, 1)],
                sinks=_names(rng, 2),
                repartitions=repartitions,
                copartition=copartition,
            )
        )
    return topology(*subs, epoch=rng.choice([0, 0, 1, -1]))


def random_tasks(rng: random.Random) -> dict[str, list[int]] | None:
    if rng.random() < 0.2:
        return None
    return {rng.choice(["0", "1", "9", ""]): [rng.randint(-1, 4) for _ in range(rng.randint(0, 3))] for _ in range(rng.randint(0, 2))}


def random_request(rng: random.Random, epochs: dict[tuple[str, str], int]) -> dict[str, Any]:
    """A plausible heartbeat (a known member at its epoch, or a join with empty tasks), spoilt by
    up to two faults half of the time."""
    group = rng.choice(["g", "g", "h", f"r{rng.randint(0, 200)}"])
    member = rng.choice(["a", "b", "c"])
    epoch = epochs.get((group, member), 0) if rng.random() < 0.9 else 0
    kw: dict[str, Any] = {"group": group, "member_id": member, "epoch": epoch, "version": rng.choice([0, 1])}
    if epoch == 0:
        kw.update(rebalance_timeout_ms=30_000, process_id=rng.choice(["p1", "p2"]), active={}, standby={}, warmup={})
        kw["topology"] = random_topology(rng) if rng.random() < 0.5 else word_count("p", rng.choice(["app", "app", "other"]))
    else:
        kw.update(rng.choice([{}, {"active": {}, "standby": {}, "warmup": {}}]))
    faults = [
        lambda: kw.update(group=rng.choice(["consumer-group", "classic-group", "", " "])),
        lambda: kw.update(member_id=rng.choice(["", "zz"])),
        lambda: kw.update(epoch=rng.choice([-3, -2, -1, 1, 2**31 - 1, epoch - 1, epoch + 1])),
        lambda: kw.update(instance_id=rng.choice(["", "i1", "i2"])),
        lambda: kw.update(rack_id=rng.choice(["", "r"])),
        lambda: kw.update(rebalance_timeout_ms=rng.choice([-1, 0, 1])),
        lambda: kw.update(process_id=rng.choice([None, ""])),
        lambda: kw.update(topology=random_topology(rng)),
        lambda: kw.update(shutdown_application=True),
        lambda: kw.update(**{rng.choice(["active", "standby", "warmup"]): random_tasks(rng)}),
        lambda: kw.update(active=random_tasks(rng), standby=random_tasks(rng), warmup=random_tasks(rng)),
        lambda: kw.update(user_endpoint=R.Endpoint(host=rng.choice(["h", ""]), port=rng.choice([0, 1, 65535]))),
        lambda: kw.update(
            task_offsets=[
                R.TaskOffset(subtopology_id=rng.choice(["0", "1", "9"]), partition=rng.randint(-1, 2), offset=rng.randint(-1, 9))
                for _ in range(3)
            ],
            task_end_offsets=[],
        ),
    ]
    if rng.random() < 0.5:
        for fault in rng.sample(faults, rng.randint(1, 2)):
            fault()
    return kw


async def test_ks_4_bad_heartbeats_get_kafkas_errors_and_never_break_the_coordinator(broker: Broker, raw: Any) -> None:
    for name, n in {**TOPICS, "p-input": 2, "app-counts-repartition": 2, "app-counts-changelog": 2}.items():
        broker.topics.create(name, n)
    client = await raw()
    # A consumer group and a classic group, whose ids a streams heartbeat may name.
    assert (await cg.heartbeat(client, "consumer-group", "cm", 0, topics=["t1"], rebalance_timeout_ms=30_000, owned={})).error_code == NONE
    first = await classic.join(client, "classic-group", "", session_timeout_ms=30_000)
    assert (await classic.join(client, "classic-group", first.member_id, session_timeout_ms=30_000)).error_code == NONE

    events: list[dict[str, Any]] = []

    def keep(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
        events.append(dict(event))
        return event

    import structlog

    processors = structlog.get_config()["processors"]
    structlog.configure(processors=[keep, *processors])
    answers: dict[int, int] = {}
    try:
        rng = random.Random(1071)
        epochs: dict[tuple[str, str], int] = {}
        for _ in range(1500):
            kw = random_request(rng, epochs)
            group, member, epoch = kw.pop("group"), kw.pop("member_id"), kw.pop("epoch")
            resp = await heartbeat(client, group, member, epoch, **kw)
            assert resp.error_code in ANSWERS, (group, member, epoch, kw, resp)
            answers[resp.error_code] = answers.get(resp.error_code, 0) + 1
            if resp.error_code == NONE and resp.member_epoch > 0:
                epochs[(group, member)] = resp.member_epoch
            elif resp.error_code in (25, 110) or resp.member_epoch < 0:
                epochs.pop((group, member), None)
    finally:
        structlog.configure(processors=processors)
    bad = [e for e in events if e.get("log_level") in ("error", "critical") or "exc_info" in e or "exception" in e]
    assert not bad, bad[:3]
    assert {0, 25, 42, 69, 110, 130} <= set(answers) and answers[0] > 300, answers  # the cases reached deep into the coordinator

    # The coordinator still works: a fresh group of well-behaved members becomes Stable.
    members = [StreamsMember(client, "fresh", f"m{i}", word_count("p", "app"), process_id=f"p{i}") for i in range(2)]
    d = await converge(members, client)
    assert d.group_state == "Stable"

    async def alive() -> bool:
        return (await cg.heartbeat(client, "consumer-group", "cm", 1, topics=["t1"])).error_code in (NONE, 110)

    await async_wait_until(alive, timeout=5, message="the consumer group to answer")
