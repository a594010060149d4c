"""A Spark standalone cluster (a master and two workers, started with spark-class by
`python -m pipeline cluster start`), with the analytics and a streaming query run on it, their
tasks spread over both workers' executors; then `cluster stop` leaves no process behind.

The driver runs in a process of its own: the suite's shared session is a local one, and a
process holds one SparkContext.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.pipeline.conftest import create_topic, produce

REPO = Path(__file__).resolve().parents[2]

DRIVER = r"""
import json, sys, urllib.request
import pipeline
from pipeline.analytics.cli import main

master, bootstrap, topic, out, ui_port = sys.argv[1:6]
spark = pipeline.session(master, "kaflet-cluster-test", {
    "spark.ui.enabled": "true", "spark.ui.port": ui_port, "spark.executor.memory": "512m", "spark.cores.max": "2",
    "spark.sql.shuffle.partitions": "4", "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
})
codes = [main([cmd, "--bootstrap-server", bootstrap, "--out", out, "--once"], spark=spark) for cmd in ("lag-history", "rebalance-timeline")]
query = (spark.readStream.format("kaflet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
         .option("startingOffsets", "earliest").option("minPartitions", "8").load()
         .selectExpr("partition", "offset").writeStream.format("parquet").option("path", out + "/stream")
         .option("checkpointLocation", out + "/stream-ck").trigger(availableNow=True).start())
query.awaitTermination(300)
app = spark.sparkContext.applicationId
with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}/allexecutors", timeout=30) as r:
    executors = [{"id": e["id"], "hostPort": e["hostPort"], "tasks": e["totalTasks"]} for e in json.load(r) if e["id"] != "driver"]
result = {
    "codes": codes,
    "stream_error": str(query.exception()) if query.exception() else None,
    "stream_rows": spark.read.parquet(out + "/stream").count(),
    "lag_rows": spark.read.parquet(out + "/lag_history").count(),
    "executors": executors,
}
spark.stop()
print("RESULT " + json.dumps(result))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_analytics_and_a_stream_on_a_two_worker_standalone_cluster(kaflet: Any, topic_name: str, tmp_path: Path) -> None:
    create_topic(kaflet.bootstrap, topic_name, 4)
    produce(kaflet.bootstrap, topic_name, [{"value": b"%d" % i, "partition": i % 4} for i in range(400)])
    c = Consumer({"bootstrap.servers": kaflet.bootstrap, "group.id": f"{topic_name}-g", "enable.auto.commit": False})
    for offset in (10, 20, 30):
        c.commit(offsets=[TopicPartition(topic_name, p, offset) for p in range(4)], asynchronous=False)
    c.close()

    cluster_dir = tmp_path / "cluster"
    started = _cli("cluster", "start", "--dir", str(cluster_dir), "--workers", "2", "--memory", "768m")
    assert started.returncode == 0, started.stderr + started.stdout
    state = json.loads((cluster_dir / "cluster.json").read_text())
    try:
        assert started.stdout.startswith(state["master_url"]) and " (2 workers;" in started.stdout
        status = _cli("cluster", "status", "--dir", str(cluster_dir))
        assert status.returncode == 0 and status.stdout.strip() == f"{state['master_url']}: 2 of 2 workers alive"
        script = tmp_path / "driver.py"
        script.write_text(DRIVER)
        out = tmp_path / "out"
        done = subprocess.run(
            [sys.executable, str(script), state["master_url"], kaflet.bootstrap, topic_name, str(out), str(_free_port())],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    finally:
        stopped = _cli("cluster", "stop", "--dir", str(cluster_dir))
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped the Spark cluster"), stopped.stderr
    assert not any(_alive(pid) for pid in state["pids"]) and not (cluster_dir / "cluster.json").exists()

    assert result["codes"] == [0, 0] and result["stream_error"] is None
    assert result["stream_rows"] == 400
    assert result["lag_rows"] >= 12  # 3 commits of 4 partitions
    # One executor per worker, each of which ran tasks.
    executors = result["executors"]
    assert len(executors) == 2 and len({e["hostPort"] for e in executors}) == 2, executors
    assert all(e["tasks"] > 0 for e in executors), executors
