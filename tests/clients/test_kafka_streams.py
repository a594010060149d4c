"""Kafka Streams 4.4 applications on kaflet, side by side with Kafka 4.4.

Each instance (one JVM: tests/jvm/kafka-streams-apps) runs two KafkaStreams, one per processing
guarantee (at_least_once, exactly_once_v2), each with three topologies: a word count (a
repartition topic and a changelog), a stream-table join (a repartition topic co-partitioned
with the table, whose store has a changelog) and a windowed count (a windowed changelog). The
scenario (tests/support/streams_apps.py, `StreamsScenario`) runs 1 instance, then 3, kills one
with SIGKILL in the middle of an open transaction while input keeps coming, lets the other two
take its tasks over, restarts it, and finally reads every output under read_committed and
checks it against the input exactly. Group protocol: classic (Streams' own assignor over
JoinGroup/SyncGroup); the internal topics are created by the apps themselves.

The same scenario runs against Kafka 4.4 (`kafka_reference`): its outputs must pass the same
checks (the harness itself is right), and kaflet must create the same internal topics with the
same configs, let Streams purge its repartition topics (DeleteRecords) as Kafka does, and end
with an assignment of the same shape.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from broker.embed import BrokerProcess
from tests.support.streams_apps import AppSpec, ScenarioResult, StreamsInstance, StreamsScenario, create_topics

# Two scenarios of about a minute each, on a loaded machine up to several.
pytestmark = pytest.mark.timeout(900)

Runs = dict[str, ScenarioResult | BaseException]


@pytest.fixture(scope="module")
def streams_runs(tmp_path_factory: pytest.TempPathFactory, kafka_reference: Any) -> Iterator[Runs]:
    """The scenario on kaflet and on Kafka at once: most of each run is waiting (a session to
    expire, a transaction to time out), which the two runs share."""
    work = tmp_path_factory.mktemp("kafka-streams")
    prefix = f"s29{uuid.uuid4().hex[:6]}"  # the Kafka broker is shared with other tests
    with BrokerProcess(work / "kaflet-data") as kaflet, ThreadPoolExecutor(2) as pool:
        on_kaflet = pool.submit(_run, "kaflet", kaflet.bootstrap, work / "kaflet", prefix)
        on_kafka = pool.submit(_run, "kafka", kafka_reference.bootstrap, work / "kafka", prefix)
        yield {"kaflet": on_kaflet.result(), "kafka": on_kafka.result()}


def _run(broker: str, bootstrap: str, work: Path, prefix: str) -> ScenarioResult | BaseException:
    try:
        result = StreamsScenario(broker, bootstrap, work, prefix=prefix, log=print).run()
    except (AssertionError, RuntimeError, TimeoutError, OSError) as exc:
        return exc
    print(result.describe())
    return result


def _result(runs: Runs, broker: str) -> ScenarioResult:
    result = runs[broker]
    if isinstance(result, BaseException):
        raise AssertionError(f"the Streams scenario failed on {broker}: {result}") from result
    return result


@pytest.mark.parametrize("broker", ["kaflet", "kafka"])
def test_streams_outputs_match_the_input_exactly(streams_runs: Runs, broker: str) -> None:
    """No loss under either guarantee, no duplicate under exactly_once_v2 (read_committed),
    through a scale-out to 3 instances, a SIGKILL mid-transaction and a restart."""
    result = _result(streams_runs, broker)
    assert result.problems == {"at_least_once": [], "exactly_once_v2": []}, result.describe()
    # What the killed instance's open transaction wrote is in the log, and was not read.
    print(f"{broker}: aborted records {result.aborted_records}, repeated {result.repeated_records}")
    assert result.aborted_records["at_least_once"] == 0
    assert result.repeated_records["exactly_once_v2"] == 0


def test_streams_internal_topics_as_on_kafka(streams_runs: Runs) -> None:
    """The apps create their repartition and changelog topics (CreateTopics with configs,
    replication factor -1); kaflet holds them with the same partitions and configs as Kafka."""
    kaflet, kafka = _result(streams_runs, "kaflet"), _result(streams_runs, "kafka")
    assert kaflet.internal_topics == kafka.internal_topics
    kinds = {name.rsplit("-", 1)[1] for name in kaflet.internal_topics}
    assert kinds == {"repartition", "changelog"}, kaflet.internal_topics
    windowed = kaflet.internal_topics["exactly-once-v2-win-counts-changelog"]["configs"]
    assert windowed["cleanup.policy"] == "compact,delete", windowed


def test_streams_purge_repartition_topics(streams_runs: Runs) -> None:
    """Streams deletes what it has committed from its repartition topics (DeleteRecords up to
    the committed offsets, every second here): every partition's log start moved, on both."""
    for broker in ("kaflet", "kafka"):
        result = _result(streams_runs, broker)
        assert len(result.log_start) == 4, result.log_start
        unpurged = {topic: starts for topic, starts in result.log_start.items() if min(starts) == 0}
        assert not unpurged, f"{broker}: repartition partitions never purged: {unpurged}"


def test_streams_final_assignment_as_on_kafka(streams_runs: Runs) -> None:
    """After the restart the three instances share the tasks as they do on Kafka: every task
    once, and the same shape (Streams' assignor co-locates a partition's tasks of every
    sub-topology; which instance gets which partition depends on timing, on Kafka as well)."""
    kaflet, kafka = _result(streams_runs, "kaflet"), _result(streams_runs, "kafka")
    assert kaflet.all_tasks == kafka.all_tasks
    assert _shape(kaflet.final_tasks) == _shape(kafka.final_tasks), (kaflet.final_tasks, kafka.final_tasks)


def test_streams_application_reset_as_on_kafka(streams_runs: Runs) -> None:
    """Kafka's kafka-streams-application-reset --force on the stopped exactly_once_v2 app (what
    a test suite runs between two runs): its members removed, its input offsets back to 0, its
    internal topics deleted, on kaflet as on Kafka. The group's offsets of the deleted internal
    topics go with them on kaflet at once (Kafka removes them shortly after, asynchronously)."""
    kaflet, kafka = _result(streams_runs, "kaflet"), _result(streams_runs, "kafka")
    for result in (kaflet, kafka):
        reset = result.reset
        assert reset["status"] == 0, f"{result.broker}: {reset['output']}"
        assert reset["internal_topics_left"] == [], result.broker
        assert len(reset["offsets"]) == 12 and set(reset["offsets"].values()) == {0}, (result.broker, reset["offsets"])
    assert kaflet.reset["offsets"] == kafka.reset["offsets"]
    assert kaflet.reset["offsets_of_deleted_topics"] == []


# Logged at ERROR by Kafka Streams itself when an exactly_once_v2 instance restarts after a
# SIGKILL: its stores have no checkpoint, so its tasks are wiped and restored (on Kafka as well).
EXPECTED_ERRORS = ("are corrupted and hence need to be re-initialized",)


def test_streams_log_no_unexpected_error_on_kaflet(streams_runs: Runs) -> None:
    """Nothing Kafka Streams logs at ERROR on kaflet but the restart's expected one. (On Kafka
    its Admin client may also log "Received unknown topic error" for the internal topics it has
    just created, while their metadata reaches the broker: kaflet's topics exist once created.)"""
    logged = _result(streams_runs, "kaflet").errors_logged
    unexpected = {n: [e for e in lines if not any(x in e for x in EXPECTED_ERRORS)] for n, lines in logged.items()}
    assert not any(unexpected.values()), unexpected


def _shape(final: dict[str, dict[str, list[str]]]) -> list[list[tuple[str, ...]]]:
    """Per app, each instance's tasks with partitions renamed in order of appearance, sorted:
    ["0_2", "1_2"] and ["0_0", "1_0"] are both ("0_a", "1_a")."""
    shape = []
    apps = sorted({app for tasks in final.values() for app in tasks})
    for app in apps:
        per_instance = []
        for tasks in final.values():
            names: dict[str, str] = {}
            renamed = []
            for task in tasks[app]:
                sub, part = task.split("_")
                renamed.append(f"{sub}_{names.setdefault(part, chr(ord('a') + len(names)))}")
            per_instance.append(tuple(sorted(renamed)))
        shape.append(sorted(per_instance))
    return shape


def test_streams_group_protocol_is_refused_as_unsupported(tmp_path: Path) -> None:
    """The same driver with group.protocol=streams (KIP-1071): kaflet does not advertise
    StreamsGroupHeartbeat, so the client fails the app at once with its own "the cluster does not
    support the STREAMS group protocol" rather than hanging or misbehaving."""
    with BrokerProcess(tmp_path / "data") as kaflet:
        create_topics(kaflet.bootstrap, ["p-wc-input", "p-s-wc-output"], 3)
        app = AppSpec("s", "p-s", "at_least_once", "streams", inputs="p", outputs="p-s", topologies=("wordcount",))
        inst = StreamsInstance("s0", kaflet.bootstrap, tmp_path, [app]).start()
        try:
            inst.wait_for(lambda r: r.get("event") == "state" and r.get("to") == "ERROR", 60)
            (error,) = inst.errors()
            assert "does not support the STREAMS group protocol" in error["error"], error["error"][:2000]
        finally:
            inst.stop()
