"""One partition of `__transaction_state` and the transactional ids that hash to it.

As with the group coordinator's shards, a state change is a record: `write()` appends it and
applies it with the same `replay()` that rebuilds the shard at load, so what the live shard
holds is what a restart rebuilds (apart from the in-memory fields Kafka does not persist
either: the previous epoch used for KIP-360 retries).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.shard import ShardState
from broker.runtime.errors import CoordinatorError
from broker.runtime.loader import batch_records
from broker.runtime.timer import Timers
from broker.txn.metadata import TxnMetadata
from protocol import records as rec
from protocol.errors import ErrorCode
from storage import txn_log_records as trec
from storage.errors import LogError

if TYPE_CHECKING:
    from broker.txn.coordinator import TransactionCoordinator

log = structlog.get_logger("kaflet.txn")


class TxnShard:
    def __init__(self, service: TransactionCoordinator, partition: int) -> None:
        self.service = service
        self.partition = partition
        self.state = ShardState.LOADING
        self.log_ = service.broker.logs.get(service.topic_name, partition)
        self.txns: dict[str, TxnMetadata] = {}
        self.timers = Timers(lambda: self.state is ShardState.ACTIVE)
        self.loaded_records = 0
        self.load_ms = 0.0

    def now_ms(self) -> int:
        return self.service.broker.clock.now_ms()

    # -- writing and replaying ----------------------------------------------------------

    def write(self, meta: TxnMetadata) -> Awaitable[Any] | None:
        """Persist `meta`'s current image (one record) and replay it; the durability wait."""
        return self._write([(trec.key(meta.transactional_id), trec.value(meta.to_value()))])

    def write_tombstone(self, transactional_id: str) -> Awaitable[Any] | None:
        return self._write([(trec.key(transactional_id), None)])

    def _write(self, records: list[tuple[bytes, bytes | None]]) -> Awaitable[Any] | None:
        if self.state is not ShardState.ACTIVE:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        batch = rec.build_batch(records, timestamp_ms=self.now_ms())
        broker = self.service.broker
        try:
            if broker.faults.append_rules:
                broker.faults.check_append(self.service.topic_name, self.partition)
            self.log_.append(batch)
        except (OSError, LogError) as exc:
            log.error("cannot append to __transaction_state", partition=self.partition, error=str(exc))
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR) from exc
        for key, value in records:
            self.replay(key, value)
        return broker.logs.wait_durable(self.log_)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record, at load and after each write."""
        if len(key) >= 2 and key[0] == 0 and key[1] > trec.KEY_VERSION:
            log.warning("skipping a record of unknown type", partition=self.partition, record_type=key[1])
            return
        transactional_id = trec.parse_key(key)
        if value is None:
            self.txns.pop(transactional_id, None)
            return
        parsed = trec.parse_value(value)
        meta = self.txns.get(transactional_id)
        if meta is None:
            self.txns[transactional_id] = TxnMetadata.from_value(transactional_id, parsed)
        else:
            meta.apply(parsed)

    # -- load and unload ----------------------------------------------------------------

    async def load(self) -> None:
        started = time.monotonic()
        count = 0
        since_yield = 0
        try:
            for buf, pos, header in self.log_.iter_batches():
                if header.is_control:
                    continue
                for _offset, key, value in batch_records(buf, pos, header):
                    if key is None:
                        raise trec.TxnRecordError("transaction log record without a key")
                    self.replay(key, value)
                    count += 1
                since_yield += header.size
                if since_yield >= 1024 * 1024:
                    since_yield = 0
                    await asyncio.sleep(0)
        except Exception:
            self.state = ShardState.FAILED
            log.error("failed to load transaction coordinator shard", partition=self.partition, exc_info=True)
            raise
        self.loaded_records = count
        self.load_ms = (time.monotonic() - started) * 1000
        self.state = ShardState.ACTIVE
        self.service.on_shard_loaded(self)

    def unload(self) -> None:
        self.state = ShardState.UNLOADED
        self.timers.cancel_all()
