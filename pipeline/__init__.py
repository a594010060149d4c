"""kaflet's data pipeline on Spark: a PySpark data source for Kafka topics and the group analytics on it.

`register(spark)` makes `spark.read.format("kaflet")`, `readStream`, `write` and `writeStream`
available; `session()` builds a SparkSession set up for it (`connector="kafka"`: with Spark's own
Kafka connector, `format("kafka")`, on its classpath as well). Both import PySpark lazily, so
`import pipeline` works without the `kaflet[pipeline]` extra installed.
"""

from __future__ import annotations

from typing import Any

FORMAT = "kaflet"


def register(spark: Any) -> None:
    """Register the `kaflet` data source (batch and streaming reads and writes) with `spark`."""
    from pipeline.source.datasource import KafletDataSource

    spark.dataSource.register(KafletDataSource)


def session(
    master: str = "local[*]", app_name: str = "kaflet-pipeline", conf: dict[str, str] | None = None, connector: str = "kaflet"
) -> Any:
    """A SparkSession with the `kaflet` data source registered, and with `connector="kafka"` Spark's
    own Kafka connector (`format("kafka")`) on its classpath too (see pipeline.spark)."""
    from pipeline.spark import session as make

    return make(master, app_name, conf, connector)


__all__ = ["FORMAT", "register", "session"]
