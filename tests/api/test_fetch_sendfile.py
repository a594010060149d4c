"""Fetch record sets sent with sendfile from the segment files (broker/network/connection.py): the bytes a
client receives are those of the pread path, also when the socket is full mid-range, when the
segment is deleted while a range waits, across segment boundaries, for read_committed, and when
a black hole or injected latency holds the answer."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker import Broker
from protocol import records as r
from protocol.apis import MESSAGE_CLASSES, ApiKey
from storage.segment import FileRange
from tests.api.test_transactions import committed_values, producer
from tests.conftest import test_config as config_for
from tests.support import data as d
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until

SEGMENT = {"segment.bytes": "200000"}
VALUE = 30_000  # bytes per record: every batch is larger than the 8 KiB walk window


def big_batch(i: int, n: int = 2) -> bytes:
    return bytes(r.build_batch([(b"k%d" % j, bytes([(i + j) % 251]) * VALUE) for j in range(n)], timestamp_ms=1_700_000_000_000 + i))


async def fill(client: RawClient, topic: str, partition: int, batches: int) -> None:
    for i in range(batches):
        res = d.produce_result(await client.request(d.produce(topic, partition, big_batch(i))))
        assert res.error_code == 0


def stored(broker: Broker, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> bytes:
    """The pread path's answer for one partition (the bytes read into memory)."""
    log = broker.logs.get(topic, partition)
    assert log is not None
    return bytes(log.read(offset, max_bytes) or b"")


class Sendfiles:
    """Counts the bytes os.sendfile sent (the OS call, not a component of ours)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.bytes = 0
        real = os.sendfile

        def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
            sent = real(out_fd, in_fd, offset, count)
            self.calls += 1
            self.bytes += sent
            return sent

        monkeypatch.setattr(os, "sendfile", counting)


async def test_a_fetch_answered_by_sendfile_is_the_stored_bytes(
    broker: Broker, raw: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    broker.topics.create("sf", 3, SEGMENT)
    client: RawClient = await raw()
    for p in range(3):
        await fill(client, "sf", p, 9)  # ~540 KB each: three segments per partition
    sent = Sendfiles(monkeypatch)
    offsets = {0: 0, 1: 5, 2: 13}
    resp = await client.request(d.fetch([("sf", p, o) for p, o in offsets.items()], max_bytes=50 << 20, partition_max_bytes=1 << 20))
    parts = resp.responses[0].partitions
    for part in parts:
        assert part.error_code == 0
        assert bytes(part.records) == stored(broker, "sf", part.partition_index, offsets[part.partition_index])
        assert d.fetched_offsets(part)[0] <= offsets[part.partition_index] <= d.fetched_offsets(part)[-1]
    assert sent.calls >= 3 and sent.bytes >= sum(len(p.records) for p in parts) - 3 * 4096
    # A segment boundary: each answer ends with its segment; the next fetch goes on from there.
    first = parts[0]
    log = broker.logs.get("sf", 0)
    assert log is not None and len(log.segments) >= 3
    assert len(first.records) == log.segments[0].size
    nxt = (await client.request(d.fetch([("sf", 0, d.fetched_offsets(first)[-1] + 1)]))).responses[0].partitions[0]
    assert bytes(nxt.records) == stored(broker, "sf", 0, log.segments[1].base_offset)
    assert d.fetched_offsets(nxt)[0] == d.fetched_offsets(first)[-1] + 1


async def test_sendfile_off_answers_the_same_bytes(tmp_path: Path) -> None:
    answers = []
    for sendfile in (True, False):
        async with Broker(config_for(tmp_path / f"data-{sendfile}", fetch_sendfile=sendfile)) as b:
            b.topics.create("same", 1, SEGMENT)
            client = await RawClient.connect(b.bootstrap)
            await fill(client, "same", 0, 5)
            resp = await client.request(d.fetch([("same", 0, 1)], max_bytes=200_000, partition_max_bytes=150_000))
            answers.append(bytes(resp.responses[0].partitions[0].records))
            await client.close()
    assert answers[0] == answers[1] and len(answers[0]) > 100_000


async def _raw_socket(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once: sendfile stalls
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    return sock


async def _read_frame(sock: socket.socket) -> bytes:
    loop = asyncio.get_running_loop()
    buf = bytearray()
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        chunk = await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 10)
        assert chunk, "the broker closed the connection"
        buf += chunk
    return bytes(buf[4:])


@pytest.mark.parametrize("deletion", ["retention", "topic"])
async def test_a_partial_send_resumes_and_survives_the_deletion_of_its_segment(
    broker: Broker, raw: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, deletion: str
) -> None:
    # 2 x 4 MB answered at once: more than the socket buffers of both ends hold.
    broker.topics.create("slow", 2, {"segment.bytes": str(4 << 20)})
    client: RawClient = await raw()
    for p in range(2):
        await fill(client, "slow", p, 100)
    expected = {p: stored(broker, "slow", p, 0, 8 << 20) for p in range(2)}
    sent = Sendfiles(monkeypatch)
    sock = await _raw_socket(broker.bootstrap)
    request = d.fetch([("slow", 0, 0), ("slow", 1, 0)], partition_max_bytes=8 << 20)
    request.with_header(correlation_id=7, client_id="slow-reader")
    await asyncio.get_running_loop().sock_sendall(sock, bytes(request.encode(header=True, framed=True)))
    conn = await async_wait_until(lambda: [c for c in broker.connections if c.client_id == "slow-reader"], message="connection")
    await async_wait_until(lambda: conn[0]._sendq, message="a range waiting for the socket")
    waiting = [c for c in conn[0]._sendq if type(c) is FileRange]
    assert waiting and all(c.pinned for c in waiting)
    # Retention takes the first segments of both partitions (or the topic goes) while their ranges wait.
    logs = [broker.logs.get("slow", p) for p in range(2)]
    segments = [s for log in logs if log is not None for s in log.segments]
    if deletion == "topic":
        broker.topics.delete("slow")
        assert all(log is not None and log.closed for log in logs)
    else:
        for log in logs:
            assert log is not None
            log.delete_records(log.segments[1].base_offset)
    gone = [s for s in segments if s.fd == -1]
    assert gone and any(s.pins for s in gone)
    frame = await _read_frame(sock)
    sock.close()
    resp = MESSAGE_CLASSES[ApiKey.FETCH][1].decode(frame, version=request.API_VERSION, header=True)
    for part in resp.responses[0].partitions:
        assert bytes(part.records) == expected[part.partition_index]
    assert sent.calls > 2  # resumed after the socket was full
    assert not conn[0]._sendq
    assert all(s.pins == 0 and s._unpinned_close == -1 for s in segments)  # every descriptor closed


async def test_read_committed_over_sendfile_filters_aborted_transactions(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1, SEGMENT)
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-sf")
    big = b"x" * VALUE
    for commit in (False, True, False, True):
        await p.add({"t": [0]})
        await p.produce("t", 0, 3, value=big + (b"c" if commit else b"a"))
        assert await p.end(commit=commit) == 0
    part = (await client.request(d.fetch([("t", 0, 0)], isolation_level=1))).responses[0].partitions[0]
    assert bytes(part.records) == stored(broker, "t", 0, 0) and len(part.records) > 8192
    assert [a.first_offset for a in part.aborted_transactions] == [0]  # the second abort is in the next segment
    assert committed_values(part) == [big + b"c"] * 3
    rest = (await client.request(d.fetch([("t", 0, d.fetched_offsets(part)[-1] + 1)], isolation_level=1))).responses[0].partitions[0]
    assert committed_values(rest) == [big + b"c"] * 3
    assert len(rest.aborted_transactions) == 1


async def test_a_black_hole_holds_bytes_not_ranges(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("held", 1, SEGMENT)
    victim: RawClient = await raw("victim")
    producer_client: RawClient = await raw("producer")
    pending = victim.send(d.fetch([("held", 0, 0)], max_wait_ms=5000, min_bytes=50_000))
    conn = await async_wait_until(lambda: [c for c in broker.connections if c.client_id == "victim" and c.busy], message="parked")
    hole = broker.chaos.hole(client_id="victim")
    await fill(producer_client, "held", 0, 1)  # 60 KB: wakes the parked fetch, whose answer is held
    await async_wait_until(lambda: conn[0]._held, message="a held answer")
    assert not any(type(c) is FileRange for c in conn[0]._held)
    expected = stored(broker, "held", 0, 0)
    await fill(producer_client, "held", 0, 6)
    log = broker.logs.get("held", 0)
    assert log is not None
    log.delete_records(log.segments[1].base_offset)  # the segment goes; the held bytes stay
    broker.chaos.restore(hole.id)
    resp = await asyncio.wait_for(pending, 10)
    assert bytes(resp.responses[0].partitions[0].records) == expected and len(expected) > 50_000


async def test_injected_latency_delivers_the_same_bytes(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("late", 1, SEGMENT)
    client: RawClient = await raw()
    await fill(client, "late", 0, 4)
    expected = stored(broker, "late", 0, 0)
    broker.chaos.latency(50)
    first, second = client.send(d.fetch([("late", 0, 0)])), client.send(d.fetch([("late", 0, 2)]))
    assert bytes((await asyncio.wait_for(first, 10)).responses[0].partitions[0].records) == expected
    assert bytes((await asyncio.wait_for(second, 10)).responses[0].partitions[0].records) == stored(broker, "late", 0, 2)
    broker.chaos.latency(0)
