"""The controller's partition changes (broker/cluster/replicas.py) on their own, case by case as
Kafka's PartitionChangeBuilder decides them (ELR on, metadata version 3.6+)."""

from __future__ import annotations

from broker.cluster.replicas import ReplicaStates
from broker.topics.catalog import Topic


def states(min_isr: int = 1, unclean: bool = False) -> tuple[ReplicaStates, set[int], list[tuple[str, int, int]]]:
    down: set[int] = set()
    epochs: list[tuple[str, int, int]] = []
    replicas = ReplicaStates(
        lambda topic, p: topic.replicas[p],  # type: ignore[index]
        lambda node: node not in down,
        lambda topic: min_isr,
        lambda topic: unclean,
        lambda topic, p: 7,
        lambda topic, p, epoch: epochs.append((topic, p, epoch)),
    )
    return replicas, down, epochs


def topic(*replicas: list[int]) -> Topic:
    import uuid

    return Topic("t", uuid.uuid4(), len(replicas), replicas=[list(r) for r in replicas])


def fence(rs: ReplicaStates, down: set[int], node: int, t: Topic) -> None:
    down.add(node)
    rs.fence(node, [t])


def unfence(rs: ReplicaStates, down: set[int], node: int, t: Topic) -> None:
    down.discard(node)
    rs.unfence(node, [t])


def test_the_leader_goes_the_next_in_sync_replica_leads_at_the_next_epoch() -> None:
    rs, down, epochs = states()
    t = topic([1, 2, 3])
    state = rs.get(t, 0)
    fence(rs, down, 1, t)
    assert (state.leader, state.leader_epoch, state.isr, state.elr, state.epochs) == (2, 1, [2, 3], [], [(0, 0), (1, 7)])
    assert epochs == [("t", 0, 1)]
    fence(rs, down, 3, t)  # a follower: the ISR shrinks, no new epoch
    assert (state.leader, state.leader_epoch, state.isr) == (2, 1, [2])
    unfence(rs, down, 1, t)
    assert (state.leader, state.leader_epoch, state.isr) == (2, 1, [2, 1])


def test_an_isr_joined_below_the_minimum_keeps_only_absent_replicas_eligible() -> None:
    rs, down, _ = states(min_isr=3)
    t = topic([1, 2, 3])
    state = rs.get(t, 0)
    fence(rs, down, 3, t)
    assert (state.isr, state.elr) == ([1, 2], [3])
    fence(rs, down, 2, t)
    assert (state.leader, state.isr, sorted(state.elr)) == (1, [1], [2, 3])
    unfence(rs, down, 2, t)  # back in sync while still below 3: eligible no more, 3 still is
    assert (state.isr, state.elr) == ([1, 2], [3])
    unfence(rs, down, 3, t)
    assert (state.isr, state.elr) == ([1, 2, 3], [])


def test_the_last_replica_leaves_an_empty_isr_and_comes_back_to_lead() -> None:
    rs, down, _ = states()
    t = topic([4])
    state = rs.get(t, 0)
    fence(rs, down, 4, t)
    assert (state.leader, state.leader_epoch, state.isr, state.elr, state.last_known_elr) == (-1, 1, [], [4], [4])
    unfence(rs, down, 4, t)
    assert (state.leader, state.leader_epoch, state.isr, state.elr, state.last_known_elr) == (4, 2, [4], [], [])


def test_unclean_election_takes_any_live_replica() -> None:
    rs, down, _ = states(unclean=True)
    t = topic([1, 2])
    state = rs.get(t, 0)
    fence(rs, down, 2, t)
    fence(rs, down, 1, t)
    assert state.leader == -1 and state.elr == [1]
    unfence(rs, down, 2, t)  # not eligible, but the topic allows an unclean election
    assert (state.leader, state.isr, state.elr) == (2, [2], [])


def test_preferred_election_and_moves() -> None:
    rs, down, _ = states()
    t = topic([1, 2], [3])
    state = rs.get(t, 0)
    fence(rs, down, 1, t)
    assert rs.elect_preferred(t, 0) is None  # the preferred replica is down
    unfence(rs, down, 1, t)
    change = rs.elect_preferred(t, 0)
    assert change is not None and (change.old_leader, change.leader, change.leader_epoch) == (2, 1, 2)
    assert (state.leader, state.isr) == (1, [2, 1])
    moved = rs.move(t, 1, 2)  # a node that is not a replica takes the leader's place
    assert (moved.old_leader, moved.leader, rs.get(t, 1).replicas, rs.get(t, 1).isr) == (3, 2, [2], [2])
