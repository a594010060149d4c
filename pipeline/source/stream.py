"""Streaming reads (`spark.readStream.format("kaflet")`): Spark's offsets, checkpointed per partition.

An offset is the connector's JSON, {"topic": {"0": 42, ...}}: for each partition the next offset to
read. Spark writes each micro-batch's end offsets to its checkpoint before running it, so a query
restarted on the checkpoint re-plans the unfinished batch with the same ranges and continues after
the last committed one; with a file sink each record lands exactly once.

- The first batch starts at `startingOffsets` (default latest) or the timestamp options; later
  ones at the previous end. A partition that appears later (new topic matching the pattern, added
  partitions) is read from offset 0; if the broker no longer has offset 0 that is data loss.
- `maxOffsetsPerTrigger` caps a batch, shared among partitions in proportion to their backlog (a
  small one gets at least one record), as the connector does. Trigger.AvailableNow reads what was
  there when the query started, in batches of that size.
- A partition that vanished, or whose log end fell below the checkpointed offset, is data loss:
  the query fails with failOnDataLoss (default), and otherwise goes on from what is there.
- `commitOffsetsToGroup` (kaflet's): once a batch is done (when Spark asks for the next one), its
  end offsets are committed to that consumer group, so lag is visible to kaflet's metrics and any
  Kafka tool. The group's offsets are a report, never read back: the checkpoint is the truth.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from pipeline.source.kafka import Admin, Offsets, SourceError, TopicPartition, admin_for
from pipeline.source.options import ReadOptions
from pipeline.source.ranges import OffsetRange, plan
from pipeline.source.read import read_range


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = off
    return out


def from_json(offsets: dict[str, Any]) -> Offsets:
    return {(topic, int(p)): int(off) for topic, parts in offsets.items() for p, off in parts.items()}


def _loss(what: str) -> SourceError:
    return SourceError(
        f"kaflet streaming source: {what}. Some data may have been lost; if you don't want the query to fail in such cases, "
        "set the source option 'failOnDataLoss' to 'false'."
    )


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions) -> None:
        from pipeline.source.datasource import executor_group

        self.opts = opts
        self.group = executor_group(opts)
        self._admin: Admin | None = None
        self._committer: Any = None
        self._target: Offsets | None = None  # Trigger.AvailableNow's end
        self._latest: Offsets | None = None
        self._committed: Offsets | None = None

    # Driver side (Spark's long-lived streaming runner holds this object). Not pickled state:
    def __getstate__(self) -> dict[str, Any]:
        return {
            "opts": self.opts,
            "group": self.group,
            "_admin": None,
            "_committer": None,
            "_target": None,
            "_latest": None,
            "_committed": None,
        }

    def _client(self) -> Admin:
        if self._admin is None:
            self._admin = admin_for(self.opts, "driver")
        return self._admin

    def initialOffset(self) -> dict:
        admin = self._client()
        tps = admin.partitions(self.opts.subscription)
        return to_json(admin.resolve(self.opts.starting, tps, "startingoffsets", self.opts.by_timestamp_strategy))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        admin = self._client()
        self._target = admin.latest(admin.partitions(self.opts.subscription))

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        self._commit_group(begin)
        admin = self._client()
        if self._target is not None:
            until = dict(self._target)
        else:
            until = admin.latest(admin.partitions(self.opts.subscription))
        self._latest = until
        gone = sorted(set(begin) - set(until))
        if gone and self.opts.fail_on_data_loss:
            raise _loss(f"partitions {', '.join(f'{t}-{p}' for t, p in gone)} are gone (topic deleted?)")
        for tp, end in until.items():
            if tp in begin and end < begin[tp]:
                if self.opts.fail_on_data_loss:
                    raise _loss(f"the log end of {tp[0]}-{tp[1]} is {end}, below the offset {begin[tp]} already read")
        if isinstance(limit, ReadMaxRows):
            until = self._rate_limit(begin, until, limit.max_rows)
        if self._target is not None:
            # AvailableNow: never past the target, and a partition that shrank keeps its position.
            until = {tp: max(min(end, self._target[tp]), 0) for tp, end in until.items()}
        return to_json(until)

    @staticmethod
    def _rate_limit(begin: Offsets, until: Offsets, limit: int) -> Offsets:
        """The connector's proration: each partition gets its share of `limit` by backlog, at least 1."""
        sizes = {tp: end - begin.get(tp, 0) for tp, end in until.items() if end - begin.get(tp, 0) > 0}
        total = sum(sizes.values())
        if total < 1:
            return until
        out: Offsets = {}
        for tp, end in until.items():
            if tp not in sizes:
                out[tp] = end
                continue
            prorate = limit * (sizes[tp] / total)
            step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
            out[tp] = min(end, begin.get(tp, 0) + step)
        return out

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        begin, until = from_json(start), from_json(end)
        ranges = []
        for tp, stop in sorted(until.items()):
            first = begin.get(tp, 0)  # a partition new since `start` is read from its beginning
            if stop > first:
                ranges.append(OffsetRange(tp[0], tp[1], first, stop))
        return plan(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)

    def read(self, partition: Any) -> Iterator[Any]:
        o = self.opts
        yield from read_range(partition, o.bootstrap, o.kafka, self.group, o.include_headers, o.fail_on_data_loss, o.poll_timeout_ms)

    def commit(self, end: dict) -> None:
        # Spark calls this for a batch only once the next one is planned, so an idle stream would never
        # report its last batch: the group commit happens in latestOffset instead (see _commit_group).
        pass

    def _commit_group(self, done: Offsets) -> None:
        """Commit `done` to the commitOffsetsToGroup group. latestOffset's `start` is the end of a batch
        that Spark has finished and recorded (it plans the next batch only after that), so what is
        committed has been processed; an unchanged position is not committed again."""
        if self.opts.commit_group is None or not done or done == self._committed:
            return
        from confluent_kafka import Consumer, KafkaException
        from confluent_kafka import TopicPartition as TP

        if self._committer is None:
            conf = {"bootstrap.servers": self.opts.bootstrap, "group.id": self.opts.commit_group, "enable.auto.commit": False}
            conf.update({k: v for k, v in self.opts.kafka.items() if k not in ("isolation.level", "auto.offset.reset")})
            self._committer = Consumer(conf)
        offsets = [TP(t, p, off) for (t, p), off in sorted(done.items())]
        try:
            result = self._committer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            raise SourceError(
                f"kaflet streaming source: committing to group '{self.opts.commit_group}' (option 'commitOffsetsToGroup') failed: {e}"
            ) from None
        bad = [tp for tp in result or [] if tp.error is not None]
        if bad:
            raise SourceError(
                f"kaflet streaming source: committing {bad[0].topic}-{bad[0].partition} to group '{self.opts.commit_group}' "
                f"(option 'commitOffsetsToGroup') failed: {bad[0].error}"
            )
        self._committed = dict(done)

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self._committer is not None:
            self._committer.close()
            self._committer = None


__all__ = ["StreamReader", "TopicPartition", "from_json", "to_json"]
