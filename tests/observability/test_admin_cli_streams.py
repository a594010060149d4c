"""`kaflet groups` on a KIP-1071 streams group (KS-28), against a broker process: `list` gives its
type and state, `describe` its epochs, topology and each member's process, tasks (current and
target) and lag, `lag` the partitions its members' active tasks read, and `delete` refuses the
group while it has members; and the streams-group metrics on /metrics."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable

from confluent_kafka import Producer

from broker.embed import BrokerProcess
from tests.observability.test_admin_cli import GROUP_ACTIVE, OK, kaflet
from tests.support import groups as classic
from tests.support.raw_client import RawClient
from tests.support.streams_groups import StreamsMember, converge, word_count


def test_ks_28_groups_list_describe_and_lag_of_a_streams_group(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc("--metrics-port", "0", "--metrics-host", "127.0.0.1", "--default-partitions", "2")
    bs = bp.bootstrap
    producer = Producer({"bootstrap.servers": bs})
    for partition, n in ((0, 5), (1, 3)):
        for i in range(n):
            producer.produce("p-input", value=b"x%d" % i, partition=partition)
    assert producer.flush(20) == 0  # p-input created with 2 partitions; the group creates its internal topics
    del producer

    async def form_group() -> tuple[RawClient, list[StreamsMember]]:
        client = await RawClient.connect(bs, "streams-app")
        members = [StreamsMember(client, "wordcount", f"m{i}", word_count("p", "app"), process_id=f"process-{i}") for i in range(2)]
        await converge(members, client)
        epoch = members[0].epoch
        offsets = {("p-input", 0): 2, ("p-input", 1): 3, ("app-counts-repartition", 0): 0, ("app-counts-repartition", 1): 0}
        assert set((await classic.commit(client, "wordcount", offsets, version=9, generation=epoch, member_id="m0")).values()) == {0}
        return client, members

    loop = asyncio.new_event_loop()
    try:
        client, members = loop.run_until_complete(form_group())
        code, out, _ = kaflet(bs, "groups", "list")
        assert code == OK and {"group": "wordcount", "state": "Stable", "protocol_type": "streams", "type": "streams"} in out["groups"]

        code, out, _ = kaflet(bs, "groups", "describe", "wordcount")
        assert code == OK
        [group] = out["groups"]
        assert (group["type"], group["state"], group["topology_epoch"]) == ("streams", "Stable", 0)
        assert group["group_epoch"] == group["assignment_epoch"] == members[0].epoch
        assert [s["subtopology"] for s in group["subtopologies"]] == ["0", "1"]
        by_id = {m["member_id"]: m for m in group["members"]}
        assert set(by_id) == {"m0", "m1"}
        tasks = sorted(t for m in by_id.values() for t in m["active"])
        assert tasks == sorted(f"{s}_{p}" for s in "01" for p in range(len(tasks) // 2))
        for m in members:
            row = by_id[m.member_id]
            assert row["process_id"] == m.process_id and row["client_id"] == "streams-app"
            assert row["active"] == [f"{s}_{p}" for s, ps in sorted(m.active.items()) for p in ps] == row["target_active"]
        # lag: p-input 0 is 3 behind (5 records, 2 committed), everything else caught up
        for m in members:
            assert by_id[m.member_id]["lag"] == (3 if 0 in m.active.get("0", []) else 0), by_id

        code, text, _ = kaflet(bs, "groups", "describe", "wordcount", output="table")
        assert code == OK and "Type: streams" in text and "ACTIVE-TASKS" in text and "process-0" in text

        code, out, _ = kaflet(bs, "groups", "lag", "wordcount")
        assert code == OK, out
        code, out, errors = kaflet(bs, "groups", "delete", "wordcount")
        assert code == GROUP_ACTIVE and "wordcount" in errors

        metrics = urllib.request.urlopen(f"http://{bp.metrics}/metrics", timeout=10).read().decode()
        assert 'kaflet_groups{protocol="streams"} 1.0' in metrics
        assert 'kaflet_streams_groups{state="Stable"} 1.0' in metrics
        assert "kaflet_streams_group_heartbeats_total" in metrics and "kaflet_streams_group_rebalances_total" in metrics

        async def leave() -> None:
            for m in members:
                await m.leave()
            await client.close()

        loop.run_until_complete(leave())
        code, out, _ = kaflet(bs, "groups", "delete", "wordcount")
        assert code == OK
    finally:
        loop.close()
