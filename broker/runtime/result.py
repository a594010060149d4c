"""What a coordinator operation produces: the records to write and the response to give once
they are written (Kafka's CoordinatorResult)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Record = tuple[bytes, bytes | None]


class CoordinatorResult(Generic[T]):
    """`records` are appended to the shard's partition before `response` leaves.

    `replay`: the runtime applies the records with the shard's `replay()` once appended (False
    where the operation changed its state itself, as Kafka's classic-group operations do).
    `atomic`: the records go in one batch, or fail together; a non-atomic result (a timer's
    expiry sweep) may be split into several batches."""

    __slots__ = ("atomic", "records", "replay", "response")

    def __init__(self, records: Sequence[Record] = (), response: T | None = None, *, replay: bool = True, atomic: bool = True) -> None:
        self.records = records
        self.response = response
        self.replay = replay
        self.atomic = atomic

    def __repr__(self) -> str:
        return f"CoordinatorResult({len(self.records)} records, response={self.response!r}, replay={self.replay}, atomic={self.atomic})"

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, CoordinatorResult):
            return NotImplemented
        return (self.records, self.response, self.replay, self.atomic) == (other.records, other.response, other.replay, other.atomic)

    __hash__ = None  # type: ignore[assignment]
