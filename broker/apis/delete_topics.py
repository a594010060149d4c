"""DeleteTopics v1-v6 (v0 is not served, as in Kafka 4): by name, and by topic id (v6),
following Kafka's ControllerApis.

Names and ids are resolved the way Kafka resolves them: a name or id given twice, a
v6 entry with both or neither, an unknown id (UNKNOWN_TOPIC_ID) or name
(UNKNOWN_TOPIC_OR_PARTITION), and a name that maps to an id also given, each get their
own error; the rest are deleted. Kafka shuffles the answers; kaflet keeps Kafka's
pre-shuffle order (errors first, then deletions), which is one of the orders Kafka may send.

Internal topics are deleted like any other, as Kafka does (only kafka-topics.sh refuses
to): the on_deleted listeners tell their owners.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DeleteTopicsResponse = lazy_response(ApiKey.DELETE_TOPICS)

_Result = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = uuid.UUID(int=0)


def _entries(request: Any) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of every requested topic; v1-v5 name topics only."""
    if request.version >= 6:
        return [(t.name, t.topic_id if t.topic_id != ZERO_UUID else None) for t in request.topics or []]
    return [(name, None) for name in request.topic_names or []]


def _result(version: int, name: str | None, topic_id: uuid.UUID | None, code: ErrorCode, message: str | None) -> Any:
    if version < 6 and name is None:
        name = ""  # v1-v5 names are not nullable; only a malformed request gets here
    return _Result(name=name, topic_id=topic_id, error_code=code, error_message=message)


def _error(request: Any, code: ErrorCode) -> Any:
    """Kafka's DeleteTopicsRequest.getErrorResponse: every requested topic gets the error."""
    results = [_result(request.version, name, topic_id, code, None) for name, topic_id in _entries(request)]
    return DeleteTopicsResponse(version=request.version, throttle_time_ms=0, responses=results)


@api(ApiKey.DELETE_TOPICS, 1, 6, error_response=_error)
def handle_delete_topics(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    topics = ctx.broker.topics
    results: list[Any] = []

    def answer(name: str | None, topic_id: uuid.UUID | None, code: ErrorCode, message: str | None) -> None:
        results.append(_result(version, name, topic_id, code, message))

    names: dict[str, None] = {}
    duplicate_names: dict[str, None] = {}
    ids: dict[uuid.UUID, None] = {}
    duplicate_ids: dict[uuid.UUID, None] = {}

    def add_name(name: str) -> None:
        if name in duplicate_names or name in names:
            duplicate_names[name] = None
            names.pop(name, None)
        else:
            names[name] = None

    for name, topic_id in _entries(request):
        if name is None:
            if topic_id is None:
                answer(None, None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
            elif topic_id in duplicate_ids or topic_id in ids:
                duplicate_ids[topic_id] = None
                ids.pop(topic_id, None)
            else:
                ids[topic_id] = None
        elif topic_id is None:
            add_name(name)
        else:
            answer(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    for name in duplicate_names:
        answer(name, None, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    for topic_id in duplicate_ids:
        answer(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")

    # With an authorizer, as ControllerApis.deleteTopics: DELETE on the cluster covers every topic;
    # else a topic needs DESCRIBE (TOPIC_AUTHORIZATION_FAILED, even when it does not exist, without
    # its name when given by id) and DELETE.
    describable = deletable = None
    if ctx.broker.authorizer is not None and not authz.cluster_allowed(ctx, authz.Op.DELETE, log_denied=False):
        known = [*names, *(t.name for i in ids if (t := topics.get_by_id(i)) is not None)]
        describable = authz.filter_allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, known)
        deletable = authz.filter_allowed(ctx, authz.Op.DELETE, authz.TOPIC, known)
    to_delete: dict[uuid.UUID, str] = {}
    for topic_id in ids:
        topic = topics.get_by_id(topic_id)
        if topic is None:
            answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_ID.message)
        elif deletable is not None and topic.name not in deletable:
            visible = describable is not None and topic.name in describable
            answer(
                topic.name if visible else None,
                topic_id,
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                ErrorCode.TOPIC_AUTHORIZATION_FAILED.message,
            )
        else:
            to_delete[topic_id] = topic.name
    for name in names:
        topic = topics.get(name)
        if describable is not None and name not in describable:
            answer(name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED.message)
        elif topic is None:
            answer(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
        elif deletable is not None and name not in deletable:
            answer(name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED.message)
        elif topic.topic_id in duplicate_ids or topic.topic_id in to_delete:
            duplicate_ids[topic.topic_id] = None
            to_delete.pop(topic.topic_id, None)
            answer(name, topic.topic_id, ErrorCode.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")
        else:
            to_delete[topic.topic_id] = name

    for topic_id, name in to_delete.items():
        topics.delete(name)
        ctx.log.info("topic deleted", topic=name, topic_id=str(topic_id))
        answer(name, topic_id, ErrorCode.NONE, None)
    return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=results)
