"""The Java client 4.4 against kaflet and against Kafka 4.4, outcome by outcome.

KafkaProducer, KafkaConsumer (group.protocol=classic and consumer, dynamic and static members)
and the Admin client's group and transaction calls run the same steps on both brokers at once
(tests/differential/clients/peers.py); every step's outcome (records and their offsets,
assignments once stable, committed offsets, descriptions, error types) must be equal once
normalized, or differ exactly as docs/decisions.md says.
"""

from __future__ import annotations

import time
from typing import Any

from tests.differential.clients.peers import SIDES, Peers, commit_to_the_end, normalize, outcome, own_groups, unkeyed


def records_of(peers: Peers, *names: str) -> list[Any]:
    """The distinct records the members were handed, equal on both brokers. Which member saw a
    record first depends on when each joined (a member alone for a moment reads everything),
    so records are compared as the group's, not per member."""
    seen: dict[str, set[tuple[Any, ...]]] = {"kaflet": set(), "kafka": set()}
    for name in names:
        for side, records in peers.ok("member_call", name=name, call="records").items():
            seen[side] |= {tuple(r) for r in records}
    assert seen["kaflet"] == seen["kafka"]
    return sorted(list(r) for r in seen["kaflet"])


def wait_for_record(peers: Peers, name: str, record: list[Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(record in r for r in peers.ok("member_call", name=name, call="records").values()):
        assert time.monotonic() < deadline, f"{name} was not handed {record} on both brokers"
        time.sleep(0.05)


def test_producer_then_a_classic_group_consumes_commits_and_rebalances(peers: Peers) -> None:
    peers.ok("create_topics", topics={"jc-orders": 3})
    sent = peers.same("produce", topic="jc-orders", records=[[None, f"k{i}", f"v{i}"] for i in range(12)])
    assert len(sent) == 12  # the default partitioner put each key where Kafka puts it
    for name in ("a", "b"):
        peers.ok("member_start", name=name, group="jc-classic", topics=["jc-orders"], client_id=name)
    # Range assignment orders members by member id, "<client id>-<uuid>": a before b on both.
    assignment = peers.same("group_wait", view=unkeyed, names=["a", "b"], partitions=3, records=12)
    assert assignment == {"a": ["jc-orders:0", "jc-orders:1"], "b": ["jc-orders:2"]}
    delivered = records_of(peers, "a", "b")
    assert len(delivered) == 12
    ends: dict[str, int] = {}
    for tp, offset, *_ in delivered:
        ends[tp] = max(ends.get(tp, 0), offset + 1)
    # a may have read every partition alone before b joined: commit until all are at their end
    commit_to_the_end(peers, ("a", "b"), ends)
    offsets = peers.same("admin", call="list_offsets", group="jc-classic")
    assert sum(v["offset"] for v in offsets["value"].values()) == 12
    described = peers.same("admin", call="describe_consumer_groups", groups=["jc-classic"])
    assert described["jc-classic"]["value"]["state"] == "Stable"
    assert [m["client_id"] for m in described["jc-classic"]["value"]["members"]] == ["a", "b"]
    # b leaves (LeaveGroup): a takes every partition and goes on from the committed offsets.
    peers.ok("member_close", name="b")
    assert peers.same("group_wait", view=unkeyed, names=["a"], partitions=3) == {"a": ["jc-orders:0", "jc-orders:1", "jc-orders:2"]}
    peers.same("produce", topic="jc-orders", records=[[2, "late", "late"]])
    wait_for_record(peers, "a", ["jc-orders:2", 4, "late", "late"])
    described = peers.same("admin", call="describe_consumer_groups", groups=["jc-classic"])
    assert [m["client_id"] for m in described["jc-classic"]["value"]["members"]] == ["a"]
    peers.ok("member_close", name="a")
    peers.same("admin", call="describe_consumer_groups", groups=["jc-classic"])


def consumer_view(result: Any) -> Any:
    """A KIP-848 group's assignment: which member gets which partitions follows the random member
    ids, so compare the shares, not who holds them."""
    return sorted(result.values())


def shares_of(answer: Any) -> Any:
    """A KIP-848 group's description without who holds which partitions (see consumer_view)."""
    d = normalize(answer)
    for g in d.values():
        if "value" in g:
            for m in g["value"]["members"]:
                m.pop("assignment"), m.pop("target_assignment")
    return d


def test_consumer_protocol_group_and_the_admin_calls_it_refuses(peers: Peers) -> None:
    peers.ok("create_topics", topics={"jc-events": 4})
    peers.same("produce", topic="jc-events", records=[[i % 4, f"k{i}", f"v{i}"] for i in range(8)])
    for name in ("c1", "c2"):
        peers.ok("member_start", name=name, group="jc-848", topics=["jc-events"], client_id=name, protocol="consumer")
    shares = peers.same("group_wait", view=consumer_view, names=["c1", "c2"], partitions=4, records=8)
    assert [len(s) for s in shares] == [2, 2]
    commit_to_the_end(peers, ("c1", "c2"), {f"jc-events:{p}": 2 for p in range(4)})  # c1 may have read c2's alone first
    offsets = peers.same("admin", call="list_offsets", group="jc-848")
    assert {k: v["offset"] for k, v in offsets["value"].items()} == {f"jc-events:{p}": 2 for p in range(4)}

    described = peers.same("admin", call="describe_consumer_groups", view=shares_of, groups=["jc-848"])
    group = described["jc-848"]["value"]
    assert (group["type"], group["state"], group["assignor"], group["group_epoch"], group["target_assignment_epoch"]) == (
        "Consumer",
        "Stable",
        "uniform",
        3,
        3,
    )
    assert [m["member_epoch"] for m in group["members"]] == [3, 3]
    listed = peers.same("admin", view=lambda r: own_groups(normalize(r)), call="list_groups", types=["consumer"], states=["Stable"])
    assert {"group": "jc-848", "type": "Consumer", "protocol": "consumer", "state": "Stable", "simple": False} in listed["value"]
    # What the admin calls refuse while members are subscribed, with the same exception types.
    altered = peers.same("admin", call="alter_offsets", group="jc-848", offsets={"jc-events:0": 1})
    assert altered["all"] == {"error": {"type": "UnknownMemberIdException", "message": altered["all"]["error"]["message"]}}
    deleted = peers.same("admin", call="delete_offsets", group="jc-848", partitions=["jc-events:0"])
    assert deleted["all"]["error"]["type"] == "GroupSubscribedToTopicException"
    refused = peers.same("admin", call="delete_groups", groups=["jc-848"])
    assert refused["jc-848"]["error"]["type"] == "GroupNotEmptyException"
    # One member closes: the other gets the four partitions.
    peers.ok("member_close", name="c2")
    assert peers.same("group_wait", view=consumer_view, names=["c1"], partitions=4) == [[f"jc-events:{p}" for p in range(4)]]
    peers.ok("member_close", name="c1")
    # Empty now: offsets can be altered and deleted, then the group.
    assert peers.same("admin", call="alter_offsets", group="jc-848", offsets={"jc-events:0": 1})["all"] == {"value": "ok"}
    assert peers.same("admin", call="delete_offsets", group="jc-848", partitions=["jc-events:1"])["all"] == {"value": "ok"}
    offsets = peers.same("admin", call="list_offsets", group="jc-848")
    assert {k: v["offset"] for k, v in offsets["value"].items()} == {"jc-events:0": 1, "jc-events:2": 2, "jc-events:3": 2}
    assert peers.same("admin", call="delete_groups", groups=["jc-848"]) == {"jc-848": {"value": "ok"}}


def test_static_members_stay_through_a_close_until_removed(peers: Peers) -> None:
    peers.ok("create_topics", topics={"jc-static": 2})
    for name in ("s1", "s2"):
        peers.ok("member_start", name=name, group="jc-static", topics=["jc-static"], client_id=name, instance_id=f"i-{name}")
    assert peers.same("group_wait", view=unkeyed, names=["s1", "s2"], partitions=2) == {
        "s1": ["jc-static:0"],
        "s2": ["jc-static:1"],
    }
    # A static member's close sends no LeaveGroup: it stays, with its partition, on both.
    peers.ok("member_close", name="s1")
    described = peers.same("admin", call="describe_consumer_groups", groups=["jc-static"])
    members = described["jc-static"]["value"]["members"]
    assert [(m["instance_id"], m["assignment"]) for m in members] == [("i-s1", ["jc-static:0"]), ("i-s2", ["jc-static:1"])]
    removed = peers.same("admin", call="remove_members", group="jc-static", instances=["i-s1", "i-unknown"])
    assert removed["i-s1"] == {"value": "ok"}
    assert removed["i-unknown"]["error"]["type"] == "UnknownMemberIdException"
    assert removed["all"]["error"]["type"] == "UnknownMemberIdException"
    peers.ok("group_wait", names=["s2"], partitions=2)
    described = peers.same("admin", call="describe_consumer_groups", groups=["jc-static"])
    assert [m["assignment"] for m in described["jc-static"]["value"]["members"]] == [["jc-static:0", "jc-static:1"]]
    peers.ok("member_close", name="s2")
    assert peers.same("admin", call="remove_members", group="jc-static") == {"all": {"value": "ok"}}  # every member
    described = peers.same("admin", call="describe_consumer_groups", groups=["jc-static"])
    assert (described["jc-static"]["value"]["state"], described["jc-static"]["value"]["members"]) == ("Empty", [])


def test_static_consumer_protocol_member_rejoins_with_its_partitions(peers: Peers) -> None:
    peers.ok("create_topics", topics={"jc-static848": 2})
    for name in ("t1", "t2"):
        peers.ok(
            "member_start",
            name=name,
            group="jc-static848",
            topics=["jc-static848"],
            client_id=name,
            instance_id=f"i-{name}",
            protocol="consumer",
        )
    before = {side: unkeyed(r) for side, r in peers.ok("group_wait", names=["t1", "t2"], partitions=2).items()}
    formed = group_epochs(peers, "jc-static848")
    peers.ok("member_close", name="t1")
    # Gone from the client, still a member at epoch -2: its partition waits for it (no epoch bump).
    described = peers.same("admin", call="describe_consumer_groups", view=epochs_from_group, groups=["jc-static848"])
    members = described["jc-static848"]["value"]["members"]
    assert [(m["instance_id"], m["member_epoch"]) for m in members] == [("i-t1", -2), ("i-t2", "E")]
    assert group_epochs(peers, "jc-static848") == formed
    peers.ok(
        "member_start", name="t1", group="jc-static848", topics=["jc-static848"], client_id="t1", instance_id="i-t1", protocol="consumer"
    )
    after = {side: unkeyed(r) for side, r in peers.ok("group_wait", names=["t1", "t2"], partitions=2).items()}
    assert after == before
    peers.same("admin", call="describe_consumer_groups", view=epochs_from_group, groups=["jc-static848"])
    assert group_epochs(peers, "jc-static848") == formed  # the rejoin bumped nothing
    for name in ("t1", "t2"):
        peers.ok("member_close", name=name)


def group_epochs(peers: Peers, group: str) -> dict[str, int]:
    """Each broker's group epoch for `group`."""
    described = peers.ok("admin", call="describe_consumer_groups", groups=[group])
    return {side: answer[group]["value"]["group_epoch"] for side, answer in described.items()}


def epochs_from_group(answer: Any) -> Any:
    """shares_of, with every epoch stated from the group's epoch E ("E", "E-1"; -2 kept): how many
    epochs two members take to form the group depends on timing on Kafka (seen: 3, and 4 on a
    busy machine), so the steps after it compare epochs relative to it."""
    d = shares_of(answer)
    for g in d.values():
        if "value" in g:
            value = g["value"]
            epoch = value["group_epoch"]

            def relative(e: int, epoch: int = epoch) -> Any:
                return e if e < 0 else "E" if e == epoch else f"E{e - epoch:+d}"

            value["group_epoch"] = "E"
            value["target_assignment_epoch"] = relative(value["target_assignment_epoch"])
            for m in value["members"]:
                m["member_epoch"] = relative(m["member_epoch"])
    return d


def test_admin_calls_on_groups_that_do_not_exist(peers: Peers) -> None:
    peers.ok("create_topics", topics={"jc-admin": 2})
    assert peers.same("admin", call="describe_consumer_groups", groups=["jc-nobody"]) == {
        "jc-nobody": {"error": {"type": "GroupIdNotFoundException", "message": "Group jc-nobody not found."}}
    }
    assert peers.same("admin", call="delete_groups", groups=["jc-nobody"])["jc-nobody"]["error"]["type"] == "GroupIdNotFoundException"
    assert peers.same("admin", call="list_offsets", group="jc-nobody") == {"value": {}}
    assert (
        peers.same("admin", call="remove_members", group="jc-nobody", instances=["i-x"])["i-x"]["error"]["type"]
        == "UnknownMemberIdException"
    )
    # Offsets altered for a group nobody joined: a simple group, listed as such.
    assert peers.same("admin", call="alter_offsets", group="jc-simple", offsets={"jc-admin:0": 7, "jc-admin:1": 3})["all"] == {
        "value": "ok"
    }
    listed = peers.same("admin", view=lambda r: own_groups(normalize(r)), call="list_groups")
    assert {"group": "jc-simple", "type": "Classic", "protocol": "", "state": "Empty", "simple": True} in listed["value"]
    assert {"group": "jc-simple", "simple": True, "state": "Empty", "type": "Classic"} in peers.same(
        "admin", view=lambda r: own_groups(normalize(r)), call="list_consumer_groups"
    )["value"]
    described = peers.same("admin", call="describe_consumer_groups", groups=["jc-simple"])["jc-simple"]["value"]
    assert (described["simple"], described["state"], described["members"]) == (True, "Empty", [])
    assert peers.same("admin", call="delete_offsets", group="jc-simple", partitions=["jc-admin:0"])["all"] == {"value": "ok"}
    assert peers.same("admin", call="list_offsets", group="jc-simple")["value"] == {
        "jc-admin:1": {"offset": 3, "metadata": "", "leader_epoch": None}
    }
    assert peers.same("admin", call="delete_groups", groups=["jc-simple"]) == {"jc-simple": {"value": "ok"}}


def transaction_view(answer: Any) -> Any:
    """Producer ids are allocated per broker: compared as present, not by value."""
    return normalize(answer, drop=frozenset({"producer_id"}))


def settled(peers: Peers, tid: str, state: str) -> dict[str, Any]:
    """describeTransactions on both until the markers are written (Kafka answers EndTxn before that)."""
    deadline = time.monotonic() + 30
    while True:
        answers = peers.java("admin", call="describe_transactions", ids=[tid])
        views = {side: transaction_view(outcome(a)) for side, a in answers.items()}
        if all(v[tid].get("value", {}).get("state") == state for v in views.values()):
            return views
        assert time.monotonic() < deadline, f"{tid} not {state}: {views}"
        time.sleep(0.05)


def test_transactions_with_offsets_described_and_listed(peers: Peers) -> None:
    peers.ok("create_topics", topics={"jc-txn": 1})
    sent = peers.same(
        "txn_begin",
        name="p",
        transactional_id="jc-tx",
        topic="jc-txn",
        records=[[0, "a", "1"], [0, "b", "2"]],
        group="jc-txn-group",
        offsets={"jc-txn:0": 5},
    )
    assert sent == {"sent": [[0, 0], [0, 1]]}
    ongoing = peers.same("admin", call="describe_transactions", view=transaction_view, ids=["jc-tx", "jc-tx-none"])
    value = ongoing["jc-tx"]["value"]
    assert (value["coordinator"], value["state"], value["producer_epoch"], value["timeout_ms"], value["started"]) == (
        1,
        "Ongoing",
        0,
        60000,
        True,
    )
    assert [p.split(":")[0] for p in value["partitions"]] == ["__consumer_offsets", "jc-txn"]
    assert ongoing["jc-tx-none"]["error"]["type"] == "TransactionalIdNotFoundException"
    assert peers.same("admin", call="list_transactions", pattern="jc-.*") == {"value": [{"transactional_id": "jc-tx", "state": "Ongoing"}]}
    peers.same("txn_end", name="p", commit=True, close=False)
    done = settled(peers, "jc-tx", "CompleteCommit")
    # Documented (docs/decisions.md, "Transactions are Transaction V1"): Kafka 4.4's producer runs transaction
    # version 2 against Kafka, whose EndTxn bumps the producer epoch; kaflet serves version 1.
    assert done["kaflet"]["jc-tx"]["value"]["producer_epoch"] == 0
    assert done["kafka"]["jc-tx"]["value"]["producer_epoch"] == 1
    for side in SIDES:
        done[side]["jc-tx"]["value"].pop("producer_epoch")
    assert done["kaflet"] == done["kafka"]
    assert done["kaflet"]["jc-tx"]["value"]["partitions"] == []
    # A second transaction, aborted: read_committed sees only the first one's records.
    peers.same("txn_begin", name="p", transactional_id="jc-tx", topic="jc-txn", records=[[0, "c", "3"]])
    peers.same("txn_end", name="p", commit=False)
    settled(peers, "jc-tx", "CompleteAbort")
    read = peers.same("read", partitions=["jc-txn:0"], isolation="read_committed", expect=2)
    assert read == {"records": [["jc-txn:0", 0, "a", "1"], ["jc-txn:0", 1, "b", "2"]], "positions": {"jc-txn:0": 5}}
    assert peers.same("admin", call="list_offsets", group="jc-txn-group")["value"] == {
        "jc-txn:0": {"offset": 5, "metadata": "", "leader_epoch": None}
    }
    assert peers.same("admin", call="list_transactions", states=["CompleteAbort"], pattern="jc-.*") == {
        "value": [{"transactional_id": "jc-tx", "state": "CompleteAbort"}]
    }


def producers_view(result: Any) -> Any:
    """A partition's producers in a fixed order (the open transaction's last): brokers list them
    in the order of their own producer-state maps, which is no contract."""
    result = normalize(result)
    for part in result.values():
        if isinstance(part, dict) and isinstance(part.get("value"), list):
            part["value"].sort(key=lambda p: (p["txn_start_offset"] is not None, p["txn_start_offset"] or 0))
    return result


def test_fence_producers_and_describe_producers(peers: Peers) -> None:
    peers.ok("create_topics", topics={"jc-fence": 1})
    peers.same("produce", topic="jc-fence", records=[[0, "plain", "idempotent"]])
    peers.same("txn_begin", name="f", transactional_id="jc-fenced", topic="jc-fence", records=[[0, "t", "open"]])
    producers = peers.same("admin", view=producers_view, call="describe_producers", partitions=["jc-fence:0"])
    assert [p["txn_start_offset"] for p in producers["jc-fence:0"]["value"]] == [None, 1]
    # fenceProducers bumps the epoch of an open transaction's producer (and of an unknown id).
    fenced = peers.same("admin", call="fence_producers", ids=["jc-fenced", "jc-never-seen"])
    assert fenced == {"jc-fenced": {"value": 2}, "jc-never-seen": {"value": 0}}
    assert peers.same("txn_end", name="f", commit=True) == {"error": "ProducerFencedException"}
    described = peers.same("admin", call="describe_transactions", view=transaction_view, ids=["jc-fenced"])
    assert (described["jc-fenced"]["value"]["state"], described["jc-fenced"]["value"]["producer_epoch"]) == ("Empty", 2)
    read = peers.same("read", partitions=["jc-fence:0"], isolation="read_committed", expect=1)
    assert read["records"] == [["jc-fence:0", 0, "plain", "idempotent"]]
    # The aborted transaction's marker: Kafka keeps its coordinator epoch (0) in the producer's
    # state, kaflet reports -1 (documented in docs/decisions.md, "DescribeProducers").
    answers = {side: producers_view(a) for side, a in peers.ok("admin", call="describe_producers", partitions=["jc-fence:0"]).items()}
    epochs = {
        side: sorted((p["coordinator_epoch"] for p in answers[side]["jc-fence:0"]["value"]), key=lambda e: (e is not None, e or 0))
        for side in SIDES
    }
    assert epochs == {"kaflet": [None, None], "kafka": [None, 0]}
    for side in SIDES:
        for p in answers[side]["jc-fence:0"]["value"]:
            p.pop("coordinator_epoch")
    rest = {side: sorted(repr(sorted(p.items())) for p in answers[side]["jc-fence:0"]["value"]) for side in SIDES}
    assert rest["kaflet"] == rest["kafka"]
