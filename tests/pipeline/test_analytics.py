"""The group analytics (pipeline/analytics) on a scenario the test makes (group_scenario.py):
a real kaflet process with an aggressively compacted `__consumer_offsets`, real confluent-kafka
consumers joining and leaving, and the suite's one SparkSession reading through the kaflet source.

lag-history and rebalance-timeline run `--once` twice on their checkpoints: after the scenario,
and again after the log cleaner has compacted away commits and generations the first run saw.
The history must still hold every commit and generation, exactly once.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from pipeline.analytics import lag, timeline
from pipeline.analytics.cli import main
from pipeline.analytics.jobs import JobOptions
from storage import offsets_records as orec
from tests.pipeline.conftest import _CONNECTOR_MISSING
from tests.pipeline.group_scenario import (
    CG_GROUP,
    CG_TOPIC,
    FANOUT,
    GROUP,
    OUTPUT,
    SOURCE,
    Scenario,
    run_consumer_group_scenario,
    run_scenario,
)
from tests.support.procs import BrokerProcess
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


@dataclass
class World:
    broker: BrokerProcess
    out: Path
    scenario: Scenario
    first_run_commits: int  # commits the first --once runs saw
    records_after_compaction: Counter[str]
    consumer_group_steps: list[dict[str, tuple[str, set[tuple[str, int]]]]]


def offsets_log_records(bootstrap: str) -> list[tuple[bytes, bytes | None]]:
    """Every record left in `__consumer_offsets` (one partition), read with a plain consumer."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader", "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition("__consumer_offsets", 0, 0)])
    out: list[tuple[bytes, bytes | None]] = []
    done = False
    while not done:
        for m in c.consume(500, 1.0):
            if m.error():
                done = True
                break
            out.append((m.key(), m.value()))
    c.close()
    return out


def kinds(records: list[tuple[bytes, bytes | None]]) -> Counter[str]:
    count: Counter[str] = Counter()
    for key, value in records:
        kind = orec.key_type(key)
        if (
            kind in (orec.OFFSET_COMMIT_KEY_V0, orec.OFFSET_COMMIT_KEY)
            and value is not None
            and orec.parse_offset_commit_key(key)[0] == GROUP
        ):
            count["commit"] += 1
        elif kind == orec.GROUP_METADATA_KEY and value is not None and orec.parse_group_metadata_key(key) == GROUP:
            count["group"] += 1
    return count


OUTPUT_LINES: list[str] = []


def cli(spark: Any, *args: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args), spark=spark) == 0
    OUTPUT_LINES.extend(out.getvalue().splitlines())


def connectors() -> list[str]:
    """The connectors the world runs the analytics with: both, when the session has Spark's."""
    return ["kaflet"] if _CONNECTOR_MISSING else ["kaflet", "kafka"]


def out_for(out: Path, connector: str) -> Path:
    return out if connector == "kaflet" else out / "with-kafka-connector"


@pytest.fixture(scope="module")
def world(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data = tmp_path_factory.mktemp("analytics-kaflet")
    out = tmp_path_factory.mktemp("analytics-out")
    # One offsets partition in small segments; the cleaner is held off (hourly) while the scenario runs.
    small = ["--offsets-partitions", "1", "--offsets-topic-segment-bytes", "600"]
    broker = BrokerProcess(data, *small, "--offsets-compaction-interval-ms", "3600000").start()
    try:
        t0 = time.monotonic()
        scenario = run_scenario(broker.bootstrap)
        consumer_group_steps = run_consumer_group_scenario(broker.bootstrap)
        print(f"scenario: {time.monotonic() - t0:.1f} s", file=sys.stderr)
        first_runs(spark, broker.bootstrap, out)
        first = len(scenario.commits)
        # The same data on a broker that compacts every 200 ms: commits and generations superseded
        # since are removed from the log, but not from the history.
        broker.stop()
        t0 = time.monotonic()
        broker = BrokerProcess(data, *small, "--offsets-compaction-interval-ms", "200").start()
        left = wait_until(
            lambda: (k := kinds(offsets_log_records(broker.bootstrap)))["commit"] < len(scenario.commits) and k["group"] < 4 and k,
            timeout=30,
            message="the log cleaner to compact __consumer_offsets",
        )
        print(f"compaction: {time.monotonic() - t0:.1f} s", file=sys.stderr)
        first_runs(spark, broker.bootstrap, out)
        for connector in connectors():
            t0 = time.monotonic()
            cli(
                spark,
                "audit",
                "--bootstrap-server",
                broker.bootstrap,
                "--out",
                str(out_for(out, connector)),
                "--source-topics",
                SOURCE,
                "--output-topics",
                OUTPUT,
                "--group",
                GROUP,
                "--connector",
                connector,
            )
            print(f"audit ({connector}): {time.monotonic() - t0:.1f} s", file=sys.stderr)
        yield World(broker, out, scenario, first, left, consumer_group_steps)
    finally:
        broker.stop()


def first_runs(spark: Any, bootstrap: str, out: Path) -> None:
    for connector in connectors():
        for command in ("lag-history", "rebalance-timeline"):
            t0 = time.monotonic()
            cli(spark, command, "--bootstrap-server", bootstrap, "--out", str(out_for(out, connector)), "--once", "--connector", connector)
            print(f"{command} --once ({connector}): {time.monotonic() - t0:.1f} s", file=sys.stderr)


def rows(spark: Any, out: Path, name: str) -> list[dict[str, Any]]:
    reader = spark.read.schema(lag.lag_schema()) if name == lag.NAME else spark.read
    return [r.asDict(recursive=True) for r in reader.parquet(str(out / name)).collect()]


def ms(ts: Any) -> int:
    return round(ts.timestamp() * 1000)


def test_lag_history_has_a_row_per_commit(spark: Any, world: World) -> None:
    s = world.scenario
    got = [r for r in rows(spark, world.out, lag.NAME) if r["group"] == GROUP]
    assert world.first_run_commits == len(s.commits)
    assert world.records_after_compaction["commit"] < len(s.commits)  # the log alone no longer has them all
    # Exactly one row per commit, none lost to compaction, none repeated by the second run.
    assert Counter((r["topic"], r["partition"], r["committed_offset"]) for r in got) == Counter(
        (c.topic, c.partition, c.offset) for c in s.commits
    )
    by_commit = {(r["topic"], r["partition"], r["committed_offset"]): r for r in got}
    lagging = 0
    for c in s.commits:
        r = by_commit[(c.topic, c.partition, c.offset)]
        tp = (c.topic, c.partition)
        t = ms(r["commit_time"])
        assert c.before_ms <= t <= c.after_ms, (c, r["commit_time"])
        assert r["log_end_offset"] == s.log_end_at(tp, t), r
        assert r["lag_records"] == s.log_end_at(tp, t) - c.offset, r
        if r["lag_records"]:
            lagging += 1
            oldest = s.timestamp_of(tp, c.offset)
            assert ms(r["oldest_unconsumed_time"]) == oldest
            assert r["lag_seconds"] == pytest.approx((t - oldest) / 1000)
        else:
            assert r["lag_seconds"] == 0 and r["oldest_unconsumed_time"] is None
    assert 0 < lagging < len(s.commits)  # the scenario has commits behind and caught up


def test_rebalance_timeline_matches_the_broker(spark: Any, world: World) -> None:
    got = sorted((r for r in rows(spark, world.out, timeline.NAME) if r["group"] == GROUP), key=lambda r: r["generation"])
    assert world.records_after_compaction["group"] < 4  # compaction took generations the timeline kept
    # Generation 0: the record a new group is persisted with at its first JoinGroup (JG-3a), Empty.
    assert got[0]["generation"] == 0 and got[0]["state"] == "Empty" and got[0]["members"] == [] and got[0]["stable_time"] is None
    got = got[1:]
    expected = world.scenario.generations
    assert [r["generation"] for r in got] == [g.number for g in expected]
    assert got[0]["not_stable_ms"] == ms(got[0]["stable_time"]) - ms(world_gen0_start(spark, world))
    previous: set[str] = set()
    for r, g in zip(got, expected, strict=True):
        assert r["state"] == g.state and r["incarnation"] == 0
        members = {m["member_id"]: (m["client_id"], {(tp["topic"], tp["partition"]) for tp in m["assignment"]}) for m in r["members"]}
        assert members == g.members, (r["generation"], members, g.members)
        assert r["member_count"] == len(g.members)
        assert set(r["joined"]) == set(g.members) - previous and set(r["left"]) == previous - set(g.members)
        previous = set(g.members)
        assert ms(r["start_time"]) <= g.settled_ms
        if g.state == "Stable":
            assert r["protocol"] == g.protocol == "range" and r["leader"] in g.members
            assert r["start_time"] <= r["stable_time"] and r["sync_ms"] == ms(r["stable_time"]) - ms(r["start_time"])
            assert r["not_stable_ms"] >= r["sync_ms"] >= 0
            for m in r["members"]:
                assert m["subscription"] == [SOURCE]
        else:
            assert r["stable_time"] is None and r["protocol"] is None and r["members"] == []
    for a, b in itertools.pairwise(got):
        assert a["end_time"] == b["start_time"]
    assert got[-1]["end_time"] is None
    assert got[1]["since_previous_stable_ms"] >= got[1]["sync_ms"]


def test_rebalance_timeline_follows_a_consumer_group_through_its_epochs(spark: Any, world: World) -> None:
    """A KIP-848 group's generations are its group epochs, from records 3-8: each step the test
    saw settled is the generation of some epoch, stable once every member had reconciled."""
    got = sorted((r for r in rows(spark, world.out, timeline.NAME) if r["group"] == CG_GROUP), key=lambda r: r["generation"])
    assert got and all(r["group_type"] == "consumer" and r["incarnation"] == 0 for r in got)
    epochs = [r["generation"] for r in got]
    assert epochs == sorted(set(epochs)) and epochs[0] >= 1
    stable = [r for r in got if r["state"] == "Stable"]
    seen = [
        {m["member_id"]: (m["client_id"], {(tp["topic"], tp["partition"]) for tp in m["assignment"]}) for m in r["members"]} for r in stable
    ]
    # Every settled step is a stable generation, in order (a step may span no other stable epoch).
    steps = [s for s in world.consumer_group_steps if s]
    it = iter(seen)
    assert all(any(step == g for g in it) for step in steps), (steps, seen)
    for r in stable:
        assert r["start_time"] <= r["stable_time"] and r["not_stable_ms"] == r["sync_ms"] == ms(r["stable_time"]) - ms(r["start_time"])
        assert r["protocol"] == "range" and r["leader"] is None  # the assignor the members named
        assert all(m["subscription"] == [CG_TOPIC] for m in r["members"])
    assert got[-1]["state"] == "Empty" and got[-1]["members"] == [] and got[-1]["end_time"] is None
    for a, b in itertools.pairwise(got):
        assert a["end_time"] == b["start_time"]


def world_gen0_start(spark: Any, world: World) -> Any:
    return next(r["start_time"] for r in rows(spark, world.out, timeline.NAME) if r["group"] == GROUP and r["generation"] == 0)


def test_audit_finds_exactly_the_arranged_losses_and_duplicates(spark: Any, world: World) -> None:
    s = world.scenario
    lost = {(r["source_topic"], r["source_partition"], r["source_offset"]) for r in rows(spark, world.out, "audit_lost")}
    assert lost == s.lost
    dups = rows(spark, world.out, "audit_duplicates")
    assert {(r["source_topic"], r["source_partition"], r["source_offset"]): r["generation"] for r in dups} == s.duplicated
    assert len(dups) == len(s.duplicated) and all(r["copies"] == 2 and r["copy"] == 2 for r in dups)
    by_gen = {r["generation"]: (r["duplicated"], r["extra_copies"]) for r in rows(spark, world.out, "audit_by_generation")}
    want = Counter(s.duplicated.values())
    assert by_gen == {g: (n, n) for g, n in want.items()}
    by_part = {r["source_partition"]: r for r in rows(spark, world.out, "audit_by_partition")}
    stray = by_part.pop(None)
    assert stray["unattributed"] == s.unattributed == 1 and stray["source_topic"] is None
    assert set(by_part) == {p for (_, p) in s.produced}
    for p, r in by_part.items():
        records = len(s.produced[(SOURCE, p)])
        lost_here = sum(1 for (_, lp, _) in s.lost if lp == p)
        dup_here = sum(1 for (_, dp, _) in s.duplicated if dp == p)
        fanout_here = sum(1 for (_, fp, _) in FANOUT if fp == p)
        assert (r["source_records"], r["processed_records"], r["lost"], r["duplicated"], r["extra_copies"], r["unattributed"]) == (
            records,
            records,  # the scenario processes and commits everything
            lost_here,
            dup_here,
            dup_here,
            0,
        )
        assert r["output_records"] == records - lost_here + dup_here + fanout_here
    assert sum(r["output_records"] for r in by_part.values()) + stray["unattributed"] == s.outputs


def test_report_renders_with_png_images(world: World) -> None:
    # Through the command line, in a process of its own: the report needs no Spark.
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "report", "--out", str(world.out)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    page = Path(done.stdout.strip())
    assert page == world.out / "report" / "index.html"
    text = page.read_text()
    for name in ("lag.png", "rebalances.png", "duplicates.png"):
        png = page.parent / name
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
        assert f"src='{name}'" in text
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width >= 600 and height >= 200
    # The tables behind the plots: every generation, the lost record, the group.
    assert GROUP in text and "orders" in text and text.count("<table>") >= 5
    assert "No lag_history" not in text and "No audit" not in text


def test_lag_history_runs_until_stopped(spark: Any, world: World, tmp_path: Path) -> None:
    """Without --once the query keeps appending commits made while it runs (one of them to a
    topic deleted since: its lag is unknown, and the query goes on), then stops on request."""
    from confluent_kafka.admin import AdminClient, NewTopic

    opts = JobOptions(world.broker.bootstrap, str(tmp_path), interval_s=0.5)
    admin = AdminClient({"bootstrap.servers": world.broker.bootstrap})
    admin.create_topics([NewTopic("gone", 1, 1)])["gone"].result(30)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            lag.run_lag_history(spark, opts)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    runner = threading.Thread(target=target, daemon=True)
    runner.start()
    c = Consumer({"bootstrap.servers": world.broker.bootstrap, "group.id": "late-group", "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("gone", 0, 0)], asynchronous=False)
        admin.delete_topics(["gone"])["gone"].result(30)
        for offset in (1, 2, 3):
            c.commit(offsets=[TopicPartition(SOURCE, 0, offset)], asynchronous=False)

        def seen() -> list[dict[str, Any]] | None:
            assert not errors, errors
            if not (tmp_path / lag.NAME / "_spark_metadata").exists():
                return None
            got = [r for r in rows(spark, tmp_path, lag.NAME) if r["group"] == "late-group"]
            return (
                got
                if sorted((r["topic"], r["committed_offset"]) for r in got) == [("gone", 0), (SOURCE, 1), (SOURCE, 2), (SOURCE, 3)]
                else None
            )

        got = wait_until(seen, timeout=90, interval=0.5, message="the running query to append the late commits")
    finally:
        c.close()
        opts.stop.set()
        runner.join(60)
    assert not runner.is_alive() and not errors
    gone = next(r for r in got if r["topic"] == "gone")
    assert gone["lag_records"] is None and gone["lag_seconds"] is None and gone["log_end_offset"] is None
    records = len(world.scenario.produced[(SOURCE, 0)])
    assert sorted(r["lag_records"] for r in got if r["topic"] == SOURCE) == [records - 3, records - 2, records - 1]


def _table(spark: Any, out: Path, name: str, order: list[str]) -> list[dict[str, Any]]:
    got = rows(spark, out, name)
    return sorted(got, key=lambda r: tuple(repr(r.get(c)) for c in order))


def test_the_analytics_give_the_same_tables_on_either_connector(spark: Any, kafka_connector: str, world: World) -> None:
    """Read through Spark's own Kafka connector (`--connector kafka`) at the same moments, every table
    is the same, row for row, as through the kaflet source."""
    other = out_for(world.out, kafka_connector)
    for name, order in (
        (lag.NAME, ["group", "topic", "partition", "offsets_partition", "offsets_offset"]),
        (timeline.NAME, ["group", "incarnation", "generation"]),
        ("audit_lost", ["source_topic", "source_partition", "source_offset"]),
        ("audit_duplicates", ["source_topic", "source_partition", "source_offset", "copy"]),
        ("audit_by_partition", ["source_topic", "source_partition"]),
        ("audit_by_generation", ["generation"]),
    ):
        ours, theirs = _table(spark, world.out, name, order), _table(spark, other, name, order)
        assert ours and ours == theirs, name


def test_each_command_says_what_it_wrote(world: World) -> None:
    """One line each on success: how much a --once run appended, and what the audit found."""
    lag_lines = [
        re.fullmatch(r"lag-history: (\d+) commit\(s\) appended to (\S+) \((\d+) in all\)", x) for x in OUTPUT_LINES if x.startswith("lag-")
    ]
    assert lag_lines and all(lag_lines)
    kaflet_runs = [m for m in lag_lines if m[2] == str(world.out / lag.NAME)]
    (first, second) = kaflet_runs
    assert int(first[1]) == int(first[3]) >= world.first_run_commits  # everything was new
    assert int(second[1]) == 0 and int(second[3]) == int(first[3])  # the compacted log added nothing
    timeline_lines = [x for x in OUTPUT_LINES if x.startswith("rebalance-timeline: ")]
    assert timeline_lines and all(
        re.fullmatch(r"rebalance-timeline: \d+ generation\(s\) of \d+ group\(s\) in \S+ \(\d+ new group record\(s\)\)", x)
        for x in timeline_lines
    )
    s = world.scenario
    audits = [x for x in OUTPUT_LINES if x.startswith("audit: ")]
    assert audits and all(
        x.startswith(f"audit: {len(s.lost)} lost, {len(s.duplicated)} duplicated ({len(s.duplicated)} extra copies)") for x in audits
    )


def test_a_misspelt_topic_or_group_is_an_error_not_a_clean_audit(spark: Any, world: World, tmp_path: Path, capsys: Any) -> None:
    base = ["audit", "--bootstrap-server", world.broker.bootstrap, "--out", str(tmp_path), "--output-topics", OUTPUT]
    assert main([*base, "--source-topics", "ordres"], spark=spark) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"python -m pipeline audit: no topic 'ordres' on {world.broker.bootstrap}"]
    assert main([*base, "--source-topics", SOURCE, "--group", "enricherr"], spark=spark) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"python -m pipeline audit: group 'enricherr' has no committed offsets on {world.broker.bootstrap} (is the name right?)"]
    assert not (tmp_path / "audit_lost").exists()


def test_report_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    # matplotlib made unimportable, as on a machine without the pipeline extra.
    stub = tmp_path / "stub" / "matplotlib"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('not installed')\n")
    (tmp_path / "stub" / "sitecustomize.py").write_text(
        "import importlib.util, sys\n_find = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'matplotlib' else _find(name, *a)\n"
    )
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path / "stub")}
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "report", "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "python -m pipeline report: needs the pipeline extra (matplotlib not installed): pip install 'kaflet[pipeline]'"
    )
