"""A Spark standalone cluster on this machine: one master and N workers, started with PySpark's own
`spark-class` (pip's PySpark has no sbin/start-*.sh scripts), for `kaflet pipeline cluster start|stop`.

Everything binds to `SPARK_LOCAL_IP` (127.0.0.1 by default). The processes, their logs and the
workers' scratch space live under one directory (`--dir`), with a `cluster.json` that names the
master URL and the process ids, which `stop` reads. The workers run executors with the Python of
the driver that submits an application (PySpark sends its interpreter's path), so on one machine
the venv that has kaflet serves every executor.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

DESCRIPTION = "A Spark standalone cluster on this machine (master + workers via spark-class)."
STATE = "cluster.json"
# Small, quick-starting daemons: they only schedule; executors do the work.
DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
DAEMON_MEMORY = "256m"


class ClusterError(RuntimeError):
    """The cluster could not be started or stopped; the message says why and where the logs are."""


@dataclass
class Cluster:
    directory: str
    host: str
    master_url: str
    master_ui: str
    pids: list[int]
    workers: int


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def spark_class() -> Path:
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise ClusterError(f"PySpark has no {path}: reinstall pyspark")
    return path


def _env(host: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = host
    env.setdefault("SPARK_DAEMON_JAVA_OPTS", DAEMON_JAVA_OPTS)
    env.setdefault("SPARK_DAEMON_MEMORY", DAEMON_MEMORY)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def _alive_workers(ui: str) -> int:
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=5) as r:
            state = json.load(r)
    except OSError:
        return -1
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def start(directory: str | Path, workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 120) -> Cluster:
    """Start a master and `workers` workers (`cores` cores, `memory` each) and wait until every
    worker has registered; return the cluster (also written to DIR/cluster.json)."""
    d = Path(directory).resolve()
    if (d / STATE).exists():
        raise ClusterError(f"a cluster is already recorded in {d / STATE}: stop it first (kaflet pipeline cluster stop --dir {d})")
    d.mkdir(parents=True, exist_ok=True)
    host = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    env = _env(host)
    port, ui_port = _free_port(host), _free_port(host)
    master_url, ui = f"spark://{host}:{port}", f"http://{host}:{ui_port}"
    procs: list[subprocess.Popen[bytes]] = []

    def launch(name: str, *args: str) -> None:
        with open(d / f"{name}.log", "wb") as log:  # the child keeps its own copy of the descriptor
            procs.append(
                subprocess.Popen(
                    [str(spark_class()), *args],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    launch("master", "org.apache.spark.deploy.master.Master", "--host", host, "--port", str(port), "--webui-port", str(ui_port))
    for i in range(workers):
        work = d / f"worker-{i + 1}"
        work.mkdir(exist_ok=True)
        launch(
            f"worker-{i + 1}",
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            host,
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--work-dir",
            str(work),
            "--webui-port",
            str(_free_port(host)),
            master_url,
        )
    cluster = Cluster(str(d), host, master_url, ui, [p.pid for p in procs], workers)
    (d / STATE).write_text(json.dumps(asdict(cluster), indent=2))
    deadline = time.monotonic() + timeout_s
    while _alive_workers(ui) < workers:
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            stop(d)
            why = f"a process exited with {dead[0].returncode}" if dead else f"not every worker registered within {timeout_s:g} s"
            raise ClusterError(f"the Spark cluster did not start: {why} (logs in {d})")
        time.sleep(0.5)
    return cluster


def load(directory: str | Path) -> Cluster:
    path = Path(directory).resolve() / STATE
    if not path.exists():
        raise ClusterError(f"no cluster recorded in {path}")
    return Cluster(**json.loads(path.read_text()))


def stop(directory: str | Path, timeout_s: float = 30) -> list[int]:
    """Stop the recorded cluster's processes (TERM, then KILL after `timeout_s`); return their pids."""
    d = Path(directory).resolve()
    cluster = load(d)
    for pid in cluster.pids:
        try:
            os.killpg(pid, signal.SIGTERM)  # each daemon leads its own session: its JVM and children
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    for pid in cluster.pids:
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _running(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in cluster.pids:
        _reap(pid)
    (d / STATE).unlink()
    return cluster.pids


def _running(pid: int) -> bool:
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (started by another process): nothing to reap


ACTIONS = ("start", "stop", "status")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`kaflet pipeline cluster ACTION [OPTIONS]`'s own arguments."""
    p.add_argument("action", choices=ACTIONS, metavar="ACTION", help="start, stop or status")
    p.add_argument(
        "--dir", default="spark-cluster", help="where the cluster keeps its state, logs and scratch space (default ./spark-cluster)"
    )
    p.add_argument("--workers", type=int, default=2, help="workers to start (default 2)")
    p.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    p.add_argument("--memory", default="1g", help="memory per worker for executors (default 1g)")


def main(argv: list[str], prog: str = "kaflet pipeline cluster") -> int:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    add_arguments(p)
    return run(p.parse_args(argv), prog)


def run(args: argparse.Namespace, prog: str) -> int:
    """One action; exit status 0 done, 1 with one line saying why (status: 1 when a worker is not alive)."""
    try:
        if args.action == "start":
            c = start(args.dir, args.workers, args.cores, args.memory)
            print(f"{c.master_url} ({c.workers} workers; web UI {c.master_ui}; stop: {prog} stop --dir {args.dir})")
        elif args.action == "stop":
            pids = stop(args.dir)
            print(f"stopped the Spark cluster in {Path(args.dir).resolve()} ({len(pids)} processes)")
        else:
            c = load(args.dir)
            alive = _alive_workers(c.master_ui)
            print(
                f"{c.master_url}: {max(alive, 0)} of {c.workers} workers alive"
                if alive >= 0
                else f"{c.master_url}: the master does not answer"
            )
            return 0 if alive == c.workers else 1
    except ClusterError as exc:
        print(f"{prog} {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0
