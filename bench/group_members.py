"""Cheap KIP-848 group members for benchmarks of large groups: thousands of raw ConsumerGroupHeartbeat
clients in one asyncio process, multiplexed over a few connections.

Each member behaves as a client does: it joins (epoch 0, its subscription), then heartbeats at the interval
the broker answers, reporting what it owns; an answer's assignment replaces what it owns (it revokes at once,
as a consumer with nothing to commit would). Requests are encoded by hand and answers decoded by hand (the
schema codecs cost more than the broker's own work); a connection carries many members' requests in
flight, which every broker answers in order.

`run_group(bootstrap, spec)` (a worker process's function) forms the group and reports: when each member
joined, when the group first covered every partition once with every member at the same epoch (stable), the
steady heartbeat rate, and the broker's answers' errors.
"""

from __future__ import annotations

import asyncio
import os
import random
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_I = struct.Struct(">i")
_H = struct.Struct(">h")
_HB_HEADER = struct.Struct(">hhi")  # api key, version, correlation id
CLIENT_ID = b"kaflet-bench"


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _cstring(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


def heartbeat_body(
    group: str,
    member_id: str,
    epoch: int,
    *,
    rebalance_timeout_ms: int = -1,
    topics: list[str] | None = None,
    regex: str | None = None,
    owned: dict[bytes, list[int]] | None = None,
) -> bytes:
    """ConsumerGroupHeartbeat v1's body."""
    out = [_cstring(group), _cstring(member_id), _I.pack(epoch), b"\x00", b"\x00", _I.pack(rebalance_timeout_ms)]
    if topics is None:
        out.append(b"\x00")
    else:
        out.append(_uvarint(len(topics) + 1))
        out += [_cstring(t) for t in topics]
    out.append(_cstring(regex))
    out.append(b"\x00")  # server assignor: null
    if owned is None:
        out.append(b"\x00")
    else:
        out.append(_uvarint(len(owned) + 1))
        for topic_id, parts in owned.items():
            out += [topic_id, _uvarint(len(parts) + 1), struct.pack(f">{len(parts)}i", *parts), b"\x00"]
    out.append(b"\x00")
    return b"".join(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _skip_tags(buf: bytes, pos: int) -> int:
    n, pos = _read_uvarint(buf, pos)
    for _ in range(n):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def _read_cstring(buf: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return buf[pos : pos + n - 1].decode(), pos + n - 1


@dataclass
class Answer:
    error: int
    message: str | None
    member_id: str | None
    epoch: int
    interval_ms: int
    assignment: dict[bytes, list[int]] | None


def parse_answer(frame: bytes) -> tuple[int, Answer]:
    """(correlation id, the answer) of a ConsumerGroupHeartbeat v1 response frame (without its size)."""
    corr = _I.unpack_from(frame, 0)[0]
    pos = _skip_tags(frame, 4)
    pos += 4  # throttle
    error = _H.unpack_from(frame, pos)[0]
    message, pos = _read_cstring(frame, pos + 2)
    member_id, pos = _read_cstring(frame, pos)
    epoch, interval = struct.unpack_from(">ii", frame, pos)
    pos += 8
    assignment = None
    if frame[pos] != 0xFF:
        pos += 1
        n, pos = _read_uvarint(frame, pos)
        assignment = {}
        for _ in range(n - 1):
            topic_id = frame[pos : pos + 16]
            count, pos = _read_uvarint(frame, pos + 16)
            parts = list(struct.unpack_from(f">{count - 1}i", frame, pos))
            pos = _skip_tags(frame, pos + 4 * (count - 1))
            assignment[topic_id] = parts
    return corr, Answer(error, message, member_id, epoch, interval, assignment)


class Connection:
    """One connection, many requests in flight, answers matched by correlation id.

    `heartbeat()` sends a hand-encoded ConsumerGroupHeartbeat; `request()` any kafka-python request object
    (encoded and decoded by its schema: the classic group members of bench/classic_members.py)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.corr = 0
        self.waiting: dict[int, tuple[asyncio.Future[Any], Callable[[bytes], Any]]] = {}
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(cls, bootstrap: str) -> Connection:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 24)
        return cls(reader, writer)

    def _send(self, frame: bytes, decode: Callable[[bytes], Any]) -> asyncio.Future[Any]:
        self.writer.write(frame)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[self.corr] = (fut, decode)
        return fut

    def heartbeat(self, body: bytes) -> asyncio.Future[Answer]:
        self.corr += 1
        header = _HB_HEADER.pack(68, 1, self.corr) + _H.pack(len(CLIENT_ID)) + CLIENT_ID + b"\x00"
        return self._send(_I.pack(len(header) + len(body)) + header + body, _heartbeat_answer)

    def request(self, request: Any) -> asyncio.Future[Any]:
        """Send a kafka-python request object at the version it was built with; the future gets its response."""
        from protocol.apis import MESSAGE_CLASSES

        self.corr += 1
        request.with_header(correlation_id=self.corr, client_id=CLIENT_ID.decode())
        response_cls, version = MESSAGE_CLASSES[request.API_KEY][1], request.API_VERSION
        return self._send(
            bytes(request.encode(header=True, framed=True)), lambda frame: response_cls.decode(frame, version=version, header=True)
        )

    async def _read(self) -> None:
        try:
            while True:
                size = _I.unpack(await self.reader.readexactly(4))[0]
                frame = await self.reader.readexactly(size)
                fut, decode = self.waiting.pop(_I.unpack_from(frame, 0)[0], (None, None))
                if fut is not None and decode is not None and not fut.done():
                    try:
                        fut.set_result(decode(frame))
                    except Exception as exc:  # an answer that does not decode fails its request, not the reader
                        fut.set_exception(exc)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            for fut, _ in self.waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection closed"))

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()


def _heartbeat_answer(frame: bytes) -> Answer:
    return parse_answer(frame)[1]


@dataclass
class Member:
    conn: Connection
    group: str
    topics: list[str] | None
    regex: str | None
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    owned: dict[bytes, list[int]] = field(default_factory=dict)
    interval_s: float = 0.25
    report: bool = True  # the owned partitions changed since the broker last heard them
    joined_at: float = 0.0
    errors: int = 0
    beats: int = 0


@dataclass
class GroupSpec:
    group: str
    members: int
    topics: list[str] | None = None
    regex_of: Any = None  # member index -> its regex (None: topics only)
    partitions: int = 0  # every partition of the subscribed topics, to tell when the group covers them
    connections: int = 16
    join_rate: float = 0.0  # members joining per second (0: as fast as the broker answers)
    settle_s: float = 30.0  # after the last join, how long to wait for a stable group
    steady_s: float = 5.0  # once stable, how long to count steady heartbeats
    rebalance_timeout_ms: int = 60_000
    broker_pid: int = 0  # when on this machine: the broker's CPU per steady heartbeat is measured too


async def _beat(m: Member, full: bool = False) -> Answer:
    body = heartbeat_body(
        m.group,
        m.member_id,
        m.epoch,
        rebalance_timeout_ms=60_000 if full else -1,
        topics=m.topics if full else None,
        # "" rather than null beside a topic list when joining, as librdkafka sends it (the mock asserts it).
        regex=(m.regex if m.regex is not None else "") if full else None,
        owned=m.owned if full or m.report else None,
    )
    answer = await m.conn.heartbeat(body)
    m.beats += 1
    if answer.error:
        m.errors += 1
        if answer.error in (25, 110):  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: rejoin as a client does
            m.epoch, m.owned = 0, {}
        return answer
    m.epoch = answer.epoch
    m.report = False
    if answer.interval_ms > 0:
        m.interval_s = answer.interval_ms / 1000
    if answer.assignment is not None and answer.assignment != m.owned:
        m.owned = answer.assignment
        m.report = True
    return answer


def _stable(members: list[Member], partitions: int) -> bool:
    """Every partition owned once, every member at one epoch, and balanced: member counts differ by at most
    one (every group here gives each member an equal share), so one member holding everything while the
    others wait for a target (Kafka's assignment interval) is not stable."""
    epoch = members[0].epoch
    seen = 0
    owners: set[tuple[bytes, int]] = set()
    low, high = partitions, 0
    for m in members:
        if m.epoch != epoch:
            return False
        count = 0
        for t, ps in m.owned.items():
            for p in ps:
                owners.add((t, p))
                count += 1
        seen += count
        low, high = min(low, count), max(high, count)
    return seen == partitions and len(owners) == partitions and high - low <= 1


async def _run(bootstrap: str, spec: GroupSpec) -> dict[str, Any]:
    conns = [await Connection.open(bootstrap) for _ in range(spec.connections)]
    members = [
        Member(conns[i % len(conns)], spec.group, spec.topics, spec.regex_of(i) if spec.regex_of else None) for i in range(spec.members)
    ]
    stop = asyncio.Event()
    joined = 0
    first_join = time.perf_counter()

    async def live(m: Member) -> None:
        nonlocal joined
        answer = await _beat(m, full=True)
        while answer.error:
            await asyncio.sleep(0.05)
            answer = await _beat(m, full=True)
        m.joined_at = time.perf_counter()
        joined += 1
        while not stop.is_set():
            await asyncio.sleep(m.interval_s * random.uniform(0.9, 1.0))
            await _beat(m, full=m.epoch == 0)

    tasks = []
    for i, m in enumerate(members):
        tasks.append(asyncio.ensure_future(live(m)))
        if spec.join_rate:
            await asyncio.sleep(1 / spec.join_rate)
        elif i % 50 == 49:
            await asyncio.sleep(0)
    join_deadline = time.perf_counter() + spec.settle_s + spec.members / 50
    while joined < spec.members:
        if time.perf_counter() > join_deadline:
            stop.set()
            errors = sum(m.errors for m in members)
            raise TimeoutError(f"{joined} of {spec.members} members joined; {errors} error answers")
        await asyncio.sleep(0.01)
    last_join = max(m.joined_at for m in members)
    stable_at = None
    deadline = last_join + spec.settle_s
    while time.perf_counter() < deadline:
        if _stable(members, spec.partitions):
            stable_at = time.perf_counter()
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(1.0)  # the answers of the last reconciliation round settle
    beats_before = sum(m.beats for m in members)
    cpu_before = _cpu(spec.broker_pid)
    steady_started = time.perf_counter()
    await asyncio.sleep(spec.steady_s)
    steady_beats = sum(m.beats for m in members) - beats_before
    steady_s = time.perf_counter() - steady_started
    cpu_used = _cpu(spec.broker_pid) - cpu_before
    stop.set()
    for t in tasks:
        t.cancel()
    for c in conns:
        await c.close()
    return {
        "members": spec.members,
        "join_s": last_join - first_join,
        "joins_per_s": spec.members / max(last_join - first_join, 1e-9),
        "stable_after_last_join_s": None if stable_at is None else stable_at - last_join,
        "steady_heartbeats_per_s": steady_beats / steady_s,
        "broker_us_per_steady_heartbeat": cpu_used / steady_beats * 1e6 if spec.broker_pid and steady_beats else None,
        "errors": sum(m.errors for m in members),
        "interval_ms": members[0].interval_s * 1000,
        "pid": os.getpid(),
    }


def _cpu(pid: int) -> float:
    if not pid:
        return 0.0
    from bench.procs import cpu_seconds

    return cpu_seconds(pid)


def run_group(conn: Any, bootstrap: str, spec: GroupSpec) -> dict[str, Any]:
    """Worker entry point (bench.procs.run_worker): form the group, measure, leave it to expire."""
    return asyncio.run(_run(bootstrap, spec))
