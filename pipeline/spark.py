"""Building a SparkSession for the pipeline.

Spark starts its Python workers (the data source's planner on the driver, the readers and
writers on executors) with `PYSPARK_PYTHON`, or `python3` from PATH, which is usually not the
interpreter that has PySpark, pyarrow and confluent-kafka installed. The planner is started from
the environment the JVM inherited, so the variable must be set before the JVM starts: this module
sets it to the running interpreter unless the caller chose one.

`connector="kafka"` also puts Spark's own Kafka connector (`format("kafka")`, the JVM jar
spark-sql-kafka-0-10) on the session's classpath, beside the `kaflet` source. Its jars are found,
in order: in `conf` (the caller's `spark.jars` or `spark.jars.packages` naming the connector), in
the classpath file `KAFLET_SPARK_KAFKA_CLASSPATH` names, in the one `make jvm` writes
(`$KAFLET_CACHE/jvm/spark-kafka.classpath`), or else as `spark.jars.packages` at the installed
PySpark's version, which Spark downloads from Maven Central when the session starts.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

CONNECTORS = ("kaflet", "kafka")
KAFKA_ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"

# Quiet, small and local by default; every key can be overridden through `conf`.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


class SessionError(RuntimeError):
    """The session cannot be built as asked; the message says what to do."""


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter (unless set), before the JVM starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _classpath_file() -> Path:
    given = os.environ.get("KAFLET_SPARK_KAFKA_CLASSPATH")
    if given:
        return Path(given)
    cache = os.environ.get("KAFLET_CACHE") or str(Path.home() / ".cache" / "kaflet")
    return Path(cache) / "jvm" / "spark-kafka.classpath"


def _artifact(jar: str) -> str:
    """A jar's artifact name without its version: 'kafka-clients-3.9.2.jar' -> 'kafka-clients'."""
    return re.sub(r"-\d+(\.\d+)+([-.][A-Za-z0-9]+)*\.jar$", "", Path(jar).name)


def kafka_connector_jars() -> list[str] | None:
    """The connector's jars from its classpath file, less those PySpark already ships (Spark's own
    Scala library, Hadoop client, compression codecs: two copies of a class on one classpath is
    trouble); None when there is no classpath file."""
    path = _classpath_file()
    if not path.exists():
        return None
    jars = [j for j in path.read_text().strip().split(os.pathsep) if j]
    missing = [j for j in jars if not Path(j).exists()]
    if missing:
        raise SessionError(f"{path} names {len(missing)} missing jar(s), e.g. {missing[0]}: run `make jvm` again")
    connector = [j for j in jars if _artifact(j) == "spark-sql-kafka-0-10_2.13"]
    if not connector:
        raise SessionError(f"{path} does not list {KAFKA_ARTIFACT}")
    import pyspark

    version = Path(connector[0]).name.removeprefix("spark-sql-kafka-0-10_2.13-").removesuffix(".jar")
    if version != pyspark.__version__:
        raise SessionError(
            f"{path} holds Spark's Kafka connector {version}, but PySpark is {pyspark.__version__}: they must match "
            f"(run `make jvm` again, or install pyspark=={version})"
        )
    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [j for j in jars if _artifact(j) not in shipped]


def connector_conf(conf: dict[str, str]) -> dict[str, str]:
    """What `conf` needs added so that `format("kafka")` loads (see the module docstring)."""
    given = conf.get("spark.jars", "") + "," + conf.get("spark.jars.packages", "")
    if "spark-sql-kafka-0-10" in given:
        return {}
    jars = kafka_connector_jars()
    if jars is None:
        import pyspark

        packages = ",".join(p for p in (conf.get("spark.jars.packages"), f"{KAFKA_ARTIFACT}:{pyspark.__version__}") if p)
        return {"spark.jars.packages": packages}
    return {"spark.jars": ",".join(p for p in (conf.get("spark.jars"), *jars) if p)}


def session(
    master: str = "local[*]", app_name: str = "kaflet-pipeline", conf: dict[str, str] | None = None, connector: str = "kaflet"
) -> Any:
    """Get or create a SparkSession on `master`, with the `kaflet` data source registered (and
    Spark's Kafka connector on its classpath with `connector="kafka"`)."""
    if connector not in CONNECTORS:
        raise SessionError(f"connector must be one of {', '.join(CONNECTORS)}, got {connector!r}")
    prepare_environment()
    from pyspark.sql import SparkSession

    import pipeline

    settings = {**DEFAULT_CONF, **(conf or {})}
    if connector == "kafka":
        settings.update(connector_conf(settings))
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("KAFLET_SPARK_LOG_LEVEL", "ERROR"))
    pipeline.register(spark)
    return spark


# Spark starts a Python process for each data source planning step and streaming source, and
# waits a fixed 10 s (PythonWorkerFactory.createSimpleWorker; Spark 4.2 has no setting for it) for
# it to connect back. On an overloaded machine that start can take longer.
WORKER_TIMEOUT_MARKS = ("Python worker failed to connect back", "Timed out while waiting for the Python worker to connect back")


def worker_timed_out(exc: BaseException) -> bool:
    text = str(exc)
    return any(mark in text for mark in WORKER_TIMEOUT_MARKS)


def worker_timeout_advice(attempts: int) -> str:
    load = ""
    try:
        load = f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    except OSError:
        pass
    return (
        f"Spark's Python worker did not connect back within Spark's fixed 10 s{load}, {attempts} time(s): the machine is too busy "
        "to start a Python process in time. Spark 4 has no setting to lengthen that wait (it is fixed in PythonWorkerFactory): "
        "run again when the load is lower, or give Spark fewer cores (--master local[1])."
    )


def retry_worker_start(call: Any, attempts: int = 3, on_retry: Any = None, backoff_s: float = 2.0) -> Any:
    """`call()`, again (up to `attempts` times) when Spark's Python worker failed to connect back in time;
    the last failure is re-raised with the advice above. A query restarted on its checkpoint
    neither loses nor repeats what its sink committed, so a retry is safe there."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            if not worker_timed_out(exc):
                raise
            if attempt == attempts:
                raise WorkerTimeout(worker_timeout_advice(attempts)) from exc
            if on_retry is not None:
                on_retry(attempt, exc)
            time.sleep(backoff_s * attempt)  # a busy machine: give it a moment
    raise AssertionError("unreachable")


class WorkerTimeout(RuntimeError):
    """Spark's Python worker did not connect back in time, even after retries."""


def explain(exc: BaseException) -> str | None:
    """A one-line account of a Spark failure kaflet recognises, or None."""
    if isinstance(exc, WorkerTimeout):
        return str(exc)
    if worker_timed_out(exc):
        return worker_timeout_advice(1)
    return None
