"""Every difference between kaflet and Kafka 4.4 that the suite expects, scenario by scenario.

An entry names the scenario and the exact differences its comparison finds (path, kaflet's
value, Kafka's value), and why they are allowed:

- `decision`: the heading of docs/decisions.md that says why kaflet decides differently
  (the test checks that the heading is there);
- `pending`: a kaflet bug whose fix waits for other work, described there; the scenario checks
  that today's differences are exactly the known ones and then fails, naming the fix, until
  the fix lands and the entry is removed.

A scenario without an entry must find no difference at all; one with an entry must find exactly
its differences, so a documented difference cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Difference = tuple[str, Any, Any]


@dataclass(frozen=True)
class Expected:
    diffs: tuple[Difference, ...]
    decision: str | None = None
    pending: str | None = None


EXPECTED: dict[str, Expected] = {}


def expect(name: str, *diffs: Difference, decision: str | None = None, pending: str | None = None) -> None:
    assert (decision is None) != (pending is None), f"{name}: a decision or a pending fix, one of them"
    assert name not in EXPECTED, name
    EXPECTED[name] = Expected(tuple(diffs), decision, pending)


# -- JoinGroup ----------------------------------------------------------------------------------

# A tie between protocol votes: Kafka keeps the first of the tied names in its HashMap's
# iteration order; kaflet the leader's preferred one.
expect(
    "jg_16_protocol_vote_tie",
    ("b:JoinGroupv9#2.protocol_name", "range", "sticky"),
    ("c:JoinGroupv9#2.protocol_name", "range", "sticky"),
    ("a:JoinGroupv9#3.protocol_name", "range", "sticky"),
    decision="Protocol vote ties",
)


# -- group configs (DescribeConfigs / IncrementalAlterConfigs on GROUP resources) ---------------

KAFLET_STREAMS_GROUP_CONFIGS = [
    "streams.assignment.interval.ms",
    "streams.assignor.name",
    "streams.heartbeat.interval.ms",
    "streams.initial.rebalance.delay.ms",
    "streams.num.standby.replicas",
    "streams.rack.aware.assignment.tags",
    "streams.session.timeout.ms",
]
KAFLET_SHARE_GROUP_CONFIGS = [
    "share.assignment.interval.ms",
    "share.auto.offset.reset",
    "share.delivery.count.limit",
    "share.heartbeat.interval.ms",
    "share.isolation.level",
    "share.partition.max.record.locks",
    "share.record.lock.duration.ms",
    "share.renew.acknowledge.enable",
    "share.session.timeout.ms",
]
KAFLET_GROUP_CONFIGS = sorted(
    [
        "consumer.assignment.interval.ms",
        "consumer.heartbeat.interval.ms",
        "consumer.session.timeout.ms",
        "lag.aware.uncommitted",
        *KAFLET_SHARE_GROUP_CONFIGS,
        *KAFLET_STREAMS_GROUP_CONFIGS,
    ]
)
# Kafka 4.4's: the consumer ones, then those of share groups (with their dead-letter queue,
# KIP-1191) and of streams groups.
KAFKA_GROUP_CONFIGS = sorted(
    [
        "consumer.assignment.interval.ms",
        "consumer.heartbeat.interval.ms",
        "consumer.session.timeout.ms",
        "errors.deadletterqueue.copy.record.enable",
        "errors.deadletterqueue.topic.name",
        "share.assignment.interval.ms",
        "share.auto.offset.reset",
        "share.delivery.count.limit",
        "share.heartbeat.interval.ms",
        "share.isolation.level",
        "share.partition.max.record.locks",
        "share.record.lock.duration.ms",
        "share.renew.acknowledge.enable",
        "share.session.timeout.ms",
        "streams.assignment.interval.ms",
        "streams.assignor.name",
        "streams.heartbeat.interval.ms",
        "streams.initial.rebalance.delay.ms",
        "streams.num.standby.replicas",
        "streams.rack.aware.assignment.tags",
        "streams.session.timeout.ms",
    ]
)
for _v in (1, 4):
    expect(
        f"cfg_describe_every_group_config_v{_v}",
        ("group configs (keys None)", (0, KAFLET_GROUP_CONFIGS), (0, KAFKA_GROUP_CONFIGS)),
        ("group configs (keys [])", (0, KAFLET_GROUP_CONFIGS), (0, KAFKA_GROUP_CONFIGS)),
        decision="Group configs",
    )
expect(
    "cfg_kafka_only_group_configs",
    ("ctl:IncrementalAlterConfigsv1#2.responses[0].error_code", 40, 0),
    ("ctl:IncrementalAlterConfigsv1#2.responses[0].error_message", "<text>", None),
    decision="Group configs",
)
# kaflet's default heartbeat interval (250 ms) is its DEFAULT_CONFIG; the reference Kafka has the
# same value in its server.properties, a STATIC_BROKER_CONFIG over Kafka's default of 5000.
expect(
    "cfg_describe_heartbeat_interval",
    ("ctl:DescribeConfigsv4.results[0].configs[0].config_source", 5, 4),
    (
        "ctl:DescribeConfigsv4.results[0].configs[0].synonyms",
        [{"name": "group.consumer.heartbeat.interval.ms", "value": "250", "source": 5}],
        [
            {"name": "group.consumer.heartbeat.interval.ms", "value": "250", "source": 4},
            {"name": "group.consumer.heartbeat.interval.ms", "value": "5000", "source": 5},
        ],
    ),
    decision="Consumer heartbeat interval",
)
for _v in (0, 1):
    expect(
        f"cfg_set_null_unknown_and_duplicate_v{_v}",
        (f"ctl:IncrementalAlterConfigsv{_v}#6.responses[0].error_code", 42, -1),
        (f"ctl:IncrementalAlterConfigsv{_v}#6.responses[0].error_message", "<text>", None),
        decision="An unknown config operation",
    )


# -- KIP-848 offsets ----------------------------------------------------------------------------

expect(
    "ko_1_commit_at_an_older_member_epoch",
    ("a:OffsetCommitv9.topics[0].partitions[0].error_code", 113, 0),
    decision="Offset commits at an older member epoch",
)
