"""The transaction coordinator: `__transaction_state` and the state machine of Kafka's
TransactionCoordinator, for Transaction V1 clients (the protocol every client here speaks).

It is a user of the coordinator runtime (broker/runtime/), as the group coordinator is:
p(transactional id) = Utils.abs(id.hashCode()) % N over `__transaction_state`
(N = --transaction-state-partitions, CO-4), one TxnShard per partition, loaded in the
background after start; until loaded its ids answer COORDINATOR_LOAD_IN_PROGRESS.

The checks follow Kafka's handleInitProducerId, handleAddPartitionsToTransaction and
handleEndTransaction in their order. Where kaflet differs, for a single broker:
- A state transition is appended and applied in one step (no "pending transition"): the
  append is synchronous, so no other request can observe the half-way state that Kafka
  answers with CONCURRENT_TRANSACTIONS. Only a transaction whose markers could not all be
  written (a failed disk, a `__consumer_offsets` partition still loading) stays in
  PrepareCommit/PrepareAbort, answers CONCURRENT_TRANSACTIONS and is retried every 500 ms.
- EndTxn writes PrepareCommit/PrepareAbort, then the markers (control batches) into every
  partition of the transaction and into `__consumer_offsets`, then CompleteCommit/
  CompleteAbort, all before answering (Kafka answers after the Prepare record and sends the
  markers afterwards); a client never sees CONCURRENT_TRANSACTIONS from a marker in flight.
- Markers carry coordinator epoch 0: there is one coordinator and no elections.
- Transaction V2 (KIP-890 part 2) is not served: no client in the test suite asks for it
  (librdkafka, aiokafka and kafka-python use EndTxn below v5 and Produce below v12, and
  kaflet advertises neither Produce v12 nor the `transaction.version` feature).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.runtime.errors import CoordinatorError, map_append_error
from broker.runtime.result import CoordinatorResult
from broker.runtime.runtime import InternalTopic, RuntimeServices
from broker.runtime.service import CoordinatorService
from broker.topics.catalog import OFFSETS_TOPIC, TRANSACTION_TOPIC
from broker.txn.metadata import (
    COMPLETED,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnMetadata,
    TxnState,
    epoch_exhausted,
)
from broker.txn.shard import TxnShard, record_of
from protocol import records as rec
from protocol.errors import ErrorCode
from protocol.javahash import partition_for
from storage.errors import InvalidProducerEpoch, LogError

if TYPE_CHECKING:
    from broker.config import Config
    from broker.runtime.context import CoordinatorContext
    from broker.txn.producer_ids import ProducerIdManager

log = structlog.get_logger("kaflet.txn")

MARKER_RETRY_MS = 500
Waits = list[Awaitable[Any]]


class TransactionParticipant(Protocol):
    """A coordinator whose internal topic takes a transaction's markers through it, so that its
    shard replays them (the group coordinator: transactional offsets, RL-2)."""

    @property
    def active(self) -> bool: ...

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> Awaitable[Any] | None: ...


class AppendFaults(Protocol):
    """The fault injector's disk faults (broker/network/faults.py), checked before a marker is written."""

    @property
    def append_rules(self) -> list[Any]: ...

    def check_append(self, topic: str, partition: int) -> None: ...


@dataclasses.dataclass
class TxnStats:
    """Counters the metrics endpoint reads."""

    committed: int = 0
    aborted: int = 0
    timed_out: int = 0
    expired_ids: int = 0
    fenced: int = 0


def transaction_state_topic(config: Config) -> InternalTopic:
    """`__transaction_state` as Kafka makes it: compacted, uncompressed, transaction.state.log.segment.bytes."""
    configs = {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "segment.bytes": str(config.transaction_state_log_segment_bytes),
    }
    return InternalTopic(
        TRANSACTION_TOPIC,
        config.transaction_state_partitions,
        configs,
        "--transaction-state-partitions",
        "every transactional id starts afresh",
    )


class TransactionCoordinator(CoordinatorService[TxnShard]):
    label = "transaction coordinator"

    def __init__(
        self,
        config: Config,
        services: RuntimeServices,
        *,
        producer_ids: ProducerIdManager,
        participants: Mapping[str, TransactionParticipant],
        faults: AppendFaults,
    ) -> None:
        """`participants`: internal topics whose markers their own coordinator writes (`__consumer_offsets`);
        markers to other partitions go to their logs through the runtime's writer (`services.writer`)."""
        super().__init__(transaction_state_topic(config), services)
        self.config = config
        self.logs = services.writer
        self.clock = services.clock
        self.producer_ids = producer_ids
        self.participants = participants
        self.faults = faults
        self.stats = TxnStats()
        self._tasks: list[asyncio.Task[None]] = []

    def build_shard(self, context: CoordinatorContext[TxnShard]) -> TxnShard:
        return TxnShard(self, context)

    def describe_load(self, shards: list[TxnShard]) -> dict[str, Any]:
        return {"transactional_ids": sum(len(s.txns) for s in shards)}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms, self.abort_timed_out)),
            loop.create_task(self._every(self.config.transaction_remove_expired_transaction_cleanup_interval_ms, self.expire_ids)),
        ]

    def on_shard_loaded(self, shard: TxnShard) -> None:
        """Transactions caught between their Prepare record and their Complete record by a
        restart finish now (Kafka's coordinator resends their markers after loading)."""
        for meta in list(shard.txns.values()):
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                meta.pending_markers = set(meta.partitions)
                log.info("completing a transaction after load", transactional_id=meta.transactional_id, state=meta.state.name)
                self._send_markers(shard, meta, meta.state is TxnState.PREPARE_COMMIT)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await super().stop()

    async def _every(self, interval_ms: int, fn: Any) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 1) / 1000)
            try:
                fn()
            except Exception:
                log.error("transaction coordinator task failed", task=getattr(fn, "__name__", str(fn)), exc_info=True)

    def open_transactions(self) -> int:
        return sum(1 for s in self.active_shards() for m in s.txns.values() if m.state is TxnState.ONGOING)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    # -- InitProducerId -------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int = NO_PRODUCER_ID, expected_epoch: int = NO_PRODUCER_EPOCH
    ) -> tuple[ErrorCode, int, int, Waits]:
        """Kafka's handleInitProducerId for a transactional id (not null, not empty)."""
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
        try:
            shard = self.shard_for(transactional_id)
        except CoordinatorError as exc:
            return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
        now = self.now_ms()
        expected = expected_pid != NO_PRODUCER_ID
        meta = shard.txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self.producer_ids.next_id(), NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY)
            meta.last_update_ms = now
        if expected and not (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or expected_pid == meta.producer_id
            or (expected_pid == meta.last_producer_id and epoch_exhausted(expected_epoch))
        ):
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
        if state is TxnState.ONGOING:
            # Fence the current producer and abort its transaction; the client retries and its
            # retry bumps the epoch again (or rotates the producer id if that exhausted it).
            self.stats.fenced += 1
            log.info("fencing producer with an open transaction", transactional_id=transactional_id, producer_id=meta.producer_id)
            try:
                waits = self._end(shard, meta, commit=False, epoch=meta.producer_epoch + 1)
            except CoordinatorError as exc:
                return map_append_error(exc.code), NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, waits
        if state not in COMPLETED:
            raise RuntimeError(f"transactional id {transactional_id!r} in unexpected state {state.name}")
        new = dataclasses.replace(meta, partitions=set(), pending_markers=set())
        new.state = TxnState.EMPTY
        new.timeout_ms = timeout_ms
        new.start_ms = -1
        new.last_update_ms = now
        last_pid = meta.last_producer_id
        if epoch_exhausted(meta.producer_epoch) and (not expected or expected_epoch == meta.producer_epoch):
            last_pid = meta.producer_id
            new.producer_id = self.producer_ids.next_id()
            new.producer_epoch = 0
            last_epoch = meta.producer_epoch if expected else NO_PRODUCER_EPOCH
        elif not expected:
            new.producer_epoch = meta.producer_epoch + 1
            last_epoch = NO_PRODUCER_EPOCH
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
            new.producer_epoch = meta.producer_epoch + 1
            last_epoch = meta.producer_epoch
        elif expected_epoch == meta.last_producer_epoch:
            last_epoch = meta.last_producer_epoch  # a retry of a bump whose answer was lost (KIP-360)
        else:
            return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
        try:
            waiter = shard.write(new)
        except CoordinatorError as exc:
            return map_append_error(exc.code), NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
        stored = shard.txns[transactional_id]
        stored.last_producer_epoch = last_epoch
        stored.last_producer_id = last_pid if last_pid != stored.producer_id else NO_PRODUCER_ID
        return ErrorCode.NONE, stored.producer_id, stored.producer_epoch, [waiter] if waiter is not None else []

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> tuple[TxnShard, TxnMetadata]:
        shard = self.shard_for(transactional_id)
        return shard, self._current(shard, transactional_id, producer_id, producer_epoch)

    @staticmethod
    def _current(shard: TxnShard, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        """The id's metadata, if `producer_id` at `producer_epoch` is its current producer."""
        meta = shard.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise CoordinatorError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            raise CoordinatorError(ErrorCode.PRODUCER_FENCED)
        return meta

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[tuple[str, int]]
    ) -> tuple[ErrorCode, Waits]:
        try:
            code, waiter = self.runtime.write(
                transactional_id, self._add_partitions, transactional_id, producer_id, producer_epoch, partitions
            )
        except CoordinatorError as exc:
            return map_append_error(exc.code), []  # as Kafka's TransactionStateManager maps a failed append (GE-3)
        return code, [waiter] if waiter is not None else []

    def _add_partitions(
        self, shard: TxnShard, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[tuple[str, int]]
    ) -> CoordinatorResult[ErrorCode]:
        """The operation of AddPartitionsToTxn (and AddOffsetsToTxn) on the id's shard: the Ongoing record."""
        meta = self._current(shard, transactional_id, producer_id, producer_epoch)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return CoordinatorResult(response=ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
            return CoordinatorResult(response=ErrorCode.NONE)
        now = self.now_ms()
        new = dataclasses.replace(meta, partitions=meta.partitions | partitions, pending_markers=set())
        if meta.state is not TxnState.ONGOING:
            new.start_ms = now
        new.state = TxnState.ONGOING
        new.last_update_ms = now
        return CoordinatorResult([record_of(new)], ErrorCode.NONE)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> tuple[ErrorCode, Waits]:
        partition = partition_for(group_id, self.config.offsets_partitions)
        return self.add_partitions(transactional_id, producer_id, producer_epoch, {(OFFSETS_TOPIC, partition)})

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int) -> ErrorCode:
        """Transaction verification (KIP-890 part 1, what Kafka's partition leaders and group
        coordinator ask before a transactional write): the producer is current and the
        partition is in its ongoing transaction. PRODUCER_FENCED is reported as
        INVALID_PRODUCER_EPOCH, as Kafka's AddPartitionsToTxnManager does."""
        try:
            _shard, meta = self._checked(transactional_id, producer_id, producer_epoch)
        except CoordinatorError as exc:
            return ErrorCode.INVALID_PRODUCER_EPOCH if exc.code is ErrorCode.PRODUCER_FENCED else exc.code
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state is not TxnState.ONGOING or (topic, partition) not in meta.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # -- EndTxn ---------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> tuple[ErrorCode, Waits]:
        try:
            shard, meta = self._checked(transactional_id, producer_id, producer_epoch)
        except CoordinatorError as exc:
            return exc.code, []
        state = meta.state
        if state is TxnState.ONGOING:
            try:
                return ErrorCode.NONE, self._end(shard, meta, commit)
            except CoordinatorError as exc:
                return map_append_error(exc.code), []
        if state is TxnState.COMPLETE_COMMIT:
            return (ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE), []
        if state is TxnState.COMPLETE_ABORT:
            return (ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE), []
        if state is TxnState.PREPARE_COMMIT:
            return (ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE), []
        if state is TxnState.PREPARE_ABORT:
            return (ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE), []
        return ErrorCode.INVALID_TXN_STATE, []

    def _end(self, shard: TxnShard, meta: TxnMetadata, commit: bool, epoch: int | None = None) -> Waits:
        """Prepare record, markers, Complete record. `epoch`: the fenced epoch the abort and its
        markers carry (timeouts and InitProducerId fencing an open transaction)."""
        new = dataclasses.replace(meta, partitions=set(meta.partitions), pending_markers=set())
        new.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        new.last_update_ms = self.now_ms()
        if epoch is not None:
            new.producer_epoch = min(epoch, MAX_EPOCH)
        waits: Waits = []
        waiter = shard.write(new)
        if waiter is not None:
            waits.append(waiter)
        stored = shard.txns[meta.transactional_id]
        if epoch is not None:
            stored.last_producer_epoch = NO_PRODUCER_EPOCH
        stored.pending_markers = set(stored.partitions)
        waits += self._send_markers(shard, stored, commit)
        return waits

    def _send_markers(self, shard: TxnShard, meta: TxnMetadata, commit: bool) -> Waits:
        """Write the markers still pending; once all are written, the Complete record."""
        waits: Waits = []
        failed: set[tuple[str, int]] = set()
        for topic, partition in sorted(meta.pending_markers):
            try:
                waiter = self._write_marker(topic, partition, meta.producer_id, meta.producer_epoch, commit)
            except (CoordinatorError, OSError, LogError) as exc:
                log.warning("cannot write a transaction marker yet", topic=topic, partition=partition, error=str(exc))
                failed.add((topic, partition))
                continue
            if waiter is not None:
                waits.append(waiter)
        meta.pending_markers = failed
        tid = meta.transactional_id
        if failed:
            shard.context.timer.schedule(f"markers:{tid}", MARKER_RETRY_MS, lambda: self._retry_markers(shard, tid, commit))
            return waits
        done = dataclasses.replace(meta, partitions=set(), pending_markers=set())
        done.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        done.last_update_ms = self.now_ms()
        try:
            waiter = shard.write(done)
        except CoordinatorError:
            meta.pending_markers = set()
            shard.context.timer.schedule(f"markers:{tid}", MARKER_RETRY_MS, lambda: self._retry_markers(shard, tid, commit))
            return waits
        if waiter is not None:
            waits.append(waiter)
        if commit:
            self.stats.committed += 1
        else:
            self.stats.aborted += 1
        return waits

    def _retry_markers(self, shard: TxnShard, transactional_id: str, commit: bool) -> None:
        meta = shard.txns.get(transactional_id)
        wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if meta is not None and meta.state is wanted:
            self._send_markers(shard, meta, commit)

    def _write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> Awaitable[Any] | None:
        participant = self.participants.get(topic)
        if participant is not None:  # `__consumer_offsets`: its shard replays the marker (RL-2)
            if not participant.active:
                raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return participant.complete_transaction(partition, producer_id, producer_epoch, commit)
        plog = self.logs.get(topic, partition)
        if plog is None or plog.closed:
            return None  # the topic is gone: nothing to mark (Kafka drops such markers too)
        if self.faults.append_rules:
            self.faults.check_append(topic, partition)
        batch = rec.build_control_batch(commit, producer_id, producer_epoch, 0, timestamp_ms=self.now_ms())
        try:
            plog.append(batch)
        except InvalidProducerEpoch as exc:
            log.warning("dropping a marker older than the partition's producer epoch", topic=topic, partition=partition, error=str(exc))
            return None
        return self.logs.wait_durable(plog)

    # -- timers ---------------------------------------------------------------------------

    def abort_timed_out(self) -> int:
        """Ongoing transactions past their timeout are aborted with the producer fenced (its
        epoch bumped), as Kafka's abortTimedOutTransactions does."""
        now = self.now_ms()
        count = 0
        for shard in self.active_shards():
            for meta in list(shard.txns.values()):
                if meta.state is TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now:
                    if meta.producer_epoch >= MAX_EPOCH:
                        continue  # cannot fence further (Kafka refuses too); left for the next InitProducerId
                    log.info(
                        "aborting timed-out transaction",
                        transactional_id=meta.transactional_id,
                        producer_id=meta.producer_id,
                        timeout_ms=meta.timeout_ms,
                    )
                    try:
                        self._end(shard, meta, commit=False, epoch=meta.producer_epoch + 1)
                    except CoordinatorError:
                        continue
                    self.stats.timed_out += 1
                    count += 1
        return count

    def expire_ids(self) -> int:
        """transactional.id.expiration.ms: ids idle that long in Empty/CompleteCommit/CompleteAbort
        are tombstoned and forgotten."""
        horizon = self.now_ms() - self.config.transactional_id_expiration_ms
        count = 0
        for shard in self.active_shards():
            for tid, meta in list(shard.txns.items()):
                if meta.state in COMPLETED and meta.last_update_ms <= horizon:
                    try:
                        shard.write_tombstone(tid)
                    except CoordinatorError:
                        break
                    count += 1
        if count:
            self.stats.expired_ids += count
            log.info("expired transactional ids", count=count)
        return count
