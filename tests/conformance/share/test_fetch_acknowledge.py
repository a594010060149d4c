"""ShareFetch and ShareAcknowledge (KIP-932), rules QF and QA of docs/coordinator-rules.md: share
sessions, acquisition, locks and their timeout, delivery counts and the delivery limit, ACCEPT,
RELEASE, REJECT and RENEW, the in-flight limit, share.auto.offset.reset, share.isolation.level,
piggy-backed acknowledgements and every malformed acknowledgement, over the raw protocol.
tests/differential/test_reference_share_groups.py replays the same steps against Kafka 4.4."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from protocol.errors import ErrorCode
from tests.support import share as s
from tests.support import txn
from tests.support.raw_client import RawClient

ACCEPT, RELEASE, REJECT, RENEW, GAP = s.ACCEPT, s.RELEASE, s.REJECT, s.RENEW, s.GAP


async def _setup(
    client: RawClient, configs: dict[str, str] | None = None, values: int = 6, partitions: int = 1
) -> tuple[uuid.UUID, s.ShareMember]:
    """Topic t with `values` records in partition 0, group g reading from the earliest offset."""
    topic_id = await s.create_topic(client, "t", partitions=partitions)
    await s.set_group_configs(client, "g", {"share.auto.offset.reset": "earliest", **(configs or {})})
    if values:
        await s.produce(client, "t", [b"v%d" % i for i in range(values)])
    m = s.ShareMember(client, "g")
    await m.join(["t"], partitions=partitions)
    return topic_id, m


async def test_qf_1_session_epochs(client: RawClient) -> None:
    topic_id, m = await _setup(client)
    tp = (topic_id, 0)
    first = await m.fetch()
    assert first.error_code == 0 and first.acquisition_lock_timeout_ms == 30000
    assert s.acquired(first) == {tp: [(0, 5, 1)]}
    assert (await m.fetch({})).error_code == 0
    # the same epoch again, or one ahead: INVALID_SHARE_SESSION_EPOCH; the session stays
    for epoch in (m.session_epoch - 1, m.session_epoch + 1):
        resp = await m.fetch({}, epoch=epoch)
        assert resp.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH, epoch
    assert (await m.fetch({})).error_code == 0
    # another member has no session
    other = s.ShareMember(client, "g")
    resp = await other.fetch({}, epoch=3)
    assert resp.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    # closing releases what the member held: a new session acquires it again, second delivery
    closed = await m.fetch({}, epoch=s.FINAL_EPOCH)
    assert closed.error_code == 0
    assert (await m.fetch({}, epoch=5)).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    m.session_epoch = 0
    again = await m.fetch()
    assert s.acquired(again) == {tp: [(0, 5, 2)]}


async def test_qf_1_requests_without_a_member_or_with_acks_on_open(client: RawClient) -> None:
    topic_id, m = await _setup(client)
    tp = (topic_id, 0)
    resp = await client.request(s.fetch_request("g", None, 0, {tp: []}))
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    resp = await client.request(s.fetch_request(None, m.member_id, 0, {tp: []}))
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    resp = await client.request(s.fetch_request("g", m.member_id, 0, {tp: [(0, 0, [ACCEPT])]}))
    assert resp.error_code == ErrorCode.INVALID_REQUEST  # acknowledgements need an open session
    resp = await client.request(s.ack_request("g", m.member_id, 0, {tp: [(0, 0, [ACCEPT])]}))
    assert resp.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH


@pytest.mark.broker_config(group_share_max_share_sessions=1)
async def test_qf_1_share_session_limit(client: RawClient, raw: Callable[..., Any]) -> None:
    topic_id, m = await _setup(client)
    assert (await m.fetch()).error_code == 0
    other = s.ShareMember(await raw(), "g")
    resp = await other.fetch({(topic_id, 0): []})
    assert resp.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED


async def test_qf_2_max_records_and_batches(client: RawClient) -> None:
    topic_id, m = await _setup(client, values=0)
    tp = (topic_id, 0)
    for batch in range(3):
        await s.produce(client, "t", [b"b%d-%d" % (batch, i) for i in range(4)])
    resp = await m.fetch(max_records=5, batch_size=2)
    # whole batches are acquired until max_records is reached, each its own range
    assert s.acquired(resp) == {tp: [(0, 3, 1), (4, 7, 1)]}
    assert [v for _, v in s.values(resp)[tp]] == [b"b0-0", b"b0-1", b"b0-2", b"b0-3", b"b1-0", b"b1-1", b"b1-2", b"b1-3"]
    rest = await m.fetch(max_records=500)
    assert s.acquired(rest) == {tp: [(8, 11, 1)]}


async def test_qf_3_lock_timeout_redelivers_with_a_higher_count(client: RawClient) -> None:
    topic_id, m = await _setup(client, {"share.record.lock.duration.ms": "1000"}, values=3)
    tp = (topic_id, 0)
    first = await m.fetch()
    assert first.acquisition_lock_timeout_ms == 1000 and s.acquired(first) == {tp: [(0, 2, 1)]}
    acquired_at = time.monotonic()
    # a parked fetch is woken by the lock timeout
    again = await m.fetch(max_wait_ms=5000)
    waited = time.monotonic() - acquired_at
    assert s.acquired(again) == {tp: [(0, 2, 2)]}
    assert 0.9 <= waited <= 4.0
    # and once more: each lock timeout is one more delivery
    late = await m.fetch(max_wait_ms=5000)
    assert s.acquired(late) == {tp: [(0, 2, 3)]}


async def test_qf_4_delivery_limit_archives(client: RawClient) -> None:
    topic_id, m = await _setup(client, {"share.delivery.count.limit": "2"}, values=2)
    tp = (topic_id, 0)
    assert s.acquired(await m.fetch()) == {tp: [(0, 1, 1)]}
    resp = await m.ack({tp: [(0, 1, [RELEASE])]})
    assert resp.error_code == 0
    assert s.acquired(await m.fetch()) == {tp: [(0, 1, 2)]}
    resp = await m.ack({tp: [(0, 1, [RELEASE])]})  # second delivery was the last: archived
    assert resp.error_code == 0
    await s.produce(client, "t", [b"next"])
    assert s.acquired(await m.fetch(max_wait_ms=2000)) == {tp: [(2, 2, 1)]}


async def test_qf_5_in_flight_limit(client: RawClient) -> None:
    topic_id, m = await _setup(client, {"share.partition.max.record.locks": "100"}, values=0)
    tp = (topic_id, 0)
    for _ in range(3):
        await s.produce(client, "t", [b"x"] * 60)
    first = await m.fetch(max_records=1000, batch_size=1000)
    assert s.acquired(first) == {tp: [(0, 119, 1)]}  # whole batches until the limit of 100 is reached
    nothing = await m.fetch(max_records=1000, max_wait_ms=100)
    assert s.acquired(nothing).get(tp, []) == []
    await m.ack({tp: [(0, 59, [ACCEPT])]})
    more = await m.fetch(max_records=1000)
    assert s.acquired(more) == {tp: [(120, 179, 1)]}


async def test_qf_6_auto_offset_reset(client: RawClient, raw: Callable[..., Any]) -> None:
    topic_id = await s.create_topic(client, "t")
    tp = (topic_id, 0)
    await s.produce(client, "t", [b"old"] * 3)
    latest = s.ShareMember(client, "latest")
    await latest.join(["t"])
    assert s.acquired(await latest.fetch(max_wait_ms=100)) == {tp: []}  # latest: only what comes next
    await s.produce(client, "t", [b"new"])
    assert s.acquired(await latest.fetch(max_wait_ms=2000)) == {tp: [(3, 3, 1)]}
    await s.set_group_configs(client, "early", {"share.auto.offset.reset": "earliest"})
    early = s.ShareMember(await raw(), "early")
    await early.join(["t"])
    assert s.acquired(await early.fetch()) == {tp: [(0, 3, 1)]}
    await s.set_group_configs(client, "hour", {"share.auto.offset.reset": "by_duration:PT1H"})
    hour = s.ShareMember(await raw(), "hour")
    await hour.join(["t"])
    assert s.acquired(await hour.fetch()) == {tp: [(0, 3, 1)]}  # every record is younger than an hour


async def test_qf_7_read_committed_skips_aborted_and_waits_for_open_transactions(client: RawClient) -> None:
    topic_id, m = await _setup(client, {"share.isolation.level": "read_committed"}, values=1)
    tp = (topic_id, 0)
    producer = txn.Producer(client, "tx-1")
    assert (await producer.init()).error_code == 0
    await producer.add({"t": [0]})
    assert (await producer.produce("t", 0, 2, value=b"aborted")).error_code == 0
    assert await producer.end(commit=False) == 0
    await producer.add({"t": [0]})
    assert (await producer.produce("t", 0, 1, value=b"committed")).error_code == 0
    resp = await m.fetch(max_wait_ms=200)
    assert [v for _, v in s.values(resp)[tp]] == [b"v0"]  # the aborted records never, the open one not yet
    assert await producer.end(commit=True) == 0
    resp = await m.fetch(max_wait_ms=2000)
    assert [v for _, v in s.values(resp)[tp]] == [b"committed"]


async def test_qf_8_piggy_backed_acknowledgements(client: RawClient) -> None:
    topic_id, m = await _setup(client, values=4)
    tp = (topic_id, 0)
    assert s.acquired(await m.fetch(max_records=2, batch_size=1)) in ({tp: [(0, 3, 1)]}, {tp: [(0, 1, 1)]})
    resp = await m.fetch({tp: [(0, 3, [ACCEPT])]}, max_wait_ms=100)
    (part,) = s.partitions_of(resp).values()
    assert (part.error_code, part.acknowledge_error_code) == (0, 0)
    # offsets below the start offset are done with: acknowledging them again changes nothing
    resp = await m.fetch({tp: [(0, 0, [ACCEPT])]}, max_wait_ms=100)
    (part,) = s.partitions_of(resp).values()
    assert (part.error_code, part.acknowledge_error_code) == (0, 0)
    # a bad acknowledgement fails only its partition's acknowledgement, the fetch goes on
    resp = await m.fetch({tp: [(10, 10, [ACCEPT])]}, max_wait_ms=100)
    (part,) = s.partitions_of(resp).values()
    assert (part.error_code, part.acknowledge_error_code) == (0, ErrorCode.INVALID_RECORD_STATE)


async def test_qf_9_a_parked_fetch_returns_when_records_arrive(client: RawClient, raw: Callable[..., Any]) -> None:
    topic_id, m = await _setup(client, values=0)
    fetching = asyncio.ensure_future(m.fetch(max_wait_ms=10000))
    await asyncio.sleep(0.2)
    assert not fetching.done()
    started = time.monotonic()
    await s.produce(await raw(), "t", [b"hello"])
    resp = await fetching
    assert time.monotonic() - started < 5
    assert s.acquired(resp) == {(topic_id, 0): [(0, 0, 1)]}


async def test_qf_10_unknown_topics_and_partitions(client: RawClient) -> None:
    topic_id, _member = await _setup(client)
    unknown = uuid.uuid4()
    resp = await client.request(s.fetch_request("g", s.new_member_id(), 0, {(unknown, 0): [], (topic_id, 9): []}))
    parts = s.partitions_of(resp)
    assert parts[(unknown, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert parts[(topic_id, 9)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_qf_11_records_held_by_one_member_are_not_given_to_another(client: RawClient, raw: Callable[..., Any]) -> None:
    topic_id, a = await _setup(client, values=4)
    tp = (topic_id, 0)
    b = s.ShareMember(await raw(), "g")
    await b.join(["t"])
    assert s.acquired(await a.fetch()) == {tp: [(0, 3, 1)]}
    assert s.acquired(await b.fetch(max_wait_ms=100)) == {tp: []}
    await a.ack({tp: [(1, 2, [RELEASE])]})
    assert s.acquired(await b.fetch(max_wait_ms=1000)) == {tp: [(1, 2, 2)]}
    # b cannot acknowledge a's records, nor a b's
    resp = await b.ack({tp: [(0, 0, [ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    resp = await a.ack({tp: [(1, 1, [ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE


async def test_qa_1_accept_release_reject(client: RawClient) -> None:
    topic_id, m = await _setup(client, values=3)
    tp = (topic_id, 0)
    await m.fetch()
    resp = await m.ack({tp: [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [REJECT])]})
    assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
    again = await m.fetch(max_wait_ms=1000)
    assert s.acquired(again) == {tp: [(1, 1, 2)]}  # only the released one comes back
    # one type per offset in one batch
    resp = await m.ack({tp: [(1, 1, [ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == 0
    await s.produce(client, "t", [b"a", b"b", b"c"])
    assert s.acquired(await m.fetch(max_wait_ms=1000)) == {tp: [(3, 5, 1)]}
    resp = await m.ack({tp: [(3, 5, [ACCEPT, RELEASE, REJECT])]})
    assert resp.responses[0].partitions[0].error_code == 0
    assert s.acquired(await m.fetch(max_wait_ms=1000)) == {tp: [(4, 4, 2)]}


async def test_qa_2_renew_extends_the_lock_from_v2(client: RawClient) -> None:
    topic_id, m = await _setup(client, {"share.record.lock.duration.ms": "1000"}, values=1)
    tp = (topic_id, 0)
    await m.fetch()
    v1 = await m.ack({tp: [(0, 0, [RENEW])]}, version=1)
    assert v1.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:  # renew every 400 ms for 2.5 s: the record stays ours
        resp = await m.ack({tp: [(0, 0, [RENEW])]})
        assert resp.responses[0].partitions[0].error_code == 0
        await asyncio.sleep(0.4)
    resp = await m.ack({tp: [(0, 0, [ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == 0


async def test_qa_3_malformed_batches(client: RawClient) -> None:
    topic_id, m = await _setup(client, values=8)
    tp = (topic_id, 0)
    await m.fetch()
    cases = [
        ([(4, 5, [ACCEPT]), (4, 6, [ACCEPT])], ErrorCode.INVALID_REQUEST),  # overlapping
        ([(6, 6, [ACCEPT]), (4, 4, [ACCEPT])], ErrorCode.INVALID_REQUEST),  # backwards
        ([(5, 4, [ACCEPT])], ErrorCode.INVALID_REQUEST),  # last before first
        ([(4, 4, [7])], ErrorCode.INVALID_REQUEST),  # unknown type
        ([(4, 6, [ACCEPT, ACCEPT])], ErrorCode.INVALID_REQUEST),  # neither one type nor one per offset
        ([(20, 21, [ACCEPT])], ErrorCode.INVALID_REQUEST),  # beyond what was acquired
        ([(4, 40, [ACCEPT])], ErrorCode.INVALID_REQUEST),  # runs past what was acquired
        ([(4, 4, [RENEW])], ErrorCode.INVALID_REQUEST),  # RENEW without IsRenewAck
    ]
    for acks, code in cases:
        resp = await m.ack({tp: acks}, renew=False)
        assert resp.error_code == 0, acks
        assert resp.responses[0].partitions[0].error_code == code, acks
    # a released record is no longer this member's to acknowledge
    assert (await m.ack({tp: [(7, 7, [RELEASE])]})).responses[0].partitions[0].error_code == 0
    resp = await m.ack({tp: [(7, 7, [ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    # none of the bad ones changed anything: the other records are still acquired
    resp = await m.ack({tp: [(0, 6, [ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == 0


async def test_qa_3_unknown_topic_and_partition(client: RawClient) -> None:
    topic_id, m = await _setup(client, values=1)
    await m.fetch()
    resp = await m.ack({(uuid.uuid4(), 0): [(0, 0, [ACCEPT])], (topic_id, 7): [(0, 0, [ACCEPT])]})
    errors = sorted(p.error_code for t in resp.responses for p in t.partitions)
    assert errors == sorted([ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])


async def test_qa_4_acknowledge_with_the_final_epoch_closes_the_session(client: RawClient) -> None:
    topic_id, m = await _setup(client, values=2)
    tp = (topic_id, 0)
    await m.fetch()
    resp = await m.ack({tp: [(0, 0, [ACCEPT])]}, epoch=s.FINAL_EPOCH)
    assert resp.error_code == 0
    assert (await m.fetch({}, epoch=2)).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    m.session_epoch = 0
    assert s.acquired(await m.fetch()) == {tp: [(1, 1, 2)]}  # the unacknowledged one was released


async def test_qa_5_gaps_are_acknowledged_with_type_0(client: RawClient) -> None:
    topic_id, m = await _setup(client, values=3)
    tp = (topic_id, 0)
    await m.fetch()
    resp = await m.ack({tp: [(0, 2, [ACCEPT, GAP, ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == 0


async def test_qf_12_a_group_config_outside_narrowed_bounds_is_held_within_them(make_config: Callable[..., Any]) -> None:
    from broker import Broker
    from tests.support.coordinator import wait_ready

    config = make_config(**s.SHARE_BOUNDS)
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap)
        await wait_ready(client)
        await s.create_topic(client, "t")
        await s.set_group_configs(client, "g", {"share.record.lock.duration.ms": "50000", "share.delivery.count.limit": "9"})
        await client.close()
    narrowed = make_config(**s.SHARE_BOUNDS, group_share_max_record_lock_duration_ms=40000, group_share_max_delivery_count_limit=6)
    async with Broker(narrowed) as broker:
        client = await RawClient.connect(broker.bootstrap)
        await wait_ready(client)
        m = s.ShareMember(client, "g")
        await m.join(["t"])
        resp = await m.fetch()
        assert resp.acquisition_lock_timeout_ms == 40000  # GroupConfig.evaluate: clamped to the new maximum
        assert broker.share_partitions.settings.delivery_count_limit("g") == 6
        await client.close()
