"""One real consumer in its own process, driven over stdin and reporting over stdout.

Run as `python -m tests.support.consumer_agent '<json spec>'` (tests start it through
tests/support/agents.py). The spec names the library (confluent-kafka, kafka-python or
aiokafka), the group and topics and the client settings. The agent subscribes, polls, and
writes one JSON line per event, flushed at once so that a SIGKILL loses nothing it reported:

  {"e": "assigned"|"revoked"|"lost", "parts": [[topic, partition], ...]}  (rebalance callbacks)
  {"e": "records", "recs": [[topic, partition, offset], ...]}             (processed, when "process")
  {"e": "committed", "offsets": [[topic, partition, next_offset], ...]}   (acknowledged commits)
  {"e": "commit_failed", "error": "..."}, {"e": "error", "code": ..., "name": ..., "fatal": ...}
  {"e": "member", "id": ...} (the member id after each assignment), {"e": "stalled"}, {"e": "closed"}

Every event carries "t", time.monotonic(), a clock shared by all processes on the machine.

Commands on stdin, one a line: "close" (leave the group cleanly and exit), "stall" (stop
polling, to exceed max.poll.interval.ms), "resume". With `"stalled": true` (confluent-kafka) the agent
subscribes and waits for "resume" before its first poll. A killed agent is simply SIGKILLed.

Processing ("process": true) is at-least-once: records are reported before their offsets are
committed; a commit of the processed positions follows every `commit_every` polls that
returned records (a failed commit is retried with the next one), the processed positions of
revoked partitions are committed in the revocation callback and the rest before a clean
close, and records of partitions no longer owned are dropped unprocessed.

`"debug": true` turns on DEBUG logging (librdkafka: debug=cgrp,protocol) to the agent's stderr,
which the test side keeps in a file and shows when a wait times out.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import sys
import threading
import time
from typing import Any

TP = tuple[str, int]


class Reporter:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"e": event, "t": time.monotonic(), **fields})
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


class Commands:
    """Lines from stdin, read on a thread; EOF (the test process died) means close."""

    def __init__(self) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            self.queue.put(line.strip())
        self.queue.put("close")

    def next(self, timeout: float | None = None) -> str | None:
        try:
            return self.queue.get(timeout=timeout) if timeout else self.queue.get_nowait()
        except queue.Empty:
            return None


class Progress:
    """What an at-least-once consumer tracks: the partitions it owns, and per partition the
    position after the last record processed and not yet committed. Locked: kafka-python 3
    runs rebalance listeners on its IO thread, concurrently with the polling thread."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.owned: set[TP] = set()
        self.pending: dict[TP, int] = {}
        self.polls_with_records = 0

    def assigned(self, tps: set[TP]) -> None:
        with self.lock:
            self.owned |= tps

    def revoked(self, tps: set[TP]) -> dict[TP, int]:
        """Give up `tps`; their uncommitted positions, to commit before they move."""
        with self.lock:
            self.owned -= tps
            return {tp: self.pending.pop(tp) for tp in tps if tp in self.pending}

    def process(self, out: Reporter, recs: list[tuple[str, int, int]]) -> bool:
        """Process (report) the records of partitions still owned (a batch may straddle a
        revocation); under the lock, so no record of a partition is reported after its revocation."""
        with self.lock:
            recs = [r for r in recs if (r[0], r[1]) in self.owned]
            if not recs:
                return False
            for t, p, o in recs:
                self.pending[(t, p)] = o + 1
            out.emit("records", recs=[[t, p, o] for t, p, o in recs])
            self.polls_with_records += 1
            return True

    def take(self) -> dict[TP, int]:
        with self.lock:
            taken, self.pending = self.pending, {}
            return taken

    def failed(self, offsets: dict[TP, int]) -> None:
        """A commit failed: retry its positions with the next one, unless moved or superseded."""
        with self.lock:
            for tp, offset in offsets.items():
                if tp in self.owned and tp not in self.pending:
                    self.pending[tp] = offset


def parts(tps: Any) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in tps)


# -- confluent-kafka -------------------------------------------------------------------------


def run_confluent(spec: dict[str, Any], out: Reporter, commands: Commands) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    def on_error(err: Any) -> None:
        out.emit("error", code=err.code(), name=err.name(), fatal=err.fatal(), str=err.str())

    conf: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"],
        "client.id": spec["name"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": spec.get("auto_commit", False),
        "session.timeout.ms": spec["session_timeout_ms"],
        "heartbeat.interval.ms": spec["heartbeat_interval_ms"],
        "max.poll.interval.ms": spec["max_poll_interval_ms"],
        "partition.assignment.strategy": spec.get("assignor", "range"),
        "error_cb": on_error,
        **spec.get("config", {}),
    }
    if spec.get("instance_id"):
        conf["group.instance.id"] = spec["instance_id"]
    if spec.get("group_protocol") == "consumer":
        # KIP-848: the broker owns the timers and the assignor; librdkafka refuses the classic settings.
        for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            conf.pop(key, None)
        conf["group.protocol"] = "consumer"
        if spec.get("remote_assignor"):
            conf["group.remote.assignor"] = spec["remote_assignor"]
    consumer = Consumer(conf)
    progress = Progress()

    def commit(offsets: dict[TP, int]) -> bool:
        try:
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
        except KafkaException as exc:
            out.emit("commit_failed", error=str(exc.args[0]))
            return False
        return committed(out, offsets)

    def on_assign(c: Any, tps: Any) -> None:
        progress.assigned(tp_set(tps))
        out.emit("assigned", parts=parts(tps))
        out.emit("member", id=c.memberid())

    def on_revoke(c: Any, tps: Any) -> None:
        offsets = progress.revoked(tp_set(tps))
        if spec.get("process") and offsets:
            commit(offsets)
        out.emit("revoked", parts=parts(tps))

    def on_lost(c: Any, tps: Any) -> None:
        progress.revoked(tp_set(tps))
        out.emit("lost", parts=parts(tps))

    consumer.subscribe(spec["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    out.emit("started")
    if spec.get("stalled") and not wait_resume(commands, out):
        consumer.close()
        out.emit("closed")
        return
    while follow(commands, out):
        batch = consumer.consume(500, 0.1)
        for m in batch:
            if m.error():
                on_error(m.error())
        handle_batch(spec, out, progress, [(m.topic(), m.partition(), m.offset()) for m in batch if not m.error()], commit)
    finish(spec, progress, commit)
    consumer.close()
    out.emit("closed")


# -- shared by the synchronous clients ---------------------------------------------------------


def tp_set(tps: Any) -> set[TP]:
    return {(tp.topic, tp.partition) for tp in tps}


def committed(out: Reporter, offsets: dict[TP, int]) -> bool:
    out.emit("committed", offsets=sorted([t, p, o] for (t, p), o in offsets.items()))
    return True


def wait_resume(commands: Commands, out: Reporter) -> bool:
    """`"stalled": true`: subscribed but not polling until "resume" (False on "close"). A KIP-848 consumer
    joins from librdkafka's own thread meanwhile, but applies no assignment, so it reads nothing."""
    out.emit("stalled")
    while (command := commands.next(0.1)) not in ("resume", "close"):
        pass
    return command == "resume"


def follow(commands: Commands, out: Reporter) -> bool:
    """Apply pending commands; False once the agent should close."""
    command = commands.next()
    if command == "stall":
        out.emit("stalled")
        while (command := commands.next(0.1)) not in ("resume", "close"):
            pass
    return command != "close"


def handle_batch(spec: dict[str, Any], out: Reporter, progress: Progress, recs: list[tuple[str, int, int]], commit: Any) -> None:
    """Process (report) a poll's records, then commit every `commit_every` polls with records."""
    if not spec.get("process") or not progress.process(out, recs):
        return
    if progress.polls_with_records % spec.get("commit_every", 1) == 0:
        offsets = progress.take()
        if offsets and not commit(offsets):
            progress.failed(offsets)


def finish(spec: dict[str, Any], progress: Progress, commit: Any) -> None:
    """Before a clean close, commit what was processed (as an at-least-once application does)."""
    offsets = progress.take()
    if spec.get("process") and offsets:
        commit(offsets)


# -- kafka-python ------------------------------------------------------------------------------


def run_kafka_python(spec: dict[str, Any], out: Reporter, commands: Commands) -> None:
    from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KpTopicPartition

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    consumer = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group"],
        client_id=spec["name"],
        group_instance_id=spec.get("instance_id"),
        auto_offset_reset="earliest",
        enable_auto_commit=spec.get("auto_commit", False),
        session_timeout_ms=spec["session_timeout_ms"],
        heartbeat_interval_ms=spec["heartbeat_interval_ms"],
        max_poll_interval_ms=spec["max_poll_interval_ms"],
        partition_assignment_strategy=[assignors[spec.get("assignor", "range")]],
        **spec.get("config", {}),
    )
    progress = Progress()

    def commit(offsets: dict[TP, int]) -> bool:
        try:
            consumer.commit({KpTopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
        except KafkaError as exc:
            out.emit("commit_failed", error=repr(exc))
            return False
        return committed(out, offsets)

    def forget_offset_fetches() -> None:
        """kafka-python 3.0.12 keeps the future of an OffsetFetch, keyed by its set of partitions only,
        until a poll collects it: one that outlives the assignment it was sent for (the poll timed out,
        then a rebalance took the partitions away) answers the next fetch of the same set, with
        committed offsets that are stale by then (none at all: auto_offset_reset), and the member
        re-reads what others processed and committed since. Java's consumer ties that cache to the
        generation it was sent in; doing the same, the agent drops the cache at every rebalance."""
        getattr(consumer._coordinator, "_offset_fetch_futures", {}).clear()

    class Listener(AsyncConsumerRebalanceListener):
        """Async: kafka-python 3 calls listeners on its IO thread, where a blocking commit() is refused."""

        async def on_partitions_revoked(self, revoked: Any) -> None:
            forget_offset_fetches()
            offsets = progress.revoked(tp_set(revoked))
            if spec.get("process") and offsets:
                try:
                    await consumer.commit_async({KpTopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
                except KafkaError as exc:
                    out.emit("commit_failed", error=repr(exc))
                else:
                    committed(out, offsets)
            out.emit("revoked", parts=parts(revoked))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            forget_offset_fetches()
            progress.assigned(tp_set(assigned))
            out.emit("assigned", parts=parts(assigned))
            out.emit("member", id=consumer._coordinator._generation.member_id)

        async def on_partitions_lost(self, lost: Any) -> None:
            forget_offset_fetches()
            progress.revoked(tp_set(lost))
            out.emit("lost", parts=parts(lost))

    consumer.subscribe(spec["topics"], listener=Listener())
    # A metadata response after subscribe() fills kafka-python's metadata snapshot before the
    # first join. Without it the leader assigns against an empty snapshot and rejoins as soon as
    # metadata arrives: a rebalance no user caused, and kafka-python 3.0.12 can stall in it.
    consumer.topics()
    out.emit("started")
    while follow(commands, out):
        try:
            polled = consumer.poll(timeout_ms=100)
        except KafkaError as exc:
            out.emit("error", code=getattr(exc, "errno", None), name=type(exc).__name__, fatal=False, str=str(exc))
            continue
        handle_batch(spec, out, progress, [(m.topic, m.partition, m.offset) for msgs in polled.values() for m in msgs], commit)
    finish(spec, progress, commit)
    consumer.close()
    out.emit("closed")


# -- aiokafka ----------------------------------------------------------------------------------


def run_aiokafka(spec: dict[str, Any], out: Reporter, commands: Commands) -> None:
    asyncio.run(_run_aiokafka(spec, out, commands))


async def _run_aiokafka(spec: dict[str, Any], out: Reporter, commands: Commands) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError
    from aiokafka.structs import OffsetAndMetadata

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group"],
        client_id=spec["name"],
        group_instance_id=spec.get("instance_id"),
        auto_offset_reset="earliest",
        enable_auto_commit=spec.get("auto_commit", False),
        session_timeout_ms=spec["session_timeout_ms"],
        heartbeat_interval_ms=spec["heartbeat_interval_ms"],
        max_poll_interval_ms=spec["max_poll_interval_ms"],
        rebalance_timeout_ms=spec["max_poll_interval_ms"],
        partition_assignment_strategy=[assignors[spec.get("assignor", "range")]],
        **spec.get("config", {}),
    )
    progress = Progress()

    async def commit(offsets: dict[TP, int]) -> bool:
        try:
            await consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "") for (t, p), o in offsets.items()})
        except KafkaError as exc:
            out.emit("commit_failed", error=repr(exc))
            return False
        return committed(out, offsets)

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            offsets = progress.revoked(tp_set(revoked))
            if spec.get("process") and offsets:
                await commit(offsets)
            out.emit("revoked", parts=parts(revoked))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            progress.assigned(tp_set(assigned))
            out.emit("assigned", parts=parts(assigned))
            out.emit("member", id=consumer._coordinator.member_id)

    consumer.subscribe(spec["topics"], listener=Listener())
    await consumer.start()
    out.emit("started")
    due: list[dict[TP, int]] = []
    while True:
        command = commands.next()
        if command == "stall":
            out.emit("stalled")
            while (command := commands.next()) not in ("resume", "close"):
                await asyncio.sleep(0.1)  # the loop keeps running the client's own tasks meanwhile
        if command == "close":
            break
        polled = await consumer.getmany(timeout_ms=100)
        recs = [(m.topic, m.partition, m.offset) for msgs in polled.values() for m in msgs]
        handle_batch(spec, out, progress, recs, lambda offsets: due.append(offsets) or True)
        for offsets in due:
            if not await commit(offsets):
                progress.failed(offsets)
        due.clear()
    offsets = progress.take()
    if spec.get("process") and offsets:
        await commit(offsets)
    await consumer.stop()
    out.emit("closed")


RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def main() -> None:
    spec = json.loads(sys.argv[1])
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if spec.get("debug") else logging.WARNING)
    if spec.get("debug") and spec["lib"] == "confluent":
        spec.setdefault("config", {})["debug"] = "cgrp,protocol"
    RUNNERS[spec["lib"]](spec, Reporter(), Commands())


if __name__ == "__main__":
    main()
