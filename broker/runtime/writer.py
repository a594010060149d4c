"""How the runtime reaches the log: a narrow view of the storage layer (Kafka's PartitionWriter).

`storage.manager.LogManager` is one (its partition logs are `CoordinatorLog`s); the runtime
never sees topics, segments or the fsync thread, only these calls:
- `get(topic, partition)`: the partition's log, created with its topic;
- `log.append(batch)`: write one record batch (no fsync), raising OSError or LogError when the
  disk fails (an injected fault included: storage calls the fault injector's check itself);
- `wait_durable(log)`: None, or an awaitable done once every append made so far is fsynced
  (`--fsync always`: the group commit of storage/manager.py). An answer waits for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from typing import Any, Protocol


class Appended(Protocol):
    base_offset: int


class CoordinatorLog(Protocol):
    """One partition of an internal topic, as the runtime writes and reads it."""

    @property
    def log_end_offset(self) -> int: ...

    def append(self, batch: bytearray, *, check_producer: bool = True) -> Appended: ...

    def iter_batches(self, start_offset: int | None = None, *, verify: bool = False) -> Iterator[tuple[Any, int, Any]]: ...


class PartitionWriter(Protocol):
    def get(self, topic: str, partition: int) -> Any: ...

    def wait_durable(self, plog: Any) -> Awaitable[None] | None: ...
