"""The transaction coordinator: `__transaction_state` and the state machine of Kafka's
TransactionCoordinator, for Transaction V1 clients (the protocol every client here speaks).

Routing: p(transactional id) = Utils.abs(id.hashCode()) % N over `__transaction_state`
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
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.shard import ShardState
from broker.runtime.errors import CoordinatorError
from broker.runtime.internal_topic import ensure_internal_topic, load_in_turn
from broker.topics.catalog import OFFSETS_TOPIC, TRANSACTION_TOPIC, Topic
from broker.txn.metadata import (
    COMPLETED,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnMetadata,
    TxnState,
    epoch_exhausted,
)
from broker.txn.shard import TxnShard
from protocol import records as rec
from protocol.errors import ErrorCode
from protocol.javahash import partition_for
from storage.errors import InvalidProducerEpoch, LogError

if TYPE_CHECKING:
    from broker.server import Broker

log = structlog.get_logger("kaflet.txn")

MARKER_RETRY_MS = 500
Waits = list[Awaitable[Any]]


class TxnStats:
    """Counters the metrics endpoint reads."""

    def __init__(self) -> None:
        self.committed = 0
        self.aborted = 0
        self.timed_out = 0
        self.expired_ids = 0
        self.fenced = 0


class TransactionCoordinator:
    topic_name = TRANSACTION_TOPIC

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.num_partitions = broker.config.transaction_state_partitions
        self.shards: list[TxnShard] = []
        self.active = False
        self.stats = TxnStats()
        self.loaded = asyncio.Event()
        self.load_ms = 0.0
        self._load_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self.broker.topics.on_deleted.append(self._on_topic_deleted)
        self.active = True
        self._create_shards()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms, self.abort_timed_out)),
            loop.create_task(self._every(self.config.transaction_remove_expired_transaction_cleanup_interval_ms, self.expire_ids)),
        ]

    def _create_shards(self) -> None:
        ensure_internal_topic(
            self.broker.topics,
            TRANSACTION_TOPIC,
            self.num_partitions,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "segment.bytes": str(self.config.transaction_state_log_segment_bytes),
            },
            "--transaction-state-partitions",
        )
        self.shards = [TxnShard(self, p) for p in range(self.num_partitions)]
        self.loaded.clear()
        self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    @property
    def topic_missing(self) -> bool:
        return self.broker.topics.get(TRANSACTION_TOPIC) is None

    def recreate_topic(self) -> None:
        """CO-7 for TRANSACTION keys: a deleted `__transaction_state` is created again, empty."""
        if self.active and self.topic_missing:
            log.warning("re-creating deleted __transaction_state; every transactional id starts afresh")
            self._create_shards()

    async def _load_all(self) -> None:
        self.load_ms = await load_in_turn(self.shards)
        self.loaded.set()
        log.info(
            "transaction coordinator loaded",
            shards=len(self.shards),
            failed=[s.partition for s in self.shards if s.state is ShardState.FAILED],
            transactional_ids=sum(len(s.txns) for s in self.shards),
            load_ms=round(self.load_ms, 1),
        )

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
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
            try:
                await self._load_task
            except (asyncio.CancelledError, Exception):
                pass
        self.active = False
        for shard in self.shards:
            shard.unload()

    async def _every(self, interval_ms: int, fn: Any) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 1) / 1000)
            try:
                fn()
            except Exception:
                log.error("transaction coordinator task failed", task=getattr(fn, "__name__", str(fn)), exc_info=True)

    def _on_topic_deleted(self, topic: Topic) -> None:
        if topic.name == TRANSACTION_TOPIC:
            if self._load_task is not None:
                self._load_task.cancel()
            for shard in self.shards:
                shard.unload()

    @property
    def all_loaded(self) -> bool:
        return bool(self.shards) and all(s.state is ShardState.ACTIVE for s in self.shards)

    def active_shards(self) -> list[TxnShard]:
        return [s for s in self.shards if s.state is ShardState.ACTIVE]

    def open_transactions(self) -> int:
        return sum(1 for s in self.active_shards() for m in s.txns.values() if m.state is TxnState.ONGOING)

    # -- routing --------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def shard_for(self, transactional_id: str) -> TxnShard:
        if not self.active or not self.shards:
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        shard = self.shards[self.partition_for(transactional_id)]
        if shard.state is ShardState.ACTIVE:
            return shard
        if shard.state is ShardState.LOADING:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        raise CoordinatorError(ErrorCode.NOT_COORDINATOR)

    def now_ms(self) -> int:
        return self.broker.clock.now_ms()

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
            meta = TxnMetadata(transactional_id, self.broker.producer_ids.next_id(), NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY)
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
                return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
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
            new.producer_id = self.broker.producer_ids.next_id()
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
            return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, []
        stored = shard.txns[transactional_id]
        stored.last_producer_epoch = last_epoch
        stored.last_producer_id = last_pid if last_pid != stored.producer_id else NO_PRODUCER_ID
        return ErrorCode.NONE, stored.producer_id, stored.producer_epoch, [waiter] if waiter is not None else []

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> tuple[TxnShard, TxnMetadata]:
        shard = self.shard_for(transactional_id)
        meta = shard.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise CoordinatorError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            raise CoordinatorError(ErrorCode.PRODUCER_FENCED)
        return shard, meta

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[tuple[str, int]]
    ) -> tuple[ErrorCode, Waits]:
        try:
            shard, meta = self._checked(transactional_id, producer_id, producer_epoch)
        except CoordinatorError as exc:
            return exc.code, []
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS, []
        if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
            return ErrorCode.NONE, []
        now = self.now_ms()
        new = dataclasses.replace(meta, partitions=meta.partitions | partitions, pending_markers=set())
        if meta.state is not TxnState.ONGOING:
            new.start_ms = now
        new.state = TxnState.ONGOING
        new.last_update_ms = now
        try:
            waiter = shard.write(new)
        except CoordinatorError as exc:
            return exc.code, []
        return ErrorCode.NONE, [waiter] if waiter is not None else []

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
                return exc.code, []
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
            shard.timers.schedule(f"markers:{tid}", MARKER_RETRY_MS, lambda: self._retry_markers(shard, tid, commit))
            return waits
        done = dataclasses.replace(meta, partitions=set(), pending_markers=set())
        done.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        done.last_update_ms = self.now_ms()
        try:
            waiter = shard.write(done)
        except CoordinatorError:
            meta.pending_markers = set()
            shard.timers.schedule(f"markers:{tid}", MARKER_RETRY_MS, lambda: self._retry_markers(shard, tid, commit))
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
        broker = self.broker
        if topic == OFFSETS_TOPIC:
            groups = broker.coordinator
            if groups is None or not groups.active or not 0 <= partition < len(groups.shards):
                raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return groups.shards[partition].write_txn_marker(producer_id, producer_epoch, commit)
        plog = broker.logs.get(topic, partition)
        if plog is None or plog.closed:
            return None  # the topic is gone: nothing to mark (Kafka drops such markers too)
        if broker.faults.append_rules:
            broker.faults.check_append(topic, partition)
        batch = rec.build_control_batch(commit, producer_id, producer_epoch, 0, timestamp_ms=self.now_ms())
        try:
            plog.append(batch)
        except InvalidProducerEpoch as exc:
            log.warning("dropping a marker older than the partition's producer epoch", topic=topic, partition=partition, error=str(exc))
            return None
        return broker.logs.wait_durable(plog)

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
