"""Where replicas go, and which manual assignments are allowed, as Kafka's controller decides.

- `StripedPlacer` is Kafka 4.4's default replica placement (StripedReplicaPlacer): brokers are
  grouped by rack (brokers without a rack form one more group), racks are visited round-robin
  from a random offset, each rack hands out its brokers round-robin, so the replicas of a
  partition land on as many racks as there are, and leaders (first replicas) spread evenly.
  Fenced brokers (nodes taken down) get replicas only when the unfenced ones cannot take them
  all, and never the first (the leader).
- `check_manual_assignment` is ReplicationControlManager.validateManualPartitionAssignment:
  empty lists, unknown brokers, duplicates and replication factors inconsistent with the
  topic's, with Kafka's messages.
- `Placement` is what CreateTopics, CreatePartitions and auto-creation ask: the registered
  brokers (one for a lone broker, every node of `kaflet serve --brokers N`), their racks and
  which are fenced, the default replication factor, and a placer.

Every message is Kafka's, so clients see the errors a Kafka cluster of the same size gives.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.javahash import java_string_hashcode

# Kafka's controller refuses one operation that would write more than this many metadata
# records (a topic, its config entries, each partition) with POLICY_VIOLATION. kaflet keeps the
# limit: it also stops a client from asking for millions of partitions by mistake.
MAX_RECORDS_PER_OPERATION = 10_000
TOO_LARGE_MESSAGE = "Unable to perform excessively large batch operation."
# Kafka's offsets.topic.replication.factor and transaction.state.log.replication.factor.
INTERNAL_TOPIC_REPLICATION_FACTOR = 3


class PlacementError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class TooManyRecords(Exception):
    """The whole request fails (Kafka's BoundedListTooLongException -> POLICY_VIOLATION)."""


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """A registered broker as the placer sees it (Kafka's UsableBroker)."""

    id: int
    rack: str | None = None
    fenced: bool = False


def _replication_error(replication_factor: int, reason: str) -> PlacementError:
    # ReplicationControlManager wraps the placer's InvalidReplicationFactorException thus.
    return PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {replication_factor} time(s): {reason}")


def _check_factor(replication_factor: int, total: int, unfenced: int) -> None:
    """The placer's three checks, in its order (place() checks the count of unfenced brokers
    before the replication factor against the registered ones)."""
    if replication_factor <= 0:
        raise _replication_error(
            replication_factor, f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )
    if unfenced == 0:
        raise _replication_error(replication_factor, "All brokers are currently fenced, or have all their log directories cordoned.")
    if replication_factor > total:
        raise _replication_error(
            replication_factor,
            f"The target replication factor of {replication_factor} cannot be reached because only {total} broker(s) are "
            "registered or some brokers have all their log directories cordoned.",
        )


class _BrokerList:
    """One rack's fenced or unfenced brokers, handed out round-robin, rotating each epoch."""

    __slots__ = ("brokers", "epoch", "index", "offset")

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, rng: random.Random) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


@dataclass(slots=True)
class _Rack:
    fenced: _BrokerList = field(default_factory=_BrokerList)
    unfenced: _BrokerList = field(default_factory=_BrokerList)

    def next(self, epoch: int) -> int:
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


def _hash_map_order(keys: list[str | None]) -> list[str | None]:
    """The iteration order of a java.util.HashMap<Optional<String>, _> holding `keys` (inserted in
    this order): by bucket of the spread hash at the table's final capacity, then insertion."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str | None) -> int:
        h = 0 if key is None else java_string_hashcode(key) & 0xFFFFFFFF  # Optional.hashCode: the value's, 0 when empty
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, k in sorted(enumerate(keys), key=lambda item: (bucket(item[1]), item[0]))]


class StripedPlacer:
    """Kafka's StripedReplicaPlacer.RackList: one placement run over a snapshot of the brokers."""

    def __init__(self, brokers: Iterable[UsableBroker], rng: random.Random) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.rack_names: list[str | None] = []
        self.total = 0
        self.unfenced = 0
        for broker in brokers:
            rack = self.racks.get(broker.rack)
            if rack is None:
                self.rack_names.append(broker.rack)
                rack = self.racks[broker.rack] = _Rack()
            if broker.fenced:
                rack.fenced.brokers.append(broker.id)
            else:
                self.unfenced += 1
                rack.unfenced.brokers.append(broker.id)
            self.total += 1
        for name in _hash_map_order(self.rack_names):  # the order Kafka's HashMap hands them out, for its random draws
            rack = self.racks[name]
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng)
        self.rack_names.sort(key=lambda name: (name is not None, name or ""))  # OptionalStringComparator: empty first
        self.epoch = 0
        self.offset = rng.randrange(len(self.rack_names)) if self.rack_names else 0

    def place(self, replication_factor: int) -> list[int]:
        """The replicas of one partition, leader first."""
        if replication_factor <= 0 or replication_factor > self.total or self.unfenced == 0:
            _check_factor(replication_factor, self.total, self.unfenced)
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.epoch = 0
        if self.offset == len(self.rack_names):
            self.offset = 0
        names = self.rack_names
        first = self.offset
        while True:  # the leader: the first unfenced broker from the racks in turn
            leader = self.racks[names[first]].unfenced.next(self.epoch)
            if leader >= 0:
                break
            first = (first + 1) % len(names)
        replicas = [leader]
        index = self.offset
        for _ in range(1, replication_factor):
            broker = -1
            while broker < 0:
                if index == first:
                    first = -1  # the leader's rack gave its replica already
                else:
                    broker = self.racks[names[index]].next(self.epoch)
                index = (index + 1) % len(names)
            replicas.append(broker)
        self.epoch += 1
        self.offset += 1
        return replicas

    def _shuffle(self) -> None:
        self.rng.shuffle(self.rack_names)
        for rack in self.racks.values():
            self.rng.shuffle(rack.fenced.brokers)
            self.rng.shuffle(rack.unfenced.brokers)


def place(brokers: Sequence[UsableBroker], partitions: int, replication_factor: int, rng: random.Random) -> list[list[int]]:
    """StripedReplicaPlacer.place: the replicas of `partitions` new partitions. PlacementError
    (INVALID_REPLICATION_FACTOR, Kafka's message) when the brokers cannot hold them."""
    placer = StripedPlacer(brokers, rng)
    _check_factor(replication_factor, placer.total, placer.unfenced)
    return [placer.place(replication_factor) for _ in range(partitions)]


def check_manual_assignment(broker_ids: list[int], expected_replicas: int | None, registered: Iterable[int]) -> None:
    """Kafka's validateManualPartitionAssignment against the registered brokers."""
    if not broker_ids:
        raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    known = set(registered)
    previous: int | None = None
    for broker_id in sorted(broker_ids):
        if broker_id not in known:
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


class Placement:
    """The registered brokers as CreateTopics, CreatePartitions and auto-creation see them.

    `brokers()` is read at each call (a node taken down is fenced from then on); the random
    source is Kafka's `new Random()` per controller, seedable here for tests.
    """

    def __init__(
        self,
        brokers: Callable[[], list[UsableBroker]],
        default_replication_factor: int = 1,
        rng: random.Random | None = None,
    ) -> None:
        self.brokers = brokers
        self.default_replication_factor = default_replication_factor
        self.rng = rng or random.Random()

    @classmethod
    def single(cls, node_id: int, rack: str | None = None, default_replication_factor: int = 1) -> Placement:
        """A lone broker: every replica is this node."""
        only = [UsableBroker(node_id, rack)]
        return cls(lambda: only, default_replication_factor)

    def registered(self) -> list[int]:
        return [b.id for b in self.brokers()]

    def is_active(self, broker_id: int) -> bool:
        """Registered and not fenced (ClusterControlManager.isActive)."""
        return any(b.id == broker_id and not b.fenced for b in self.brokers())

    @property
    def internal_replication_factor(self) -> int:
        """The internal topics' replication factor: Kafka's default of 3, or every broker of a
        smaller cluster (Kafka would refuse to create them; see docs/decisions.md)."""
        return min(INTERNAL_TOPIC_REPLICATION_FACTOR, len(self.brokers()))

    def place(self, partitions: int, replication_factor: int) -> list[list[int]]:
        return place(self.brokers(), partitions, replication_factor, self.rng)

    def assignment_isr(self, replicas: list[int], partition: int, manual: bool) -> list[int]:
        """The ISR a new partition starts with: its active replicas. None active is refused
        (Kafka: INVALID_REPLICA_ASSIGNMENT for a manual assignment, INVALID_REPLICATION_FACTOR
        for a placed one)."""
        active = [r for r in replicas if self.is_active(r)]
        if not active:
            if manual:
                raise PlacementError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition {partition} are fenced or in controlled shutdown.",
                )
            raise _replication_error(len(replicas), "All brokers are currently fenced or in controlled shutdown.")
        return active


class RecordBudget:
    """Counts the metadata records an operation would write, as Kafka's bounded list does."""

    def __init__(self) -> None:
        self.used = 0

    def spend(self, records: int) -> None:
        self.used += records
        if self.used > MAX_RECORDS_PER_OPERATION:
            raise TooManyRecords(TOO_LARGE_MESSAGE)
