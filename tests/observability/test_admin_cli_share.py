"""`kaflet groups` for share groups (KIP-932): list, describe (members, epochs, start offsets and
lag), lag, reset-offsets (only while the group has no members) and delete, against a broker
process and a real share consumer (confluent-kafka's ShareConsumer)."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from broker.admin_cli import FAILED, GROUP_ACTIVE, OK
from broker.embed import BrokerProcess
from tests.observability.test_admin_cli import kaflet
from tests.support.waiting import wait_until


def test_share_groups_list_describe_lag_reset_and_delete(broker_proc: Callable[..., BrokerProcess]) -> None:
    bs = broker_proc("--default-partitions", "1").bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, "queue", incremental_configs=[earliest])]).values():
        f.result()
    producer = Producer({"bootstrap.servers": bs})
    for i in range(6):
        producer.produce("jobs", value=b"%d" % i, partition=0)
    assert producer.flush(20) == 0
    worker = ShareConsumer({"bootstrap.servers": bs, "group.id": "queue", "share.acknowledgement.mode": "explicit"})
    worker.subscribe(["jobs"])
    got: list = []
    wait_until(lambda: got.extend(worker.poll(0.5)) or len(got) == 6, timeout=30, message="six records")
    for m in got[:4]:
        worker.acknowledge(m, AcknowledgeType.ACCEPT)  # two left in flight
    for m in got[4:]:
        worker.acknowledge(m, AcknowledgeType.RELEASE)
    worker.commit_sync(10)
    try:
        code, out, _ = kaflet(bs, "groups", "list")
        assert code == OK and {"group": "queue", "state": "Stable", "protocol_type": "share", "type": "share"} in out["groups"]
        code, out, _ = kaflet(bs, "groups", "describe", "queue")
        [group] = out["groups"]
        assert code == OK and (group["type"], group["state"], group["assignor"]) == ("share", "Stable", "simple")
        [member] = group["members"]
        assert member["assignment"] == [{"topic": "jobs", "partitions": [0]}] and member["subscribed_topics"] == ["jobs"]
        # the stored start offset moves with the next write after a whole batch is done, as in Kafka
        assert group["partitions"] == [{"topic": "jobs", "partition": 0, "start_offset": 0, "lag": 2}]
        code, out, _ = kaflet(bs, "groups", "lag", "queue")
        [lag] = out["groups"]
        assert code == OK and lag["total_lag"] == 2
        [p] = lag["partitions"]
        assert (p["start_offset"], p["log_end"], p["lag"], p["members"]) == (0, 6, 2, [member["member_id"]])
        code, _, err = kaflet(bs, "groups", "reset-offsets", "queue", "--topic", "jobs", "--to-earliest", "--execute")
        assert code == GROUP_ACTIVE and "not empty" in err
        code, text, _ = kaflet(bs, "groups", "describe", "queue", output="table")
        assert code == OK and "START-OFFSET" in text and "Type: share" in text
    finally:
        worker.close()
    wait_until(lambda: kaflet(bs, "groups", "describe", "queue")[1]["groups"][0]["members"] == [], timeout=30, message="member gone")
    code, out, _ = kaflet(bs, "groups", "reset-offsets", "queue", "--topic", "jobs", "--to-offset", "1")
    assert code == OK and out["executed"] is False and out["partitions"][0]["new"] == 1
    code, out, _ = kaflet(bs, "groups", "reset-offsets", "queue", "--topic", "jobs", "--shift-by", "3", "--execute")
    assert code == OK and out["partitions"][0]["current"] == 0 and out["partitions"][0]["new"] == 3
    code, out, _ = kaflet(bs, "groups", "lag", "queue")
    assert out["groups"][0]["partitions"][0]["start_offset"] == 3 and out["groups"][0]["total_lag"] == 3
    again = ShareConsumer({"bootstrap.servers": bs, "group.id": "queue"})
    again.subscribe(["jobs"])
    try:
        redelivered: list = []
        wait_until(lambda: redelivered.extend(again.poll(0.5)) or len(redelivered) >= 3, timeout=30, message="records from offset 3")
        assert sorted(m.offset() for m in redelivered) == [3, 4, 5]
        again.commit_sync(10)
    finally:
        again.close()
    wait_until(lambda: kaflet(bs, "groups", "describe", "queue")[1]["groups"][0]["members"] == [], timeout=30, message="member gone")
    code, out, _ = kaflet(bs, "groups", "delete", "queue", "nobody")
    assert code == FAILED and out["groups"][0] == {"group": "queue", "deleted": True, "error": None}
    code, out, _ = kaflet(bs, "groups", "list")
    assert all(g["group"] != "queue" for g in out["groups"])
