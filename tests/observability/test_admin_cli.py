"""`kaflet topics ...` and `kaflet groups ...` against a live broker process, JSON output asserted.

Each command runs as its own process (`python -m broker ...`), as a user or a script runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from broker.embed import BrokerProcess
from tests.support.waiting import wait_until


def assigned(consumer: Consumer) -> bool:
    """Poll once (that serves the rebalance) and say whether the consumer has partitions."""
    consumer.poll(0.1)
    return bool(consumer.assignment())


OK, FAILED, USAGE, UNREACHABLE, GROUP_ACTIVE = 0, 1, 2, 3, 4


def kaflet(bootstrap: str, *args: str, output: str = "json", timeout: float = 10) -> tuple[int, Any, str]:
    """(exit code, parsed JSON or the text printed, the errors) of one CLI command.

    In JSON mode the errors are in the document on stdout and nothing goes to stderr."""
    cmd = [sys.executable, "-m", "broker", *args, "--bootstrap-server", bootstrap, "--output", output, "--timeout", str(timeout)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    out: Any = done.stdout
    if output == "json":
        assert done.stderr == "", done.stderr
        out = json.loads(done.stdout)
        if "error" in out and set(out) == {"error"}:  # the command failed as a whole
            assert out["error"]["exit_code"] == done.returncode
            return done.returncode, "", out["error"]["message"]
        return done.returncode, out, "\n".join(out["errors"])
    return done.returncode, out, done.stderr


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )


def first_offset_read(bootstrap: str, group: str, topic: str) -> int:
    """The offset of the first record a fresh member of `group` reads: where its committed offset points."""
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                return int(msg.offset())
        raise AssertionError("no record read")
    finally:
        c.close()


def test_topics_create_list_describe_delete(broker_proc: Callable[..., BrokerProcess]) -> None:
    bs = broker_proc().bootstrap
    code, out, _ = kaflet(bs, "topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=60000")
    assert code == OK and out["created"] is True and out["partitions"] == 3 and out["replication_factor"] == 1
    code, out, err = kaflet(bs, "topics", "create", "orders")
    assert code == FAILED and out["error"] == "TOPIC_ALREADY_EXISTS" and "Topic 'orders' already exists." in err
    assert kaflet(bs, "topics", "create", "orders", "--if-not-exists")[0] == OK
    code, out, _ = kaflet(bs, "topics", "list")
    assert code == OK
    assert {"name": "orders", "partitions": 3, "replication_factor": 1, "internal": False} in out["topics"]
    assert any(t["name"] == "__consumer_offsets" and t["internal"] for t in out["topics"])
    code, out, _ = kaflet(bs, "topics", "list", "--exclude-internal")
    assert [t["name"] for t in out["topics"]] == ["orders"]
    code, out, _ = kaflet(bs, "topics", "describe", "orders")
    [orders] = out["topics"]
    assert code == OK and orders["error"] is None
    assert orders["partitions"] == [{"partition": p, "leader": 1, "replicas": [1], "isr": [1]} for p in range(3)]
    assert orders["configs"] == {"retention.ms": "60000"}  # set at creation; the broker's defaults are not shown
    # what alter-config sets, describe shows, as kafka-topics.sh --describe does
    assert kaflet(bs, "topics", "alter-config", "orders", "--set", "cleanup.policy=compact")[0] == OK
    code, text, _ = kaflet(bs, "topics", "describe", "orders", output="table")
    assert code == OK and text.splitlines()[0].endswith("\tConfigs: cleanup.policy=compact,retention.ms=60000")
    code, out, err = kaflet(bs, "topics", "describe", "missing")
    assert code == FAILED and out["topics"][0]["error"] == "UNKNOWN_TOPIC_OR_PARTITION" and "missing" in err
    code, out, _ = kaflet(bs, "topics", "delete", "orders", "missing")
    assert code == FAILED
    assert sorted(out["topics"], key=lambda t: t["topic"]) == [
        {"topic": "missing", "deleted": False, "error": "UNKNOWN_TOPIC_OR_PARTITION"},
        {"topic": "orders", "deleted": True, "error": None},
    ]
    assert kaflet(bs, "topics", "delete", "orders", "--if-exists")[0] == OK
    code, text, _ = kaflet(bs, "topics", "list", output="table")
    assert code == OK and text.splitlines()[0].split() == ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"]


def test_groups_list_describe_lag_and_delete(broker_proc: Callable[..., BrokerProcess]) -> None:
    bs = broker_proc("--default-partitions", "2").bootstrap
    producer = Producer({"bootstrap.servers": bs})
    for i in range(7):
        producer.produce("events", value=b"%d" % i, partition=i % 2)  # 4 records in partition 0, 3 in 1
    assert producer.flush(20) == 0
    member = consumer(bs, "readers")
    member.subscribe(["events"])
    wait_until(lambda: assigned(member) and len(member.assignment()) == 2, timeout=30, message="assignment")
    member.commit(offsets=[TopicPartition("events", 0, 3)], asynchronous=False)
    member_id = member.memberid()
    try:
        code, out, _ = kaflet(bs, "groups", "list")
        assert code == OK and {"group": "readers", "state": "Stable", "protocol_type": "consumer", "type": "classic"} in out["groups"]
        code, out, _ = kaflet(bs, "groups", "describe", "readers")
        [group] = out["groups"]
        assert code == OK and group["state"] == "Stable" and group["protocol_type"] == "consumer"
        [m] = group["members"]
        assert m["member_id"] == member_id and m["assignment"] == [{"topic": "events", "partitions": [0, 1]}]
        code, out, _ = kaflet(bs, "groups", "lag", "readers")
        [lag] = out["groups"]
        assert code == OK and lag["total_lag"] == 1
        assert [(p["partition"], p["committed"], p["log_end"], p["lag"], p["member_id"]) for p in lag["partitions"]] == [
            (0, 3, 4, 1, member_id),
            (1, None, 3, None, member_id),  # owned, never committed
        ]
        code, out, err = kaflet(bs, "groups", "delete", "readers")
        assert code == GROUP_ACTIVE and out["groups"] == [{"group": "readers", "deleted": False, "error": "NON_EMPTY_GROUP"}]
        assert "active members" in err
    finally:
        member.close()
    code, out, _ = kaflet(bs, "groups", "delete", "readers", "nobody")
    assert code == FAILED
    assert out["groups"] == [
        {"group": "readers", "deleted": True, "error": None},
        {"group": "nobody", "deleted": False, "error": "GROUP_ID_NOT_FOUND"},
    ]
    code, out, err = kaflet(bs, "groups", "describe", "readers")
    assert code == FAILED and out["groups"][0]["exists"] is False and "does not exist" in err


def test_reset_offsets_moves_what_a_consumer_reads_next(broker_proc: Callable[..., BrokerProcess]) -> None:
    bs = broker_proc("--default-partitions", "1").bootstrap
    producer = Producer({"bootstrap.servers": bs})
    for i in range(10):
        producer.produce("stream", value=b"%d" % i, timestamp=1_700_000_000_000 + i * 1000)
    assert producer.flush(20) == 0
    member = consumer(bs, "resetters")
    member.subscribe(["stream"])
    wait_until(lambda: assigned(member), timeout=30, message="assignment")
    member.commit(offsets=[TopicPartition("stream", 0, 8)], asynchronous=False)
    try:
        # Refused while the group has a member, with kafka-consumer-groups.sh's message.
        code, out, err = kaflet(bs, "groups", "reset-offsets", "resetters", "--topic", "stream", "--to-earliest", "--execute")
        assert code == GROUP_ACTIVE and out == ""
        assert "Assignments can only be reset if the group 'resetters' is inactive, but the current state is Stable." in err
    finally:
        member.close()

    def reset(*how: str) -> dict[str, Any]:
        code, out, err = kaflet(bs, "groups", "reset-offsets", "resetters", "--topic", "stream", *how)
        assert code == OK, err
        return out

    dry = reset("--to-earliest")
    assert dry["executed"] is False and dry["partitions"] == [{"topic": "stream", "partition": 0, "current": 8, "new": 0, "error": None}]
    assert first_offset_read(bs, "resetters", "stream") == 8  # a dry run changes nothing
    assert reset("--to-earliest", "--execute")["partitions"][0]["new"] == 0
    assert first_offset_read(bs, "resetters", "stream") == 0
    assert reset("--to-offset", "5", "--execute")["partitions"][0]["new"] == 5
    assert first_offset_read(bs, "resetters", "stream") == 5
    assert reset("--shift-by", "-2", "--execute")["partitions"][0] == {
        "topic": "stream",
        "partition": 0,
        "current": 5,
        "new": 3,
        "error": None,
    }
    assert first_offset_read(bs, "resetters", "stream") == 3
    assert reset("--to-offset", "1000")["partitions"][0]["new"] == 10  # clamped to the log end
    # The first record at or after 00:00:06.5 is record 7; a time after the last record means the log end.
    assert reset("--to-datetime", "2023-11-14T22:13:26.500", "--execute")["partitions"][0]["new"] == 7
    assert first_offset_read(bs, "resetters", "stream") == 7
    assert reset("--to-datetime", "2030-01-01T00:00:00.000Z")["partitions"][0]["new"] == 10
    assert reset("--to-latest", "--execute", "--topic", "stream:0")["partitions"][0]["new"] == 10


def test_exit_codes_for_usage_and_unreachable_clusters(broker_proc: Callable[..., BrokerProcess]) -> None:
    bs = broker_proc().bootstrap
    code, _, err = kaflet(bs, "groups", "reset-offsets", "g", "--topic", "t")  # no --to-...
    assert code == USAGE and "one of the arguments" in err
    code, _, err = kaflet(bs, "groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday")
    assert code == USAGE and "ISO-8601" in err
    code, _, err = kaflet(bs, "groups", "reset-offsets", "g", "--topic", "absent", "--to-earliest")
    assert code == FAILED and "Topic 'absent' does not exist." in err
    done = subprocess.run(
        [sys.executable, "-m", "broker", "topics", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == UNREACHABLE and "cannot reach the cluster" in done.stderr
    code, _, err = kaflet("127.0.0.1:1", "topics", "list", timeout=1)  # JSON mode: the error is a document on stdout
    assert code == UNREACHABLE and "cannot reach the cluster" in err


def test_errors_in_json_mode_are_json_and_tables_print_no_header_before_an_error(broker_proc: Callable[..., BrokerProcess]) -> None:
    bs = broker_proc().bootstrap
    code, text, err = kaflet(bs, "groups", "lag", "nosuch", output="table")
    assert (code, text, err) == (FAILED, "", "Error: Consumer group 'nosuch' does not exist.\n")
    code, out, err = kaflet(bs, "groups", "lag", "nosuch")
    assert code == FAILED and out["errors"] == ["Consumer group 'nosuch' does not exist."] and out["groups"][0]["exists"] is False
    code, out, _ = kaflet(bs, "topics", "list")
    assert code == OK and out["errors"] == []
    # a usage error in JSON mode: a document on stdout, exit 2 as in table mode
    done = subprocess.run(
        [sys.executable, "-m", "broker", "groups", "reset-offsets", "g", "--output", "json", "--bootstrap-server", bs],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == USAGE and done.stderr == ""
    error = json.loads(done.stdout)["error"]
    assert error["exit_code"] == USAGE and "--topic" in error["message"]


def test_groups_describe_a_consumer_protocol_group(broker_proc: Callable[..., BrokerProcess]) -> None:
    """KIP-848: the group epoch, assignment epoch and assignor; each member's epoch, current and
    target assignment (from ConsumerGroupDescribe); text mode shows the same columns."""
    bs = broker_proc("--default-partitions", "3").bootstrap
    producer = Producer({"bootstrap.servers": bs})
    producer.produce("kip848-events", value=b"x")
    assert producer.flush(20) == 0
    member = Consumer({"bootstrap.servers": bs, "group.id": "new-protocol", "group.protocol": "consumer", "group.remote.assignor": "range"})
    member.subscribe(["kip848-events"])
    try:
        wait_until(lambda: assigned(member) and len(member.assignment()) == 3, timeout=30, message="assignment")
        code, out, _ = kaflet(bs, "groups", "describe", "new-protocol")
        [group] = out["groups"]
        assert code == OK
        assert (group["type"], group["state"], group["assignor"], group["group_epoch"], group["assignment_epoch"]) == (
            "consumer",
            "Stable",
            "range",
            2,  # a new group is at epoch 1 (as in Kafka 4.4); its first member bumps it
            2,
        )
        [m] = group["members"]
        assert m["member_id"] == member.memberid() and m["member_epoch"] == 2 and m["subscribed_topics"] == ["kip848-events"]
        assert m["assignment"] == m["target_assignment"] == [{"topic": "kip848-events", "partitions": [0, 1, 2]}]
        code, text, _ = kaflet(bs, "groups", "describe", "new-protocol", output="table")
        assert code == OK and "GroupEpoch: 2" in text and "TARGET-ASSIGNMENT" in text and "kip848-events:0,1,2" in text
        code, out, _ = kaflet(bs, "groups", "list")
        assert {"group": "new-protocol", "state": "Stable", "protocol_type": "consumer", "type": "consumer"} in out["groups"]
    finally:
        member.close()


def test_groups_lag_and_reset_offsets_see_consumer_protocol_members(broker_proc: Callable[..., BrokerProcess]) -> None:
    """`groups lag` names the KIP-848 member owning each partition; `reset-offsets` refuses a
    consumer group with members, as for a classic group."""
    bs = broker_proc("--default-partitions", "2").bootstrap
    producer = Producer({"bootstrap.servers": bs})
    for i in range(4):
        producer.produce("kip848-lag", value=b"%d" % i, partition=i % 2)
    assert producer.flush(20) == 0
    member = Consumer({"bootstrap.servers": bs, "group.id": "lag-848", "group.protocol": "consumer", "enable.auto.commit": False})
    member.subscribe(["kip848-lag"])
    try:
        wait_until(lambda: assigned(member) and len(member.assignment()) == 2, timeout=30, message="assignment")
        member.commit(offsets=[TopicPartition("kip848-lag", 0, 1)], asynchronous=False)
        code, out, _ = kaflet(bs, "groups", "lag", "lag-848")
        [lag] = out["groups"]
        assert code == OK and lag["state"] == "Stable" and lag["total_lag"] == 1
        assert {(p["partition"], p["member_id"]) for p in lag["partitions"]} == {(0, member.memberid()), (1, member.memberid())}
        code, _, err = kaflet(bs, "groups", "reset-offsets", "lag-848", "--topic", "kip848-lag", "--to-earliest", "--execute")
        assert code == GROUP_ACTIVE and "inactive" in err
    finally:
        member.close()


def test_groups_lag_of_a_group_whose_topic_was_deleted_says_why_it_shows_nothing(broker_proc: Callable[..., BrokerProcess]) -> None:
    bs = broker_proc().bootstrap
    producer = Producer({"bootstrap.servers": bs})
    producer.produce("doomed", b"x")
    assert producer.flush(10) == 0
    c = consumer(bs, "orphans")
    c.subscribe(["doomed"])
    try:
        wait_until(lambda: (m := c.poll(0.2)) is not None and not m.error(), timeout=30, message="a record")
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert kaflet(bs, "groups", "lag", "orphans")[1]["groups"][0]["partitions"][0]["committed"] == 1
    assert kaflet(bs, "topics", "delete", "doomed")[0] == OK  # its offsets go with it (OR-5)
    code, text, err = kaflet(bs, "groups", "lag", "orphans", output="table")
    assert (code, err) == (OK, "")
    assert text.strip() == (
        "Consumer group 'orphans' (Empty) has no committed offsets and no assigned partitions: "
        "no lag to show (deleting a topic deletes the group's offsets of it)."
    )
    code, out, _ = kaflet(bs, "groups", "lag", "orphans")
    assert code == OK and out["groups"][0]["partitions"] == [] and "no lag to show" in out["groups"][0]["note"]
