"""Acknowledgement batches as ShareAcknowledge and ShareFetch carry them, checked as KafkaApis
checks them (validateAcknowledgementBatches, handleAcknowledgements) before they reach a share
partition. Shared by broker/apis/share_fetch.py and broker/apis/share_acknowledge.py."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker.share.inflight import REJECT, RENEW
from broker.share.manager import SharePartitionManager
from broker.share.partition import AckBatch
from protocol.errors import ErrorCode

TopicIdPartition = tuple[uuid.UUID, int]
AckResult = tuple[ErrorCode, str | None]


def member_id_valid(member_id: str | None) -> bool:
    """KafkaApis.isMemberIdValid: non-empty, at most 36 characters (a UUID's string form)."""
    return member_id is not None and member_id != "" and len(member_id) <= 36


def requested_batches(
    topics: Any, names: Callable[[uuid.UUID], str | None]
) -> tuple[dict[TopicIdPartition, list[AckBatch]], dict[TopicIdPartition, AckResult]]:
    """getAcknowledgeBatchesFromShare*Request: per partition its batches; unknown topic ids fail."""
    batches: dict[TopicIdPartition, list[AckBatch]] = {}
    erroneous: dict[TopicIdPartition, AckResult] = {}
    for t in topics:
        known = names(t.topic_id) is not None
        for p in t.partitions:
            tip = (t.topic_id, p.partition_index)
            if not known:
                erroneous[tip] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
                continue
            batches[tip] = [AckBatch(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]
    return batches, erroneous


def _invalid(batches: list[AckBatch], renew_supported: bool, renew_ack: bool) -> bool:
    """validateAcknowledgementBatches for one partition: overlap, order, types, lengths."""
    previous_end = -1
    max_type = RENEW if renew_supported else REJECT
    for b in batches:
        if b.first_offset > b.last_offset or b.first_offset < previous_end or not b.types:
            return True
        if len(b.types) > 1 and b.last_offset - b.first_offset != len(b.types) - 1:
            return True
        if any(t < 0 or t > max_type for t in b.types):
            return True
        if RENEW in b.types and not renew_ack:
            return True
        previous_end = b.last_offset
    return False


def handle_acknowledgements(
    manager: SharePartitionManager,
    group: str,
    member: str,
    batches: dict[TopicIdPartition, list[AckBatch]],
    erroneous: dict[TopicIdPartition, AckResult],
    readable: Callable[[str], bool],
    names: Callable[[uuid.UUID], str | None],
    partition_exists: Callable[[str, int], bool],
    renew_supported: bool,
    renew_ack: bool,
) -> tuple[dict[TopicIdPartition, AckResult], list[Awaitable[Any]]]:
    """handleAcknowledgements: every partition's result, and the durability waits of the writes."""
    interested: dict[TopicIdPartition, list[AckBatch]] = {}
    empty: dict[TopicIdPartition, AckResult] = {}
    for tip, partition_batches in batches.items():
        if _invalid(partition_batches, renew_supported, renew_ack):
            erroneous[tip] = (ErrorCode.INVALID_REQUEST, None)
            continue
        topic = names(tip[0])
        assert topic is not None
        if not readable(topic):
            erroneous[tip] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        elif not partition_exists(topic, tip[1]):
            erroneous[tip] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        elif not partition_batches:
            empty[tip] = (ErrorCode.NONE, None)
        else:
            interested[tip] = partition_batches
    if not interested:
        return erroneous, []
    results, waiters = manager.acknowledge(group, member, interested)
    results.update(erroneous)
    results.update(empty)
    return results, waiters
