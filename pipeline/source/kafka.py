"""The driver's Kafka look-ups (partitions, offsets) through confluent-kafka, with clear failures.

The driver never reads records: it lists partitions and resolves offset specs (earliest, latest,
per-partition JSON with -2/-1, timestamps) into numbers, which Spark checkpoints for streams and
ships to executors in each task's offset range.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from typing import Any

from pipeline.source.options import EARLIEST, LATEST, OffsetSpec, ReadOptions, Subscription, spelt

LOG = logging.getLogger("pipeline.source.kafka")
TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


class SourceError(RuntimeError):
    """A failure of the kaflet source at run time (unreachable broker, data loss, ...)."""


def client_config(bootstrap: str, kafka: dict[str, str], group_id: str) -> dict[str, Any]:
    """A librdkafka consumer config for assign-mode reads (never joins the group, never commits itself)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # The Java consumer's default, which Spark's connector inherits (librdkafka's is read_committed).
        "isolation.level": "read_uncommitted",
        # An offset out of range is data loss to report, never something to reset silently.
        "auto.offset.reset": "error",
        "allow.auto.create.topics": False,
        # librdkafka's own log lines go to Python logging, not straight to the worker's stderr.
        "logger": LOG,
    }
    conf.update(kafka)
    return conf


class Admin:
    """Driver-side look-ups with one consumer handle; every call bounded by `timeout_ms`."""

    def __init__(self, bootstrap: str, kafka: dict[str, str], group_id: str, timeout_ms: int) -> None:
        from confluent_kafka import Consumer

        self.bootstrap = bootstrap
        self.timeout = timeout_ms / 1000
        self._errors: list[str] = []
        self._lock = threading.Lock()
        conf = client_config(bootstrap, kafka, group_id)
        conf["error_cb"] = self._on_error
        try:
            self.consumer = Consumer(conf)
        except Exception as e:  # KafkaException for a bad librdkafka setting
            raise SourceError(
                f"kaflet source: bad Kafka client option: {_text(e)} (options 'kafka.*' are librdkafka's settings, or the Java client's common names)"
            ) from None

    def _on_error(self, err: Any) -> None:
        with self._lock:
            self._errors.append(str(err))
            del self._errors[:-5]

    def _fail(self, doing: str, e: BaseException) -> SourceError:
        with self._lock:
            seen = "; ".join(dict.fromkeys(self._errors)) or _text(e)
        return SourceError(f"kaflet source: cannot reach Kafka at kafka.bootstrap.servers={self.bootstrap} ({doing} failed: {seen})")

    def close(self) -> None:
        self.consumer.close()

    def topics(self) -> dict[str, int]:
        """Every topic's partition count, internal topics included."""
        try:
            md = self.consumer.list_topics(timeout=self.timeout)
        except Exception as e:
            raise self._fail(f"listing topics within {self.timeout:g} s", e) from None
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def partitions(self, sub: Subscription) -> list[TopicPartition]:
        """The partitions a subscription covers now, sorted."""
        if sub.kind == "assign":
            return sorted(sub.partitions)
        topics = self.topics()
        if sub.kind == "subscribe":
            # Named topics are read even when internal (`__consumer_offsets`), as the Java
            # consumer subscribes to them; a pattern skips internal topics, as
            # exclude.internal.topics=true (its default) makes it.
            names = [t for t in sub.topics if t in topics]
        else:
            pattern = re.compile(sub.pattern)
            names = [t for t in topics if pattern.fullmatch(t) and not t.startswith("__")]
        return sorted((t, p) for t in names for p in range(topics[t]))

    def _list(self, requests: dict[TopicPartition, int]) -> Offsets:
        """ListOffsets for each partition: a timestamp, or -2 (earliest) / -1 (latest)."""
        from confluent_kafka import TopicPartition as TP

        if not requests:
            return {}
        deadline = time.monotonic() + self.timeout
        try:
            # One batched ListOffsets per leader; -2/-1 are Kafka's sentinels, passed through.
            answer = self.consumer.offsets_for_times([TP(t, p, ts) for (t, p), ts in requests.items()], timeout=self.timeout)
        except Exception as e:
            raise self._fail(f"listing offsets within {self.timeout:g} s", e) from None
        out: Offsets = {}
        for tp in answer:
            if tp.error is not None:
                if time.monotonic() > deadline:
                    raise self._fail("listing offsets", RuntimeError(str(tp.error)))
                raise SourceError(f"kaflet source: listing offsets of {tp.topic}-{tp.partition} failed: {tp.error}")
            out[(tp.topic, tp.partition)] = tp.offset
        return out

    def earliest(self, tps: list[TopicPartition]) -> Offsets:
        return self._list(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: list[TopicPartition]) -> Offsets:
        return self._list(dict.fromkeys(tps, LATEST))

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], key: str, strategy: str = "error") -> Offsets:
        """Turn an offset spec into a number per partition. `key` names the option for messages."""
        if spec == "earliest":
            return self.earliest(tps)
        if spec == "latest":
            return self.latest(tps)
        if isinstance(spec, tuple):
            kind, value = spec
            if kind == "timestamp":
                stamps = dict.fromkeys(tps, value)
                option = key.replace("offsets", "timestamp")
            else:
                stamps = _specific(value, tps, key.replace("offsets", "offsetsbytimestamp"))
                option = key.replace("offsets", "offsetsbytimestamp")
            found = self._list(stamps)
            # No record at or after the timestamp: ListOffsets answers -1.
            missing = [tp for tp, off in found.items() if off < 0]
            if missing:
                if strategy == "latest" or key == "endingoffsets":
                    found.update(self.latest(missing))
                else:
                    tp = missing[0]
                    raise SourceError(
                        f"kaflet source: option '{spelt(option)}': no offset matched timestamp {stamps[tp]} in {tp[0]}-{tp[1]} "
                        f"(no record at or after it); set 'startingOffsetsByTimestampStrategy' to 'latest' to start at the end"
                    )
            return found
        wanted = _specific(spec, tps, key)
        fixed = {tp: off for tp, off in wanted.items() if off >= 0}
        fixed.update(self.earliest([tp for tp, off in wanted.items() if off == EARLIEST]))
        fixed.update(self.latest([tp for tp, off in wanted.items() if off == LATEST]))
        return fixed


def _specific(spec: dict[str, dict[int, int]], tps: list[TopicPartition], key: str) -> dict[TopicPartition, int]:
    """Per-partition JSON must name exactly the subscribed partitions, as the connector requires."""
    given = {(t, p): v for t, parts in spec.items() for p, v in parts.items()}
    if set(given) != set(tps):
        missing = sorted(set(tps) - set(given))
        extra = sorted(set(given) - set(tps))
        detail = []
        if missing:
            detail.append("missing " + ", ".join(f"{t}-{p}" for t, p in missing))
        if extra:
            detail.append("not subscribed " + ", ".join(f"{t}-{p}" for t, p in extra))
        raise SourceError(
            f"kaflet source: option '{spelt(key)}' must give every subscribed partition ({'; '.join(detail)}); use -2 for earliest, -1 for latest"
        )
    return given


def admin_for(opts: ReadOptions, role: str) -> Admin:
    group = opts.group_id or f"{opts.group_id_prefix}-{uuid.uuid4()}-{role}"
    return Admin(opts.bootstrap, opts.kafka, group, opts.driver_timeout_ms)


def _text(e: BaseException) -> str:
    args = getattr(e, "args", ())
    if args and hasattr(args[0], "str"):
        return args[0].str()
    return str(e)
