"""The `kaflet` data source's options: Spark's Kafka connector's names and meanings, checked up front.

Everything is validated on the driver when the query is planned, so a bad option fails there with
an `OptionError` naming it, never as a task failure. Spark hands options over case-insensitively
(lowercased keys); the names below are the connector's, compared lowercased.

Where kaflet decides (the connector is silent or cannot apply):
- Unknown options are an error (the connector ignores them): a misspelt `subscribe` would
  otherwise read nothing. Connector options that tune its JVM consumer pool and have no meaning
  here (`fetchOffset.numRetries`, `fetchOffset.retryIntervalMs`, `kafkaConsumer.pollTimeoutMs` is
  honoured) are accepted and ignored; `path`, `checkpointLocation` and `queryName`, which Spark may
  pass along, too.
- `kafka.*` options go to librdkafka with the prefix stripped: librdkafka's names, or the Java
  client's common ones, translated (client_options.py). `kafka.default.api.timeout.ms` (Java's, default 60 s) bounds the
  driver's metadata and offset look-ups and is not passed on.
- `commitOffsetsToGroup` (kaflet's): a streaming read commits each finished batch's end offsets to
  this consumer group, so the group's lag shows in the broker's metrics and tools. Spark's own
  offsets stay in the checkpoint; the group commit is informational, never read back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2  # Kafka's ListOffsets sentinels, as the connector's JSON offsets use them
LATEST = -1


class OptionError(ValueError):
    """A bad option; the message names it."""


# Kafka client settings the connector refuses, with its reasons.
UNSUPPORTED_KAFKA = {
    "kafka.auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' instead",
    "kafka.enable.auto.commit": "the source does not commit through the consumer; see 'commitOffsetsToGroup'",
    "kafka.key.deserializer": "keys are always read as bytes; cast or use DataFrame operations to deserialize",
    "kafka.value.deserializer": "values are always read as bytes; cast or use DataFrame operations to deserialize",
    "kafka.key.serializer": "keys are always written as bytes (a string column is encoded as UTF-8)",
    "kafka.value.serializer": "values are always written as bytes (a string column is encoded as UTF-8)",
    "kafka.interceptor.classes": "interceptors are not supported",
}

READ_OPTIONS = {
    "kafka.bootstrap.servers",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger",
    "minpartitions",
    "maxrecordsperpartition",
    "includeheaders",
    "failondataloss",
    "groupidprefix",
    "commitoffsetstogroup",
    "kafkaconsumer.polltimeoutms",
}
WRITE_OPTIONS = {"kafka.bootstrap.servers", "topic", "includeheaders"}
IGNORED_OPTIONS = {"fetchoffset.numretries", "fetchoffset.retryintervalms", "path", "checkpointlocation", "queryname"}
REJECTED_OPTIONS = {
    # Spark's Python stream readers state one read limit (pyspark.sql.streaming.datasource: no composite
    # of ReadMinRows and ReadMaxRows, and its ReadMinRows has no trigger delay), where the connector
    # combines minOffsetsPerTrigger, maxTriggerDelay and maxOffsetsPerTrigger.
    "minoffsetspertrigger": (
        "is not supported by the kaflet source: Spark's Python data source API takes one read limit per stream and "
        "its minimum-rows limit has no trigger delay; use 'maxOffsetsPerTrigger', or a longer trigger interval"
    ),
    "maxtriggerdelay": "is not supported by the kaflet source: it goes with 'minOffsetsPerTrigger', which Spark's Python data source API cannot serve",
}
# Shown in messages with the connector's capitalisation.
SPELLING = {
    name.lower(): name
    for name in [
        "subscribePattern",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "maxRecordsPerPartition",
        "includeHeaders",
        "failOnDataLoss",
        "groupIdPrefix",
        "commitOffsetsToGroup",
        "kafkaConsumer.pollTimeoutMs",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
    ]
}
DRIVER_TIMEOUT_KEY = "kafka.default.api.timeout.ms"


def spelt(key: str) -> str:
    return SPELLING.get(key, key)


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: named topics, a topic pattern, or fixed partitions."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[tuple[str, int], ...] = ()


# An offset spec: "earliest", "latest", {topic: {partition: offset}} (with -2/-1 sentinels),
# or ("timestamp", ts) / ("timestamps", {topic: {partition: ts}}).
OffsetSpec = Any


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    group_id_prefix: str = "spark-kafka-source"
    group_id: str | None = None
    commit_group: str | None = None
    poll_timeout_ms: int = 120_000
    driver_timeout_ms: int = 60_000
    kafka: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    driver_timeout_ms: int = 60_000
    kafka: dict[str, str] = field(default_factory=dict)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _check_names(opts: dict[str, str], allowed: set[str], what: str) -> None:
    for key in opts:
        if key in UNSUPPORTED_KAFKA:
            raise OptionError(f"kaflet {what}: Kafka option '{key[len('kafka.') :]}' is not supported: {UNSUPPORTED_KAFKA[key]}")
        if key in REJECTED_OPTIONS:
            raise OptionError(f"kaflet {what}: option '{spelt(key)}' {REJECTED_OPTIONS[key]}")
        if key.startswith("kafka.") or key in allowed or key in IGNORED_OPTIONS:
            continue
        raise OptionError(f"kaflet {what}: unknown option '{key}' (options: {', '.join(sorted(spelt(k) for k in allowed))}, kafka.*)")


def _int(opts: dict[str, str], key: str, default: int | None, minimum: int, what: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"kaflet {what}: option '{spelt(key)}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"kaflet {what}: option '{spelt(key)}' must be at least {minimum}, got {value}")
    return value


def _bool(opts: dict[str, str], key: str, default: bool, what: str) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"kaflet {what}: option '{spelt(key)}' must be true or false, got {raw!r}")
    return value == "true"


def _json(raw: str, key: str, what: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as e:
        raise OptionError(f"kaflet {what}: option '{spelt(key)}' is not valid JSON ({e}): {raw!r}") from None


def _partition_map(raw: str, key: str, what: str) -> dict[str, dict[int, int]]:
    """{"topic": {"0": 23, "1": -1}} -> {"topic": {0: 23, 1: -1}}."""
    value = _json(raw, key, what)
    example = 'e.g. {"topicA":{"0":23,"1":-1}}'
    if not isinstance(value, dict) or not value:
        raise OptionError(f"kaflet {what}: option '{spelt(key)}' must be a non-empty JSON object of topics, {example}; got {raw!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise OptionError(f"kaflet {what}: option '{spelt(key)}': topic {topic!r} must map partitions to numbers, {example}")
        out[topic] = {}
        for p, v in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise OptionError(f"kaflet {what}: option '{spelt(key)}': partition {p!r} of topic {topic!r} is not an integer") from None
            if isinstance(v, bool) or not isinstance(v, int):
                raise OptionError(f"kaflet {what}: option '{spelt(key)}': {topic}-{partition} must be an integer, got {v!r}")
            if partition < 0:
                raise OptionError(f"kaflet {what}: option '{spelt(key)}': partition {partition} of topic {topic!r} is negative")
            out[topic][partition] = v
    return out


def _subscription(opts: dict[str, str], what: str) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        names = "'assign', 'subscribe', 'subscribePattern'"
        if not given:
            raise OptionError(f"kaflet {what}: one of the options {names} must be specified")
        raise OptionError(f"kaflet {what}: only one of the options {names} can be specified, got {', '.join(spelt(k) for k in given)}")
    key = given[0]
    raw = opts[key]
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError(f"kaflet {what}: option 'subscribe' names no topic: {raw!r}")
        return Subscription("subscribe", topics=tuple(dict.fromkeys(topics)))
    if key == "subscribepattern":
        if not raw.strip():
            raise OptionError(f"kaflet {what}: option 'subscribePattern' is empty")
        try:
            re.compile(raw.strip())
        except re.error as e:
            raise OptionError(f"kaflet {what}: option 'subscribePattern' is not a valid regular expression ({e}): {raw!r}") from None
        return Subscription("subscribePattern", pattern=raw.strip())
    value = _json(raw, key, what)
    example = 'e.g. {"topicA":[0,1],"topicB":[2,4]}'
    if not isinstance(value, dict) or not value:
        raise OptionError(f"kaflet {what}: option 'assign' must be a non-empty JSON object of topics to partition lists, {example}")
    partitions: list[tuple[str, int]] = []
    for topic, parts in value.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
            raise OptionError(f"kaflet {what}: option 'assign': topic {topic!r} must map to a list of partition numbers, {example}")
        partitions.extend((topic, p) for p in parts)
    if not partitions:
        raise OptionError(f"kaflet {what}: option 'assign' names no partition: {raw!r}")
    return Subscription("assign", partitions=tuple(dict.fromkeys(partitions)))


def _offsets(opts: dict[str, str], key: str, default: str, what: str, streaming: bool) -> OffsetSpec:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip()
    if value.lower() in ("earliest", "latest"):
        value = value.lower()
        if not streaming and key == "startingoffsets" and value == "latest":
            raise OptionError(f"kaflet {what}: option 'startingOffsets' cannot be 'latest' for batch queries")
        if key == "endingoffsets" and value == "earliest":
            raise OptionError(f"kaflet {what}: option 'endingOffsets' cannot be 'earliest' for batch queries")
        return value
    parsed = _partition_map(value, key, what)
    for topic, parts in parsed.items():
        for p, off in parts.items():
            if off < EARLIEST:
                raise OptionError(
                    f"kaflet {what}: option '{spelt(key)}': {topic}-{p} offset {off} is invalid (-2 earliest, -1 latest, or >= 0)"
                )
            if not streaming and key == "startingoffsets" and off == LATEST:
                raise OptionError(f"kaflet {what}: option 'startingOffsets' cannot be -1 (latest) for batch queries ({topic}-{p})")
            if key == "endingoffsets" and off == EARLIEST:
                raise OptionError(f"kaflet {what}: option 'endingOffsets' cannot be -2 (earliest) ({topic}-{p})")
    return parsed


def _timestamps(opts: dict[str, str], prefix: str, what: str) -> OffsetSpec | None:
    """startingTimestamp / startingOffsetsByTimestamp (likewise ending): the global one wins, as in the connector."""
    single = opts.get(f"{prefix}timestamp")
    if single is not None:
        try:
            ts = int(single.strip())
        except ValueError:
            raise OptionError(f"kaflet {what}: option '{spelt(prefix + 'timestamp')}' must be a timestamp in ms, got {single!r}") from None
        if ts < 0:
            raise OptionError(f"kaflet {what}: option '{spelt(prefix + 'timestamp')}' must not be negative, got {ts}")
        return ("timestamp", ts)
    per = opts.get(f"{prefix}offsetsbytimestamp")
    if per is not None:
        parsed = _partition_map(per, f"{prefix}offsetsbytimestamp", what)
        for topic, parts in parsed.items():
            for p, ts in parts.items():
                if ts < 0:
                    raise OptionError(
                        f"kaflet {what}: option '{spelt(prefix + 'offsetsbytimestamp')}': {topic}-{p} timestamp {ts} is negative"
                    )
        return ("timestamps", parsed)
    return None


def _kafka_config(opts: dict[str, str], what: str, role: str) -> dict[str, str]:
    """The `kafka.*` options as librdkafka settings (Java client names translated: client_options.py)."""
    from pipeline.source.client_options import librdkafka_config

    given = {
        k[len("kafka.") :]: v
        for k, v in opts.items()
        if k.startswith("kafka.") and k not in ("kafka.bootstrap.servers", DRIVER_TIMEOUT_KEY, "kafka.group.id")
    }
    return librdkafka_config(given, what, role)


def _bootstrap(opts: dict[str, str], what: str) -> str:
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError(f"kaflet {what}: option 'kafka.bootstrap.servers' must be specified (host:port[,host:port...])")
    return bootstrap


def parse_read(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    what = "streaming source" if streaming else "source"
    opts = _lower(options)
    _check_names(opts, READ_OPTIONS, what)
    if not streaming:
        for key in ("maxoffsetspertrigger",):
            if key in opts:
                raise OptionError(f"kaflet {what}: option '{spelt(key)}' applies to streaming queries only")
    else:
        for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if key in opts:
                raise OptionError(f"kaflet {what}: option '{spelt(key)}' applies to batch queries only")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"kaflet {what}: option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}")
    starting = _timestamps(opts, "starting", what) or _offsets(
        opts, "startingoffsets", "latest" if streaming else "earliest", what, streaming
    )
    ending = _timestamps(opts, "ending", what) or _offsets(opts, "endingoffsets", "latest", what, streaming)
    commit_group = opts.get("commitoffsetstogroup")
    if commit_group is not None and not commit_group.strip():
        raise OptionError(f"kaflet {what}: option 'commitOffsetsToGroup' is empty")
    if commit_group is not None and not streaming:
        raise OptionError(f"kaflet {what}: option 'commitOffsetsToGroup' applies to streaming queries only")
    return ReadOptions(
        bootstrap=_bootstrap(opts, what),
        subscription=_subscription(opts, what),
        starting=starting,
        ending=ending,
        by_timestamp_strategy=strategy,
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", None, 1, what),
        min_partitions=_int(opts, "minpartitions", None, 1, what),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", None, 1, what),
        include_headers=_bool(opts, "includeheaders", False, what),
        fail_on_data_loss=_bool(opts, "failondataloss", True, what),
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
        group_id=opts.get("kafka.group.id"),
        commit_group=commit_group.strip() if commit_group else None,
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms", 120_000, 1, what) or 120_000,
        driver_timeout_ms=_int(opts, DRIVER_TIMEOUT_KEY, 60_000, 1, what) or 60_000,
        kafka=_kafka_config(opts, what, "consumer"),
    )


def parse_write(options: Mapping[str, str], streaming: bool) -> WriteOptions:
    what = "streaming sink" if streaming else "sink"
    opts = _lower(options)
    _check_names(opts, WRITE_OPTIONS, what)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError(f"kaflet {what}: option 'topic' is empty")
    return WriteOptions(
        bootstrap=_bootstrap(opts, what),
        topic=topic.strip() if topic else None,
        driver_timeout_ms=_int(opts, DRIVER_TIMEOUT_KEY, 60_000, 1, what) or 60_000,
        kafka=_kafka_config(opts, what, "producer"),
    )
