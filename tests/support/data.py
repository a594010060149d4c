"""Requests of the data path for raw-protocol tests: Produce, Fetch, ListOffsets and friends."""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from protocol import records as r

_PT = ProduceRequest.TopicProduceData
_PP = _PT.PartitionProduceData
_FT = FetchRequest.FetchTopic
_FP = _FT.FetchPartition
_LT = ListOffsetsRequest.ListOffsetsTopic
_LP = _LT.ListOffsetsPartition


def produce(
    topic: str, partition: int, records: bytes | None, *, acks: int = -1, version: int = 9, transactional_id: str | None = None
) -> Any:
    return ProduceRequest(
        version=version,
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=5000,
        topic_data=[_PT(name=topic, partition_data=[_PP(index=partition, records=records)])],
    )


def produce_result(response: Any) -> Any:
    return response.responses[0].partition_responses[0]


def batch(n: int = 1, *, key: bytes = b"k", value: bytes = b"v", **kw: Any) -> bytes:
    return bytes(r.build_batch([(key + b"%d" % i, value) for i in range(n)], **kw))


def fetch(
    parts: list[tuple[str | uuid.UUID, int, int]],
    *,
    version: int = 11,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
    isolation_level: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
) -> Any:
    topics: dict[Any, list[Any]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(_FP(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
    return FetchRequest(
        version=version,
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[
            _FT(topic=None if isinstance(t, uuid.UUID) else t, topic_id=t if isinstance(t, uuid.UUID) else None, partitions=ps)
            for t, ps in topics.items()
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def fetched_offsets(partition_data: Any) -> list[int]:
    """Record offsets in a fetched partition's record set (whole batches only)."""
    data = partition_data.records or b""
    return [rec.offset for _pos, h in r.iter_batches(data) for rec in r.iter_all_records(data, _pos, h)]


def list_offsets(topic: str, partition: int, timestamp: int, *, version: int = 8, isolation_level: int = 0) -> Any:
    return ListOffsetsRequest(
        version=version,
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[_LT(name=topic, partitions=[_LP(partition_index=partition, timestamp=timestamp, current_leader_epoch=-1)])],
    )


def list_offsets_v0(topic: str, partition: int, timestamp: int, max_num_offsets: int) -> Any:
    return ListOffsetsRequest(
        version=0,
        replica_id=-1,
        topics=[_LT(name=topic, partitions=[_LP(partition_index=partition, timestamp=timestamp, max_num_offsets=max_num_offsets)])],
    )


def offset_for_leader_epoch(topic: str, partition: int, leader_epoch: int, current: int = -1, version: int = 4) -> Any:
    t = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    return OffsetForLeaderEpochRequest(
        version=version,
        replica_id=-1,
        topics=[
            t(
                topic=topic,
                partitions=[t.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=leader_epoch)],
            )
        ],
    )


def delete_records(topic: str, partition: int, offset: int, version: int = 2) -> Any:
    t = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest(
        version=version,
        timeout_ms=5000,
        topics=[t(name=topic, partitions=[t.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
    )


def init_producer_id(transactional_id: str | None = None, producer_id: int = -1, epoch: int = -1, version: int = 4) -> Any:
    return InitProducerIdRequest(
        version=version, transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=producer_id, producer_epoch=epoch
    )
