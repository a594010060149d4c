"""Kafka Streams 4.4 applications on kaflet, side by side with Kafka 4.4.

Each instance (one JVM: tests/jvm/kafka-streams-apps) runs four KafkaStreams, one per processing
guarantee (at_least_once, exactly_once_v2) and group protocol (classic, streams), each with three
topologies: a word count (a repartition topic and a changelog), a stream-table join (a
repartition topic co-partitioned with the table, whose store has a changelog) and a windowed
count (a windowed changelog). The scenario (tests/support/streams_apps.py, `StreamsScenario`)
runs 1 instance, then 3, kills one with SIGKILL in the middle of an open transaction while input
keeps coming, lets the other two take its tasks over, restarts it, and finally reads every
output under read_committed and checks it against the input exactly.

Classic protocol: Streams' own assignor over JoinGroup/SyncGroup; the apps create their internal
topics themselves. Streams protocol (KIP-1071, KS-*): the broker validates the topology, creates
the internal topics and assigns the tasks; a streams group's session timeout is the group's
`streams.session.timeout.ms`, set to 6 s here on both brokers (their lower bound lowered to
allow it), as the classic apps' client-side session.timeout.ms is.

The same scenario runs against Kafka 4.4 (`kafka_reference`): its outputs must pass the same
checks (the harness itself is right), and kaflet must create the same internal topics with the
same configs (the classic apps' and, for the streams apps, the broker's own), let Streams purge
its repartition topics (DeleteRecords) as Kafka does, and end with an assignment of the same
shape, protocol by protocol.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from broker.embed import BrokerProcess
from tests.support.streams_apps import ScenarioResult, StreamsScenario

# Two scenarios of about a minute each, on a loaded machine up to several.
pytestmark = pytest.mark.timeout(900)

Runs = dict[str, ScenarioResult | BaseException]
PROTOCOLS = ("classic", "streams")
STREAMS_GROUP_CONFIGS = {"streams.session.timeout.ms": "6000"}
APPS = ("at_least_once", "exactly_once_v2", "streams_at_least_once", "streams_exactly_once_v2")


@pytest.fixture(scope="module")
def streams_runs(tmp_path_factory: pytest.TempPathFactory, kafka_reference: Any) -> Iterator[Runs]:
    """The scenario on kaflet and on Kafka at once: most of each run is waiting (a session to
    expire, a transaction to time out), which the two runs share."""
    work = tmp_path_factory.mktemp("kafka-streams")
    prefix = f"s29{uuid.uuid4().hex[:6]}"  # the Kafka broker is shared with other tests
    with BrokerProcess(work / "kaflet-data", "--group-streams-min-session-timeout-ms", "6000") as kaflet, ThreadPoolExecutor(2) as pool:
        on_kaflet = pool.submit(_run, "kaflet", kaflet.bootstrap, work / "kaflet", prefix)
        on_kafka = pool.submit(_run, "kafka", kafka_reference.bootstrap, work / "kafka", prefix)
        yield {"kaflet": on_kaflet.result(), "kafka": on_kafka.result()}


def _run(broker: str, bootstrap: str, work: Path, prefix: str) -> ScenarioResult | BaseException:
    try:
        scenario = StreamsScenario(
            broker, bootstrap, work, prefix=prefix, protocols=PROTOCOLS, group_configs=STREAMS_GROUP_CONFIGS, log=print
        )
        result = scenario.run()
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
    assert result.problems == {app: [] for app in APPS}, result.describe()
    # What the killed instance's open transaction wrote is in the log, and was not read.
    print(f"{broker}: aborted records {result.aborted_records}, repeated {result.repeated_records}")
    assert result.aborted_records["at_least_once"] == result.aborted_records["streams_at_least_once"] == 0
    assert result.repeated_records["exactly_once_v2"] == result.repeated_records["streams_exactly_once_v2"] == 0


def test_streams_internal_topics_as_on_kafka(streams_runs: Runs) -> None:
    """The classic apps create their repartition and changelog topics (CreateTopics with configs,
    replication factor -1), the broker creates the streams apps' from their topology (KS-13);
    kaflet holds them with the same partitions and configs as Kafka."""
    kaflet, kafka = _result(streams_runs, "kaflet"), _result(streams_runs, "kafka")
    assert kaflet.internal_topics == kafka.internal_topics
    kinds = {name.rsplit("-", 1)[1] for name in kaflet.internal_topics}
    assert kinds == {"repartition", "changelog"}, kaflet.internal_topics
    for app in ("exactly-once-v2", "streams-exactly-once-v2"):
        windowed = kaflet.internal_topics[f"{app}-win-counts-changelog"]["configs"]
        assert windowed["cleanup.policy"] == "compact,delete", windowed
    streams_topics = {n.removeprefix("streams-") for n in kaflet.internal_topics if n.startswith("streams-")}
    assert streams_topics == {n for n in kaflet.internal_topics if not n.startswith("streams-")}


def test_streams_purge_repartition_topics(streams_runs: Runs) -> None:
    """Streams deletes what it has committed from its repartition topics (DeleteRecords up to
    the committed offsets, every second here): every partition's log start moved, on both."""
    for broker in ("kaflet", "kafka"):
        result = _result(streams_runs, broker)
        assert len(result.log_start) == 8, result.log_start
        unpurged = {topic: starts for topic, starts in result.log_start.items() if min(starts) == 0}
        assert not unpurged, f"{broker}: repartition partitions never purged: {unpurged}"


def test_streams_final_assignment_as_on_kafka(streams_runs: Runs) -> None:
    """After the restart the three instances share the tasks as they do on Kafka: every task
    once, and the same shape, protocol by protocol (Streams' assignor co-locates a partition's
    tasks of every sub-topology; the broker's sticky assignor (KS-15) spreads each member's share
    and keeps tasks where they were, so which instance ends with which task depends on the
    history, on Kafka as well: there the shape is each instance's number of tasks)."""
    kaflet, kafka = _result(streams_runs, "kaflet"), _result(streams_runs, "kafka")
    assert kaflet.all_tasks == kafka.all_tasks
    assert _shape(kaflet.final_tasks) == _shape(kafka.final_tasks), (kaflet.final_tasks, kafka.final_tasks)


def _shape(final: dict[str, dict[str, list[str]]]) -> dict[str, list[Any]]:
    """Per app: for the classic protocol each instance's tasks with partitions renamed in order of
    appearance, sorted (["0_2", "1_2"] and ["0_0", "1_0"] are both ("0_a", "1_a")); for the
    streams protocol each instance's number of tasks, sorted."""
    shape: dict[str, list[Any]] = {}
    for app in sorted({app for tasks in final.values() for app in tasks}):
        per_instance: list[Any] = []
        for tasks in final.values():
            if app.startswith("streams_"):
                per_instance.append(len(tasks[app]))
                continue
            names: dict[str, str] = {}
            renamed = []
            for task in tasks[app]:
                sub, part = task.split("_")
                renamed.append(f"{sub}_{names.setdefault(part, chr(ord('a') + len(names)))}")
            per_instance.append(tuple(sorted(renamed)))
        shape[app] = sorted(per_instance)
    return shape


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
# And, with the streams protocol, by a consumer closed while it was taking over tasks: the
# instances close at once, so a member may get the tasks of one that left just before it closes
# itself ("Reconciliation failed ... could not be completed before the consumer closed").
EXPECTED_ERRORS = ("are corrupted and hence need to be re-initialized", "could not be completed before the consumer closed")


def test_streams_log_no_unexpected_error_on_kaflet(streams_runs: Runs) -> None:
    """Nothing Kafka Streams logs at ERROR on kaflet but the restart's expected one. (On Kafka
    its Admin client may also log "Received unknown topic error" for the internal topics it has
    just created, while their metadata reaches the broker: kaflet's topics exist once created.)"""
    logged = _result(streams_runs, "kaflet").errors_logged
    unexpected = {n: [e for e in lines if not any(x in e for x in EXPECTED_ERRORS)] for n, lines in logged.items()}
    assert not any(unexpected.values()), unexpected
