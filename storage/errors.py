"""Errors a partition log raises, each carrying the Kafka error code a response should use."""

from __future__ import annotations

from protocol.errors import ErrorCode


class LogError(Exception):
    code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRecord(LogError):
    code = ErrorCode.INVALID_RECORD


class CorruptRecord(LogError):
    code = ErrorCode.CORRUPT_MESSAGE


class UndecodableRecords(LogError):
    """A batch whose records cannot be decompressed (or name no known codec): Kafka's
    validation fails with an unexpected exception, answered UNKNOWN_SERVER_ERROR."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class RecordTooLarge(LogError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class OutOfOrderSequence(LogError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(LogError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class OffsetOutOfRange(LogError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class StorageError(LogError):
    code = ErrorCode.KAFKA_STORAGE_ERROR


class RecordErrors(InvalidRecord):
    """Some records of a batch are invalid (Kafka's RecordValidationException): the response
    lists them per record and carries a message."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestamps(RecordErrors):
    code = ErrorCode.INVALID_TIMESTAMP
