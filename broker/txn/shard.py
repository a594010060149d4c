"""One partition of `__transaction_state` and the transactional ids that hash to it, on the
coordinator runtime (broker/runtime/).

As with the group coordinator's shards, a state change is a record: `write()` goes through the
runtime, which appends it and applies it with the same `replay()` that rebuilds the shard at
load, so what the live shard holds is what a restart rebuilds (apart from the in-memory fields
Kafka does not persist either: the previous epoch used for KIP-360 retries).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import structlog

from broker.txn.metadata import TxnMetadata
from storage import txn_log_records as trec

if TYPE_CHECKING:
    from broker.runtime.context import CoordinatorContext
    from broker.txn.coordinator import TransactionCoordinator

log = structlog.get_logger("kaflet.txn")

Record = tuple[bytes, bytes | None]


def record_of(meta: TxnMetadata) -> Record:
    """`meta`'s current image as its `__transaction_state` record."""
    return trec.key(meta.transactional_id), trec.value(meta.to_value())


class TxnShard:
    def __init__(self, service: TransactionCoordinator, context: CoordinatorContext[TxnShard]) -> None:
        self.service = service
        self.context = context  # its timer and writes (broker/runtime/context.py)
        self.txns: dict[str, TxnMetadata] = {}
        self.partition = context.partition

    # -- writing and replaying ----------------------------------------------------------

    def write(self, meta: TxnMetadata) -> Awaitable[Any] | None:
        """Persist `meta`'s current image (one record) and replay it; the durability wait."""
        return self.context.write([record_of(meta)])

    def write_tombstone(self, transactional_id: str) -> Awaitable[Any] | None:
        return self.context.write([(trec.key(transactional_id), None)])

    def replay(self, key: bytes, value: bytes | None, offset: int = -1, producer_id: int = -1) -> None:
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

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """`__transaction_state` holds no transactional batches: nothing to complete."""

    # -- load and unload ----------------------------------------------------------------

    def on_loaded(self) -> None:
        self.service.on_shard_loaded(self)

    def on_unloaded(self) -> None:
        """Nothing parks on a transaction coordinator shard (its answers never wait for an event)."""
