"""Where partitions go: every replica is this node. Manual assignments and replication
factors are checked as Kafka's controller checks them (ReplicationControlManager and the
striped replica placer), with its messages, so clients see the errors a one-broker Kafka
cluster gives.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

# Kafka's controller refuses one operation that would write more than this many metadata
# records (a topic, its config entries, each partition) with POLICY_VIOLATION. kaflet keeps the
# limit: it also stops a client from asking for millions of partitions by mistake.
MAX_RECORDS_PER_OPERATION = 10_000
TOO_LARGE_MESSAGE = "Unable to perform excessively large batch operation."


class PlacementError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class TooManyRecords(Exception):
    """The whole request fails (Kafka's BoundedListTooLongException -> POLICY_VIOLATION)."""


def check_manual_assignment(broker_ids: list[int], expected_replicas: int | None, node_id: int) -> None:
    """Kafka's validateManualPartitionAssignment for a cluster whose only broker is `node_id`."""
    if not broker_ids:
        raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker_id in sorted(broker_ids):
        if broker_id != node_id:
            raise PlacementError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise PlacementError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {previous} more than once.",
            )
        previous = broker_id
    if expected_replicas is not None and len(broker_ids) != expected_replicas:
        raise PlacementError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but this is not "
            f"consistent with previous partitions, which have {expected_replicas} replica(s).",
        )


def check_replication_factor(replication_factor: int) -> None:
    """What the striped placer says when a one-broker cluster is asked for more replicas."""
    if replication_factor > 1:
        raise PlacementError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
            f"{replication_factor} cannot be reached because only 1 broker(s) are registered.",
        )


class RecordBudget:
    """Counts the metadata records an operation would write, as Kafka's bounded list does."""

    def __init__(self) -> None:
        self.used = 0

    def spend(self, records: int) -> None:
        self.used += records
        if self.used > MAX_RECORDS_PER_OPERATION:
            raise TooManyRecords(TOO_LARGE_MESSAGE)
