"""The pipeline suite's fixtures: ONE local SparkSession for the whole suite, and kaflet processes.

Starting Spark costs seconds (a JVM, then Python workers), so every pipeline test shares the
session-scoped `spark`; tests isolate themselves by topic names (`topic_name`), never by sessions.
The session carries both connectors: the `kaflet` source and Spark's own Kafka connector
(`format("kafka")`, its jars from `make jvm`'s tests/jvm/spark-kafka module, never downloaded at run
time). A test that uses `format("kafka")` asks for `kafka_connector`, which fails with Maven's reason
when the jars could not be had; the others run on the same session all the same.
`kaflet` is one broker process shared by the suite; tests that stop or break a broker start their
own with the function-scoped `broker_proc` (tests/conftest.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import BrokerProcess

pytest.importorskip("pyspark", reason="the pipeline extra (pip install -e '.[pipeline]') is not installed")

# Loopback only: Spark otherwise binds to, and warns about, the machine's outward address.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stopTimeout": "30s",
    # Tests read back what they wrote at once; no adaptive re-planning to wait for.
    "spark.sql.adaptive.enabled": "false",
    # The suite's jobs are small and short: the JVM's quick compiler only and the serial
    # collector start Spark and its first jobs in about half the time on two busy cores.
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}


def _connector_classpath() -> tuple[str | None, str | None]:
    """(the connector's classpath file, None) or (None, why it cannot be had)."""
    from tests.support.jvm import JvmUnavailable, classpath, jvm_dir

    try:
        classpath("spark-kafka")
    except JvmUnavailable as exc:
        return None, str(exc)
    return str(jvm_dir() / "spark-kafka.classpath"), None


_CONNECTOR_MISSING: list[str] = []


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pipeline.spark import session

    path, why = _connector_classpath()
    if path is None:
        _CONNECTOR_MISSING.append(why or "unknown")
        spark = session("local[2]", "kaflet-tests", TEST_CONF)
    else:
        os.environ["KAFLET_SPARK_KAFKA_CLASSPATH"] = path
        spark = session("local[2]", "kaflet-tests", TEST_CONF, connector="kafka")
        # The jars come from the classpath file: nothing is resolved through Ivy when a session starts.
        assert not spark.conf.get("spark.jars.packages", None)
    yield spark
    spark.stop()


@pytest.fixture
def kafka_connector(spark: Any) -> str:
    """The format name of Spark's own Kafka connector, on the shared session; fails (never skips)
    with Maven's reason when `make jvm` could not fetch it."""
    if _CONNECTOR_MISSING:
        pytest.fail(f"Spark's Kafka connector is not available: {_CONNECTOR_MISSING[0]}", pytrace=False)
    return "kafka"


@pytest.fixture(scope="session")
def kaflet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One kaflet process for the pipeline suite (topics keep tests apart)."""
    data = tmp_path_factory.mktemp("pipeline-kaflet")
    bp = BrokerProcess(data, "--offsets-partitions", "5").start()
    yield bp
    if bp.alive:
        bp.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name of the test's own."""
    return f"{request.node.name[:60].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=10)
    futures[topic].result(timeout=15)


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    """Produce `records` (dicts of value, key, partition, headers, timestamp) and wait for every ack."""
    from confluent_kafka import Producer

    failures: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for r in records:
        kw = {k: r[k] for k in ("key", "partition", "headers", "timestamp") if r.get(k) is not None}
        producer.produce(topic, r.get("value"), on_delivery=lambda err, _msg: err and failures.append(str(err)), **kw)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not failures, (remaining, failures[:3])


@pytest.fixture
def tmp_dir(tmp_path: Path) -> Path:
    return tmp_path
