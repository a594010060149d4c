"""Fetch v4-v16: whole stored batches, long-polled, answered as a list of buffers.

Sessions: kaflet answers sessionless, as a Kafka broker with
max.incremental.fetch.session.cache.slots=0 does. A full fetch (epoch 0 or -1) gets session
id 0, which tells clients that no session was created; they keep sending full fetches
(librdkafka, aiokafka and kcat never use sessions; the Java client and kafka-python fall back
on their own). An incremental fetch (epoch > 0) names a session that cannot exist and gets
FETCH_SESSION_ID_NOT_FOUND, after which clients start over with a full fetch.

Reads follow Kafka's ReplicaManager.readFromLog: partitions in request order, each limited to
min(partition_max_bytes, what is left of max_bytes), and the first batch of the first
partition with data is returned even when larger than both. A partition whose next batch does
not fit in what is left returns nothing (never a later segment's batch). Record sets are whole
batches of one segment, never decoded: Kafka's slice may end inside a batch (clients drop the
partial one); kaflet stops at the last whole batch. A record set larger than the 8 KiB window
its batch headers were walked with stays in the file as a FileRange, which the connection sends
with sendfile (`--no-fetch-sendfile`: read into memory instead), as Kafka sends a FileRecords
slice. When less than min_bytes is available the request parks until appends to its partitions
bring enough (each append wakes it), or until max_wait_ms, then reads again.

read_committed (isolation_level 1): reads stop at the last stable offset (the first offset of
the oldest open transaction), and each partition lists the aborted transactions (producer id,
first offset) overlapping the returned batches, from the segments' transaction indexes, so
the client drops their records; markers (control batches) are returned as stored and skipped
by clients, which advance their position past them, as with Kafka.

last_fetched_epoch (v12+) is not checked: a consumer's log never diverges from the broker's
(every node of a cluster shares one log).

In a cluster (`--brokers N`), as in Kafka: a consumer's Fetch v11+ is served by any replica of
the partition (a follower shares the leader's log here, so its high watermark is the leader's),
older versions and non-replicas get NOT_LEADER_OR_FOLLOWER; from v16 that error and
FENCED_LEADER_EPOCH carry KIP-951's CurrentLeader and the response NodeEndpoints. With
`--replica-selector rack` (Kafka's RackAwareReplicaSelector), the leader sends a consumer whose
rack_id holds an in-sync follower (and not the leader) to it: preferred_read_replica, no records,
answered at once.
"""

from __future__ import annotations

import asyncio
import struct
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.security.listeners import listener_name
from protocol.apis import ApiKey
from protocol.encode import I16, I32, I64, NO_TAGS, array_len, bytes_len, string
from protocol.errors import ErrorCode
from protocol.leader_discovery import Endpoint, leader_id_and_epoch, node_endpoints, tagged
from storage.errors import OffsetOutOfRange
from storage.log import LEADER_EPOCH
from storage.segment import FileRange

if TYPE_CHECKING:
    from storage.log import PartitionLog

_FLEXIBLE_FROM = 12
_TOPIC_IDS_FROM = 13
_FOLLOWER_FETCH_FROM = 11  # KafkaApis passes client metadata from v11: FetchParams.fetchOnlyLeader is false
_LEADER_DISCOVERY_FROM = 16  # KafkaApis fills CurrentLeader and NodeEndpoints from v16
_PARKED: weakref.WeakKeyDictionary[object, set[asyncio.Future[None]]] = weakref.WeakKeyDictionary()  # by node
_EMPTY = b""
_BASE_LEN = struct.Struct(">qi")


@dataclass(slots=True)
class _Partition:
    index: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int
    log: PartitionLog | None
    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = _EMPTY  # bytes, a memoryview or a FileRange (sent with sendfile)
    aborted: Any = None  # read_committed: [(producer id, first offset)]
    preferred_read_replica: int = -1  # --replica-selector rack: the follower this consumer should fetch from
    current_leader: tuple[int, int] | None = None  # KIP-951 (v16+): leader id and epoch


@dataclass(slots=True)
class _Topic:
    name: str | None
    topic_id: Any
    partitions: list[_Partition]


def encode_response(
    version: int, error: int, topics: list[_Topic], read_committed: bool, endpoints: list[Endpoint] | None = None
) -> list[Any]:
    """FetchResponse v4-v16 as a list of buffers (record sets are not copied)."""
    flex = version >= _FLEXIBLE_FROM
    head = [I32.pack(0)]  # throttle_time_ms
    if version >= 7:
        head.append(I16.pack(error) + I32.pack(0))  # error code, session id 0: sessionless
    head.append(array_len(len(topics), flex))
    out: list[Any] = [b"".join(head)]
    meta = bytearray()
    for t in topics:
        if version >= _TOPIC_IDS_FROM:
            meta += t.topic_id.bytes if t.topic_id is not None else bytes(16)  # the zero id decodes to None
        else:
            meta += string(t.name, flex)
        meta += array_len(len(t.partitions), flex)
        for p in t.partitions:
            meta += I32.pack(p.index)
            meta += I16.pack(p.error)
            meta += I64.pack(p.high_watermark)
            meta += I64.pack(p.last_stable_offset)
            if version >= 5:
                meta += I64.pack(p.log_start_offset)
            # Aborted transactions: null when reading uncommitted.
            aborted = p.aborted
            if not read_committed or p.error:
                meta += array_len(None, flex)
            elif not aborted:
                meta += array_len(0, flex)
            else:
                meta += array_len(len(aborted), flex)
                for producer_id, first_offset in aborted:
                    meta += I64.pack(producer_id) + I64.pack(first_offset)
                    if flex:
                        meta += NO_TAGS
            if version >= 11:
                meta += I32.pack(p.preferred_read_replica)
            records = p.records
            meta += bytes_len(len(records), flex)
            if records:
                out.append(bytes(meta))
                out.append(records)
                meta = bytearray()
            if flex:
                leader = p.current_leader if version >= _LEADER_DISCOVERY_FROM else None
                meta += NO_TAGS if leader is None else tagged([(1, leader_id_and_epoch(*leader))])
        if flex:
            meta += NO_TAGS
    if flex:
        meta += tagged([(0, node_endpoints(endpoints))]) if endpoints and version >= _LEADER_DISCOVERY_FROM else NO_TAGS
    out.append(bytes(meta))
    return out


def _resolve(ctx: RequestContext, request: Any) -> list[_Topic]:
    broker = ctx.broker
    version = ctx.api_version
    topics_mgr = broker.topics
    logs = broker.logs
    by_id = version >= _TOPIC_IDS_FROM
    out: list[_Topic] = []
    readable = None
    if broker.authorizer is not None:  # READ on each topic, after unknown topic ids, as KafkaApis checks
        names = (
            [t.topic for t in request.topics] if not by_id else [x.name for t in request.topics if (x := topics_mgr.get_by_id(t.topic_id))]
        )
        readable = authz.filter_allowed(ctx, authz.Op.READ, authz.TOPIC, names)
    rack = getattr(request, "rack_id", None) if version >= _FOLLOWER_FETCH_FROM else None
    selector = broker.cluster is not None and broker.config.replica_selector == "rack" and bool(rack)
    for t in request.topics:
        if by_id:
            topic = topics_mgr.get_by_id(t.topic_id)
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = topics_mgr.get(t.topic)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        denied = (
            readable is not None and (topic is not None or not by_id) and (topic.name if topic is not None else t.topic) not in readable
        )
        parts = []
        for p in t.partitions:
            log = logs.get(topic.name, p.partition) if topic is not None and not denied else None
            part = _Partition(p.partition, p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1), log)
            if denied:
                part.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None:
                part.error = missing
            elif log is None:
                part.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif broker.cluster is not None:
                part.error = broker.partition_check(topic.name, p.partition, part.leader_epoch, version >= _FOLLOWER_FETCH_FROM)[0]
                if not part.error and selector:
                    part.preferred_read_replica = _preferred_read_replica(broker, topic.name, p.partition, rack)
            elif part.leader_epoch != -1 and part.leader_epoch != LEADER_EPOCH:
                part.error = ErrorCode.FENCED_LEADER_EPOCH if part.leader_epoch < LEADER_EPOCH else ErrorCode.UNKNOWN_LEADER_EPOCH
            parts.append(part)
        out.append(_Topic(topic.name if topic is not None else getattr(t, "topic", None), getattr(t, "topic_id", None), parts))
    return out


def _preferred_read_replica(broker: Any, topic: str, partition: int, rack: str) -> int:
    """RackAwareReplicaSelector, on the leader only (ReplicaManager.findPreferredReadReplica): the
    in-sync replicas in the consumer's rack; none, or the leader among them, keeps the leader
    (-1). Every follower is caught up here, so the first such replica in replica order."""
    cluster = broker.cluster
    node = broker.config.node_id
    state = cluster.partition(topic, partition)
    if state is None or state.leader != node:
        return -1
    same_rack = [r for r in state.isr if cluster.alive(r) and cluster.racks.get(r) == rack]
    if not same_rack or node in same_rack:
        return -1
    return next(r for r in state.replicas if r in same_rack)


def _leader_discovery(ctx: RequestContext, topics: list[_Topic]) -> list[Endpoint]:
    """KIP-951 (v16+): CurrentLeader on every NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    partition, and the endpoints of the leaders named."""
    cluster = ctx.broker.cluster
    listener = listener_name(ctx)
    endpoints: dict[int, Endpoint] = {}
    for t in topics:
        for p in t.partitions:
            if p.error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) and t.name is not None:
                leader, epoch, endpoint = cluster.current_leader(t.name, p.index, listener)
                p.current_leader = (leader, epoch)
                if endpoint is not None:
                    endpoints[endpoint[0]] = endpoint
    return list(endpoints.values())


def _upper_bound(data: memoryview) -> int:
    """The offset after the last batch of `data` (whole batches)."""
    pos = 0
    last = -1
    n = len(data)
    while n - pos >= 61:
        base, length = _BASE_LEN.unpack_from(data, pos)
        last = base + I32.unpack_from(data, pos + 23)[0]
        pos += length + 12
    return last + 1


def _read(topics: list[_Topic], max_bytes: int, read_committed: bool = False, ranges: bool = False) -> tuple[int, bool, bool]:
    """Read every partition; returns (bytes read, whether some partition has an error, whether
    some record set is a FileRange). With `ranges`, record sets larger than a walk window are
    left in their files as FileRanges (sent with sendfile by the connection)."""
    limit = max_bytes
    files = False
    min_one = True
    total = 0
    errors = False
    for t in topics:
        for p in t.partitions:
            log = p.log
            p.aborted = None
            if log is not None and log.closed and p.error == 0:
                p.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if p.error:
                errors = True
                p.records = _EMPTY
                continue
            assert log is not None
            if p.preferred_read_replica >= 0:  # sent to a follower: offsets, no records
                p.high_watermark = log.high_watermark
                p.last_stable_offset = log.last_stable_offset
                p.log_start_offset = log.log_start_offset
                p.records = _EMPTY
                continue
            try:
                lso = log.last_stable_offset if read_committed else None
                if ranges:
                    data = log.read_range(p.fetch_offset, min(p.max_bytes, limit), min_one, lso)
                else:
                    data = log.read(p.fetch_offset, min(p.max_bytes, limit), min_one, lso)
            except OffsetOutOfRange:
                p.error = ErrorCode.OFFSET_OUT_OF_RANGE
                p.high_watermark = p.last_stable_offset = p.log_start_offset = -1
                p.records = _EMPTY
                errors = True
                continue
            p.high_watermark = log.high_watermark
            p.last_stable_offset = log.last_stable_offset
            p.log_start_offset = log.log_start_offset
            if data is None:
                p.records = _EMPTY
                continue
            if type(data) is FileRange:
                upper = data.last_offset + 1
                if data.data is not None:  # small: the walk read it anyway
                    data = data.data
                else:
                    files = True
            else:
                upper = -1
            p.records = data
            if read_committed:
                aborted = log.aborted_transactions(p.fetch_offset, upper if upper >= 0 else _upper_bound(data))
                p.aborted = [(a.producer_id, a.first_offset) for a in aborted] if aborted else None
            n = len(data)
            total += n
            limit = max(0, limit - n)
            min_one = False
    return total, errors, files


def _error(request: Any, code: ErrorCode) -> list[Any]:
    version = request.API_VERSION
    if version >= _TOPIC_IDS_FROM:
        return encode_response(version, code, [], False)
    topics = [_Topic(t.topic, None, [_Partition(p.partition, 0, 0, -1, None, int(code)) for p in t.partitions]) for t in request.topics]
    return encode_response(version, code if version >= 7 else 0, topics, False)


@api(ApiKey.FETCH, 4, 16, error_response=_error)
def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if version >= 7 and request.session_epoch not in (0, -1):
        # An incremental fetch: kaflet creates no sessions, so none can be found.
        ctx.errors = [ErrorCode.FETCH_SESSION_ID_NOT_FOUND]
        return encode_response(version, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, [], False)
    read_committed = request.isolation_level == 1
    topics = _resolve(ctx, request)
    max_bytes = request.max_bytes
    ranges = ctx.broker.config.fetch_sendfile and ctx.conn.can_send_files
    total, errors, files = _read(topics, max_bytes, read_committed, ranges)
    endpoints = None
    if errors:  # for the request metrics (broker/metrics/errors.py)
        ctx.errors = [p.error for t in topics for p in t.partitions if p.error]
        if version >= _LEADER_DISCOVERY_FROM and ctx.broker.cluster is not None:
            endpoints = _leader_discovery(ctx, topics)
    # A consumer sent to a preferred read replica is answered at once (ReplicaManager.fetchMessages).
    redirected = ctx.broker.cluster is not None and any(p.preferred_read_replica >= 0 for t in topics for p in t.partitions)
    if request.max_wait_ms <= 0 or total >= request.min_bytes or errors or redirected or not topics or not ctx.broker.accepting:
        if files:
            ctx.conn.files_in_response()
        return encode_response(version, 0, topics, read_committed, endpoints)
    return _park(ctx, version, topics, max_bytes, request.min_bytes, total, request.max_wait_ms, read_committed, ranges)


async def _park(
    ctx: RequestContext,
    version: int,
    topics: list[_Topic],
    max_bytes: int,
    min_bytes: int,
    total: int,
    max_wait_ms: int,
    read_committed: bool,
    ranges: bool,
) -> list[Any]:
    broker = ctx.broker
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    needed = min_bytes - total
    got = [0]
    logs = {id(p.log): p.log for t in topics for p in t.partitions if p.log is not None}
    # read_committed: only what lies below the last stable offset counts, as in Kafka's
    # DelayedFetch (its end offset is the LSO): records appended inside an open transaction do
    # not answer the fetch; the marker that moves the LSO past them does, once enough is readable.
    stable = [tuple(log.last_stable_offset for log in logs.values())]
    checking = [False]

    def check_stable() -> None:
        checking[0] = False
        if done.done():
            return
        now = tuple(log.last_stable_offset for log in logs.values())
        if now != stable[0]:
            stable[0] = now
            if _read(topics, max_bytes, True, ranges)[0] >= min_bytes:
                done.set_result(None)

    def on_append(size: int) -> None:
        if done.done():
            return
        if size == 0:  # the log closed (its topic deleted, the broker stopping)
            done.set_result(None)
        elif read_committed:
            if not checking[0]:  # once per loop turn, outside the append that woke it
                checking[0] = True
                loop.call_soon(check_stable)
        else:
            got[0] += size
            if got[0] >= needed:
                done.set_result(None)

    for log in logs.values():
        assert log is not None
        log.add_waiter(on_append)
    parked = _PARKED.setdefault(broker, set())
    parked.add(done)
    timer = loop.call_later(max_wait_ms / 1000, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        timer.cancel()
        parked.discard(done)
        for log in logs.values():
            assert log is not None
            log.remove_waiter(on_append)
    endpoints = None
    if broker.cluster is not None:  # leadership may have moved meanwhile (DelayedFetch checks it too)
        for t in topics:
            for p in t.partitions:
                if not p.error and t.name is not None:
                    p.error = broker.partition_check(t.name, p.index, p.leader_epoch, version >= _FOLLOWER_FETCH_FROM)[0]
    _total, errors, files = _read(topics, max_bytes, read_committed, ranges)
    if errors:
        ctx.errors = [p.error for t in topics for p in t.partitions if p.error]
        if broker.cluster is not None and version >= _LEADER_DISCOVERY_FROM:
            endpoints = _leader_discovery(ctx, topics)
    if files:
        ctx.conn.files_in_response()
    return encode_response(version, 0, topics, read_committed, endpoints)


def parked_fetches(broker: object) -> int:
    """How many Fetch requests are parked now, waiting for data or their max wait."""
    return sum(1 for fut in _PARKED.get(broker, ()) if not fut.done())


def wake_parked_fetches(broker: object) -> None:
    """At shutdown: the node's parked fetches answer with what they have."""
    for fut in list(_PARKED.get(broker, ())):
        if not fut.done():
            fut.set_result(None)
