"""Share-group metrics (KIP-932): share groups by state, sessions, and each share partition's
records in flight, acquired now, and what became of them (acquired, accepted, released, rejected,
archived, lock timeouts, redeliveries), counted as a raw member fetches and acknowledges."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support import share as s
from tests.support.coordinator import serving
from tests.support.metrics import ascrape


async def test_share_partition_and_group_series(make_config: Callable[..., Any]) -> None:
    async with serving(make_config(metrics=True, metrics_port=0, **s.SHARE_BOUNDS)) as served:
        client = await served.ready()
        topic_id = await s.create_topic(client, "t")
        await s.set_group_configs(client, "g", {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2"})
        await s.produce(client, "t", [b"a", b"b", b"c", b"d"])
        m = s.ShareMember(client, "g")
        await m.join(["t"])
        tp = (topic_id, 0)
        assert s.acquired(await m.fetch()) == {tp: [(0, 3, 1)]}
        before = await ascrape(served.broker.metrics.address)
        labels = {"group": "g", "topic": "t", "partition": "0"}
        assert before.value("kaflet_share_partition_in_flight_records", **labels) == 4
        assert before.value("kaflet_share_partition_acquired_records", **labels) == 4
        await m.ack({tp: [(0, 0, [s.ACCEPT]), (1, 1, [s.RELEASE]), (2, 2, [s.REJECT])]})
        assert s.acquired(await m.fetch({}, max_wait_ms=1000)) == {tp: [(1, 1, 2)]}
        await m.ack({tp: [(1, 1, [s.RELEASE])]})  # its second delivery was its last: archived
        after = await ascrape(served.broker.metrics.address)
        counts = {
            name: after.value(f"kaflet_share_partition_{name}_total", **labels)
            for name in (
                "records_acquired",
                "records_acknowledged",
                "records_released",
                "records_rejected",
                "records_archived",
                "redeliveries",
                "lock_timeouts",
            )
        }
        assert counts == {
            "records_acquired": 5,
            "records_acknowledged": 1,
            "records_released": 2,
            "records_rejected": 1,
            "records_archived": 1,
            "redeliveries": 1,
            "lock_timeouts": 0,
        }
        assert after.value("kaflet_share_partition_acquired_records", **labels) == 1  # offset 3, still held
        assert after.value("kaflet_share_groups", state="Stable") == 1
        assert after.value("kaflet_groups", protocol="share") == 1
        assert after.value("kaflet_share_sessions") == 1
        assert after.value("kaflet_share_group_heartbeats_total") >= 2
