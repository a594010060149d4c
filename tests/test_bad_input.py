"""Bad input against a broker process: the offending connection is closed with exactly one
warning naming the peer and the reason, nothing else is logged at error level, no traceback
reaches stderr, and a healthy connection keeps getting correct answers."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from broker.embed import BrokerProcess
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the whole module: every case looks only at the log lines of its own peer."""
    bp = BrokerProcess(tmp_path_factory.mktemp("bad-input") / "data", "--offsets-partitions", "5").start()
    yield bp
    bp.stop()
    assert_no_tracebacks(bp)


def assert_no_tracebacks(bp: BrokerProcess) -> None:
    for line in bp.lines:
        record = json.loads(line)  # every stderr line is a structured record, never raw traceback text
        assert record.get("level") not in ("error", "critical"), line
        assert "exception" not in record, line


def local_peer(client: RawClient) -> str:
    host, port = client.writer.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


async def connection_warnings(bp: BrokerProcess, peer: str, *, wait: bool = True) -> list[dict[str, Any]]:
    def matching() -> list[dict[str, Any]]:
        return [r for r in list(bp.records) if r.get("peer") == peer and r.get("level") == "warning"]

    if wait:
        await async_wait_until(matching, timeout=10, message=f"a warning about {peer}")
    return matching()


async def assert_healthy(client: RawClient, bp: BrokerProcess) -> None:
    versions = await client.request(ApiVersionsRequest[3](client_software_name="healthy", client_software_version="1"))
    assert versions.error_code == 0 and versions.api_keys
    meta = await client.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
    assert [(b.node_id, b.port) for b in meta.brokers] == [(1, bp.port)]


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def header(api_key: int, version: int, corr: int = 1, client_id: bytes = b"bad") -> bytes:
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id


CASES: list[tuple[str, bytes, str]] = [
    ("http", b"GET / HTTP/1.1\r\nHost: kaflet\r\n\r\n", "request size 1195725856 outside 0..104857600"),
    ("negative size", b"\xff\xff\xff\xfe", "request size -2 outside 0..104857600"),
    ("too large", struct.pack(">i", 104857601), "request size 104857601 outside 0..104857600"),
    ("short header", frame(b"\x00\x03\x00"), "bad request header: frame shorter than a request header"),
    ("unknown api key", frame(header(999, 0)), "unknown api key 999"),
    ("unsupported version", frame(header(3, 99)), "unsupported version 99 of METADATA (serves 0-12)"),
    # Metadata v1 needs a topics array after the header; here it stops half way.
    ("body does not decode", frame(header(3, 1) + b"\x00\x00"), "METADATA v1 body does not decode"),
    ("client id overruns the frame", frame(struct.pack(">hhih", 18, 0, 1, 200) + b"abc"), "bad request header: truncated client id"),
    (
        "garbage after a good request",
        frame(header(18, 0)) + b"\x00\x00\x00\x09" + bytes(range(9)),
        "unsupported version 515 of FETCH (serves 4-16)",
    ),
    # Issue 11, bug 4: a null where the schema forbids one is a decode error (protocol/nullability.py),
    # never a handler crash nor an error answer that cannot be encoded.
    (
        "null topics in ListOffsets v4",
        # The frame, with its size prefix made 20 (it read 21 for the 20 bytes shown).
        bytes.fromhex("00000014 0002 0004 00000001 0001 78 ffffffff 00 ffffffff"),
        "LIST_OFFSETS v4 body does not decode: NullFieldError: non-nullable field topics was serialized as null",
    ),
    (
        "null config name in DescribeConfigs v1",
        bytes.fromhex("0000001c 0020 0001 00000001 0003 626164 00000001 02 0001 74 00000001 ffff 00"),
        "non-nullable field resources[0].configuration_keys[0] was serialized as null",
    ),
    (
        "null states filter in ListGroups v4",
        bytes.fromhex("00000010 0010 0004 00000001 0003 626164 00 00 00"),
        "LIST_GROUPS v4 body does not decode: NullFieldError: non-nullable field states_filter",
    ),
    (
        "null protocols in JoinGroup v3",
        bytes.fromhex("00000028 000b 0003 00000001 0003 626164 0001 67 00002710 00002710 0000 0008 636f6e73756d6572 ffffffff"),
        "non-nullable field protocols was serialized as null",
    ),
    (
        "null group id in OffsetCommit v2 (hand-written codec)",
        bytes.fromhex("00000021 0008 0002 00000001 0003 626164 ffff ffffffff 0000 ffffffffffffffff 00000000"),
        "OFFSET_COMMIT v2 body does not decode: CodecError: non-nullable field group_id or member_id",
    ),
]


@pytest.mark.parametrize(("data", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_bad_bytes_close_only_the_offender(proc: BrokerProcess, data: bytes, reason: str) -> None:
    healthy = await RawClient.connect(proc.bootstrap, "healthy")
    bad = await RawClient.connect(proc.bootstrap, "bad")
    try:
        await assert_healthy(healthy, proc)
        peer = local_peer(bad)
        await bad.send_raw(data)
        assert await bad.wait_closed_by_peer(10)
        await connection_warnings(proc, peer)
        # A round trip on the healthy connection lets a wrong second warning about the same
        # close (logged when the broker sees the socket gone) reach the log before counting.
        await assert_healthy(healthy, proc)
        warnings = await connection_warnings(proc, peer)
        assert len(warnings) == 1, warnings
        assert warnings[0]["event"] == "closing connection"
        assert reason in warnings[0]["reason"]
        assert await connection_warnings(proc, local_peer(healthy), wait=False) == []
    finally:
        await bad.close()
        await healthy.close()


async def test_peer_closing_mid_frame(proc: BrokerProcess) -> None:
    healthy = await RawClient.connect(proc.bootstrap, "healthy")
    bad = await RawClient.connect(proc.bootstrap, "bad")
    try:
        peer = local_peer(bad)
        await bad.send_raw(struct.pack(">i", 100) + header(18, 0))
        await bad.close()
        await connection_warnings(proc, peer)
        await assert_healthy(healthy, proc)
        warnings = await connection_warnings(proc, peer)
        assert len(warnings) == 1, warnings
        assert warnings[0]["event"] == "connection closed mid-frame"
        assert "incomplete request" in warnings[0]["reason"]
    finally:
        await healthy.close()


async def test_good_requests_before_the_bad_bytes_are_answered(proc: BrokerProcess) -> None:
    bad = await RawClient.connect(proc.bootstrap, "bad")
    try:
        request = ApiVersionsRequest[0]()
        request.with_header(correlation_id=41, client_id="bad")
        await bad.send_raw(bytes(request.encode(header=True, framed=True)) + b"\xff\xff\xff\xff")
        answer = await asyncio.wait_for(bad.read_frame(), 10)
        assert struct.unpack_from(">i", answer)[0] == 41
        assert await bad.wait_closed_by_peer(10)
    finally:
        await bad.close()


async def test_idle_connections_are_closed(tmp_path: Path) -> None:
    """A silent client and one that stopped half way through a frame are both closed after
    connections.max.idle.ms; a connection that keeps talking is not."""
    bp = BrokerProcess(tmp_path / "data", "--offsets-partitions", "5", "--connections-max-idle-ms", "2000").start()
    try:
        healthy = await RawClient.connect(bp.bootstrap, "healthy")
        silent = await RawClient.connect(bp.bootstrap, "silent")
        halfway = await RawClient.connect(bp.bootstrap, "halfway")
        await halfway.send_raw(struct.pack(">i", 50) + header(18, 0))
        peers = {local_peer(silent): silent, local_peer(halfway): halfway}

        async def both_closed() -> bool:
            await assert_healthy(healthy, bp)  # keeps the healthy connection active meanwhile
            closed = [r for r in list(bp.records) if r.get("peer") in peers and r.get("event") == "closing connection"]
            return len(closed) == 2

        await async_wait_until(both_closed, timeout=20, interval=0.05, message="both idle connections closed")
        for client in peers.values():
            assert await client.wait_closed_by_peer(10)
        await assert_healthy(healthy, bp)
        for peer in peers:
            warnings = await connection_warnings(bp, peer)
            assert len(warnings) == 1, warnings
            assert warnings[0]["reason"] == "idle for more than 2000 ms"
        await assert_healthy(healthy, bp)
        assert await connection_warnings(bp, local_peer(healthy), wait=False) == []
        for client in (healthy, silent, halfway):
            await client.close()
    finally:
        assert bp.stop() == 0
    assert_no_tracebacks(bp)
