"""Share groups (KIP-932) with the Java client 4.4 against kaflet and Kafka 4.4 at once: every
scenario of tests/jvm/share-clients (ShareScenarios.java) runs on both brokers together, in one
JVM for the session; kaflet's outcome must be what the scenario expects, and Kafka's the same. The broker-SIGKILL
scenario runs on a kaflet process of its own only: the reference Kafka is shared by the session."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.embed import BrokerProcess
from tests.differential.clients.peers import normalize_text
from tests.support.client_driver import JavaDriver
from tests.support.kafka_reference import free_port
from tests.support.waiting import wait_until


class ShareDriver(JavaDriver):
    artifact, main = "share-clients", "dev.kaflet.tests.ShareScenarios"


@pytest.fixture(scope="module")
def share_driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShareDriver]:
    from tests.support.jvm import JvmUnavailable

    driver = ShareDriver(tmp_path_factory.mktemp("share-clients"))
    try:
        driver.start()
    except JvmUnavailable as exc:
        pytest.fail(f"the Java share-clients driver cannot run: {exc}", pytrace=False)
    try:
        yield driver
    finally:
        driver.stop()


@pytest.fixture
def both(share_driver: ShareDriver, kaflet_peer: Any, kafka_reference: Any) -> Any:
    def run(op: str, **args: Any) -> tuple[Any, Any]:
        """The scenario on kaflet and on Kafka together; each side's result (or error)."""
        name = f"{op}-{uuid.uuid4().hex[:6]}"
        futures = [
            share_driver.submit(op, bootstrap=bootstrap, topic=f"t-{name}", group=f"g-{name}", **args)
            for bootstrap in (kaflet_peer.bootstrap, kafka_reference.bootstrap)
        ]
        mine, theirs = (f.result(180) for f in futures)
        assert mine["ok"], (mine, share_driver.log_tail())
        assert theirs["ok"], (theirs, share_driver.log_tail())
        return mine["result"], theirs["result"]

    return run


def test_implicit_acknowledgement(both: Any) -> None:
    mine, theirs = both("implicit")
    assert mine["first"] == [[o, f"v{o}", 1] for o in range(20)]
    assert mine["after"] == [] and mine["commit"] == ["ok"] and mine["lock_ms"] == 30000
    # the start offset moves when a whole batch is done; the lag counts the records not yet done
    assert mine["offsets"] == {"T:0": {"start_offset": 0, "lag": 0}}
    assert mine == theirs


def test_explicit_accept_release_reject(both: Any) -> None:
    mine, theirs = both("explicit")
    assert mine["deliveries"] == [[0, "accept", 1], [1, "release", 1], [2, "reject", 1], [3, "accept-2", 1], [1, "release", 2]]
    assert mine["after"] == []
    assert mine == theirs


def test_renew_keeps_a_record_past_its_lock(both: Any) -> None:
    mine, theirs = both("renew")
    assert mine == {"accept": ["ok"], "deliveries": ["[0, slow, 1]"], "renewals_ok": True, "stolen": []}
    assert mine == theirs


def test_record_limit_acquire_mode(both: Any) -> None:
    mine, theirs = both("record_limit")
    assert all(n <= 3 for n in mine["poll_sizes"]) and sum(mine["poll_sizes"]) == 10
    assert mine["deliveries"] == [[o, f"v{o}", 1] for o in range(10)]
    assert mine == theirs


def test_four_consumers_on_one_partition(both: Any) -> None:
    mine, theirs = both("many_consumers", consumers=4, records=600)
    assert mine["deliveries"] == [[o, 1] for o in range(600)]  # each record once, to one consumer
    assert mine["consumers_with_records"] >= 2
    assert theirs["deliveries"] == mine["deliveries"] and theirs["consumers_with_records"] >= 2


def test_lock_timeout(both: Any) -> None:
    mine, theirs = both("lock_timeout")
    assert mine["held"] == [[o, f"v{o}", 1] for o in range(5)]
    assert mine["redelivered"] == [[o, f"v{o}", 2] for o in range(5)]
    # acknowledgements of records the group is done with change nothing and fail nothing
    assert mine["late_acknowledgement"] == ["ok"]
    assert mine == theirs


def test_killed_consumer(both: Any) -> None:
    mine, theirs = both("killed_consumer")
    assert mine["holder"] == {"accepted": [0, 1, 2, 3, 4], "held": [5, 6, 7, 8, 9]}
    # the held records come again (their second delivery), the accepted ones never
    assert mine["redelivered"] == [[o, f"v{o}", 2] for o in range(5, 10)] and mine["after"] == []
    assert mine == theirs


def test_poison_record_archived_at_the_delivery_limit(both: Any) -> None:
    mine, theirs = both("poison")
    poison = [d for d in mine["deliveries"] if d[1] == "poison"]
    assert poison == [[1, "poison", 1], [1, "poison", 2], [1, "poison", 3]]
    assert mine["after"] == [] and mine["later"] == [[3, "after", 1]]
    assert mine == theirs


def test_read_committed(both: Any) -> None:
    mine, theirs = both("read_committed")
    assert mine == {"read_committed": ["committed"], "read_uncommitted": ["aborted", "committed"]}
    assert mine == theirs


_MEMBER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
_CLIENT_ID = re.compile(r"^(consumer-.+)-\d+$")


def _tool(result: dict[str, Any]) -> dict[str, Any]:
    """A tool's output as rows of cells (column widths follow the longest cell), with member ids,
    client-id sequence numbers and ports replaced."""
    rows = []
    for line in result["out"].splitlines():
        cells = [_CLIENT_ID.sub(r"\1-<n>", _MEMBER_ID.sub("<member-id>", c)) for c in normalize_text(line).split()]
        if cells:
            rows.append(cells)
    return {"status": result["status"], "rows": rows}


def test_admin_and_kafka_share_groups_tool(both: Any) -> None:
    mine, theirs = both("admin")
    assert mine["describe"]["state"] == "Stable" and len(mine["describe"]["members"]) == 1
    assert mine["list"] == [["Share", "Stable", "share"]]
    # every record went to partition 0; partition 1 has no share state until a record comes
    assert mine["offsets"] == {"T:0": {"start_offset": 0, "lag": 0}, "T:1": {"start_offset": None, "lag": None}}
    assert mine["alter_while_active"] == "GroupNotEmptyException"
    assert mine["alter"] == "ok" and mine["offsets_after_alter"] == {
        "T:0": {"start_offset": 1, "lag": 5},
        "T:1": {"start_offset": 0, "lag": 0},
    }
    assert mine["after_alter"] == [[0, o, 1] for o in range(1, 6)]  # delivered again from the new start
    assert mine["delete_offsets"] == "ok" and mine["delete_group"] == "ok"
    assert mine["describe_deleted"] == "GroupIdNotFoundException" and mine["delete_unknown"] == "GroupIdNotFoundException"
    for key in ("tool_describe", "tool_members", "tool_state", "tool_offsets_empty"):
        mine[key], theirs[key] = _tool(mine[key]), _tool(theirs[key])
    assert mine == theirs


def test_broker_sigkill_during_consumption(share_driver: ShareDriver, tmp_path: Path) -> None:
    """kaflet only (the reference Kafka is shared by the session and stays up): the broker is
    SIGKILLed while a KafkaShareConsumer accepts and commits poll by poll, and comes back on the same
    port and data dir. No record whose commitSync answered without error comes again; none is lost."""
    port = free_port()
    args = ("--port", str(port), "--offsets-partitions", "5", "--group-share-min-session-timeout-ms", "6000")
    progress, restarted = tmp_path / "progress", tmp_path / "restarted"
    broker = BrokerProcess(tmp_path / "data", *args).start()
    try:
        name = uuid.uuid4().hex[:6]
        future = share_driver.submit(
            "broker_sigkill",
            bootstrap=broker.bootstrap,
            topic=f"t-{name}",
            group=f"g-{name}",
            records=600,
            progress=str(progress),
            restarted=str(restarted),
        )

        def done_so_far() -> int:
            return int(progress.read_text()) if progress.exists() else 0

        wait_until(lambda: done_so_far() >= 200, timeout=90, message=lambda: f"{done_so_far()} records done; {share_driver.log_tail()}")
        broker.kill()
        done_at_kill = done_so_far()
        broker = BrokerProcess(tmp_path / "data", *args).start()
        restarted.touch()
        answer = future.result(180)
        assert answer["ok"], (answer, share_driver.log_tail())
        result = answer["result"]
        assert done_at_kill < 600, "the kill came after the last record: nothing was tested"
        assert result["redelivered_after_done"] == [], "acknowledged records delivered again after the restart"
        assert result["lost"] == [] and result["seen"] == 600, result
    finally:
        broker.close()
