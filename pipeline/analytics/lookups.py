"""What the lag estimate asks the brokers, batched: log end offsets, offsets at a time, and the
timestamps of records at given offsets. One client per task, closed when the task ends (a
client cached in a reused Python worker would outlive the brokers it talks to).

Everything goes over the wire (ListOffsets and Fetch), so the lookups work from any executor
against kaflet or Kafka. Requests are batched in rounds: a round asks one question per
partition, for all the partitions a task holds, in one request; a task needs as many rounds
as the most commits one of its partitions has in the micro-batch.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterable

TP = tuple[str, int]


class Lookups:
    def __init__(self, bootstrap: str, client_config: dict[str, str] | None = None, timeout: float = 30.0) -> None:
        from confluent_kafka import Consumer

        self.timeout = timeout
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                # Never joins: partitions are assigned by hand. librdkafka wants a group id all the same.
                "group.id": "kaflet-pipeline-lookups",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # An offset retention or DeleteRecords took: the first record after it answers.
                "auto.offset.reset": "earliest",
                # One record per partition is wanted: keep fetches small.
                "fetch.max.bytes": 1 << 20,
                "max.partition.fetch.bytes": 64 << 10,
                "queued.max.messages.kbytes": 1024,
                **(client_config or {}),
            }
        )

    def __enter__(self) -> Lookups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()

    def log_end_offsets(self, tps: Iterable[TP]) -> dict[TP, int | None]:
        """Each partition's log end offset now; None for a partition that is not there (a topic
        deleted since the commit): its lag is unknown, and the job goes on."""
        from confluent_kafka import KafkaException, TopicPartition

        out: dict[TP, int | None] = {}
        for topic, partition in tps:
            try:
                _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout, cached=False)
            except KafkaException as exc:
                if exc.args[0].code() not in _GONE:
                    raise
                high = None
            out[(topic, partition)] = high
        return out

    def offsets_at(self, questions: Iterable[tuple[TP, int]]) -> dict[tuple[TP, int], int]:
        """For each (partition, time in ms): the first offset whose timestamp is at or after that
        time (ListOffsets by timestamp), -1 where no record is that late."""
        from confluent_kafka import TopicPartition

        out: dict[tuple[TP, int], int] = {}
        for round_ in _rounds(questions):
            answers = self.consumer.offsets_for_times([TopicPartition(t, p, ts) for (t, p), ts in round_], timeout=self.timeout)
            for ((t, p), ts), answer in zip(round_, answers, strict=True):
                out[((t, p), ts)] = answer.offset if answer.error is None else -1
        return out

    def timestamps_at(self, questions: Iterable[tuple[TP, int]]) -> dict[tuple[TP, int], int | None]:
        """For each (partition, offset): the timestamp (ms) of the first record at or after that
        offset (the offset itself unless compaction, retention or a transaction marker took it),
        None when there is none.

        The offsets of a partition are read in runs: offsets closer than SCAN_GAP records apart are
        answered by one sequential read from the first to the last (a fetch streams them), and a
        new run starts with a seek. All partitions' runs are read together, round by round."""
        from confluent_kafka import KafkaError, TopicPartition

        out: dict[tuple[TP, int], int | None] = {}
        runs: dict[TP, list[list[int]]] = defaultdict(list)
        for tp, offset in sorted(set(questions)):
            tp_runs = runs[tp]
            if tp_runs and offset - tp_runs[-1][-1] <= SCAN_GAP:
                tp_runs[-1].append(offset)
            else:
                tp_runs.append([offset])
        for i in range(max((len(r) for r in runs.values()), default=0)):
            wanted = {tp: deque(r[i]) for tp, r in runs.items() if i < len(r)}  # ascending offsets still unanswered
            self.consumer.assign([TopicPartition(t, p, offsets[0]) for (t, p), offsets in wanted.items()])
            deadline = time.monotonic() + self.timeout
            while wanted and time.monotonic() < deadline:
                for msg in self.consumer.consume(num_messages=10_000, timeout=0.5):
                    tp = (msg.topic(), msg.partition())
                    offsets = wanted.get(tp)
                    if offsets is None:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            for offset in offsets:
                                out[(tp, offset)] = None
                            del wanted[tp]
                        continue
                    stamp = msg.timestamp()[1]
                    if offsets[0] <= msg.offset():
                        deadline = time.monotonic() + self.timeout  # progress: the time-out counts from here
                    while offsets and offsets[0] <= msg.offset():
                        out[(tp, offsets.popleft())] = stamp
                    if not offsets:
                        del wanted[tp]
            self.consumer.unassign()
            if wanted:
                raise TimeoutError(f"no answer within {self.timeout}s for the records at {sorted(wanted.items())[:5]}")
        return out


# Offsets of one partition closer than this are answered by reading the records between them, not by seeking.
SCAN_GAP = 20_000


def _gone_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC})


_GONE = _gone_codes()


def _rounds(questions: Iterable[tuple[TP, int]]) -> list[list[tuple[TP, int]]]:
    """Distinct questions split so that a round asks at most one per partition."""
    per_tp: dict[TP, list[int]] = defaultdict(list)
    for tp, x in set(questions):
        per_tp[tp].append(x)
    rounds: list[list[tuple[TP, int]]] = []
    for tp, xs in per_tp.items():
        for i, x in enumerate(sorted(xs)):
            if i == len(rounds):
                rounds.append([])
            rounds[i].append((tp, x))
    return rounds
