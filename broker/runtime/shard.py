"""What the runtime asks of a coordinator's shard, and the states of a shard's partition.

A shard is a coordinator's state over one partition of its internal topic (Kafka's
CoordinatorShard). It changes only by `replay(record)`, at load and after every write alike,
so what a live shard holds is what a restart rebuilds. The runtime owns everything else about
the partition: its state, its log, its timer and its writes (broker/runtime/context.py).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Protocol


class ShardState(Enum):
    LOADING = "loading"  # replaying its log: its keys answer COORDINATOR_LOAD_IN_PROGRESS
    ACTIVE = "active"
    FAILED = "failed"  # its load failed: its keys answer NOT_COORDINATOR
    UNLOADED = "unloaded"  # moved away, its topic deleted, or stopped: NOT_COORDINATOR


class CoordinatorShard(Protocol):
    """A coordinator's state over one partition; built by the user's builder from its context."""

    def replay(self, key: bytes, value: bytes | None, offset: int, producer_id: int) -> None:
        """Apply one record (`producer_id` is the transaction's, or -1), at load and after writes."""

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """Apply a COMMIT or ABORT marker of `producer_id` (a no-op for a shard without transactions)."""

    def on_loaded(self) -> None:
        """The log is replayed and the shard is ACTIVE: arm timers, finish what a restart cut short."""

    def on_unloaded(self) -> None:
        """The shard is no longer served here: answer what is parked (NOT_COORDINATOR)."""


class BatchReplay(Protocol):
    """An optional fast path of a shard: replay a whole record batch, returning its record count."""

    def replay_batch(self, buf: Any, pos: int, header: Any, producer_id: int) -> int: ...
