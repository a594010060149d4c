"""Metadata v0-v12: the live brokers with their racks, the cluster id, topics with ids, and each
partition's leader, leader epoch, replicas, ISR and offline replicas.

A lone broker leads every partition. In a cluster (`--brokers N`) the answer is the cluster's
view (broker/cluster/), as Kafka's KRaftMetadataCache gives it: fenced brokers (nodes taken down)
are left out of the broker list and listed as offline replicas; a partition without a leader
has leader -1 and LEADER_NOT_AVAILABLE; the controller id is a live broker (-1 with none).

Answers are cached as encoded bodies keyed by the request's raw bytes and version, and dropped
whenever the topic set changes: a repeated Metadata request is answered before it is even
decoded (the connection's fast path), so steady-state Metadata costs a dictionary lookup.
"""

from __future__ import annotations

from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.security.acls import CLUSTER_NAME, ResourceType, all_operations
from broker.security.listeners import advertised_for, listener_name
from broker.topics.catalog import INTERNAL_TOPICS, Topic, name_error
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

MetadataResponse = lazy_response(ApiKey.METADATA)

_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition

# What an authorizer-less Kafka reports as allowed: every operation the resource type supports.
TOPIC_OPERATIONS = all_operations(ResourceType.TOPIC)
CLUSTER_OPERATIONS = all_operations(ResourceType.CLUSTER)
LEADER_EPOCH = 0
_CACHE_LIMIT = 256


def partition_entries(broker_node: int, topic: Topic, cluster: Any = None) -> list[Any]:
    if cluster is not None:
        return _cluster_partitions(cluster, topic)
    return [
        _Partition(
            error_code=0,
            partition_index=p,
            leader_id=broker_node,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=[broker_node],
            isr_nodes=[broker_node],
            offline_replicas=[],
        )
        for p in range(topic.partitions)
    ]


def _cluster_partitions(cluster: Any, topic: Topic) -> list[Any]:
    """KRaftMetadataCache.partitionMetadata: replicas and ISR as the controller holds them, the
    replicas of fenced nodes listed offline, LEADER_NOT_AVAILABLE without a leader."""
    out = []
    alive = cluster.alive
    for p in range(topic.partitions):
        state = cluster.replicas.get(topic, p)
        out.append(
            _Partition(
                error_code=0 if state.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=p,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[r for r in state.replicas if not alive(r)],
            )
        )
    return out


def _topic_entry(ctx: RequestContext, topic: Topic, include_ops: bool) -> Any:
    return _Topic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal or topic.name in INTERNAL_TOPICS,
        partitions=partition_entries(ctx.broker.config.node_id, topic, ctx.broker.cluster),
        authorized_operations=set(TOPIC_OPERATIONS) if include_ops else None,
    )


def _error_entry(code: ErrorCode, name: str | None, topic_id: Any = None, operations: set[int] | None = None) -> Any:
    return _Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[], authorized_operations=operations)


def _error(request: Any, code: ErrorCode) -> Any:
    topics = [_error_entry(code, t.name, getattr(t, "topic_id", None)) for t in (request.topics or [])]
    return MetadataResponse(
        version=request.version,
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=-1,
        topics=topics,
        authorized_operations=None,
    )


def brokers_of(broker: Any, make: Any, listener: str | None = None, include_fenced: bool = False) -> list[Any]:
    """The live nodes of the broker's cluster (itself alone without one; with `include_fenced`
    the fenced ones too), as `make(node_id, host, port, rack)`, with the addresses of `listener`
    (the one the request came in on)."""
    if broker.cluster is None:
        nodes = [broker]
    else:
        nodes = broker.cluster.nodes if include_fenced else broker.cluster.alive_nodes()
    return [make(n.config.node_id, *advertised_for(n, listener), n.config.broker_rack) for n in nodes]


def controller_id(broker: Any) -> int:
    """This node alone, or a live node of the cluster (Kafka names a random live broker)."""
    return broker.config.node_id if broker.cluster is None else broker.cluster.controller_id()


def _cache(broker: Any) -> dict[tuple[int, bytes], tuple[int, bytes, bool]]:
    cache = broker.__dict__.get("_metadata_cache")
    if cache is None:
        cache = broker.__dict__["_metadata_cache"] = {}
    return cache


def _cached(broker: Any, version: int, frame: bytes, body_offset: int) -> bytes | None:
    hit = _cache(broker).get((version, frame[body_offset:]))
    # An answer carrying topic errors takes the normal path, whose handler notes them for the
    # request metrics (the fast path has no request context); such repeats are rare.
    if hit is not None and hit[0] == broker.topics.generation and not hit[2]:
        return hit[1]
    return None


@api(ApiKey.METADATA, 0, 12, error_response=_error, fast_path=_cached)
def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.api_version
    topics_mgr = broker.topics
    requested = request.topics
    if version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    allow_auto = request.allow_auto_topic_creation if version >= 4 else True
    include_cluster_ops = bool(version >= 8 and version <= 10 and request.include_cluster_authorized_operations)
    include_topic_ops = bool(version >= 8 and request.include_topic_authorized_operations)
    if broker.authorizer is not None:
        return _authorized_metadata(ctx, request, requested, allow_auto, include_cluster_ops, include_topic_ops)

    entries: list[Any] = []
    if requested is None:
        entries = [_topic_entry(ctx, t, include_topic_ops) for t in topics_mgr.topics.values()]
    else:
        seen: set[Any] = set()
        for wanted in requested:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", None) if version >= 10 else None
            ident = (name, topic_id)
            if ident in seen:
                continue
            seen.add(ident)
            if name is None:
                topic = topics_mgr.get_by_id(topic_id)
                entries.append(
                    _topic_entry(ctx, topic, include_topic_ops) if topic else _error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
                )
                continue
            topic = topics_mgr.get(name)
            if topic is None:
                # As Kafka: an entry found by name reports its operations even with an error.
                operations = set(TOPIC_OPERATIONS) if include_topic_ops else None
                if name_error(name) is not None:
                    entries.append(_error_entry(ErrorCode.INVALID_TOPIC_EXCEPTION, name, operations=operations))
                    continue
                if allow_auto:
                    topic = topics_mgr.maybe_auto_create(name)
                if topic is None:
                    entries.append(_error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name, operations=operations))
                    continue
            entries.append(_topic_entry(ctx, topic, include_topic_ops))

    response = MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=brokers_of(broker, _Broker, listener_name(ctx)),
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker),
        topics=entries,
        authorized_operations=set(CLUSTER_OPERATIONS) if include_cluster_ops else None,
    )
    body = bytes(response.encode())
    if not ctx.conn.cacheable:  # another listener's addresses
        return body
    cache = _cache(broker)
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    ctx.errors = [e.error_code for e in entries if e.error_code] or None  # for the request metrics
    # Stored at the generation after any auto-creation above, so a repeat is a hit.
    cache[(version, bytes(ctx.raw_body))] = (topics_mgr.generation, body, ctx.errors is not None)
    return body


def _authorized_metadata(ctx: RequestContext, request: Any, requested: Any, allow_auto: bool, cluster_ops: bool, topic_ops: bool) -> Any:
    """Metadata with an authorizer, in KafkaApis' order: topics without DESCRIBE are left out of an
    all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named; an unknown topic is
    auto-created only with CREATE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED
    otherwise); authorized-operations bits come from the authorizer."""
    broker = ctx.broker
    version = ctx.api_version
    topics_mgr = broker.topics
    unknown_ids: list[Any] = []
    entries: list[Any] = []
    denied_create: list[Any] = []
    denied_describe: list[Any] = []

    def entry(topic: Topic) -> Any:
        e = _topic_entry(ctx, topic, False)
        if topic_ops:
            e.authorized_operations = set(authz.operations_or_all(ctx, authz.TOPIC, topic.name))
        return e

    if requested is None:
        for topic in list(topics_mgr.topics.values()):
            if authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, topic.name, log_denied=False):
                entries.append(entry(topic))
    else:
        names: dict[str, Any] = {}
        for wanted in requested:
            topic_id = getattr(wanted, "topic_id", None) if version >= 10 else None
            if wanted.name is None:
                topic = topics_mgr.get_by_id(topic_id)
                if topic is None:
                    unknown_ids.append(_error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id))
                else:
                    names.setdefault(topic.name, topic_id)
            else:
                names.setdefault(wanted.name, None)
        describable = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, names)
        missing = {n for n in names if n in describable and topics_mgr.get(n) is None}
        creatable = set(missing)
        if (
            missing
            and allow_auto
            and broker.config.auto_create_topics
            and not authz.cluster_allowed(ctx, authz.Op.CREATE, log_denied=False)
        ):
            creatable = authz.filter_allowed(ctx, authz.Op.CREATE, authz.TOPIC, missing)
        for name, topic_id in names.items():
            if name not in describable:
                if topic_id is not None:
                    denied_describe.append(_error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, topic_id))
                else:
                    denied_describe.append(_error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                continue
            if name in missing and name not in creatable:
                e = _error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
                e.is_internal = name in INTERNAL_TOPICS
                denied_create.append(e)
                continue
            topic = topics_mgr.get(name)
            if topic is None:
                if name_error(name) is not None:
                    entries.append(_error_entry(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                    continue
                if allow_auto:
                    topic = topics_mgr.maybe_auto_create(name)
                if topic is None:
                    entries.append(_error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
                    continue
            entries.append(entry(topic))
    ops = None
    if cluster_ops:
        ops = set(authz.operations_or_all(ctx, authz.CLUSTER, CLUSTER_NAME)) if authz.cluster_allowed(ctx, authz.Op.DESCRIBE) else set()
    topics = unknown_ids + entries + denied_create + denied_describe
    ctx.errors = [e.error_code for e in topics if e.error_code] or None
    return MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=brokers_of(broker, _Broker, listener_name(ctx)),
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker),
        topics=topics,
        authorized_operations=ops,
    )
