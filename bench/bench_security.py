"""Security (issue 27): produce and consume over TLS against plaintext on the same broker, SCRAM
connections set up per second (PLAIN beside it), and the cost of the ACL check at 10,000 ACLs
against a Metadata request's time.

Baselines are kaflet's own other configuration in the same run (plaintext, PLAIN, no authorizer):
the mock cluster has none of these. Throughput on a small shared machine follows the CPU the
client and the broker need per MB, so each TLS row comes with the broker's and the client's CPU
per MB beside plaintext, and with Apache Kafka 4.4 measured the same way in the same run (a
PLAINTEXT and an SSL listener with the same certificate): Kafka's own TLS/plaintext ratio.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import wire
from bench.context import Context, Row, Target, median
from bench.procs import Worker, cpu_seconds, run_worker

ABOUT = "TLS vs plaintext produce/consume MB/s, SCRAM connections/s, ACL check cost at 10,000 ACLs vs a Metadata request"

SIZE = 1024
TOPIC = "bench-security"


# -- workers (child processes) ----------------------------------------------------------------


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this worker: librdkafka's too
    return r.ru_utime + r.ru_stime


def produce(conn: Any, conf: dict[str, Any], topic: str, seconds: float) -> dict[str, Any]:
    """Produce 1 KiB records to partition 0 for `seconds`, then flush. Says "measuring" to the
    harness (which reads the broker's CPU then) once warmed up; returns the count, the seconds
    until everything was acknowledged and the CPU this client used meanwhile."""
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer({**conf, "linger.ms": 5, "acks": "all", "queue.buffering.max.messages": 100_000, "delivery.report.only.error": True,
                         "on_delivery": lambda err, msg: errors.append(str(err)) if err else None})  # fmt: skip
    payload = os.urandom(SIZE)
    producer.produce(topic, payload, partition=0)
    if producer.flush(30):
        raise RuntimeError("warm-up record not delivered")
    conn.send("measuring")
    cpu0 = _cpu()
    t0 = time.perf_counter()
    sent = 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            while True:
                try:
                    producer.produce(topic, payload, partition=0)
                    break
                except BufferError:  # the queue is full: wait (without spinning) for room
                    producer.poll(0.005)
            sent += 1
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - t0
    return {"count": sent, "seconds": elapsed, "cpu": _cpu() - cpu0, "failed": len(errors) + left, "errors": errors[:3]}


def consume(conn: Any, conf: dict[str, Any], topic: str, total: int) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {**conf, "group.id": "bench-security-assign", "enable.auto.commit": False, "fetch.queue.backoff.ms": 0, "fetch.wait.max.ms": 100}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = first = 0
    t_first = cpu0 = 0.0
    deadline = time.perf_counter() + 120
    while got < total and time.perf_counter() < deadline:
        batch = consumer.consume(num_messages=10_000, timeout=0.1)
        got += sum(1 for m in batch if not m.error())
        if batch and not t_first:
            t_first, first, cpu0 = time.perf_counter(), got, _cpu()
            conn.send("measuring")
    elapsed = time.perf_counter() - t_first
    cpu = _cpu() - cpu0
    consumer.close()
    return {"count": got - first, "seconds": elapsed, "cpu": cpu, "failed": 0 if got >= total else total - got}


def _frame(api_key: int, version: int, corr: int, body: bytes, flexible: bool) -> bytes:
    header = struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", 5) + b"bench" + (b"\0" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def _read(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    return exact(struct.unpack(">i", exact(4))[0])


def _compact_bytes(b: bytes) -> bytes:
    n = len(b) + 1
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out + b


def _auth_bytes(answer: bytes) -> bytes:
    """SaslAuthenticate v2 answer (after the response header v1): error, message, auth bytes."""
    pos = 4 + 1 + 2  # correlation id, header tags, error code
    n = answer[pos] - 1  # compact nullable message (short here)
    pos += 1 + max(n, 0)
    size, shift, length = 0, 0, 0
    while True:
        byte = answer[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    if struct.unpack_from(">h", answer, 5)[0] != 0:
        raise RuntimeError("authentication failed")
    return answer[pos : pos + length - 1] if size == 0 else b""


def connections(conn: Any, address: str, mechanism: str, user: str, password: str, seconds: float) -> dict[str, Any]:
    """Worker: connect, SaslHandshake v1, SaslAuthenticate v2 (PLAIN: one, SCRAM: two), close; repeat."""
    host, port = address.rsplit(":", 1)
    n = 0
    # Clients compute the salted password (PBKDF2, 4096 rounds) once per login; kept here across
    # logins so that the figure is the broker's cost, not the load generator's.
    salted_cache: dict[tuple[str, str], bytes] = {}
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        with socket.create_connection((host, int(port))) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            mech = mechanism.encode()
            s.sendall(_frame(17, 1, 1, struct.pack(">h", len(mech)) + mech, False))
            _read(s)
            if mechanism == "PLAIN":
                s.sendall(_frame(36, 2, 2, _compact_bytes(f"\0{user}\0{password}".encode()) + b"\0", True))
                _auth_bytes(_read(s))
            else:
                algo = "sha256" if mechanism.endswith("256") else "sha512"
                nonce = base64.b64encode(os.urandom(18)).decode()
                bare = f"n={user},r={nonce}"
                s.sendall(_frame(36, 2, 2, _compact_bytes(f"n,,{bare}".encode()) + b"\0", True))
                first = _auth_bytes(_read(s)).decode()
                fields = dict(f.split("=", 1) for f in first.split(","))
                key = (fields["s"], fields["i"])
                if key not in salted_cache:
                    salted_cache[key] = hashlib.pbkdf2_hmac(algo, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
                salted = salted_cache[key]
                client_key = hmac.new(salted, b"Client Key", algo).digest()
                stored = hashlib.new(algo, client_key).digest()
                without = f"c=biws,r={fields['r']}"
                signature = hmac.new(stored, f"{bare},{first},{without}".encode(), algo).digest()
                proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
                s.sendall(_frame(36, 2, 3, _compact_bytes(f"{without},p={proof}".encode()) + b"\0", True))
                _auth_bytes(_read(s))
        n += 1
    return {"count": n, "seconds": time.perf_counter() - t0}


def metadata_rtt(conn: Any, address: str, count: int) -> dict[str, Any]:
    """Worker: `count` sequential Metadata v12 requests for one topic on one connection; mean µs."""
    from kafka.protocol.metadata import MetadataRequest

    host, port = address.rsplit(":", 1)
    request = MetadataRequest[12](
        topics=[MetadataRequest[12].MetadataRequestTopic(topic_id=None, name=TOPIC)], allow_auto_topic_creation=False
    )
    request.with_header(correlation_id=1, client_id="bench")
    frame = bytes(request.encode(header=True, framed=True))
    with socket.create_connection((host, int(port))) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(200):
            s.sendall(frame)
            _read(s)
        t0 = time.perf_counter()
        for _ in range(count):
            s.sendall(frame)
            _read(s)
        elapsed = time.perf_counter() - t0
    return {"us": elapsed / count * 1e6}


# -- the run ------------------------------------------------------------------------------------


class _Side:
    """Figures of one broker over one listener: MB/s and CPU per MB of the broker and the client."""

    def __init__(self) -> None:
        self.mbps: list[float] = []
        self.broker_ms: list[float] = []
        self.client_ms: list[float] = []

    def add(self, result: dict[str, Any], broker_cpu: float) -> None:
        mb = result["count"] * SIZE / 1e6
        self.mbps.append(mb / result["seconds"] if result["seconds"] > 0 else 0.0)
        self.broker_ms.append(broker_cpu * 1000 / mb if mb else 0.0)
        self.client_ms.append(result["cpu"] * 1000 / mb if mb else 0.0)


def _timed(broker_cpu: Any, fn: Any, *args: Any) -> tuple[dict[str, Any], float]:
    """Run a worker; the broker's CPU from the worker's "measuring" until its result."""
    worker = Worker(fn, *args)
    try:
        if worker.recv(120) != "measuring":
            raise RuntimeError("worker did not start measuring")
        c0 = broker_cpu()
        result = worker.result(300)
        return result, broker_cpu() - c0
    finally:
        worker.kill()


def _throughput(ctx: Context, broker_cpu: Any, confs: dict[str, dict[str, Any]], topic: str) -> dict[str, dict[str, _Side]]:
    """Produce, then consume, over each listener of `confs`, alternating, ctx.reps times."""
    seconds = 0.3 if ctx.quick else ctx.duration
    out: dict[str, dict[str, _Side]] = {"produce": {n: _Side() for n in confs}, "consume": {n: _Side() for n in confs}}
    for conf in confs.values():  # warm-up: connections, a JIT's first compilations
        run_worker(produce, conf, topic, 0.3 if ctx.quick else 1.0)
    for _ in range(ctx.reps):
        for name, conf in confs.items():
            r, cpu = _timed(broker_cpu, produce, conf, topic, seconds)
            if r["failed"]:
                raise RuntimeError(f"produce over {name}: {r['errors']}")
            out["produce"][name].add(r, cpu)
    total = 20_000 if ctx.quick else 100_000
    fill = run_worker(produce, next(iter(confs.values())), topic + "-c", 0.5 if ctx.quick else 3.0)
    total = min(total, fill["count"])
    for _ in range(ctx.reps):
        for name, conf in confs.items():
            r, cpu = _timed(broker_cpu, consume, conf, topic + "-c", total)
            out["consume"][name].add(r, cpu)
    return out


def _kaflet_tls(ctx: Context, tls: dict[str, str]) -> dict[str, dict[str, _Side]]:
    flags = ["--listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "--ssl-cert", tls["ssl_cert"], "--ssl-key", tls["ssl_key"]]
    with ctx.kaflet(*flags) as k:
        port = int(k.ready["listeners"][1].rsplit(":", 1)[1])
        confs = {
            "plaintext": {"bootstrap.servers": k.bootstrap},
            "TLS": {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": tls["ssl_ca"]},
        }
        wire.ensure_topic(k, TOPIC, 1)
        wire.ensure_topic(k, TOPIC + "-c", 1)
        return _throughput(ctx, k.cpu, confs, TOPIC)


def _kafka_tls(ctx: Context, tls: dict[str, str], certs: Path) -> dict[str, dict[str, _Side]] | None:
    """The same runs against Apache Kafka 4.4 with a PLAINTEXT and an SSL listener (the same
    certificate, as a PEM keystore); None (and a note) when Kafka cannot run here."""
    from bench.bench_kafka import ensure_topic
    from tests.support.jvm import JvmUnavailable
    from tests.support.kafka_reference import KafkaReference

    keystore = certs / "broker-keystore.pem"  # Kafka's PEM keystore: the key, then the chain
    keystore.write_text(Path(tls["ssl_key"]).read_text() + Path(tls["ssl_cert"]).read_text())
    ref = KafkaReference(
        extra_listeners={"SSL": "SSL"},
        properties={"listener.name.ssl.ssl.keystore.type": "PEM", "listener.name.ssl.ssl.keystore.location": str(keystore)},
    )
    try:
        ref.start()
    except JvmUnavailable as exc:
        ctx.note(f"Kafka 4.4 rows left out: {exc}")
        return None
    try:
        assert ref.process is not None
        pid = ref.process.pid
        confs = {
            "plaintext": {"bootstrap.servers": ref.bootstrap},
            "TLS": {"bootstrap.servers": ref.address("SSL"), "security.protocol": "SSL", "ssl.ca.location": tls["ssl_ca"]},
        }
        for name in (TOPIC, TOPIC + "-c"):
            ensure_topic(ref, name, 1)
        return _throughput(ctx, lambda: cpu_seconds(pid), confs, TOPIC)
    finally:
        ref.stop()


def _tls_rows(ctx: Context, certs: Path) -> list[Row]:
    from broker.security.certs import tls_settings

    tls = tls_settings(certs)
    k = _kaflet_tls(ctx, tls)
    kafka = None if ctx.quick else _kafka_tls(ctx, tls, certs)
    if ctx.quick:
        ctx.note("--quick: the Kafka 4.4 rows are left out")
    rows: list[Row] = []
    for op in ("produce", "consume"):
        t, p = k[op]["TLS"], k[op]["plaintext"]
        rows += [
            Row(f"{op} 1 KiB over TLS", "MB/s", median(t.mbps), median(p.mbps), target=Target("ratio>=", 0.7), baseline_name="plaintext"),
            Row(f"{op} over TLS: broker CPU per MB", "ms/MB", median(t.broker_ms), median(p.broker_ms), False, baseline_name="plaintext"),
            Row(f"{op} over TLS: client CPU per MB", "ms/MB", median(t.client_ms), median(p.client_ms), False, baseline_name="plaintext"),
        ]
        if kafka is not None:
            kt, kp = kafka[op]["TLS"], kafka[op]["plaintext"]
            rows += [
                Row(f"Kafka 4.4 itself: {op} over TLS", "MB/s", median(kt.mbps), median(kp.mbps), baseline_name="its plaintext"),
                Row(
                    f"Kafka 4.4 itself: {op} over TLS: broker CPU per MB",
                    "ms/MB",
                    median(kt.broker_ms),
                    median(kp.broker_ms),
                    False,
                    baseline_name="its plaintext",
                ),
                Row(f"{op} 1 KiB over TLS, kaflet vs Kafka 4.4", "MB/s", median(t.mbps), median(kt.mbps), baseline_name="Kafka TLS"),
                Row(
                    f"{op} over TLS: broker CPU per MB vs Kafka 4.4",
                    "ms/MB",
                    median(t.broker_ms),
                    median(kt.broker_ms),
                    False,
                    baseline_name="Kafka TLS",
                ),
            ]
    ctx.raw["tls"] = {
        broker: {op: {n: vars(side) for n, side in sides.items()} for op, sides in figures.items()}
        for broker, figures in (("kaflet", k), ("kafka", kafka)) if figures is not None
    }  # fmt: skip
    return rows


def _scram_rows(ctx: Context) -> list[Row]:
    seconds = 0.5 if ctx.quick else ctx.duration
    flags = [
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-plain-users",
        "bench:bench-secret",
        "--scram-users",
        "bench:bench-secret",
    ]
    rates: dict[str, list[float]] = {"SCRAM-SHA-256": [], "SCRAM-SHA-512": [], "PLAIN": []}
    with ctx.kaflet(*flags) as k:
        for _ in range(ctx.reps):
            for mech in rates:
                r = run_worker(connections, k.bootstrap, mech, "bench", "bench-secret", seconds)
                rates[mech].append(r["count"] / r["seconds"])
    return [
        Row(f"{mech} connections set up", "conn/s", median(rates[mech]), median(rates["PLAIN"]), baseline_name="PLAIN")
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    ]


def _acl_rows(ctx: Context) -> list[Row]:
    from broker.security.acl_store import AclStore
    from broker.security.acls import Acl
    from broker.security.authorizer import StandardAuthorizer
    from broker.security.principal import KafkaPrincipal

    acls = [Acl(2, f"topic-{i}", 3, f"User:user-{i % 500}", "*", 3, 3) for i in range(9_800)]
    acls += [Acl(2, f"team-{i}-", 4, f"User:user-{i}", "*", 4, 3) for i in range(150)]
    acls += [Acl(3, f"group-{i}", 3, f"User:user-{i}", "*", 3, 3) for i in range(49)]
    acls.append(Acl(2, TOPIC, 3, "User:ANONYMOUS", "*", 8, 3))  # the bench client's own
    assert len(acls) == 10_000
    authorizer = StandardAuthorizer()
    for a in acls:
        authorizer.add(a)
    anonymous = KafkaPrincipal("User", "ANONYMOUS")
    n = 20_000 if ctx.quick else 200_000
    t0 = time.perf_counter()
    for _ in range(n):
        authorizer.authorize(anonymous, "127.0.0.1", 8, 2, TOPIC)  # what a one-topic Metadata asks
    check_us = (time.perf_counter() - t0) / n * 1e6
    data_dir = tempfile.mkdtemp(prefix="kaflet-bench-acls-")
    rtts: dict[str, list[float]] = {"acls": [], "none": []}
    count = 2_000 if ctx.quick else 20_000
    with ctx.kaflet() as plain:
        wire.ensure_topic(plain, TOPIC, 1)
        for _ in range(ctx.reps):
            rtts["none"].append(run_worker(metadata_rtt, plain.bootstrap, count)["us"])
    Path(data_dir).mkdir(exist_ok=True)
    with ctx.kaflet(data_dir=data_dir):
        pass  # makes the data dir (meta.properties)
    store = AclStore(Path(data_dir), StandardAuthorizer())
    store.load()
    store.create(acls)
    with ctx.kaflet("--authorizer", "standard", "--allow-everyone-if-no-acl-found", data_dir=data_dir) as k:
        wire.ensure_topic(k, TOPIC, 1)
        for _ in range(ctx.reps):
            rtts["acls"].append(run_worker(metadata_rtt, k.bootstrap, count)["us"])
    metadata_us = median(rtts["acls"])
    return [
        Row("ACL check at 10,000 ACLs", "µs", check_us, compare=False),
        Row(
            "Metadata request with 10,000 ACLs",
            "µs",
            metadata_us,
            median(rtts["none"]),
            higher_is_better=False,
            baseline_name="no authorizer",
        ),
        Row("ACL check share of a Metadata request", "%", check_us / metadata_us * 100, compare=False, target=Target("<=", 5.0)),
    ]


def run(ctx: Context) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="kaflet-bench-certs-") as certs:
        return _tls_rows(ctx, Path(certs)) + _scram_rows(ctx) + _acl_rows(ctx)
