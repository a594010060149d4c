"""Leaders, in-sync replicas and leader epochs of every partition of a cluster, changed as Kafka
4.4's controller changes them (ReplicationControlManager and PartitionChangeBuilder).

A partition's replicas come from the topic catalog (placed at creation). Its state here:
- `isr`: the in-sync replicas. A replica leaves when its node is fenced (taken down) and comes
  back as soon as the partition has a leader and its node is up again: kaflet's nodes share one
  log, so a follower is always caught up (Kafka's leader adds it once it has fetched the log end).
- `leader`: elected as Kafka's controller elects one (Election.ONLINE): the current leader if
  still valid, else the first replica in the ISR whose node is up; with an empty ISR, a member
  of the ELR; with `unclean.leader.election.enable`, any replica whose node is up. None: -1,
  an offline partition (Metadata answers LEADER_NOT_AVAILABLE).
- `elr`, `last_known_elr` (KIP-966, on by default in Kafka 4.1+): when the ISR falls below
  min.insync.replicas, the replicas that left it stay eligible; the last leader of a partition
  gone offline is remembered.
- `leader_epoch`: bumped at every leader change (-1 included), never at an ISR change alone
  (metadata version 3.6+); `epochs` is its history, (epoch, start offset), for
  OffsetForLeaderEpoch.

Nothing here is persisted: a cluster starts with every node up, every replica in sync, the
first replica (the preferred one) leading, at epoch 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.topics.catalog import Topic

NO_LEADER = -1


@dataclass(slots=True)
class PartitionState:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])

    @property
    def online(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True)
class LeaderChange:
    topic: str
    partition: int
    old_leader: int
    leader: int
    leader_epoch: int


class ReplicaStates:
    """Every partition's state, made on first use from the catalog's replicas.

    `alive(node)` says whether a node is up (not fenced); `min_isr(topic)` and `unclean(topic)`
    read the topic's min.insync.replicas and unclean.leader.election.enable; `log_end(topic,
    partition)` is where a new leader epoch starts; `on_epoch(topic, partition, epoch)` tells the
    partition log which epoch its next batches carry.
    """

    def __init__(
        self,
        replicas_of: Callable[[Topic, int], list[int]],
        alive: Callable[[int], bool],
        min_isr: Callable[[Topic], int],
        unclean: Callable[[Topic], bool],
        log_end: Callable[[str, int], int],
        on_epoch: Callable[[str, int, int], None],
    ) -> None:
        self.replicas_of = replicas_of
        self.alive = alive
        self.min_isr = min_isr
        self.unclean = unclean
        self.log_end = log_end
        self.on_epoch = on_epoch
        self.states: dict[tuple[str, int], PartitionState] = {}

    def get(self, topic: Topic, partition: int) -> PartitionState:
        key = (topic.name, partition)
        state = self.states.get(key)
        if state is None:
            replicas = list(self.replicas_of(topic, partition))
            isr = [r for r in replicas if self.alive(r)]
            if isr:
                state = PartitionState(replicas, isr, isr[0])
            else:  # every replica down before anyone looked: as if they left the ISR last
                state = PartitionState(replicas, [], NO_LEADER, elr=list(replicas))
            self.states[key] = state
        return state

    def forget(self, topic: str) -> None:
        """A deleted topic: its states go (a new topic of the same name starts afresh)."""
        for key in [k for k in self.states if k[0] == topic]:
            del self.states[key]

    def all(self, topics: Iterable[Topic]) -> Iterator[tuple[Topic, int, PartitionState]]:
        for topic in list(topics):
            for p in range(topic.partitions):
                yield topic, p, self.get(topic, p)

    # -- what the controller does -------------------------------------------------------------

    def fence(self, node: int, topics: Iterable[Topic]) -> list[LeaderChange]:
        """`node` went down: it leaves every ISR, and the partitions it led elect another leader
        (handleBrokerFenced). Call once `alive(node)` is False."""
        changes = []
        for topic, p, state in self.all(topics):
            if node in state.isr:
                change = self._change(topic, p, state, [r for r in state.isr if r != node])
                if change is not None:
                    changes.append(change)
        return changes

    def unfence(self, node: int, topics: Iterable[Topic]) -> list[LeaderChange]:
        """`node` came back: leaderless partitions elect (it may be the one), then it rejoins the
        ISR of every partition it is a replica of that has a leader (handleBrokerUnfenced, then
        the leader's AlterPartition once the follower caught up, at once here)."""
        changes = []
        for topic, p, state in self.all(topics):
            if node not in state.replicas:
                continue
            if not state.online:
                change = self._change(topic, p, state, list(state.isr))
                if change is not None:
                    changes.append(change)
            if state.online:
                self.catch_up(topic, state)
        return changes

    def catch_up(self, topic: Topic, state: PartitionState) -> None:
        """Every replica whose node is up joins the ISR of a partition that has a leader."""
        joining = [r for r in state.replicas if r not in state.isr and self.alive(r)]
        if joining:
            self._set_isr(topic, state, state.isr + joining)

    def elect_preferred(self, topic: Topic, partition: int) -> LeaderChange | None:
        """Election.PREFERRED (the periodic leader balancing): the first replica if it may lead."""
        state = self.get(topic, partition)
        preferred = state.replicas[0]
        if state.leader == preferred or not (preferred in state.isr and self.alive(preferred)):
            return None
        return self._set_leader(topic, partition, state, preferred)

    def move(self, topic: Topic, partition: int, node: int) -> LeaderChange:
        """kaflet's move_leader: `node` (up) leads from now on. A replica is elected as a
        preferred election would elect it; another node takes the place of the leader in the
        replicas first (a reassignment that completes at once: every node shares the log)."""
        state = self.get(topic, partition)
        if node not in state.replicas:
            old = state.leader if state.online else state.replicas[0]
            state.replicas = [node if r == old else r for r in state.replicas]
            state.isr = [r for r in state.isr if r != old]
            state.elr = [r for r in state.elr if r != old]
        if node not in state.isr:
            state.isr.append(node)
        state.elr = [r for r in state.elr if r != node]
        state.last_known_elr = []
        change = self._set_leader(topic, partition, state, node)
        self.catch_up(topic, state)
        return change

    def reassign(self, topic: Topic, partition: int, old: int, new: int) -> LeaderChange | None:
        """Replace replica `old` by `new` (kaflet's failover of a partition left without an
        in-sync replica: a reassignment that completes at once, the data being shared)."""
        state = self.get(topic, partition)
        state.replicas = [new if r == old else r for r in state.replicas]
        state.elr = [r for r in state.elr if r != old]
        state.last_known_elr = []
        state.isr = [r for r in state.isr if r != old]
        if new not in state.isr:
            state.isr.append(new)
        change = self._change(topic, partition, state, list(state.isr))
        self.catch_up(topic, state)
        return change

    # -- PartitionChangeBuilder --------------------------------------------------------------

    def _change(self, topic: Topic, partition: int, state: PartitionState, target_isr: list[int]) -> LeaderChange | None:
        """PartitionChangeBuilder.build() with Election.ONLINE (UNCLEAN when the topic allows it),
        ELR enabled: returns the leader change, if any."""
        min_isr = min(self.min_isr(topic), len(state.replicas))
        target_elr = list(state.elr)
        # maybePopulateTargetElr
        if len(target_isr) >= min_isr:
            target_elr = []
        else:
            candidates = dict.fromkeys([*target_elr, *state.isr])
            target_elr = [r for r in candidates if r not in target_isr]

        def valid(replica: int) -> bool:
            return (replica in target_isr or (not target_isr and replica in target_elr)) and self.alive(replica)

        # electAnyLeader
        unclean = False
        leader = NO_LEADER
        if state.leader != NO_LEADER and valid(state.leader):
            leader = state.leader
        else:
            leader = next((r for r in state.replicas if valid(r)), NO_LEADER)
            if leader == NO_LEADER and not target_elr and not target_isr and len(state.last_known_elr) == 1:
                if self.alive(state.last_known_elr[0]):
                    leader, unclean = state.last_known_elr[0], True
            if leader == NO_LEADER and self.unclean(topic):
                leader = next((r for r in state.replicas if self.alive(r)), NO_LEADER)
                unclean = leader != NO_LEADER
        old_leader = state.leader
        if leader != old_leader:
            if leader in target_elr:
                target_isr = [leader]
                target_elr = [r for r in target_elr if r != leader]
            elif unclean:
                target_isr = [leader]
        if unclean:
            target_elr = []
        state.elr = target_elr
        state.isr = target_isr
        # maybeUpdateLastKnownLeader
        if leader == NO_LEADER and old_leader != NO_LEADER and not state.last_known_elr:
            state.last_known_elr = [old_leader]
        elif leader != NO_LEADER and state.last_known_elr:
            state.last_known_elr = []
        if leader == old_leader:
            return None
        return self._set_leader(topic, partition, state, leader)

    def _set_isr(self, topic: Topic, state: PartitionState, isr: list[int]) -> None:
        """An ISR change with the leader kept (the leader's AlterPartition): the ELR as
        maybePopulateTargetElr leaves it, empty once the ISR meets min.insync.replicas."""
        old = state.isr
        state.isr = isr
        if len(isr) >= min(self.min_isr(topic), len(state.replicas)):
            state.elr = []
        else:
            state.elr = [r for r in dict.fromkeys([*state.elr, *old]) if r not in isr]

    def _set_leader(self, topic: Topic, partition: int, state: PartitionState, leader: int) -> LeaderChange:
        old = state.leader
        state.leader = leader
        state.leader_epoch += 1
        state.epochs.append((state.leader_epoch, self.log_end(topic.name, partition)))
        self.on_epoch(topic.name, partition, state.leader_epoch)
        return LeaderChange(topic.name, partition, old, leader, state.leader_epoch)
