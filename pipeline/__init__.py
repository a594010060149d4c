"""kaflet's data pipeline on Spark: a PySpark data source for Kafka topics and the group analytics on it.

`register(spark)` makes `spark.read.format("kaflet")`, `readStream`, `write` and `writeStream`
available; `session()` builds a SparkSession set up for it. Both import PySpark lazily, so
`import pipeline` works without the `kaflet[pipeline]` extra installed.
"""

from __future__ import annotations

from typing import Any

FORMAT = "kaflet"


def register(spark: Any) -> None:
    """Register the `kaflet` data source (batch and streaming reads and writes) with `spark`."""
    from pipeline.source.datasource import KafletDataSource

    spark.dataSource.register(KafletDataSource)


def session(master: str = "local[*]", app_name: str = "kaflet-pipeline", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession with the `kaflet` data source registered (see pipeline.spark)."""
    from pipeline.spark import session as make

    return make(master, app_name, conf)


__all__ = ["FORMAT", "register", "session"]
