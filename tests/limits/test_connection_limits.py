"""Limits a shared broker needs (issue 11): max.connections, max.connections.per.ip,
queued.max.request.bytes and the deadline on a started request frame (request.read.timeout.ms)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from broker import Broker, Config
from tests.support import data as d
from tests.support.classic import answered_within
from tests.support.metrics import ascrape
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until


@pytest.fixture
async def clients() -> AsyncIterator[list[RawClient]]:
    opened: list[RawClient] = []
    yield opened
    for c in opened:
        await c.close()


async def connect(broker: Broker, opened: list[RawClient], local_host: str | None = None) -> RawClient:
    host, port = broker.bootstrap.rsplit(":", 1)
    local = (local_host, 0) if local_host else None
    reader, writer = await asyncio.open_connection(host, int(port), local_addr=local)
    client = RawClient(reader, writer, "limits")
    opened.append(client)
    return client


async def healthy(client: RawClient) -> bool:
    resp = await client.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    return resp.error_code == 0


async def test_max_connections_refuses_new_connections_and_counts_them(
    make_config: Callable[..., Config], clients: list[RawClient]
) -> None:
    async with Broker(make_config(max_connections=3, metrics=True, metrics_port=0)) as broker:
        first = [await connect(broker, clients) for _ in range(3)]
        for c in first:
            assert await healthy(c)
        extra = await connect(broker, clients)
        assert await extra.wait_closed_by_peer(timeout=5)
        assert broker.limits.refused["max_connections"] == 1
        assert broker.metrics is not None
        scrape = await ascrape(broker.metrics.address)
        assert scrape.value("kaflet_connections_refused_total", reason="max_connections") == 1
        # A slot freed is a slot a new client gets.
        await first[0].close()
        await async_wait_until(lambda: len(broker.connections) == 2, message="the closed connection to be gone")
        again = await connect(broker, clients)
        assert await healthy(again)
        assert all([await healthy(c) for c in first[1:]])


async def test_max_connections_per_ip_counts_each_address_alone(make_config: Callable[..., Config], clients: list[RawClient]) -> None:
    async with Broker(make_config(max_connections_per_ip=2)) as broker:
        a = [await connect(broker, clients, "127.0.0.1") for _ in range(2)]
        refused = await connect(broker, clients, "127.0.0.1")
        assert await refused.wait_closed_by_peer(timeout=5)
        # Another address has its own allowance.
        other = [await connect(broker, clients, "127.0.0.2") for _ in range(2)]
        for c in a + other:
            assert await healthy(c)
        assert broker.limits.refused == {"max_connections": 0, "max_connections_per_ip": 1}
        assert broker.limits.per_ip == {"127.0.0.1": 2, "127.0.0.2": 2}


async def test_queued_max_request_bytes_stops_reading_while_the_pool_is_overdrawn(
    make_config: Callable[..., Config], clients: list[RawClient]
) -> None:
    # A long-polling Fetch holds its request bytes until it is answered; with a pool smaller than
    # one request, nothing else is read meanwhile (Kafka mutes every channel while its pool is empty).
    async with Broker(make_config(queued_max_request_bytes=64)) as broker:
        broker.topics.create("t", 1)
        a = await connect(broker, clients)
        b = await connect(broker, clients)
        assert await healthy(b)  # answered: nothing held yet
        parked = a.send(d.fetch([("t", 0, 0)], max_wait_ms=1500))
        await async_wait_until(lambda: broker.limits.pool_exhausted, message="the pool to be overdrawn")
        meta = b.send(MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
        assert not await answered_within(meta, 0.5)
        fetched = await asyncio.wait_for(parked, 10)
        assert fetched.error_code == 0
        assert (await asyncio.wait_for(meta, 10)).brokers
        await async_wait_until(lambda: broker.limits.pool_used == 0, message="every request byte back in the pool")
        assert await healthy(a) and await healthy(b)


async def test_request_read_timeout_closes_a_trickling_connection(make_config: Callable[..., Config], clients: list[RawClient]) -> None:
    async with Broker(make_config(request_read_timeout_ms=400)) as broker:
        slow = await connect(broker, clients)
        quiet = await connect(broker, clients)  # sends nothing: only connections.max.idle.ms applies
        good = await connect(broker, clients)
        request = ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
        request.with_header(correlation_id=1, client_id="slow")
        frame = bytes(request.encode(header=True, framed=True))
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4

        async def trickle() -> None:
            for byte in frame[:-1]:  # one byte every 50 ms: active, but never a whole frame in time
                await slow.send_raw(bytes([byte]))
                await asyncio.sleep(0.05)

        task = asyncio.get_running_loop().create_task(trickle())
        try:
            assert await slow.wait_closed_by_peer(timeout=10)
        finally:
            task.cancel()
        assert await healthy(good)
        assert quiet in clients and len(broker.connections) == 2  # quiet and good stay
        assert await healthy(quiet)


async def test_limits_refuse_bad_values() -> None:
    for bad in ({"max_connections": -1}, {"queued_max_request_bytes": 0}, {"request_read_timeout_ms": -5}):
        with pytest.raises(ValueError):
            Config(**bad).validate()
