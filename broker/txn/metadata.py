"""A transactional id's state, as Kafka's TransactionMetadata keeps it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from storage.txn_log_records import TxnLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(IntEnum):
    """TransactionStatus as stored in TransactionLogValue."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


STATE_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATES_BY_NAME = {name: state for state, name in STATE_NAMES.items()}
COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's isEpochExhausted: the last two epochs are kept for fencing."""
    return epoch >= MAX_EPOCH - 1


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # Not persisted (Kafka keeps them in memory only): KIP-360 retries and rotations.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # Marker partitions still to write after a failed attempt (retried by a timer).
    pending_markers: set[tuple[str, int]] = field(default_factory=set)

    def to_value(self) -> TxnLogValue:
        by_topic: dict[str, list[int]] | None = None
        if self.state is not TxnState.EMPTY:
            by_topic = {}
            for topic, p in sorted(self.partitions):
                by_topic.setdefault(topic, []).append(p)
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=int(self.state),
            partitions=by_topic,
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
        )

    def apply(self, value: TxnLogValue) -> None:
        """replay(): a record's fields become the state."""
        if value.producer_id != self.producer_id:
            self.last_producer_id = self.producer_id
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.timeout_ms = value.timeout_ms
        self.state = TxnState(value.status)
        self.partitions = {(t, p) for t, ps in (value.partitions or {}).items() for p in ps}
        self.last_update_ms = value.last_update_ms
        self.start_ms = value.start_ms

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnLogValue) -> TxnMetadata:
        meta = cls(transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms, TxnState(value.status))
        meta.apply(value)
        meta.last_producer_id = NO_PRODUCER_ID
        return meta
