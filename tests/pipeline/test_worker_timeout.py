"""Spark waits a fixed 10 s for a Python worker to connect back; on a busy machine it may not.
The analytics start the query again from its checkpoint, say so, and when it keeps failing stop
with one line saying what happened and what to do."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from pipeline.spark import WorkerTimeout, retry_worker_start
from tests.pipeline.conftest import create_topic

REPO = Path(__file__).resolve().parents[2]
SPARK_MESSAGE = "org.apache.spark.SparkException: Python worker failed to connect back."


def test_a_worker_that_never_connects_back_is_retried_then_explained() -> None:
    calls: list[int] = []

    def start() -> None:
        calls.append(1)
        raise RuntimeError(SPARK_MESSAGE)

    retried: list[int] = []
    with pytest.raises(WorkerTimeout, match=r"did not connect back within Spark's fixed 10 s.*3 time\(s\).*fewer cores"):
        retry_worker_start(start, attempts=3, on_retry=lambda attempt, _exc: retried.append(attempt), backoff_s=0)
    assert len(calls) == 3 and retried == [1, 2]
    with pytest.raises(ValueError, match="other"):  # anything else is not retried
        retry_worker_start(lambda: (_ for _ in ()).throw(ValueError("other")))


def test_a_slow_worker_start_is_retried_from_the_checkpoint(kaflet: Any, topic_name: str, tmp_path: Path) -> None:
    create_topic(kaflet.bootstrap, topic_name, 1)
    c = Consumer({"bootstrap.servers": kaflet.bootstrap, "group.id": f"{topic_name}-g", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic_name, 0, 0)], asynchronous=False)
    c.close()
    # The Python that Spark starts for the streaming source: the first one takes longer than Spark waits.
    marker = tmp_path / "slow-once"
    wrapper = tmp_path / "python"
    wrapper.write_text(
        f"""#!/bin/sh
case "$*" in *python_streaming_source_runner*)
  if [ ! -e {marker} ]; then touch {marker}; sleep 13; exit 1; fi;;
esac
exec {sys.executable} "$@"
"""
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PYSPARK_PYTHON": str(wrapper)}
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "lag-history",
            "--once",
            "--bootstrap-server",
            kaflet.bootstrap,
            "--out",
            str(out),
            "--master",
            "local[1]",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert marker.exists()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Spark's Python worker did not connect back in time (attempt 1); starting the query again" in done.stderr
    assert done.stdout.startswith("lag-history: ")
