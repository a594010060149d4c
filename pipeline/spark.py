"""Building a SparkSession for the pipeline.

Spark starts its Python workers (the data source's planner on the driver, the readers and
writers on executors) with `PYSPARK_PYTHON`, or `python3` from PATH, which is usually not the
interpreter that has PySpark, pyarrow and confluent-kafka installed. The planner is started from
the environment the JVM inherited, so the variable must be set before the JVM starts: this module
sets it to the running interpreter unless the caller chose one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# Quiet, small and local by default; every key can be overridden through `conf`.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter (unless set), before the JVM starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session(master: str = "local[*]", app_name: str = "kaflet-pipeline", conf: dict[str, str] | None = None) -> Any:
    """Get or create a SparkSession on `master`, with the `kaflet` data source registered."""
    prepare_environment()
    from pyspark.sql import SparkSession

    import pipeline

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("KAFLET_SPARK_LOG_LEVEL", "ERROR"))
    pipeline.register(spark)
    return spark
