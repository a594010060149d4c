"""The read side of a connection (broker/network/connection.py): a request frame decodes whatever pieces
it arrives in; frames of 64 KiB and more are read straight into buffers of their own (a Produce
is then appended from that buffer without a copy); pipelined requests are answered in order,
also when a handler parks (an fsync under --fsync always) while more frames queue behind it.

The exact-boundary cases drive a KafkaConnection of a real broker through the loop's own
interface (get_buffer / buffer_updated) over a transport that keeps what is written; the socket
cases send the same stream over TCP in uneven pieces, on uvloop and on asyncio's own loop."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Callable, Iterable
from typing import Any

from kafka.protocol.metadata import MetadataRequest

from broker import Broker, Config
from broker.network import connection
from broker.network.connection import _DIRECT_AT, KafkaConnection
from protocol import records as r
from protocol.apis import MESSAGE_CLASSES, ApiKey
from tests.support import data as d
from tests.support.waiting import async_wait_until

TOPIC = "framing"
ABSENT = 300


class Request:
    """One framed request of the stream and what its answer must be."""

    def __init__(self, corr: int, message: Any, batch: bytes | None = None) -> None:
        message.with_header(correlation_id=corr, client_id="framing")
        self.corr = corr
        self.api_key = message.API_KEY
        self.version = message.API_VERSION
        self.frame = bytes(message.encode(header=True, framed=True))
        self.batch = batch  # a Produce's batch, to compare with what the log holds


def produce_of_frame_size(corr: int, frame_size: int) -> Request:
    """A Produce whose frame (size prefix excluded) is exactly `frame_size` bytes."""
    value = frame_size - 200
    while True:
        batch = bytes(r.build_batch([(b"k", os.urandom(value))]))
        req = Request(corr, d.produce(TOPIC, 0, batch), batch)
        diff = frame_size - (len(req.frame) - 4)
        if diff == 0:
            return req
        value += diff


def big_metadata(corr: int) -> Request:
    """A Metadata request over 64 KiB (names of absent topics; nothing is created)."""
    names = [f"absent-{i:04d}-" + "x" * 237 for i in range(ABSENT)]  # the longest legal names
    msg = MetadataRequest[4](topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=False)
    return Request(corr, msg)


def small_metadata(corr: int) -> Request:
    return Request(corr, MetadataRequest[4](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False))


def small_produce(corr: int, records: int) -> Request:
    batch = d.batch(records)
    return Request(corr, d.produce(TOPIC, 0, batch), batch)


def stream(big: bool = True) -> list[Request]:
    """Small and large frames back to back; with `big`, 300 KiB and 1 MiB Produce frames too."""
    reqs = [
        small_produce(1, 3),
        produce_of_frame_size(2, _DIRECT_AT - 1),  # the largest frame that goes through the scratch buffer
        small_metadata(3),
        produce_of_frame_size(4, _DIRECT_AT),  # the smallest frame with a buffer of its own
        big_metadata(5),
        produce_of_frame_size(6, _DIRECT_AT + 1),
        small_produce(7, 1),
    ]
    assert len(reqs[4].frame) - 4 >= _DIRECT_AT
    if big:
        reqs += [produce_of_frame_size(8, 300 * 1024), small_metadata(9), produce_of_frame_size(10, 1024 * 1024)]
    return reqs


def check_answers(broker: Broker, reqs: list[Request], answers: bytes, first_offset: int) -> int:
    """Every request answered once, in order, correctly; each batch is in the log as sent.
    Returns the next offset."""
    pos = 0
    offset = first_offset
    log = broker.logs.get(TOPIC, 0)
    assert log is not None
    for req in reqs:
        assert len(answers) - pos >= 4, f"no answer to correlation id {req.corr}"
        size = struct.unpack_from(">i", answers, pos)[0]
        frame = answers[pos + 4 : pos + 4 + size]
        pos += 4 + size
        assert struct.unpack_from(">i", frame, 0)[0] == req.corr
        answer = MESSAGE_CLASSES[req.api_key][1].decode(frame, version=req.version, header=True)
        if req.api_key == ApiKey.PRODUCE:
            res = d.produce_result(answer)
            assert (res.error_code, res.base_offset) == (0, offset)
            assert req.batch is not None
            stored = log.read(offset, len(req.batch))
            assert stored is not None
            # The broker sets the base offset and leader epoch (outside the CRC); the rest is as sent.
            assert bytes(stored[16:]) == req.batch[16:]
            offset += r.read_header(req.batch).last_offset_delta + 1
        else:
            topics = answer.topics
            assert len(topics) in (1, ABSENT)
            if len(topics) == ABSENT:
                assert all(t.error_code == 3 for t in topics)  # UNKNOWN_TOPIC_OR_PARTITION, none created
            else:
                assert topics[0].error_code == 0
    assert pos == len(answers), "answers to requests never sent"
    return offset


class KeepingTransport(asyncio.Transport):
    """What the broker writes to a connection, kept in one buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.out += data

    def writelines(self, chunks: Iterable[Any]) -> None:
        for chunk in chunks:
            self.out += chunk

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def feed(conn: KafkaConnection, data: bytes, cuts: Iterable[int] = ()) -> None:
    """Hand `data` to the connection as the loop does: into what get_buffer returns, each read
    as large as that buffer allows but never across a position in `cuts`."""
    view = memoryview(data)
    stops = sorted({c for c in cuts if 0 < c < len(data)} | {len(data)})
    pos = 0
    for stop in stops:
        while pos < stop:
            buf = conn.get_buffer(-1)
            assert len(buf) > 0, "get_buffer returned an empty buffer"
            n = min(len(buf), stop - pos)
            buf[:n] = view[pos : pos + n]
            conn.buffer_updated(n)
            pos += n


def connect(broker: Broker) -> tuple[KafkaConnection, KeepingTransport]:
    conn = KafkaConnection(broker)
    transport = KeepingTransport()
    conn.connection_made(transport)
    return conn, transport


async def test_frames_decode_read_one_byte_at_a_time(broker: Broker) -> None:
    broker.topics.create(TOPIC, 1)
    reqs = stream(big=False)
    data = b"".join(q.frame for q in reqs)
    conn, transport = connect(broker)
    feed(conn, data, range(len(data)))
    assert not transport.closed and conn.partial_bytes == 0
    check_answers(broker, reqs, bytes(transport.out), 0)


async def test_frames_decode_split_in_two_at_every_boundary_near_a_frame_edge(broker: Broker) -> None:
    # Every cut within 5 bytes of each frame's start (its size prefix, its api key) and end,
    # and around the 64 KiB point where a frame gets a buffer of its own.
    broker.topics.create(TOPIC, 1)
    reqs = stream(big=False)
    data = b"".join(q.frame for q in reqs)
    cuts: set[int] = set()
    start = 0
    for q in reqs:
        for edge in (start, start + len(q.frame), start + 4 + _DIRECT_AT):
            cuts.update(range(edge - 5, edge + 6))
        start += len(q.frame)
    cuts = {c for c in cuts if 0 < c < len(data)}
    offset = 0
    for cut in sorted(cuts):
        conn, transport = connect(broker)
        feed(conn, data, [cut])
        assert not transport.closed, f"closed after a cut at {cut}"
        offset = check_answers(broker, reqs, bytes(transport.out), offset)
        conn.connection_lost(None)


async def test_large_frames_read_as_the_socket_fills_each_buffer(broker: Broker) -> None:
    # The loop's common case: each read fills what get_buffer offered; a 1 MiB Produce goes
    # straight into its own buffer.
    broker.topics.create(TOPIC, 1)
    reqs = stream()
    data = b"".join(q.frame for q in reqs)
    conn, transport = connect(broker)
    feed(conn, data)
    offset = check_answers(broker, reqs, bytes(transport.out), 0)
    # data_received (bytes handed over, as the in-process benchmarks do) frames the same way.
    conn2, transport2 = connect(broker)
    for i in range(0, len(data), 100_000):
        conn2.data_received(data[i : i + 100_000])
    assert not transport2.closed and conn2.partial_bytes == 0
    check_answers(broker, reqs, bytes(transport2.out), offset)


async def test_a_frame_over_the_limit_is_refused_before_its_buffer_is_made(make_config: Callable[..., Config]) -> None:
    # The size is checked when its 4 bytes arrive; the requests before it are still answered.
    async with Broker(make_config(max_request_bytes=100_000)) as broker:
        broker.topics.create(TOPIC, 1)
        first = small_produce(1, 2)
        conn, transport = connect(broker)
        feed(conn, first.frame + struct.pack(">i", 100_001) + bytes(1000), range(0, 10_000, 7))
        assert transport.closed
        check_answers(broker, [first], bytes(transport.out), 0)


async def test_a_large_frames_buffer_is_reused_only_once_nothing_holds_the_frame(make_config: Callable[..., Config]) -> None:
    # --fsync always: the first Produce parks (its handler holds a view of its frame) while the
    # second arrives; that one must get a buffer of its own. Once both are answered, the next
    # large frame reuses a buffer instead of allocating another.
    pool = connection._buffers.pool
    async with Broker(make_config(fsync="always")) as broker:
        broker.topics.create(TOPIC, 1)
        pool.clear()
        conn, transport = connect(broker)
        first, second = produce_of_frame_size(1, 300 * 1024), produce_of_frame_size(2, 300 * 1024)
        feed(conn, first.frame)
        assert conn.busy and len(pool) == 1  # parked on its fsync, holding its frame
        held = pool[0]
        feed(conn, second.frame)
        assert len(pool) == 2 and pool[0] is held
        assert held[: len(first.frame) - 4] == first.frame[4:]  # what the parked handler holds is intact
        await async_wait_until(lambda: len(transport.out) and not conn.busy, timeout=10)
        offset = check_answers(broker, [first, second], bytes(transport.out), 0)
        third = produce_of_frame_size(3, 300 * 1024 - 1000)
        transport.out.clear()
        feed(conn, third.frame)
        assert len(pool) == 2  # no new buffer
        await async_wait_until(lambda: len(transport.out) and not conn.busy, timeout=10)
        check_answers(broker, [third], bytes(transport.out), offset)


async def test_an_idle_connection_holds_no_read_buffer(broker: Broker) -> None:
    # The scratch buffer is the event loop's, not each connection's: 10,000 idle clients must
    # not hold 256 KiB each. Between frames a connection keeps only the bytes of one still arriving.
    broker.topics.create(TOPIC, 1)
    reqs = stream(big=False)
    data = b"".join(q.frame for q in reqs)
    conn, transport = connect(broker)
    feed(conn, data[:-10], range(0, len(data), 999))
    assert conn.partial_bytes == len(reqs[-1].frame) - 10
    held = [v for v in vars(conn).values() if isinstance(v, (bytes, bytearray, memoryview)) and len(v) > 0]
    assert sum(len(v) for v in held) == len(reqs[-1].frame) - 10  # just the partial frame
    feed(conn, data[-10:])
    check_answers(broker, reqs, bytes(transport.out), 0)
    held = [v for v in vars(conn).values() if isinstance(v, (bytes, bytearray, memoryview)) and len(v) > 0]
    assert held == [] and conn.partial_bytes == 0


def send_in_pieces_and_read(bootstrap: str, data: bytes, answers: int) -> bytes:
    """Over a real socket: `data` in uneven pieces (1 byte up to 100 KB), then `answers` frames."""

    async def run() -> bytes:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sizes = [1, 2, 3, 4, 5, 7, 11, 4096, 65_535, 65_537, 100_000, 13]
        pos = i = 0
        while pos < len(data):
            n = sizes[i % len(sizes)]
            writer.write(data[pos : pos + n])
            await writer.drain()
            pos += n
            i += 1
        out = bytearray()
        for _ in range(answers):
            head = await asyncio.wait_for(reader.readexactly(4), 30)
            out += head + await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), 30)
        writer.close()
        return bytes(out)

    return asyncio.run(run())


async def test_pipelined_requests_over_a_socket_are_answered_in_order_while_fsyncs_park_them(make_config: Callable[..., Config]) -> None:
    # --fsync always: each Produce parks until its fsync; the frames behind it wait, and every
    # answer leaves in request order.
    async with Broker(make_config(fsync="always")) as broker:
        broker.topics.create(TOPIC, 1)
        reqs = stream()
        data = b"".join(q.frame for q in reqs)
        answers = await asyncio.to_thread(send_in_pieces_and_read, broker.bootstrap, data, len(reqs))
        check_answers(broker, reqs, answers, 0)


def test_pipelined_requests_over_a_socket_on_asyncios_own_loop(make_config: Callable[..., Config]) -> None:
    # Without uvloop the broker runs on asyncio's loop, whose buffered reads differ from uvloop's.
    async def scenario() -> None:
        async with Broker(make_config()) as broker:
            broker.topics.create(TOPIC, 1)
            reqs = stream()
            data = b"".join(q.frame for q in reqs)
            answers = await asyncio.to_thread(send_in_pieces_and_read, broker.bootstrap, data, len(reqs))
            check_answers(broker, reqs, answers, 0)
            await async_wait_until(lambda: not any(c.partial_bytes for c in broker.connections), timeout=10)

    loop = asyncio.new_event_loop()
    assert type(loop).__module__.startswith("asyncio")
    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()
