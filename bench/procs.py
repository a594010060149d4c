"""The processes of a benchmark: a kaflet broker child, a librdkafka mock cluster child, client workers.

Both brokers run as child processes so that their RSS and CPU can be read from /proc and so
that neither shares an interpreter (or a GIL) with the harness or the clients.

The mock cluster lives inside a librdkafka handle. confluent-kafka hides the handle, so the
mock child (`python -m bench.procs mock`) drives the librdkafka that confluent-kafka bundles
through ctypes: it creates a handle with `test.mock.num.brokers=1`, takes its cluster with
`rd_kafka_handle_mock_cluster()`, and can then call the mock's C API, which has what the
`test.mock.*` configs lack: `rd_kafka_mock_group_initial_rebalance_delay_ms()` (the mock's
default is 3000 ms and there is no config for it) and `rd_kafka_mock_topic_create()` (the mock
has no CreateTopics and auto-creates topics with 4 partitions). It confirms the cluster answers
with confluent-kafka's `list_topics()` and reads the broker address from that metadata. If the
C API cannot be loaded it falls back to a plain confluent-kafka Producer and says what it cannot do.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

from broker.embed.log_tail import JsonLineTail

# Where `python -m broker` runs: None for this checkout, or another one (`--kaflet-dir`),
# e.g. a branch not merged yet. Its directory comes first on the child's sys.path.
KAFLET_DIR: str | None = None

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# -- /proc readings --------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (all its threads)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- child processes with a JSON-lines channel ------------------------------------------------


class _Child(JsonLineTail):
    """A child process whose stderr (kaflet) or stdout (mock) carries JSON lines we wait on."""

    name = "child"

    def __init__(self) -> None:
        super().__init__()
        self.bootstrap = ""
        self.spawned_at = 0.0  # time.perf_counter() just before the process was started
        self.start_seconds = 0.0  # process start until ready

    def _spawn(self, cmd: list[str], stream: str, **kw: Any) -> None:
        self.spawned_at = time.perf_counter()
        pipes = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        pipes[stream] = subprocess.PIPE
        self.proc = subprocess.Popen(cmd, **pipes, **kw)  # type: ignore[call-overload]
        self._start_pump(getattr(self.proc, stream))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Kaflet(_Child):
    """`python -m broker serve --port 0 --data-dir DIR --log-format json ...`, ready at its "broker ready" line."""

    name = "kaflet"

    def __init__(self, *flags: str, data_dir: str | None = None) -> None:
        super().__init__()
        self.flags = list(flags)
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kaflet-bench-")
        self.metrics_port: int | None = None
        self.ready: dict[str, Any] = {}

    def start(self, timeout: float = 30.0) -> Kaflet:
        cmd = [sys.executable, "-m", "broker", "serve", "--port", "0", "--data-dir", self.data_dir, "--log-format", "json"]
        if "--no-metrics" not in self.flags and not any(f.startswith("--metrics-port") for f in self.flags):
            # Metrics stay on (the default) but on a port of our own: 9644 may be taken.
            self.metrics_port = free_port()
            cmd += ["--metrics-port", str(self.metrics_port)]
        cmd += self.flags
        env = None
        if KAFLET_DIR:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [KAFLET_DIR, os.environ.get("PYTHONPATH")]))}
        self._spawn(cmd, "stderr", stdin=subprocess.DEVNULL, cwd=KAFLET_DIR, env=env)
        self.ready = self.wait_for(lambda r: r.get("event") == "broker ready", timeout)
        self.start_seconds = time.perf_counter() - self.spawned_at
        self.bootstrap = self.ready["bootstrap"]
        return self

    def restart(self, timeout: float = 120.0) -> Kaflet:
        self.stop()
        return self.start(timeout)

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


class Mock(_Child):
    """The librdkafka mock cluster (one broker) in a child process, controlled over stdin."""

    name = "mock"

    def __init__(self, rebalance_delay_ms: int | None = None, consumer_heartbeat_interval_ms: int | None = None, brokers: int = 1) -> None:
        super().__init__()
        self.brokers = brokers  # > 1: bootstrap names every broker (bench_cluster)
        self.rebalance_delay_ms = rebalance_delay_ms
        self.consumer_heartbeat_interval_ms = consumer_heartbeat_interval_ms
        self.ready: dict[str, Any] = {}

    def start(self, timeout: float = 30.0) -> Mock:
        cmd = [sys.executable, "-m", "bench.procs", "mock"]
        if self.rebalance_delay_ms is not None:
            cmd += ["--rebalance-delay-ms", str(self.rebalance_delay_ms)]
        if self.consumer_heartbeat_interval_ms is not None:
            cmd += ["--consumer-heartbeat-interval-ms", str(self.consumer_heartbeat_interval_ms)]
        if self.brokers != 1:
            cmd += ["--brokers", str(self.brokers)]
        self._spawn(cmd, "stdout", stdin=subprocess.PIPE)
        self.ready = self.wait_for(lambda r: r.get("event") == "mock ready", timeout)
        self.start_seconds = time.perf_counter() - self.spawned_at
        self.bootstrap = self.ready["bootstrap"]
        return self

    @property
    def controllable(self) -> bool:
        """True when the mock's C API is reachable (topic creation, rebalance delay)."""
        return bool(self.ready.get("c_api"))

    def command(self, op: str, timeout: float = 10.0, **args: Any) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        after = len(self.records)
        self.proc.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
        self.proc.stdin.flush()
        reply = self.wait_for(lambda r: r.get("reply") == op, timeout, after=after)
        if reply.get("error"):
            raise RuntimeError(f"mock {op}: {reply['error']}")
        return reply

    def create_topic(self, name: str, partitions: int) -> None:
        self.command("create_topic", name=name, partitions=partitions)

    def stop(self, timeout: float = 20.0) -> int:
        if self.proc is not None and self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()  # EOF: the child destroys the cluster and exits
                return self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return super().stop(timeout)


# -- the mock child itself --------------------------------------------------------------------


def _load_librdkafka() -> Any:
    """The librdkafka confluent-kafka uses (its wheel bundles one), with the mock API declared."""
    import ctypes
    import ctypes.util
    import glob

    import confluent_kafka

    here = os.path.dirname(confluent_kafka.__file__)
    candidates = sorted(glob.glob(os.path.join(here, "..", "confluent_kafka.libs", "librdkafka*.so*")))
    system = ctypes.util.find_library("rdkafka")
    if system:
        candidates.append(system)
    if not candidates:
        raise OSError("librdkafka shared library not found")
    lib = ctypes.CDLL(candidates[0])
    p, c, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    lib.rd_kafka_conf_new.restype = p
    lib.rd_kafka_conf_set.argtypes = [p, c, c, c, ctypes.c_size_t]
    lib.rd_kafka_new.restype = p
    lib.rd_kafka_new.argtypes = [i, p, c, ctypes.c_size_t]
    lib.rd_kafka_handle_mock_cluster.restype = p
    lib.rd_kafka_handle_mock_cluster.argtypes = [p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = c
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [p]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [p, ctypes.c_int32]
    lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms.argtypes = [p, ctypes.c_int]
    lib.rd_kafka_mock_topic_create.restype = i
    lib.rd_kafka_mock_topic_create.argtypes = [p, c, i, i]
    # Moves, for bench_cluster: a group's coordinator and a partition's leader.
    lib.rd_kafka_mock_coordinator_set.restype = i
    lib.rd_kafka_mock_coordinator_set.argtypes = [p, c, c, ctypes.c_int32]
    lib.rd_kafka_mock_partition_set_leader.restype = i
    lib.rd_kafka_mock_partition_set_leader.argtypes = [p, c, ctypes.c_int32, ctypes.c_int32]
    # Variadic (broker, api key, count, then error and RTT per request): called with ctypes values.
    lib.rd_kafka_mock_broker_push_request_error_rtts.restype = None
    lib.rd_kafka_destroy.argtypes = [p]
    lib.rd_kafka_err2str.restype = c
    return lib


def _say(**record: Any) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


# What Kafka's old coordinator answers OffsetCommit after a move. The mock's own OffsetCommit
# handler answers NOT_COORDINATOR only when no broker is the coordinator: a commit sent to the old
# one is accepted, so its clients never see the move on the commit path (librdkafka's cgrp does
# on Heartbeat). Pushed on the old broker's error stack, enough for every commit a benchmark
# sends it; the stack cannot be cleared, so that broker must not be made coordinator again.
OFFSET_COMMIT, NOT_COORDINATOR, FENCED_COMMITS = 8, 16, 1000


def _fence_commits(lib: Any, mcluster: Any, broker_id: int) -> None:
    import ctypes

    for _ in range(FENCED_COMMITS):
        lib.rd_kafka_mock_broker_push_request_error_rtts(
            ctypes.c_void_p(mcluster),
            ctypes.c_int32(broker_id),
            ctypes.c_int16(OFFSET_COMMIT),
            ctypes.c_size_t(1),
            ctypes.c_int(NOT_COORDINATOR),
            ctypes.c_int(0),
        )


def mock_main(argv: list[str]) -> int:
    import argparse
    import ctypes

    from confluent_kafka.admin import AdminClient

    parser = argparse.ArgumentParser(prog="bench.procs mock")
    parser.add_argument("--rebalance-delay-ms", type=int, default=None)
    parser.add_argument("--consumer-heartbeat-interval-ms", type=int, default=None)
    parser.add_argument("--brokers", type=int, default=1)
    args = parser.parse_args(argv)

    lib = rk = mcluster = keeper = None
    note = ""
    try:
        lib = _load_librdkafka()
        conf = lib.rd_kafka_conf_new()
        err = ctypes.create_string_buffer(512)
        if lib.rd_kafka_conf_set(conf, b"test.mock.num.brokers", str(args.brokers).encode(), err, 512) != 0:
            raise OSError(err.value.decode())
        rk = lib.rd_kafka_new(0, conf, err, 512)  # RD_KAFKA_PRODUCER
        if not rk:
            raise OSError(err.value.decode())
        mcluster = lib.rd_kafka_handle_mock_cluster(rk)
        bootstraps = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        if args.rebalance_delay_ms is not None:
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mcluster, args.rebalance_delay_ms)
        if args.consumer_heartbeat_interval_ms is not None:
            lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(mcluster, args.consumer_heartbeat_interval_ms)
    except (OSError, AttributeError) as exc:
        # No C API: a plain confluent-kafka handle still starts the mock, without our controls.
        from confluent_kafka import Producer

        note = f"mock C API unavailable ({exc}): rebalance delay stays 3000 ms, topics auto-create with 4 partitions"
        keeper = Producer({"test.mock.num.brokers": 1})
        md = keeper.list_topics(timeout=10)
        bootstraps = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
        lib = None

    admin = AdminClient({"bootstrap.servers": bootstraps})
    md = admin.list_topics(timeout=10)
    broker = next(iter(md.brokers.values()))
    every = ",".join(f"{b.host}:{b.port}" for _id, b in sorted(md.brokers.items()))
    del admin
    _say(
        event="mock ready",
        bootstrap=f"{broker.host}:{broker.port}" if args.brokers == 1 else every,
        c_api=lib is not None,
        rebalance_delay_ms=args.rebalance_delay_ms if lib is not None else 3000,
        note=note,
        pid=os.getpid(),
    )
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
        except ValueError:
            continue
        op = cmd.get("op")
        if op == "create_topic":
            if lib is None:
                _say(reply=op, error=note)
                continue
            code = lib.rd_kafka_mock_topic_create(mcluster, cmd["name"].encode(), int(cmd["partitions"]), 1)
            _say(reply=op, error=lib.rd_kafka_err2str(code).decode() if code else "")
        elif op in ("coordinator_set", "partition_set_leader"):
            if lib is None:
                _say(reply=op, error=note)
                continue
            if op == "coordinator_set":
                code = lib.rd_kafka_mock_coordinator_set(mcluster, b"group", cmd["key"].encode(), int(cmd["broker"]))
                if not code and cmd.get("old_broker") is not None:
                    _fence_commits(lib, mcluster, int(cmd["old_broker"]))
            else:
                code = lib.rd_kafka_mock_partition_set_leader(mcluster, cmd["topic"].encode(), int(cmd["partition"]), int(cmd["broker"]))
            _say(reply=op, error=lib.rd_kafka_err2str(code).decode() if code else "")
        elif op == "stop":
            break
        else:
            _say(reply=op, error=f"unknown op {op!r}")
    if lib is not None and rk:
        lib.rd_kafka_destroy(rk)
    del keeper
    return 0


# -- client workers: a function run in a fresh interpreter -------------------------------------


def _worker_main(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        result = fn(conn, *args)
        conn.send(("result", result))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class Worker:
    """`fn(conn, *args)` in a spawned process; it may talk over `conn`, its return value is the result.

    Clients (load generators, producers, consumers) run in workers so that their CPU is
    their own and can be reported separately from the harness's.
    """

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child_conn, fn, args), daemon=True)
        self.proc.start()
        child_conn.close()

    def recv(self, timeout: float) -> Any:
        """The next message the worker sent; its error, re-raised, if it failed instead."""
        if not self.conn.poll(timeout):
            raise TimeoutError(f"worker sent nothing within {timeout:.0f} s")
        try:
            msg = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"worker died (exit code {self.proc.exitcode})") from None
        if isinstance(msg, tuple) and msg and msg[0] == "error":
            raise RuntimeError("worker failed:\n" + msg[1])
        return msg

    def send(self, msg: Any) -> None:
        self.conn.send(msg)

    def result(self, timeout: float) -> Any:
        while True:
            msg = self.recv(timeout)
            if isinstance(msg, tuple) and msg and msg[0] == "result":
                self.proc.join(5)
                return msg[1]

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


def run_worker(fn: Callable[..., Any], *args: Any, timeout: float = 300.0) -> Any:
    worker = Worker(fn, *args)
    try:
        return worker.result(timeout)
    finally:
        worker.kill()


if __name__ == "__main__":
    if sys.argv[1:2] == ["mock"]:
        sys.exit(mock_main(sys.argv[2:]))
    sys.exit("usage: python -m bench.procs mock [--rebalance-delay-ms MS]")
