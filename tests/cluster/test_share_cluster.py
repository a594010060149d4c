"""Share groups (KIP-932) on several brokers in one process (`--brokers N`): the group coordinator,
the share partitions on each partition's leader, the share coordinator on the leader of a
`__share_group_state` partition; what each answers when asked on the wrong broker; the share
coordinator and partition leaders moving while members read; the chaos rules on the share APIs;
and confluent-kafka's ShareConsumer reading through all of it."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.protocol.metadata import FindCoordinatorRequest

from broker.cluster.cluster import Cluster
from broker.cluster.pytest_plugin import KafletCluster
from broker.config import Config
from broker.share.coordinator.service import coordinator_key
from protocol.errors import ErrorCode
from tests.support import share as s
from tests.support.raw_client import RawClient
from tests.support.share_scenarios import _read
from tests.support.waiting import wait_until


@pytest.fixture
async def cluster(make_config: Callable[..., Config]) -> AsyncIterator[Cluster]:
    config = make_config(
        offsets_partitions=6, transaction_state_partitions=3, share_coordinator_state_topic_num_partitions=6, **s.SHARE_BOUNDS
    )
    async with Cluster(config, brokers=3) as c:
        yield c


async def _on(cluster: Cluster, node_id: int) -> RawClient:
    return await RawClient.connect(cluster.node(node_id).bootstrap)


async def _setup(cluster: Cluster, records: int = 6) -> tuple[uuid.UUID, int, s.ShareMember, list[RawClient]]:
    """Topic t (one partition) with records, group g reading from the earliest offset; a member
    heartbeating with the group's coordinator; (topic id, t-0's leader, the member, clients)."""
    coordinator = cluster.coordinator_of("g")[1]
    gc = await _on(cluster, coordinator)
    topic_id = await s.create_topic(gc, "t")
    leader = cluster.leader("t", 0)
    await s.set_group_configs(gc, "g", {"share.auto.offset.reset": "earliest"})
    lc = await _on(cluster, leader)
    await s.produce(lc, "t", [b"v%d" % i for i in range(records)])
    member = s.ShareMember(gc, "g")
    await member.join(["t"])
    return topic_id, leader, member, [gc, lc]


async def test_share_requests_on_the_wrong_broker(cluster: Cluster) -> None:
    topic_id, leader, member, clients = await _setup(cluster)
    other = next(n for n in cluster.node_ids if n != cluster.coordinator_of("g")[1])
    elsewhere = await _on(cluster, other)
    resp = await elsewhere.request(s.heartbeat_request("g", member.member_id, member.epoch))
    assert resp.error_code == ErrorCode.NOT_COORDINATOR
    described = await s.describe(elsewhere, "g")
    assert described.groups[0].error_code == ErrorCode.NOT_COORDINATOR
    # ShareFetch on a broker that does not lead the partition: NOT_LEADER_OR_FOLLOWER and where it is
    follower = await _on(cluster, next(n for n in cluster.node_ids if n != leader))
    resp = await follower.request(s.fetch_request("g", member.member_id, 0, {(topic_id, 0): []}))
    (part,) = s.partitions_of(resp).values()
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and part.current_leader.leader_id == leader
    assert [e.node_id for e in resp.node_endpoints] == [leader]
    # ...and on the leader the records
    member.client = clients[1]
    assert s.acquired(await member.fetch()) == {(topic_id, 0): [(0, 5, 1)]}
    for c in [elsewhere, follower, *clients]:
        await c.close()


async def test_share_coordinator_is_the_state_partitions_leader_and_moves(cluster: Cluster) -> None:
    topic_id, _leader, member, clients = await _setup(cluster)
    key = coordinator_key("g", topic_id, 0)
    state_partition, share_node = cluster.share_coordinator_of("g", topic_id, 0)
    client = clients[0]
    found = await client.request(FindCoordinatorRequest[6](key_type=2, coordinator_keys=[key]))
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (0, share_node)
    wrong = await _on(cluster, next(n for n in cluster.node_ids if n != share_node))
    read = await wrong.request(_read("g", topic_id, 0, 0))
    assert read.results[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    right = await _on(cluster, share_node)
    before = (await right.request(_read("g", topic_id, 0, 0))).results[0].partitions[0]
    assert before.error_code == 0
    # members fetch and acknowledge while the share coordinator moves (the state loads on the new node)
    member.client = clients[1]
    assert s.acquired(await member.fetch()) == {(topic_id, 0): [(0, 5, 1)]}
    moved = await cluster.chaos.apply("move_share_coordinator", {"key": key})
    assert moved["old_leader"] == share_node and moved["leader"] != share_node and moved["partition"] == state_partition
    resp = await member.ack({(topic_id, 0): [(0, 5, [s.ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == 0
    found = await client.request(FindCoordinatorRequest[6](key_type=2, coordinator_keys=[key]))
    assert found.coordinators[0].node_id == moved["leader"]
    now = await _on(cluster, moved["leader"])
    after = (await now.request(_read("g", topic_id, 0, 0))).results[0].partitions[0]
    assert after.error_code == 0 and [(b.first_offset, b.last_offset, b.delivery_state) for b in after.state_batches] == [(0, 5, 2)]
    for c in [wrong, right, now, *clients]:
        await c.close()


async def test_a_leader_move_hands_the_share_partition_to_the_new_leader(cluster: Cluster) -> None:
    topic_id, _leader, member, clients = await _setup(cluster)
    tp = (topic_id, 0)
    member.client = clients[1]
    assert s.acquired(await member.fetch(max_records=3, batch_size=1)) == {tp: [(0, 5, 1)]}
    assert (await member.ack({tp: [(0, 1, [s.ACCEPT])]})).responses[0].partitions[0].error_code == 0
    moved = cluster.move_leader("t", 0)
    new_leader = moved["leader"]
    # the old leader's share session is of no use for the partition any more
    resp = await member.fetch({})
    (part,) = s.partitions_of(resp).values()
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and part.current_leader.leader_id == new_leader
    # on the new leader (a new session), what was accepted stays done, what was held comes again
    there = s.ShareMember(await _on(cluster, new_leader), "g", member.member_id, member.epoch, assignment=member.assignment)
    got = await there.fetch()
    assert s.acquired(got) == {tp: [(2, 5, 1)]}
    for c in [there.client, *clients]:
        await c.close()


async def test_fault_rules_apply_to_the_share_apis(cluster: Cluster) -> None:
    topic_id, leader, member, clients = await _setup(cluster)
    await cluster.chaos.apply("rule", {"node": leader, "api": "ShareFetch", "error": "COORDINATOR_NOT_AVAILABLE", "count": 1})
    member.client = clients[1]
    first = await member.fetch()
    assert first.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE  # the injected answer
    member.session_epoch = 0
    assert s.acquired(await member.fetch()) == {(topic_id, 0): [(0, 5, 1)]}  # and the next one goes through
    coordinator = cluster.coordinator_of("g")[1]
    await cluster.chaos.apply("push_errors", {"node": coordinator, "api": "ShareGroupHeartbeat", "errors": ["UNKNOWN_MEMBER_ID"]})
    assert (await clients[0].request(s.heartbeat_request("g", member.member_id, member.epoch))).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    for c in clients:
        await c.close()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 3)
        if i % 10 == 9:
            p.flush(10)
    assert p.flush(30) == 0


@pytest.mark.kaflet(default_partitions=3, group_share_min_record_lock_duration_ms=1000, share_coordinator_state_topic_num_partitions=6)
def test_share_consumers_read_on_while_leaders_and_the_share_coordinator_move(kaflet_cluster: KafletCluster) -> None:
    bootstrap, topic, group = kaflet_cluster.bootstrap, "jobs", "workers"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    entries = [
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.record.lock.duration.ms", "3000", incremental_operation=AlterConfigOpType.SET),
    ]
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]).values():
        f.result()
    values = [b"%d" % i for i in range(600)]
    _produce(bootstrap, topic, values)
    seen: dict[bytes, int] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def work(name: str) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "log_level": 3})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                for m in c.poll(0.2):
                    if m.error() is None:
                        with lock:
                            seen[m.value()] = seen.get(m.value(), 0) + 1
                        time.sleep(0.002)
            c.commit_sync(10)
        finally:
            c.close()

    workers = [threading.Thread(target=work, args=(f"w{i}",), daemon=True) for i in range(2)]
    for w in workers:
        w.start()
    try:
        wait_until(lambda: len(seen) >= 100, timeout=60, message="the workers read")
        for p in range(3):
            kaflet_cluster.chaos.move_leader(topic, p)
        for p in range(6):
            kaflet_cluster.chaos.move_share_coordinator(partition=p)
        wait_until(lambda: len(seen) == len(values), timeout=90, message=lambda: f"{len(seen)} of {len(values)} delivered")
    finally:
        stop.set()
        for w in workers:
            w.join(30)
    assert set(seen) == set(values)  # nothing lost; a record held across a move may come twice


def test_kaflet_chaos_move_share_coordinator_from_the_command_line() -> None:
    """`kaflet chaos move-share-coordinator` against a running `kaflet serve --brokers 3 --control`:
    by state partition or by share-partition key, to a node or to the next one; a partition that
    does not exist is refused with the reason."""
    from broker import Broker
    from tests.cluster.test_control import kaflet_chaos

    with Broker.in_subprocess("--brokers", "3", "--control", "--share-coordinator-state-topic-num-partitions", "3") as b:
        assert b.metrics is not None
        done = kaflet_chaos(b.metrics, "move-share-coordinator", "--partition", "1", "--to", "3")
        assert done.returncode == 0, done.stderr
        moved = json.loads(done.stdout)
        assert (moved["partition"], moved["leader"]) == (1, 3)
        key = coordinator_key("g", uuid.uuid4(), 0)
        again = kaflet_chaos(b.metrics, "move-share-coordinator", "--key", key)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["leader"] != json.loads(again.stdout)["old_leader"]
        refused = kaflet_chaos(b.metrics, "move-share-coordinator", "--partition", "7")
        assert refused.returncode == 1 and "no partition __share_group_state-7" in refused.stderr
        assert [r["op"] for r in b.records if r.get("event") == "chaos"] == ["move_share_coordinator"] * 2
