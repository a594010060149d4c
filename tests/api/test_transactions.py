"""The transaction coordinator over the wire: InitProducerId with transactional ids,
AddPartitionsToTxn, EndTxn, markers, Produce verification, read_committed Fetch and
ListOffsets, `__transaction_state` in Kafka's record formats, restarts, timeouts and expiry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from broker import Broker, Config
from broker.txn.metadata import TxnState
from protocol import records as r
from protocol.errors import ErrorCode
from storage import txn_log_records as trec
from storage.txn_index import ENTRY, TransactionIndex
from tests.support import data as d
from tests.support.coordinator import serving
from tests.support.raw_client import RawClient
from tests.support.txn import Producer, add_partitions, init_producer_id
from tests.support.waiting import async_wait_until

E = ErrorCode


async def ready(broker: Broker) -> None:
    assert broker.txn is not None
    await async_wait_until(lambda: broker.txn.all_loaded, message="transaction coordinator loaded")  # type: ignore[union-attr]


async def producer(broker: Broker, client: RawClient, tid: str, **kw: Any) -> Producer:
    await ready(broker)
    p = Producer(client, tid)
    assert (await p.init(**kw)).error_code == 0
    return p


async def fetch_part(client: RawClient, topic: str, partition: int, offset: int = 0, isolation: int = 0) -> Any:
    resp = await client.request(d.fetch([(topic, partition, offset)], isolation_level=isolation))
    return resp.responses[0].partitions[0]


def values(part: Any) -> list[bytes]:
    data = part.records or b""
    return [rec.value for pos, h in r.iter_batches(data) if not h.is_control for rec in r.iter_all_records(data, pos, h)]


def committed_values(part: Any) -> list[bytes]:
    """What a read_committed consumer keeps: Kafka's client-side filter over the aborted list."""
    data = part.records or b""
    pending = sorted((a.first_offset, a.producer_id) for a in part.aborted_transactions or ())
    aborting: set[int] = set()
    out = []
    for pos, h in r.iter_batches(data):
        while pending and pending[0][0] <= h.base_offset:
            aborting.add(pending.pop(0)[1])
        if h.is_control:
            aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        out.extend(rec.value for rec in r.iter_all_records(data, pos, h))
    return out


async def latest(client: RawClient, topic: str, isolation: int) -> int:
    resp = await client.request(d.list_offsets(topic, 0, -1, isolation_level=isolation))
    return resp.topics[0].partitions[0].offset


# -- InitProducerId ------------------------------------------------------------------------


async def test_init_producer_id_bumps_the_epoch_and_bounds_the_timeout(broker: Broker, raw: Callable[..., Any]) -> None:
    client: RawClient = await raw()
    await ready(broker)
    first = await init_producer_id(client, "tx-a")
    assert (first.error_code, first.producer_epoch) == (0, 0)
    for version in range(6):
        again = await init_producer_id(client, "tx-a", version=version)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, version + 1)
    other = await init_producer_id(client, "tx-b")
    assert other.producer_id != first.producer_id
    for timeout in (0, -1, 900_001):
        bad = await init_producer_id(client, "tx-a", timeout_ms=timeout)
        assert (bad.error_code, bad.producer_id, bad.producer_epoch) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
    assert (await init_producer_id(client, "")).error_code == E.INVALID_REQUEST
    assert (await init_producer_id(client, "tx-a", pid=first.producer_id, epoch=-1)).error_code == E.INVALID_REQUEST


async def test_kip_360_epoch_recovery(broker: Broker, raw: Callable[..., Any]) -> None:
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-360")
    pid, epoch = p.pid, p.epoch
    bumped = await init_producer_id(client, "tx-360", pid=pid, epoch=epoch)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, epoch + 1)
    # The same request again (its answer was lost): the same epoch, not another bump.
    retry = await init_producer_id(client, "tx-360", pid=pid, epoch=epoch)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, pid, epoch + 1)
    assert (await init_producer_id(client, "tx-360", pid=pid, epoch=epoch + 7)).error_code == E.PRODUCER_FENCED
    assert (await init_producer_id(client, "tx-360", pid=pid, epoch=epoch + 7, version=3)).error_code == E.INVALID_PRODUCER_EPOCH
    assert (await init_producer_id(client, "tx-360", pid=pid + 1000, epoch=0)).error_code == E.PRODUCER_FENCED


async def test_exhausted_epoch_rotates_the_producer_id(broker: Broker, raw: Callable[..., Any]) -> None:
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-max")
    assert broker.txn is not None
    shard = broker.txn.shard_for("tx-max")
    meta = shard.txns["tx-max"]
    meta.producer_epoch = 32766
    shard.write(meta)
    rotated = await init_producer_id(client, "tx-max", pid=p.pid, epoch=32766)
    assert rotated.error_code == 0 and rotated.producer_id != p.pid and rotated.producer_epoch == 0
    # A retry with the old id and its exhausted epoch is recognised (Kafka's isValidProducerId).
    retry = await init_producer_id(client, "tx-max", pid=p.pid, epoch=32766)
    assert (retry.error_code, retry.producer_id) == (0, rotated.producer_id)


# -- AddPartitionsToTxn, EndTxn, Produce verification ----------------------------------------


async def test_add_partitions_errors(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 2)
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-add")
    assert await p.add({"t": [0, 5], "nope": [0]}) == {
        ("t", 0): E.OPERATION_NOT_ATTEMPTED,
        ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await add_partitions(client, "tx-unknown", p.pid, p.epoch, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert await add_partitions(client, "tx-add", p.pid + 1, p.epoch, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert await add_partitions(client, "tx-add", p.pid, p.epoch + 1, {"t": [0]}) == {("t", 0): E.PRODUCER_FENCED}
    assert await add_partitions(client, "tx-add", p.pid, p.epoch + 1, {"t": [0]}, version=1) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    for version in (0, 3, 4, 5):
        assert await add_partitions(client, "tx-add", p.pid, p.epoch, {"t": [0, 1]}, version=version) == {("t", 0): 0, ("t", 1): 0}
    assert broker.txn is not None
    meta = broker.txn.shard_for("tx-add").txns["tx-add"]
    assert meta.state is TxnState.ONGOING and meta.partitions == {("t", 0), ("t", 1)}


async def test_end_txn_by_state(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-end")
    assert await p.end(commit=True) == E.INVALID_TXN_STATE  # Empty
    assert await p.add({"t": [0]}) == {("t", 0): 0}
    assert (await p.produce("t", 0)).error_code == 0
    assert await p.end(commit=True) == 0
    assert await p.end(commit=True) == 0  # a retry of a completed commit
    assert await p.end(commit=False) == E.INVALID_TXN_STATE
    p.epoch += 1
    assert await p.end(commit=True) == E.PRODUCER_FENCED
    assert await p.end(commit=True, version=1) == E.INVALID_PRODUCER_EPOCH


async def test_produce_verifies_the_transaction(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 2)
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-prod")
    assert (await p.produce("t", 0)).error_code == E.INVALID_TXN_STATE  # not added to the transaction
    await p.add({"t": [0]})
    assert (await p.produce("t", 1)).error_code == E.INVALID_TXN_STATE
    assert (await p.produce("t", 0, 3)).error_code == 0
    assert (await p.produce("t", 0, epoch=p.epoch - 1 if p.epoch else p.epoch + 1)).error_code == E.INVALID_PRODUCER_EPOCH
    stranger = Producer(client, "tx-prod", pid=p.pid + 500, epoch=0, seq={})
    assert (await stranger.produce("t", 0)).error_code == E.INVALID_PRODUCER_ID_MAPPING
    log = broker.logs.get("t", 0)
    assert log is not None and log.log_end_offset == 3 and log.last_stable_offset == 0


async def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    zombie = await producer(broker, client, "tx-z")
    await zombie.add({"t": [0]})
    assert (await zombie.produce("t", 0, 2, value=b"zombie")).error_code == 0
    successor = Producer(client, "tx-z")
    assert (await successor.init()).error_code == E.CONCURRENT_TRANSACTIONS  # the open transaction is aborted first
    assert (await successor.init()).error_code == 0
    assert (successor.pid, successor.epoch) == (zombie.pid, zombie.epoch + 2)
    assert (await zombie.produce("t", 0)).error_code == E.INVALID_PRODUCER_EPOCH
    assert await zombie.end(commit=True) == E.PRODUCER_FENCED
    part = await fetch_part(client, "t", 0, isolation=1)
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(zombie.pid, 0)]
    assert part.last_stable_offset == part.high_watermark == 3


# -- read_committed ---------------------------------------------------------------------------


async def test_read_committed_stops_at_the_last_stable_offset(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    assert d.produce_result(await client.request(d.produce("t", 0, d.batch(2, value=b"plain")))).error_code == 0
    p = await producer(broker, client, "tx-rc")
    await p.add({"t": [0]})
    await p.produce("t", 0, 2, value=b"open")
    assert d.produce_result(await client.request(d.produce("t", 0, d.batch(1, value=b"after")))).error_code == 0
    assert (await latest(client, "t", 1), await latest(client, "t", 0)) == (2, 5)
    committed = await fetch_part(client, "t", 0, isolation=1)
    assert values(committed) == [b"plain", b"plain"] and committed.last_stable_offset == 2 and committed.aborted_transactions == []
    assert await fetch_part(client, "t", 0, offset=2, isolation=1) is not None
    assert values(await fetch_part(client, "t", 0, offset=2, isolation=1)) == []
    assert values(await fetch_part(client, "t", 0)) == [b"plain"] * 2 + [b"open"] * 2 + [b"after"]
    assert (await fetch_part(client, "t", 0)).aborted_transactions is None
    assert await p.end(commit=False) == 0
    after = await fetch_part(client, "t", 0, isolation=1)
    assert [(a.producer_id, a.first_offset) for a in after.aborted_transactions] == [(p.pid, 2)]
    assert committed_values(after) == [b"plain", b"plain", b"after"]
    assert after.last_stable_offset == 6 and await latest(client, "t", 1) == 6
    # A fetch from the marker still lists it (lastOffset >= fetch offset); one after it does not.
    assert d.produce_result(await client.request(d.produce("t", 0, d.batch(1, value=b"later")))).base_offset == 6
    assert len((await fetch_part(client, "t", 0, offset=5, isolation=1)).aborted_transactions) == 1
    assert (await fetch_part(client, "t", 0, offset=6, isolation=1)).aborted_transactions == []
    log = broker.logs.get("t", 0)
    assert log is not None
    (seg,) = log.segments
    assert [tuple(e) for e in seg.txn_index.entries] == [(p.pid, 2, 5, 6)]  # the LSO once it completed
    raw_index = seg.txn_index.path.read_bytes()
    assert raw_index == ENTRY.pack(0, p.pid, 2, 5, 6)


async def test_a_parked_read_committed_fetch_waits_for_the_last_stable_offset(broker: Broker, raw: Callable[..., Any]) -> None:
    """Kafka's DelayedFetch counts, for read_committed, only the bytes below the last stable
    offset: records appended inside an open transaction leave the fetch parked (Kafka 4.4 held
    it its whole max_wait, 3 s here); the commit marker answers it at once, with the records."""
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    consumer: RawClient = await raw()
    p = await producer(broker, client, "tx-park")
    await p.add({"t": [0]})
    await p.produce("t", 0, 1, value=b"first")
    pending = consumer.send(d.fetch([("t", 0, 0)], max_wait_ms=3000, min_bytes=1, isolation_level=1))
    await p.produce("t", 0, 2, value=b"more")  # inside the open transaction: nothing is stable
    await p.produce("t", 0, 1, value=b"still")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(pending), 0.3)
    assert await p.end(commit=True) == 0
    part = (await asyncio.wait_for(pending, 2.0)).responses[0].partitions[0]
    assert committed_values(part) == [b"first", b"more", b"more", b"still"] and part.last_stable_offset == 5
    # An abort answers it too: the marker moves the LSO past what the consumer must skip.
    await p.add({"t": [0]})
    await p.produce("t", 0, 1, value=b"dropped")
    pending = consumer.send(d.fetch([("t", 0, 5)], max_wait_ms=3000, min_bytes=1, isolation_level=1))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(pending), 0.3)
    assert await p.end(commit=False) == 0
    part = (await asyncio.wait_for(pending, 2.0)).responses[0].partitions[0]
    assert committed_values(part) == [] and part.last_stable_offset == 7


async def test_state_and_indexes_survive_a_restart(make_config: Callable[..., Config]) -> None:
    config = make_config(transaction_state_partitions=3)
    async with serving(config) as served:
        broker = served.broker
        broker.topics.create("t", 1)
        client = await served.connect()
        p = await producer(broker, client, "tx-r")
        await p.add({"t": [0]})
        await p.produce("t", 0, 2)
        assert await p.end(commit=False) == 0
        await p.add({"t": [0]})
        await p.produce("t", 0, 1, value=b"kept")
        assert await p.end(commit=True) == 0
        await p.add({"t": [0]})
        await p.produce("t", 0, 1, value=b"open")
        pid, epoch = p.pid, p.epoch
    async with serving(config) as served:
        broker = served.broker
        client = await served.connect()
        await ready(broker)
        assert broker.txn is not None
        meta = broker.txn.shard_for("tx-r").txns["tx-r"]
        assert (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions) == (pid, epoch, TxnState.ONGOING, {("t", 0)})
        log = broker.logs.get("t", 0)
        assert log is not None and log.last_stable_offset == 5  # the open transaction still holds it
        part = await fetch_part(client, "t", 0, isolation=1)
        assert committed_values(part) == [b"kept"] and [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
        again = Producer(client, "tx-r")
        assert (await again.init()).error_code == E.CONCURRENT_TRANSACTIONS
        assert (await again.init()).error_code == 0 and again.epoch == epoch + 2
        assert log.last_stable_offset == log.log_end_offset


async def test_transaction_log_records_are_kafkas(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-log")
    await p.add({"t": [0]})
    await p.produce("t", 0)
    assert await p.end(commit=True) == 0
    assert broker.txn is not None
    plog = broker.logs.get("__transaction_state", broker.txn.partition_for("tx-log"))
    assert plog is not None
    records = []
    for buf, pos, header in plog.iter_batches():
        assert not header.is_transactional
        for rec in r.iter_all_records(buf, pos, header):
            assert rec.key == b"\x00\x00\x00\x06tx-log" and rec.value is not None and rec.value[:2] == b"\x00\x00"
            records.append(trec.parse_value(rec.value))
    assert [v.status for v in records] == [0, 1, 2, 4]  # Empty, Ongoing, PrepareCommit, CompleteCommit
    assert [v.partitions for v in records] == [None, {"t": [0]}, {"t": [0]}, {}]
    assert {(v.producer_id, v.producer_epoch, v.timeout_ms) for v in records} == {(p.pid, p.epoch, 60000)}
    assert records[1].start_ms == records[3].start_ms > 0
    data = plog.read(0, 1 << 20)
    assert data is not None
    first = r.read_header(data, 0)
    assert first.producer_id == -1 and first.compression == 0
    tlog = broker.logs.get("t", 0)
    assert tlog is not None
    markers = [(h.producer_id, h.producer_epoch, h.is_control) for _b, _p, h in tlog.iter_batches() if h.is_control]
    assert markers == [(p.pid, p.epoch, True)]


async def test_txn_value_codec_reads_version_1() -> None:
    value = trec.TxnLogValue(7, 3, 60000, 1, {"a": [0, 2]}, 10, 5)
    v0 = trec.value(value)
    assert trec.parse_value(v0) == value
    # v1: flexible, with the tagged previous/next producer ids and client transaction version.
    body = bytearray(b"\x00\x01") + v0[2:17]
    body += bytes([2, 2]) + b"a" + bytes([3]) + (0).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\x00"
    body += (10).to_bytes(8, "big") + (5).to_bytes(8, "big")
    body += bytes([2, 0, 8]) + (6).to_bytes(8, "big") + bytes([2, 2]) + (2).to_bytes(2, "big")
    parsed = trec.parse_value(bytes(body))
    assert (parsed.partitions, parsed.previous_producer_id, parsed.client_transaction_version) == ({"a": [0, 2]}, 6, 2)
    with pytest.raises(trec.TxnRecordError):
        trec.parse_value(v0[:-3])


def test_transaction_index_truncation_and_torn_tail(tmp_path: Any) -> None:
    from storage.txn_index import AbortedTxn

    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    assert index.entries == [] and not index.path.exists()
    index.append(AbortedTxn(1, 0, 4, 5))
    index.append(AbortedTxn(2, 3, 9, 10))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(3, 0, 9, 10))
    with open(index.path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn entry
    assert TransactionIndex(index.path).entries == [AbortedTxn(1, 0, 4, 5), AbortedTxn(2, 3, 9, 10)]
    out: list[AbortedTxn] = []
    assert TransactionIndex(index.path).collect(5, 9, out) is True and out == [AbortedTxn(2, 3, 9, 10)]
    index.truncate_to(9)
    assert TransactionIndex(index.path).entries == [AbortedTxn(1, 0, 4, 5)]
    index.truncate_to(0)
    assert not index.path.exists()


# -- timeouts and expiry ---------------------------------------------------------------------


async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(make_config: Callable[..., Config]) -> None:
    config = make_config(transaction_abort_timed_out_transaction_cleanup_interval_ms=50)
    async with serving(config) as served:
        broker = served.broker
        broker.topics.create("t", 1)
        client = await served.connect()
        p = await producer(broker, client, "tx-slow", timeout_ms=300)
        await p.add({"t": [0]})
        await p.produce("t", 0, 2)
        assert broker.txn is not None
        shard = broker.txn.shard_for("tx-slow")
        await async_wait_until(lambda: shard.txns["tx-slow"].state is TxnState.COMPLETE_ABORT, timeout=10, message="timed-out abort")
        assert shard.txns["tx-slow"].producer_epoch == p.epoch + 1 and broker.txn.stats.timed_out == 1
        assert await p.end(commit=True) == E.PRODUCER_FENCED
        assert (await p.produce("t", 0)).error_code == E.INVALID_PRODUCER_EPOCH
        part = await fetch_part(client, "t", 0, isolation=1)
        assert values(part) == [b"v", b"v"] and [a.producer_id for a in part.aborted_transactions] == [p.pid]
        assert committed_values(part) == []


async def test_idle_transactional_ids_expire(make_config: Callable[..., Config]) -> None:
    config = make_config(transactional_id_expiration_ms=200, transaction_remove_expired_transaction_cleanup_interval_ms=50)
    async with serving(config) as served:
        broker = served.broker
        client = await served.connect()
        p = await producer(broker, client, "tx-idle")
        assert broker.txn is not None
        shard = broker.txn.shard_for("tx-idle")
        await async_wait_until(lambda: "tx-idle" not in shard.txns, timeout=10, message="expiry")
        again = Producer(client, "tx-idle")
        assert (await again.init()).error_code == 0 and again.pid != p.pid and again.epoch == 0
        plog = broker.logs.get("__transaction_state", shard.partition)
        assert plog is not None
        tombstones = [rec.key for b, pos, h in plog.iter_batches() for rec in r.iter_all_records(b, pos, h) if rec.value is None]
        assert tombstones == [trec.key("tx-idle")]


# -- prepared transactions, failed markers, the pinned partition count -------------------------------


async def test_a_transaction_prepared_before_a_restart_completes_at_load(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with serving(config) as served:
        broker = served.broker
        broker.topics.create("t", 1)
        client = await served.connect()
        p = await producer(broker, client, "tx-prep")
        await p.add({"t": [0]})
        await p.produce("t", 0, 2, value=b"prepared")
        # The markers cannot be written (a broken disk under the data partition): the broker stops
        # between the PrepareCommit record and the markers, which is what a crash there leaves.
        broker.faults.fail_appends("t", partition=0, count=None)
        assert await p.end(commit=True) == 0  # answered once the PrepareCommit record is written
        assert broker.txn is not None
        assert broker.txn.shard_for("tx-prep").txns["tx-prep"].state is TxnState.PREPARE_COMMIT
        part = await fetch_part(client, "t", 0, isolation=1)
        assert (committed_values(part), part.last_stable_offset) == ([], 0)  # no marker: nothing committed yet
    async with serving(config) as served:
        broker = served.broker
        client = await served.connect()
        await ready(broker)
        assert broker.txn is not None
        assert broker.txn.shard_for("tx-prep").txns["tx-prep"].state is TxnState.COMPLETE_COMMIT
        part = await fetch_part(client, "t", 0, isolation=1)
        assert committed_values(part) == [b"prepared", b"prepared"] and part.last_stable_offset == 3


async def test_markers_that_cannot_be_written_are_retried(broker: Broker, raw: Callable[..., Any]) -> None:
    broker.topics.create("t", 1)
    client: RawClient = await raw()
    p = await producer(broker, client, "tx-retry")
    await p.add({"t": [0]})
    await p.produce("t", 0)
    broker.faults.fail_appends("t", partition=0, count=2)  # a broken disk, for two attempts
    assert await p.end(commit=True) == 0  # answered once the Prepare record is written
    assert broker.txn is not None
    meta = broker.txn.shard_for("tx-retry").txns["tx-retry"]
    assert meta.state is TxnState.PREPARE_COMMIT
    assert (await p.add({"t": [0]})) == {("t", 0): E.CONCURRENT_TRANSACTIONS}
    await async_wait_until(lambda: meta.state is TxnState.COMPLETE_COMMIT, timeout=10, message="markers retried")
    part = await fetch_part(client, "t", 0, isolation=1)
    assert committed_values(part) == [b"v"] and part.last_stable_offset == 2


async def test_the_transaction_state_partition_count_is_fixed(make_config: Callable[..., Config]) -> None:
    async with serving(make_config(transaction_state_partitions=3)):
        pass
    with pytest.raises(RuntimeError, match="--transaction-state-partitions"):
        async with serving(make_config(transaction_state_partitions=4)):
            pass


async def test_a_transaction_whose_state_record_is_over_the_topics_limit_is_refused(make_config: Callable[..., Config]) -> None:
    """`__transaction_state` takes batches up to its max.message.bytes, as `__consumer_offsets`
    does; Kafka's TransactionStateManager answers MESSAGE_TOO_LARGE as UNKNOWN_SERVER_ERROR."""
    async with serving(make_config(message_max_bytes=2048)) as served:
        broker = served.broker
        broker.topics.create("t", 600)
        p = await producer(broker, await served.connect(), "tx-big")
        assert set((await p.add({"t": list(range(600))})).values()) == {E.UNKNOWN_SERVER_ERROR}
        assert broker.txn is not None and broker.txn.shard_for("tx-big").txns["tx-big"].state is TxnState.EMPTY
        assert await p.add({"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
