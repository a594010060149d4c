"""Coordinator errors and the mapping of failed appends to client errors (GE-3)."""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode


class CoordinatorError(Exception):
    """An operation failed with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code


class AppendsFailed(CoordinatorError):
    """Batched appends failed on some shards (`failed`: shard -> its error); the others were made."""

    def __init__(self, failed: dict[Any, CoordinatorError]) -> None:
        first = next(iter(failed.values()))
        super().__init__(first.code, f"appends failed on {len(failed)} coordinator partition(s): {first}")
        self.failed = failed


_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


def map_append_error(code: ErrorCode) -> ErrorCode:
    """GE-3: what a client sees when a coordinator write fails with `code`."""
    return _APPEND_ERRORS.get(code, code)


def map_require_stable_error(code: ErrorCode) -> ErrorCode:
    """GE-3's exception for OffsetFetch with RequireStable: older consumers do not retry 15 there."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.NOT_COORDINATOR
    return map_append_error(code)
