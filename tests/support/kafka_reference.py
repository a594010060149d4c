"""Apache Kafka 4.4 as a reference broker: KRaft combined mode on free loopback ports.

`make jvm` fetches Kafka with Maven (tests/jvm/kafka-broker); this module formats a fresh
storage dir, starts `kafka.Kafka` and waits until its group and transaction coordinators answer,
so that a scenario's first request meets a broker in the state kaflet is in after start-up.
The JVM dies with the process that started it (PR_SET_PDEATHSIG), so a killed test run leaves
no Kafka behind; `stop()` ends it and removes its files.

The group settings kaflet changes from Kafka's defaults (KAFLET_GROUP_SETTINGS) are set equal
unless `kafka_defaults=True`, so that timers and intervals in answers can be compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.jvm import JvmUnavailable, classpath, java_binary

KAFKA_VERSION = "4.4.0"
ARTIFACT = "kafka-broker"

# kaflet's defaults that differ from Kafka's (broker/config/flags.py KAFKA_DEFAULTS), as Kafka names them;
# and kaflet's behaviour where it has no setting: a KIP-848 group's new target assignment is
# computed by the heartbeat that needs it (Kafka 4.4 waits group.consumer.assignment.interval.ms,
# 1000 ms, between two assignments of a group; docs/decisions.md).
KAFLET_GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.consumer.min.heartbeat.interval.ms": "250",
    "group.consumer.assignment.interval.ms": "0",
    "group.streams.heartbeat.interval.ms": "250",
    "group.streams.min.heartbeat.interval.ms": "250",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
    "group.share.heartbeat.interval.ms": "250",
    "group.share.min.heartbeat.interval.ms": "250",
    "group.share.assignment.interval.ms": "0",
}

# The share-group bounds the tests' brokers (kaflet's and Kafka's alike) run with, so that a group
# can set the short record locks and session timeouts tests wait for, as a user would.
SHARE_TEST_BOUNDS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
}
# A bound lowered for tests (not a default): a streams group's session timeout is the broker's or its
# group's (streams.session.timeout.ms), and the suite sets it to 6 s per group, as kaflet allows with
# --group-streams-min-session-timeout-ms 6000, so that a killed Streams instance is noticed quickly.
TEST_GROUP_BOUNDS = {"group.streams.min.session.timeout.ms": "6000"}

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.kafka.additivity = false
logger.kafka.appenderRef.file.ref = FILE
"""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    PR_SET_PDEATHSIG = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class KafkaReference:
    """One Kafka 4.4 broker+controller. `with KafkaReference() as kafka:` serves on `kafka.bootstrap`."""

    def __init__(
        self,
        work_dir: str | Path | None = None,
        *,
        properties: dict[str, str] | None = None,
        kafka_defaults: bool = False,
        heap: str = "1g",
        offsets_partitions: int = 5,
        transaction_state_partitions: int = 5,
        extra_listeners: dict[str, str] | None = None,
    ) -> None:
        """`extra_listeners`: more listeners beside PLAINTEXT, name -> security protocol (e.g.
        {"SASL_PLAINTEXT": "SASL_PLAINTEXT"}); `address(name)` says where each listens."""
        self._own_dir = work_dir is None
        self.dir = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="kafka-reference-"))
        self.heap = heap
        self.port = 0
        self.controller_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0  # format + start until ready (coordinators answer)
        self.metadata_seconds = 0.0  # `kafka.Kafka` spawned until its first Metadata answer naming it
        self.cluster_id = ""
        self.props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": str(offsets_partitions),
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": str(transaction_state_partitions),
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.coordinator.rebalance.protocols": "classic,consumer,share,streams",
            "auto.create.topics.enable": "true",
            "log.flush.interval.messages": "9223372036854775807",
        }
        if not kafka_defaults:
            self.props.update(KAFLET_GROUP_SETTINGS)
            self.props.update(TEST_GROUP_BOUNDS)
        self.props.update(properties or {})
        self.extra_listeners = dict(extra_listeners or {})
        self.ports: dict[str, int] = {}

    # -- paths -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}" if listener != "PLAINTEXT" else self.bootstrap

    @property
    def log_file(self) -> Path:
        return self.dir / "kafka.log"

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for path in (self.log_file, self.dir / "stdout.log"):
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        return text

    def java_command(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        """A command running `main` of Kafka's classpath (a tool such as ConsumerGroupCommand)."""
        return [
            java_binary(),
            f"-Xmx{heap}",
            "-cp",
            classpath(ARTIFACT),
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            main,
            *args,
        ]

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> KafkaReference:
        """Format, start and wait until ready; JvmUnavailable (with why) when it cannot.

        Free ports are picked before Kafka binds them, so another process may take one in
        between (the machine is shared): Kafka then exits at once with a BindException, and the
        start is tried again with new ports and a fresh data dir, up to three times."""
        t0 = time.monotonic()
        cp = classpath(ARTIFACT)  # raises with the reason when Maven could not fetch Kafka
        java = java_binary()
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        jvm = [
            java,
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.dir}",
            "-cp",
            cp,
        ]
        for attempt in range(3):
            self._launch(jvm, timeout)
            try:
                asyncio.run(self._wait_ready(t0 + timeout))
            except _Exited as exc:
                tail = self.log_tail()
                self.stop(keep_dir=True)
                if "BindException" in tail and attempt < 2:
                    continue  # a port was taken meanwhile: new ports
                raise JvmUnavailable(f"Kafka {KAFKA_VERSION} exited with {exc} while starting; its log ends:\n{tail}") from None
            except TimeoutError:
                tail = self.log_tail()
                self.stop()
                raise JvmUnavailable(f"Kafka {KAFKA_VERSION} did not become ready within {timeout:.0f} s; its log ends:\n{tail}") from None
            except BaseException:
                self.stop()  # interrupted: no Kafka left behind
                raise
            break
        self.start_seconds = time.monotonic() - t0
        return self

    def _launch(self, jvm: list[str], timeout: float) -> None:
        """Free ports, a formatted fresh data dir, and `kafka.Kafka` started on them."""
        shutil.rmtree(self.dir / "data", ignore_errors=True)
        for log in (self.log_file, self.dir / "stdout.log"):  # this attempt's log only
            log.unlink(missing_ok=True)
        self.port, self.controller_port = free_port(), free_port()
        self.ports = {name: free_port() for name in self.extra_listeners}
        extra = "".join(f",{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        self.props["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}{extra}"
        self.props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}{extra}"
        if self.extra_listeners:
            self.props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" + "".join(
                f",{name}:{protocol}" for name, protocol in self.extra_listeners.items()
            )
        self.props["controller.quorum.voters"] = f"1@127.0.0.1:{self.controller_port}"
        config = self.dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        self.cluster_id = _random_cluster_id()
        fmt = subprocess.run(
            [*jvm[:1], "-Xmx256m", *jvm[4:], "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if fmt.returncode != 0:
            raise JvmUnavailable(f"Kafka's storage format failed ({fmt.returncode}): {fmt.stdout[-1500:]}{fmt.stderr[-1500:]}")
        with open(self.dir / "stdout.log", "wb") as stdout:
            self._spawned_at = time.monotonic()
            self.process = subprocess.Popen(
                [*jvm, "kafka.Kafka", str(config)],
                stdout=stdout,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
                start_new_session=True,
            )

    async def _wait_ready(self, deadline: float) -> None:
        """Until Metadata lists the broker and FindCoordinator answers NONE for a group, a
        transactional id and a share-partition key (Kafka creates its internal topics on that first
        lookup)."""
        from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

        from tests.support.raw_client import RawClient

        while True:
            if self.process is not None and self.process.poll() is not None:
                raise _Exited(f"exit status {self.process.returncode}")
            client = None
            try:
                client = await RawClient.connect(self.bootstrap, "kafka-reference-ready")
                meta = await client.request(MetadataRequest[12](topics=[], allow_auto_topic_creation=False), timeout=5)
                if meta.brokers:
                    if not self.metadata_seconds:
                        self.metadata_seconds = time.monotonic() - self._spawned_at
                    done = 0
                    for key_type in (0, 1):
                        resp = await client.request(
                            FindCoordinatorRequest[4](key_type=key_type, coordinator_keys=["kaflet-ready"]), timeout=5
                        )
                        done += all(c.error_code == 0 for c in resp.coordinators)
                    # The share coordinator's __share_group_state is made on its first lookup too (kaflet
                    # makes it at start), so a share group's first heartbeat meets the same broker.
                    resp = await client.request(
                        FindCoordinatorRequest[6](key_type=2, coordinator_keys=["kaflet-ready:AAAAAAAAAAAAAAAAAAAAAA:0"]), timeout=5
                    )
                    done += all(c.error_code == 0 for c in resp.coordinators)
                    if done == 3:
                        return
            except (OSError, ConnectionError, TimeoutError):
                pass
            finally:
                if client is not None:
                    await client.close()
            if time.monotonic() > deadline:
                raise TimeoutError("Kafka not ready")
            await asyncio.sleep(0.05)

    def stop(self, keep_dir: bool = False) -> None:
        """End Kafka (SIGTERM, then SIGKILL after 20 s) and remove its files: its data dir, and
        the whole work dir when this object made it. `keep_dir` keeps everything (a retry)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if keep_dir:
            return
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            shutil.rmtree(self.dir / "data", ignore_errors=True)

    def __enter__(self) -> KafkaReference:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Exited(RuntimeError):
    """Kafka's process ended before it was ready."""


def _random_cluster_id() -> str:
    """A cluster id as Kafka's `random-uuid` makes one: 16 random bytes, URL-safe base64, unpadded,
    never starting with "-" (Uuid.randomUuid() draws again, as the tools would read it as an option)."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
