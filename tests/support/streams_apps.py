"""Kafka Streams 4.4 applications against a broker (kaflet or Kafka 4.4), from the suite's side.

The applications live in tests/jvm/kafka-streams-apps (`make jvm`): one driver JVM per Streams
instance (`StreamsInstance`) hosts one KafkaStreams per processing guarantee, each with three
topologies (word count, stream-table join, windowed count) reading the same input topics and
writing outputs of their own. `StreamsScenario` runs the suite's scenario end to end: 1 then 3
instances, one killed (SIGKILL) and restarted, input produced in batches between the steps, and
every output read back under read_committed and checked against the input exactly
(`check_outputs`). The bench (bench/bench_streams.py) drives the same pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import random
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.embed.log_tail import JsonLineTail
from tests.support.jvm import classpath, java_binary
from tests.support.waiting import wait_until

ARTIFACT = "kafka-streams-apps"
MAIN = "dev.kaflet.streams.StreamsDriver"
TOPOLOGIES = ("wordcount", "join", "windowed")
GUARANTEES = ("at_least_once", "exactly_once_v2")
# Input topics (after the scenario's prefix) and the output suffix of each topology.
INPUTS = ("wc-input", "join-users", "join-clicks", "win-input")
OUTPUTS = {"wordcount": "wc-output", "join": "join-output", "windowed": "win-output"}
WINDOW_MS = 10_000

# JVM options for a quick start and a small footprint (the C1 compiler alone: these apps process
# hundreds of records, not millions); the bench passes its own.
LEAN_JVM = ("-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def _die_with_parent() -> None:  # between fork and exec: the JVM dies with the suite
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class AppSpec:
    """One KafkaStreams of an instance: its application id, guarantee and group protocol."""

    name: str
    application_id: str
    guarantee: str
    protocol: str
    inputs: str  # the input topics' prefix
    outputs: str  # the output topics' prefix
    topologies: tuple[str, ...] = TOPOLOGIES
    store: str = "rocksdb"
    settings: dict[str, str] = field(default_factory=dict)

    def arg(self) -> str:
        pairs = {
            "name": self.name,
            "id": self.application_id,
            "guarantee": self.guarantee,
            "protocol": self.protocol,
            "in": self.inputs,
            "out": self.outputs,
            "topologies": "+".join(self.topologies),
            "store": self.store,
            **self.settings,
        }
        for key, value in pairs.items():
            if "," in key or "," in str(value):
                raise ValueError(f"a comma in an app setting: {key}={value}")
        return ",".join(f"{k}={v}" for k, v in pairs.items())

    def output_topics(self) -> list[str]:
        return [f"{self.outputs}-{OUTPUTS[t]}" for t in self.topologies]


class StreamsInstance(JsonLineTail):
    """One driver JVM: `start()` launches it (its KafkaStreams start at once) and keeps its JSON
    lines (`records`; `states(app)` those of one app); `kill()` is SIGKILL, `close()` an orderly
    close, `restart()` a new JVM on the same state dir (and so the same Streams process id)."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        work_dir: Path,
        apps: list[AppSpec],
        settings: dict[str, str] | None = None,
        jvm_options: Iterable[str] = LEAN_JVM,
        process_id: str | None = None,
        hold: bool = False,
    ) -> None:
        super().__init__()
        self.hold = hold  # start only on `go()`, once built
        self.name = name
        self.bootstrap = bootstrap
        self.dir = work_dir / name
        self.state_dir = self.dir / "state"
        self.apps = apps
        self.settings = dict(settings or {})
        self.jvm_options = list(jvm_options)
        self.starts = 0
        self._stderr: Any = None
        self.process_id = process_id
        if process_id is not None:
            # Streams keeps its process id in the app's state dir (with persistent stores); a fixed
            # one names the instance's transactional id (<application id>-<process id>-<thread>),
            # which a restart reuses, fencing what its killed predecessor left open.
            for app in apps:
                app_dir = self.state_dir / app.application_id
                app_dir.mkdir(parents=True, exist_ok=True)
                (app_dir / "kafka-streams-process-metadata").write_text(json.dumps({"processId": process_id}))

    def command(self) -> list[str]:
        cmd = [java_binary(), *self.jvm_options, "-cp", classpath(ARTIFACT), MAIN, "--bootstrap", self.bootstrap]
        cmd += ["--state-dir", str(self.state_dir)]
        for app in self.apps:
            cmd += ["--app", app.arg()]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd + (["--hold"] if self.hold else [])

    @property
    def stderr_path(self) -> Path:
        return self.dir / f"stderr-{self.starts}.log"

    def start(self) -> StreamsInstance:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            preexec_fn=_die_with_parent,
        )
        self._stderr.close()
        assert self.proc.stdout is not None
        self._start_pump(self.proc.stdout)
        return self

    def go(self, timeout: float = 60.0) -> None:
        """With `hold`: once the JVM has built its apps, start them."""
        self.wait_for(lambda r: r.get("event") == "ready", timeout)
        self.send("start")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def states(self, app: str) -> list[dict[str, Any]]:
        with self._cond:
            return [r for r in self.records if r.get("event") == "state" and r.get("app") == app]

    def state(self, app: str) -> str | None:
        states = self.states(app)
        return states[-1]["to"] if states else None

    def errors(self) -> list[dict[str, Any]]:
        with self._cond:
            return [r for r in self.records if r.get("event") == "error"]

    def tasks(self, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
        """{app: {"state", "active", "standby"}} as the instance sees them now."""
        mark = len(self.records)
        self.send("tasks")
        out: dict[str, dict[str, Any]] = {}
        for app in self.apps:
            record = self.wait_for(lambda r, a=app.name: r.get("event") == "tasks" and r.get("app") == a, timeout, after=mark)
            out[app.name] = record
        return out

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)

    def close(self, leave: bool = False, timeout: float = 60.0) -> list[dict[str, Any]]:
        """An orderly close of every app (leaving the group when `leave`); the `closed` records."""
        if not self.alive:
            return []
        return self.wait_closed(self.request_close(leave), timeout)

    def request_close(self, leave: bool = False) -> int:
        """Asks for the close; `wait_closed(mark)` with the returned mark waits for it."""
        mark = len(self.records)
        self.send("close leave" if leave else "close")
        return mark

    def wait_closed(self, mark: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        closed = [
            self.wait_for(lambda r, a=app.name: r.get("event") == "closed" and r.get("app") == a, timeout, after=mark) for app in self.apps
        ]
        assert self.proc is not None
        self.proc.wait(timeout)
        return closed

    def restart(self) -> StreamsInstance:
        return self.start()

    def stop(self) -> None:
        """Whatever state it is in, it is not running afterwards."""
        if self.alive:
            try:
                self.close(timeout=30)
            except (TimeoutError, RuntimeError, OSError, subprocess.TimeoutExpired):
                self.kill()

    def logged(self, level: str) -> list[str]:
        """The lines logged at `level` by every start of this instance, each with the first line of
        the exception it carries (the line after it, when that is not a log line of its own)."""
        out = []
        for n in range(1, self.starts + 1):
            path = self.dir / f"stderr-{n}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()
                for i, line in enumerate(lines):
                    if f"] {level} [" in line:
                        following = lines[i + 1] if i + 1 < len(lines) else ""
                        out.append(line if following.startswith("[") or not following else f"{line} {following.strip()}")
        return out

    def stderr_tail(self, lines: int = 40) -> str:
        try:
            return "".join(self.stderr_path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        except OSError:
            return ""

    def describe(self) -> str:
        return f"{self.name} (alive={self.alive}):\n  stdout: " + "\n  ".join(self.lines[-15:]) + "\n  stderr: " + self.stderr_tail(25)


def settled_at(instances: list[StreamsInstance], app: str, all_tasks: set[str], after: float = 0.0) -> float | None:
    """The wall-clock time (ms, the instances' `at`) at which, after `after`, every one of
    `instances` had `app` RUNNING and their active tasks covered `all_tasks` once each, every
    instance with some: the end of a rebalance as the instances lived it. None if not yet."""
    events = sorted(
        ((r["at"], inst.name, r) for inst in instances for r in inst.states(app)),
        key=lambda e: e[0],
    )
    latest: dict[str, dict[str, Any]] = {}
    for at, name, record in events:
        latest[name] = record
        if at < after or len(latest) < len(instances):
            continue
        if any(r["to"] != "RUNNING" for r in latest.values()):
            continue
        owned = [t for r in latest.values() for t in r["active"]]
        if len(owned) == len(set(owned)) and set(owned) == all_tasks and all(r["active"] for r in latest.values()):
            return float(at)
    return None


# -- input and expected output ------------------------------------------------------------

WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
]  # fmt: skip
REGIONS = ["north", "south", "east", "west"]


@dataclass
class Batch:
    """One batch of input for the three topologies: lines, clicks and timed events."""

    lines: list[tuple[str, str]]  # (line id, text)
    clicks: list[tuple[str, str]]  # (click id, user)
    events: list[tuple[str, int]]  # (sensor, event time ms)


@dataclass
class InputData:
    """The scenario's input, deterministic from its seed, and the outputs it must yield."""

    users: dict[str, str]
    batches: list[Batch]
    window_base_ms: int

    @classmethod
    def make(cls, seed: int, batches: int, lines: int = 40, clicks: int = 30, events: int = 40, users: int = 24) -> InputData:
        rng = random.Random(seed)
        table = {f"user-{i:02d}": rng.choice(REGIONS) for i in range(users)}
        # Event times ten minutes back, so that the whole run lands in windows well within the
        # store's retention (size + a day of grace) and the broker's timestamp bounds.
        base = (int(time.time() * 1000) - 600_000) // WINDOW_MS * WINDOW_MS
        out = []
        for b in range(batches):
            out.append(
                Batch(
                    lines=[(f"line-{b}-{i}", " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))) for i in range(lines)],
                    clicks=[(f"click-{b}-{i}", rng.choice(sorted(table))) for i in range(clicks)],
                    events=[(f"sensor-{rng.randint(0, 5)}", base + b * 60_000 + rng.randint(0, 59_999)) for _ in range(events)],
                )
            )
        return cls(table, out, base)

    def expected(self, upto: int | None = None) -> dict[str, Any]:
        """What the three outputs must hold once batches [0, upto) are processed:
        wordcount {word: final count}, join Counter{(user, "click:region")}, windowed {"key@start": count}."""
        batches = self.batches[:upto]
        words: Counter[str] = Counter()
        joins: Counter[tuple[str, str]] = Counter()
        windows: Counter[str] = Counter()
        for batch in batches:
            for _, text in batch.lines:
                words.update(text.split())
            for click, user in batch.clicks:
                joins[(user, f"{click}:{self.users[user]}")] += 1
            for sensor, ts in batch.events:
                windows[f"{sensor}@{ts // WINDOW_MS * WINDOW_MS}"] += 1
        return {"wordcount": dict(words), "join": joins, "windowed": dict(windows)}


# -- topics, producing and reading ---------------------------------------------------------


def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=30)
    for future in futures.values():
        future.result(60)


class InputProducer:
    """Produces the scenario's input with an idempotent producer, every send acknowledged before
    `produce_*` returns."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        from confluent_kafka import Producer

        self.prefix = prefix
        # murmur2_random is the Java client's partitioner: the users table must be partitioned as
        # Streams partitions the clicks it re-keys by user, or the join misses (librdkafka's
        # default, consistent_random, hashes with CRC32).
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, "partitioner": "murmur2_random"}
        )
        self.failures: list[str] = []

    def _send(self, topic: str, key: str, value: str, timestamp: int | None = None) -> None:
        def report(err: Any, _msg: Any) -> None:
            if err is not None:
                self.failures.append(str(err))

        kwargs: dict[str, Any] = {"timestamp": timestamp} if timestamp is not None else {}
        self.producer.produce(f"{self.prefix}-{topic}", key=key.encode(), value=value.encode(), on_delivery=report, **kwargs)

    def _flush(self) -> None:
        left = self.producer.flush(60)
        assert left == 0 and not self.failures, f"input not acknowledged: {left} left, {self.failures[:3]}"

    def produce_users(self, users: dict[str, str], timestamp: int) -> None:
        for user, region in users.items():
            self._send("join-users", user, region, timestamp)
        self._flush()

    def produce_batch(self, batch: Batch, chunks: int = 1, pause: float = 0.0) -> None:
        """The batch in `chunks` acknowledged parts `pause` seconds apart (a trickle that keeps
        the apps busy, and their transactions open, for a while)."""
        sends: list[tuple[str, str, str, int | None]] = []
        sends += [("wc-input", line_id, text, None) for line_id, text in batch.lines]
        sends += [("join-clicks", click, user, None) for click, user in batch.clicks]
        sends += [("win-input", sensor, "event", ts) for sensor, ts in batch.events]
        for n in range(chunks):
            for send in sends[n::chunks]:  # every chunk feeds every topology
                self._send(*send)
            self._flush()
            if pause and n + 1 < chunks:
                time.sleep(pause)


class OutputReader:
    """Reads output topics from the beginning (under read_committed unless told otherwise),
    keeping every record in order per partition; `poll()` reads what is there now."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, isolation: str = "read_committed") -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.topics = topics
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"kaflet-streams-reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "fetch.wait.max.ms": 50,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.consumer.assign([TopicPartition(t, p, -2) for t in topics for p in range(partitions)])  # -2: the beginning
        self.records: dict[str, list[tuple[int, str, str]]] = defaultdict(list)  # topic -> [(partition, key, value)]

    def poll(self, seconds: float = 0.3) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in self.consumer.consume(500, timeout=0.05):
                if msg.error():
                    raise AssertionError(f"reading {msg.topic()}: {msg.error()}")
                self.records[msg.topic()].append((msg.partition(), (msg.key() or b"").decode(), (msg.value() or b"").decode()))

    def read_to_end(self, timeout: float = 60.0) -> None:
        """Until every partition is read up to its high watermark (no transaction left open)."""
        from confluent_kafka import TopicPartition

        deadline = time.monotonic() + timeout
        while True:
            self.poll(0.3)
            done = True
            for topic in self.topics:
                for tp in self.consumer.position([TopicPartition(topic, p) for p in range(self._partitions(topic))]):
                    _low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10)
                    if (tp.offset < 0 and high > 0) or (tp.offset >= 0 and tp.offset < high):
                        done = False
            if done:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"output not readable to its end within {timeout}s (a transaction left open?)")

    def _partitions(self, topic: str) -> int:
        return len(self.consumer.list_topics(topic, timeout=10).topics[topic].partitions)

    def close(self) -> None:
        self.consumer.close()


def transaction_state(bootstrap: str, transactional_id: str) -> tuple[str, list[tuple[str, int]]]:
    """(state, [(topic, partition)]) of a transactional id, as DescribeTransactions v0 tells."""
    from kafka.protocol.admin import DescribeTransactionsRequest

    from tests.support.raw_client import RawClient

    async def describe() -> Any:
        client = await RawClient.connect(bootstrap, "kaflet-streams-txn")
        try:
            return await client.request(DescribeTransactionsRequest(version=0, transactional_ids=[transactional_id]), timeout=10)
        finally:
            await client.close()

    state = asyncio.run(describe()).transaction_states[0]
    if state.error_code:
        return f"error {state.error_code}", []
    return state.transaction_state, [(t.topic, p) for t in state.topics for p in t.partitions]


# -- checking outputs ----------------------------------------------------------------------


def parse_outputs(records: dict[str, list[tuple[int, str, str]]], app: AppSpec) -> dict[str, Any]:
    """The app's outputs: wordcount and windowed as {key: [values in order]}, join as a Counter."""
    out: dict[str, Any] = {}
    for topology in app.topologies:
        rows = records.get(f"{app.outputs}-{OUTPUTS[topology]}", [])
        if topology == "join":
            out["join"] = Counter((key, value) for _, key, value in rows)
        else:
            seq: dict[str, list[int]] = defaultdict(list)
            for _, key, value in rows:
                seq[key].append(int(value))
            out[topology] = dict(seq)
    return out


def progress_missing(outputs: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """What is not there yet of the expected results (a count below the expected, a join row
    absent), one example per topology; empty once everything is."""
    missing = []
    for topology, want in expected.items():
        got = outputs.get(topology, {})
        if topology == "join":
            absent = [row for row in want if got.get(row, 0) < 1]
            if absent:
                missing.append(f"join: {len(absent)} of {len(want)} rows absent, e.g. {absent[0]}")
        else:
            low = [(key, n, max(got.get(key) or [0])) for key, n in want.items() if max(got.get(key) or [0]) < n]
            if low:
                key, n, seen = low[0]
                missing.append(f"{topology}: {len(low)} of {len(want)} keys below their count, e.g. {key} {seen} < {n}")
    return missing


def check_outputs(outputs: dict[str, Any], expected: dict[str, Any], guarantee: str) -> list[str]:
    """The differences between an app's whole output and what its input must give.

    exactly_once_v2: each word's and each window's counts are exactly 1, 2, ..., n in order (every
    input counted once, no update lost or repeated) and every join row appears exactly once.
    at_least_once: nothing lost (each final count at least n, every join row present) and nothing
    invented (no key or row the input cannot give); repeats are allowed, as after a crash an
    instance re-processes what it had not committed.
    """
    problems: list[str] = []
    exact = guarantee == "exactly_once_v2"
    for topology, want in expected.items():
        got = outputs.get(topology, {})
        if topology == "join":
            extra = set(got) - set(want)
            if extra:
                problems.append(f"join: {len(extra)} rows the input cannot give, e.g. {sorted(extra)[:3]}")
            missing = [row for row in want if got.get(row, 0) == 0]
            if missing:
                problems.append(f"join: {len(missing)} rows lost, e.g. {missing[:3]}")
            if exact:
                dup = {row: n for row, n in got.items() if n > 1}
                if dup:
                    problems.append(f"join: {len(dup)} rows duplicated, e.g. {sorted(dup.items())[:3]}")
            continue
        extra = set(got) - set(want)
        if extra:
            problems.append(f"{topology}: keys the input cannot give: {sorted(extra)[:5]}")
        for key, n in sorted(want.items()):
            seq = got.get(key, [])
            if exact and seq != list(range(1, n + 1)):
                problems.append(f"{topology}: {key} counted {_short(seq)}, expected 1..{n} once each")
            elif not exact and (not seq or max(seq) < n):
                problems.append(f"{topology}: {key} reached {max(seq) if seq else 'nothing'}, expected at least {n}")
    return problems


def _short(seq: list[int]) -> str:
    return str(seq) if len(seq) <= 12 else f"{seq[:6]}...{seq[-6:]} ({len(seq)} values)"


class _Background:
    """A function run on a thread; `join()` re-raises what it raised."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"still running after {timeout}s")
        if self.error is not None:
            raise self.error


# -- the scenario --------------------------------------------------------------------------

# Client settings of the suite's runs (every app): a killed instance's session ends within
# 6 s (the broker's minimum session timeout), and members see a rebalance within half a second.
# Repartition topics are purged (DeleteRecords up to the committed offsets) every second
# instead of every 30 s, so that every run purges them.
TEST_SETTINGS = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "repartition.purge.interval.ms": "1000"}
# Per guarantee: both commit every second (defaults: 30 s under at_least_once, 100 ms under
# exactly_once_v2, where a second keeps transactions open long enough, with their records sent,
# for the kill to land inside one), and a dead instance's open transaction times out after 5 s
# (default 10 s).
GUARANTEE_SETTINGS = {
    "at_least_once": {"commit.interval.ms": "1000"},
    "exactly_once_v2": {"commit.interval.ms": "1000", "transaction.timeout.ms": "5000"},
}


@dataclass
class ScenarioResult:
    broker: str
    problems: dict[str, list[str]]  # app -> the differences between output and input
    outputs: dict[str, dict[str, Any]]  # app -> parsed outputs
    final_tasks: dict[str, dict[str, list[str]]]  # instance -> app -> active tasks, at the end
    all_tasks: dict[str, list[str]]  # app -> every task of the app
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds it took
    running_ms: dict[str, float] = field(default_factory=dict)  # app -> first start() to RUNNING of the first instance
    # The internal topics as the broker describes them, named without the scenario's prefix:
    # {name: {"partitions": n, "configs": {the configs set at creation}}}.
    internal_topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Each repartition topic's log start offsets after the run (DeleteRecords moved them).
    log_start: dict[str, list[int]] = field(default_factory=dict)
    # app -> output records read under read_uncommitted beyond those under read_committed
    # (what aborted transactions wrote, for exactly_once_v2; 0 under at_least_once).
    aborted_records: dict[str, int] = field(default_factory=dict)
    # app -> output records beyond one per input effect (at_least_once repeats after the kill).
    repeated_records: dict[str, int] = field(default_factory=dict)
    # Lines Kafka Streams logged at ERROR, per instance.
    errors_logged: dict[str, list[str]] = field(default_factory=dict)
    # Kafka's application reset tool on the exactly_once_v2 app after the run: its exit status,
    # the app's internal topics left, its group's committed offsets of the input topics afterwards,
    # and the (deleted) topics it still has offsets of.
    reset: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        steps = ", ".join(f"{k} {v:.1f}s" for k, v in self.steps.items())
        return f"{self.broker}: {steps}; problems: {self.problems}"


class StreamsScenario:
    """The scenario on one broker: 1 instance, then 3, one killed (SIGKILL) while input
    keeps coming and its tasks move to the others, then restarted; the outputs of every app
    checked against the input exactly (`check_outputs`). Each instance runs one KafkaStreams per
    guarantee in `guarantees` and group protocol in `protocols` (group.protocol; default: just
    `protocol`). With several protocols a streams-protocol app is named `streams_<guarantee>`.
    `group_configs` are set on the streams-protocol apps' groups (IncrementalAlterConfigs on the
    GROUP resource) before the first instance starts: a streams group's session timeout is the
    broker's (or its group's), not the client's."""

    def __init__(
        self,
        broker: str,
        bootstrap: str,
        work_dir: Path,
        *,
        prefix: str,
        protocol: str = "classic",
        protocols: Iterable[str] | None = None,
        group_configs: dict[str, str] | None = None,
        guarantees: Iterable[str] = GUARANTEES,
        partitions: int = 3,
        seed: int = 29,
        settings: dict[str, str] | None = None,
        timeout: float = 90.0,
        reset: bool = True,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.reset = reset
        self.broker = broker
        self.bootstrap = bootstrap
        self.work_dir = work_dir
        self.prefix = prefix
        self.partitions = partitions
        self.timeout = timeout
        self.log = log or (lambda _msg: None)
        self.data = InputData.make(seed, batches=4)
        protocols = list(protocols) if protocols is not None else [protocol]
        self.group_configs = dict(group_configs or {})
        self.apps = []
        for p in protocols:
            for g in guarantees:
                name = f"streams_{g}" if p == "streams" and len(protocols) > 1 else g
                self.apps.append(
                    AppSpec(
                        name=name,
                        application_id=f"{prefix}-{name.replace('_', '-')}",
                        guarantee=g,
                        protocol=p,
                        inputs=prefix,
                        outputs=f"{prefix}-{name.replace('_', '-')}",
                        settings=GUARANTEE_SETTINGS.get(g, {}),
                    )
                )
        settings = {**TEST_SETTINGS, **(settings or {})}
        self.instances = [
            StreamsInstance(f"i{n}", bootstrap, work_dir, self.apps, settings, process_id=str(uuid.UUID(int=n + 1))) for n in range(3)
        ]
        self.steps: dict[str, float] = {}

    # -- waiting ---------------------------------------------------------------------------

    def _fail(self, what: str) -> AssertionError:
        return AssertionError(f"{self.broker}: {what}\n" + "\n".join(i.describe() for i in self.instances))

    def _check_alive(self, running: list[StreamsInstance]) -> None:
        for inst in running:
            if inst.errors():
                raise self._fail(f"{inst.name} failed: {inst.errors()[0]['error'][:3000]}")
            if not inst.alive:
                raise self._fail(f"{inst.name} exited")

    def wait_balanced(self, running: list[StreamsInstance], all_tasks: dict[str, set[str]] | None) -> dict[str, dict[str, list[str]]]:
        """Until every app of every instance in `running` is RUNNING and their active tasks cover
        every task once, each instance with some; returns instance -> app -> active tasks."""
        deadline = time.monotonic() + self.timeout
        last: dict[str, dict[str, list[str]]] = {}
        while True:
            self._check_alive(running)
            if all(inst.state(app.name) == "RUNNING" for inst in running for app in self.apps):
                views = {inst.name: inst.tasks() for inst in running}
                last = {n: {a: v["active"] for a, v in view.items()} for n, view in views.items()}
                ok = all(v["state"] == "RUNNING" for view in views.values() for v in view.values())
                for app in self.apps:
                    owned = [t for n in last for t in last[n][app.name]]
                    want = all_tasks[app.name] if all_tasks else set(owned)
                    if len(owned) != len(set(owned)) or set(owned) != want or any(not last[n][app.name] for n in last):
                        ok = False
                if ok:
                    return last
            if time.monotonic() > deadline:
                raise self._fail(f"instances {[i.name for i in running]} not running with every task once within {self.timeout}s: {last}")
            time.sleep(0.25)

    def wait_progress(self, reader: OutputReader, upto: int, running: list[StreamsInstance]) -> None:
        expected = self.data.expected(upto)
        deadline = time.monotonic() + self.timeout
        while True:
            reader.poll(0.25)
            if not any(progress_missing(parse_outputs(reader.records, app), expected) for app in self.apps):
                return
            self._check_alive(running)
            if time.monotonic() > deadline:
                lagging = {a.name: progress_missing(parse_outputs(reader.records, a), expected) for a in self.apps}
                raise self._fail(f"the output of batches < {upto} not complete within {self.timeout}s for {lagging}")

    def set_group_configs(self) -> None:
        """The streams-protocol apps' group configs, set before their groups exist (Kafka keeps them)."""
        groups = [app.application_id for app in self.apps if app.protocol == "streams"]
        if not groups or not self.group_configs:
            return
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in self.group_configs.items()]
        futures = admin.incremental_alter_configs(
            [ConfigResource(ConfigResource.Type.GROUP, g, incremental_configs=entries) for g in groups]
        )
        for future in futures.values():
            future.result(30)

    def describe_internal_topics(self) -> tuple[dict[str, dict[str, Any]], dict[str, list[int]]]:
        """The apps' internal topics as the broker describes them (partitions, the configs set
        at creation) and the repartition topics' log start offsets."""
        from confluent_kafka import Consumer, TopicPartition
        from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        ids = tuple(f"{app.application_id}-" for app in self.apps)
        outputs = {t for app in self.apps for t in app.output_topics()}
        topics = {n: t for n, t in admin.list_topics(timeout=30).topics.items() if n.startswith(ids) and n not in outputs}
        futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, n) for n in sorted(topics)])
        internal: dict[str, dict[str, Any]] = {}
        for resource, future in futures.items():
            entries = future.result(60)
            configs = {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
            name = resource.name.removeprefix(f"{self.prefix}-")
            internal[name] = {"partitions": len(topics[resource.name].partitions), "configs": configs}
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kaflet-streams-offsets"})
        try:
            log_start = {
                n.removeprefix(f"{self.prefix}-"): [
                    consumer.get_watermark_offsets(TopicPartition(n, p), timeout=30)[0] for p in sorted(t.partitions)
                ]
                for n, t in sorted(topics.items())
                if n.endswith("-repartition")
            }
        finally:
            consumer.close()
        return internal, log_start

    def reset_application(self, app: AppSpec) -> dict[str, Any]:
        """Kafka's kafka-streams-application-reset (StreamsResetter, from kafka-tools) with --force
        on the stopped app: what a test suite runs between two runs of an app."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient

        inputs = ",".join(f"{self.prefix}-{t}" for t in INPUTS)
        cmd = [java_binary(), "-Xmx256m", *LEAN_JVM[2:], "-cp", classpath("kafka-broker"), "org.apache.kafka.tools.StreamsResetter"]
        cmd += ["--bootstrap-server", self.bootstrap, "--application-id", app.application_id, "--input-topics", inputs, "--force"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        left = sorted(
            n for n in admin.list_topics(timeout=30).topics if n.startswith(f"{app.application_id}-") and n not in app.output_topics()
        )
        group = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(app.application_id)])[app.application_id].result(30)
        named = {f"{self.prefix}-{t}" for t in INPUTS}
        return {
            "status": out.returncode,
            "output": out.stdout[-2000:] + out.stderr[-2000:],
            "internal_topics_left": left,
            "offsets": {
                f"{tp.topic.removeprefix(self.prefix + '-')}-{tp.partition}": tp.offset
                for tp in group.topic_partitions
                if tp.topic in named
            },
            "offsets_of_deleted_topics": sorted(
                {tp.topic.removeprefix(self.prefix + "-") for tp in group.topic_partitions if tp.topic not in named}
            ),
        }

    def wait_open_transaction(self, inst: StreamsInstance, reader: OutputReader, trickle: _Background) -> None:
        """Until `inst`'s exactly_once_v2 transaction is open (Ongoing, as DescribeTransactions
        tells) with an output partition in it and records of open transactions in that partition
        (read_uncommitted sees more than read_committed): a kill then leaves written records of
        an open transaction behind. With no such app, until the trickle's first results are out."""
        eos = [app for app in self.apps if app.guarantee == "exactly_once_v2"]
        if not eos or inst.process_id is None:
            wait_until(lambda: reader.poll(0.05) or any(reader.records.values()), self.timeout, 0, "the first results")
            return
        app = eos[0]
        txn_id = f"{app.application_id}-{inst.process_id}-1"  # EOS v2: <application.id>-<process id>-<thread index>
        outputs = app.output_topics()
        peek = OutputReader(self.bootstrap, outputs, self.partitions, isolation="read_uncommitted")
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                reader.poll(0.05)
                peek.poll(0.05)
                state, partitions = transaction_state(self.bootstrap, txn_id)
                if state == "Ongoing":
                    for topic, partition in partitions:
                        if topic in outputs:
                            committed = sum(1 for p, _, _ in reader.records[topic] if p == partition)
                            if sum(1 for p, _, _ in peek.records[topic] if p == partition) > committed:
                                return
                if time.monotonic() > deadline or not trickle.thread.is_alive():
                    raise self._fail(f"{txn_id} not seen open with records written while the input trickled in")
        finally:
            peek.close()

    def _step(self, name: str, t0: float) -> None:
        self.steps[name] = time.monotonic() - t0
        self.log(f"{self.broker}: {name} {self.steps[name]:.1f}s")

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> ScenarioResult:
        data, (i0, i1, i2) = self.data, self.instances[:3]
        outputs = [t for app in self.apps for t in app.output_topics()]
        create_topics(self.bootstrap, [f"{self.prefix}-{t}" for t in INPUTS] + outputs, self.partitions)
        producer = InputProducer(self.bootstrap, self.prefix)
        producer.produce_users(data.users, data.window_base_ms - 600_000)
        reader = OutputReader(self.bootstrap, outputs, self.partitions)
        self.set_group_configs()
        try:
            t0 = time.monotonic()
            i0.start()
            one = self.wait_balanced([i0], None)
            all_tasks = {app.name: set(one[i0.name][app.name]) for app in self.apps}
            running_ms = {app.name: next(s["ms"] for s in i0.states(app.name) if s["to"] == "RUNNING") for app in self.apps}
            self._step("1 instance running", t0)

            t0 = time.monotonic()
            producer.produce_batch(data.batches[0])
            self.wait_progress(reader, 1, [i0])
            self._step("batch 0 processed", t0)

            t0 = time.monotonic()
            i1.start()
            i2.start()
            self.wait_balanced([i0, i1, i2], all_tasks)
            self._step("3 instances running", t0)

            t0 = time.monotonic()
            producer.produce_batch(data.batches[1])
            self.wait_progress(reader, 2, [i0, i1, i2])
            self._step("batch 1 processed", t0)

            # Batch 2 trickles in over about two seconds; i1 is killed mid-stream, with its
            # exactly_once_v2 transaction open and records of it written: they must never show.
            t0 = time.monotonic()
            trickle = _Background(lambda: producer.produce_batch(data.batches[2], chunks=40, pause=0.05))
            self.wait_open_transaction(i1, reader, trickle)
            i1.kill()
            trickle.join(self.timeout)
            self.wait_progress(reader, 3, [i0, i2])
            self.wait_balanced([i0, i2], all_tasks)
            self._step("i1 killed mid-stream, batch 2 processed by the others", t0)

            t0 = time.monotonic()
            i1.restart()
            self.wait_balanced([i0, i1, i2], all_tasks)
            self._step("i1 restarted, 3 instances running", t0)

            t0 = time.monotonic()
            producer.produce_batch(data.batches[3])
            self.wait_progress(reader, 4, [i0, i1, i2])
            final = self.wait_balanced([i0, i1, i2], all_tasks)
            self._step("batch 3 processed", t0)

            t0 = time.monotonic()
            # All at once, each leaving the group (the reset tool then finds no member left).
            marks = [inst.request_close(leave=True) for inst in (i0, i1, i2)]
            for inst, mark in zip((i0, i1, i2), marks, strict=True):
                inst.wait_closed(mark, self.timeout)
            reader.read_to_end()
            self._step("closed, outputs read to their end", t0)
        finally:
            for inst in self.instances:
                inst.stop()
            reader.close()
        uncommitted = OutputReader(self.bootstrap, outputs, self.partitions, isolation="read_uncommitted")
        try:
            uncommitted.read_to_end()
        finally:
            uncommitted.close()
        internal, log_start = self.describe_internal_topics()
        reset = self.reset_application(next(a for a in self.apps if a.guarantee == "exactly_once_v2")) if self.reset else {}
        expected = data.expected()
        outputs = {app.name: parse_outputs(reader.records, app) for app in self.apps}
        aborted = {app.name: sum(len(uncommitted.records[t]) - len(reader.records[t]) for t in app.output_topics()) for app in self.apps}
        exact = sum(expected["wordcount"].values()) + sum(expected["join"].values()) + sum(expected["windowed"].values())
        return ScenarioResult(
            repeated_records={app.name: sum(len(reader.records[t]) for t in app.output_topics()) - exact for app in self.apps},
            errors_logged={inst.name: inst.logged("ERROR") for inst in self.instances},
            internal_topics=internal,
            log_start=log_start,
            aborted_records=aborted,
            reset=reset,
            broker=self.broker,
            problems={app.name: check_outputs(outputs[app.name], expected, app.guarantee) for app in self.apps},
            outputs=outputs,
            final_tasks=final,
            all_tasks={a: sorted(t) for a, t in all_tasks.items()},
            steps=dict(self.steps),
            running_ms=running_ms,
        )
