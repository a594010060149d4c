"""One partition of a coordinator's internal topic as the runtime keeps it (Kafka's
CoordinatorContext): its state, its log, its timer, the records waiting for the commit turn,
and the user's shard built over it. A context lives as long as its shard: a reload or a move
makes a new one, so that whatever still holds the old shard is refused (NOT_COORDINATOR).

Every write of a shard goes through here: append the records as one batch to the partition's
log, replay them into the shard (unless the operation applied them itself), and hand back the
durability wait that the answer awaits (None unless `--fsync always`). Appends never await, so
an operation (a request or a timer) runs whole between two others: operations on a partition
are serialized on the event loop (GE-6).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import structlog

from broker.runtime.errors import CoordinatorError
from broker.runtime.result import CoordinatorResult, Record
from broker.runtime.shard import ShardState
from broker.runtime.timer import CoordinatorTimer
from protocol import records as rec
from protocol.compiled import speedups
from protocol.errors import ErrorCode
from storage.errors import LogError

if TYPE_CHECKING:
    import asyncio

    from broker.runtime.runtime import CoordinatorRuntime
    from broker.runtime.writer import Appended

log = structlog.get_logger("kaflet.coordinator")

S = TypeVar("S")
NO_PRODUCER_ID = rec.NO_PRODUCER_ID
_build_batch = speedups.build_batch if speedups is not None else None  # rec.build_batch's compiled twin, defaults as here
CHUNK_RECORDS = 5000  # a non-atomic result's records per batch (expiry sweeps, topic deletions)


class CoordinatorContext(Generic[S]):
    def __init__(self, runtime: CoordinatorRuntime[S], partition: int) -> None:
        self.runtime = runtime
        self.topic = runtime.topic.name
        self.partition = partition
        self.state = ShardState.LOADING
        self.log: Any = runtime.writer.get(self.topic, partition)
        self.timer = CoordinatorTimer(
            lambda: self.state is ShardState.ACTIVE,
            on_failure=self._timer_failed,
            before_fire=runtime.before_timer,
            on_result=self.apply,
        )
        # Records of operations applied already, appended by the commit turn (broker/runtime/turn.py).
        self.pending: list[tuple[list[Record], int]] = []
        self.load_ms = 0.0
        self.loaded_records = 0
        self.shard: S = runtime.build(self)

    def now_ms(self) -> int:
        return self.runtime.clock.now_ms()

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    # -- writing --------------------------------------------------------------------------

    def write(self, records: Sequence[Record], *, replay: bool = True) -> Awaitable[Any] | None:
        """Append `records` as one batch, replay them if `replay`, and return the durability wait."""
        if not records:
            return None
        self._check(records)
        appended = self._append(records)
        if replay:
            shard_replay = self.shard.replay  # type: ignore[attr-defined]
            base = appended.base_offset
            for i, (key, value) in enumerate(records):
                shard_replay(key, value, base + i, NO_PRODUCER_ID)
        return self.runtime.writer.wait_durable(self.log)

    def apply(self, result: CoordinatorResult[Any]) -> tuple[Any, Awaitable[Any] | None]:
        """Write an operation's result: (its response, the durability wait its answer awaits).
        A non-atomic result goes in batches of CHUNK_RECORDS records (the last one's wait covers all)."""
        records = result.records
        if result.atomic or len(records) <= CHUNK_RECORDS:
            return result.response, self.write(records, replay=result.replay)
        waiter = None
        for i in range(0, len(records), CHUNK_RECORDS):
            waiter = self.write(records[i : i + CHUNK_RECORDS], replay=result.replay)
        return result.response, waiter

    def write_transactional(self, records: Sequence[Record], producer_id: int, producer_epoch: int) -> Awaitable[Any] | None:
        """TX-4: records of a producer's transaction, appended as one transactional batch after the
        commits enqueued before them, and replayed as pending until the transaction's marker."""
        self._check(records)
        self.flush_pending()  # records enqueued before these keep their place in the log
        batch = rec.build_batch(
            records, timestamp_ms=self.now_ms(), producer_id=producer_id, producer_epoch=producer_epoch, attributes=rec.TRANSACTIONAL_BIT
        )
        appended = self._append_batch(batch, check_producer=False)  # the transaction coordinator verified the producer
        shard_replay = self.shard.replay  # type: ignore[attr-defined]
        for i, (key, value) in enumerate(records):
            shard_replay(key, value, appended.base_offset + i, producer_id)
        return self.runtime.writer.wait_durable(self.log)

    def write_marker(self, producer_id: int, producer_epoch: int, commit: bool) -> Awaitable[Any] | None:
        """A COMMIT or ABORT marker from the transaction coordinator: appended as a control batch and
        replayed as at load (RL-2)."""
        if self.state is not ShardState.ACTIVE:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        self.flush_pending()
        self._append_batch(rec.build_control_batch(commit, producer_id, producer_epoch, 0, timestamp_ms=self.now_ms()))
        self.shard.replay_end_transaction(producer_id, commit)  # type: ignore[attr-defined]
        return self.runtime.writer.wait_durable(self.log)

    def _check(self, records: Sequence[Record]) -> None:
        if self.state is not ShardState.ACTIVE:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        if rec.batch_size(records) > self.runtime.max_batch_bytes:
            # Kafka's runtime refuses a batch over the partition's max.message.bytes (GE-3 -> UNKNOWN_SERVER_ERROR).
            raise CoordinatorError(ErrorCode.MESSAGE_TOO_LARGE)

    def _append(self, records: Sequence[Record]) -> Appended:
        now = self.runtime.clock.now_ms()
        return self._append_batch(_build_batch(records, now) if _build_batch is not None else rec.build_batch(records, timestamp_ms=now))

    def _append_batch(self, batch: bytearray, check_producer: bool = True) -> Appended:
        try:
            # An armed append fault (broker/network/faults.py) fails it here, as a failed disk would.
            return self.log.append(batch, check_producer=check_producer)  # type: ignore[no-any-return]
        except (OSError, LogError) as exc:
            # A failed disk (KAFKA_STORAGE_ERROR) is answered NOT_COORDINATOR (GE-3).
            log.error(f"cannot append to {self.topic}", partition=self.partition, error=str(exc))
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR) from exc

    # -- batched writes (the commit turn) -----------------------------------------------------

    def enqueue(self, records: list[Record], size: int) -> None:
        """Records of an operation whose effects are already applied (`size`: their batch's size);
        appended by flush_pending() with those of other operations, before any of their answers leave."""
        if not self.pending:
            self.runtime.mark_dirty(self)
        self.pending.append((records, size))

    def flush_pending(self) -> int:
        """Append every enqueued record, in as few batches as max.message.bytes allows; returns the
        number of batches. If the append fails, the shard is reloaded from its log, which reverts
        the effects applied ahead of it (GE-6), the failure is noted for the commit turn (whose
        waiting answers it turns into errors, broker/runtime/turn.py) and raised, so that no
        response claims success."""
        pending, self.pending = self.pending, []
        if not pending:
            return 0
        if self.state is not ShardState.ACTIVE:
            # Unloaded since they were enqueued (the topic deleted, the shard moved or reloaded in
            # the same loop turn): they cannot be written here, and their answers must say so.
            exc = CoordinatorError(ErrorCode.NOT_COORDINATOR)
            self.runtime.note_failed(self.shard, exc)
            raise exc
        limit = self.runtime.max_batch_bytes
        batches = 1
        try:
            # Operations stay whole; a batch holds as many as max.message.bytes allows.
            chunk: list[Record] = []
            size = rec.HEADER_SIZE
            for records, records_size in pending:
                body = records_size - rec.HEADER_SIZE
                if chunk and size + body > limit:
                    self._append(chunk)
                    batches += 1
                    chunk, size = [], rec.HEADER_SIZE
                chunk.extend(records)
                size += body
            self._append(chunk)
        except CoordinatorError as exc:
            self.runtime.note_failed(self.shard, exc)
            self.reload()
            raise
        return batches

    # -- load and unload ------------------------------------------------------------------

    async def load(self) -> None:
        """RL-1: replay the partition from its start into the shard, then serve it."""
        try:
            self.loaded_records, self.load_ms = await self.runtime.loader.load(self.log, self.shard)
        except Exception:
            if self.state is ShardState.LOADING:
                self.state = ShardState.FAILED
            log.error(f"failed to load {self.runtime.label} shard", topic=self.topic, partition=self.partition, exc_info=True)
            raise
        if self.state is not ShardState.LOADING:
            return  # unloaded meanwhile (its topic deleted, reloaded, moved): not served
        self.state = ShardState.ACTIVE
        self.shard.on_loaded()  # type: ignore[attr-defined]

    def unload(self) -> None:
        """CT-6: the partition is no longer served here; what its shard parked gets NOT_COORDINATOR."""
        self.state = ShardState.UNLOADED
        self.timer.cancel_all()
        self.shard.on_unloaded()  # type: ignore[attr-defined]

    def reload(self) -> asyncio.Task[None]:
        """Unload (parked requests get NOT_COORDINATOR) and load a new shard from the log: what
        was not appended is gone, as after a coordinator failover (GE-6)."""
        log.error("reloading coordinator shard from its log", topic=self.topic, partition=self.partition)
        self.unload()
        return self.runtime.restart(self.partition)

    def _timer_failed(self, group_id: str, key: str) -> None:
        handler = getattr(self.shard, "on_timer_failed", None)
        if handler is not None:
            handler(group_id, key)
