"""Streams groups (KIP-1071) on kaflet and on Kafka 4.4 side by side: one kaflet process for the
module set up as the reference broker is (5 offsets partitions, the streams session bound lowered
to 6 s), and `Both`, which runs one scenario -- an async function of a `Side` -- against each
broker at once and returns both outcomes, for the test to compare."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.embed import BrokerProcess
from tests.support.groups import delete_groups
from tests.support.raw_client import RawClient
from tests.support.streams_groups import MISSING_SOURCE_TOPICS, heartbeat, subtopology, topology
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def kaflet_streams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("kaflet-streams") / "data"
    args = ("--offsets-partitions", "5", "--transaction-state-partitions", "5", "--group-streams-min-session-timeout-ms", "6000")
    broker = BrokerProcess(data, *args).start()
    try:
        yield broker
    finally:
        broker.close()


@dataclass
class Side:
    """One broker as a scenario sees it: its name, address, a prefix for its topics and groups
    (the same on both sides, so that answers naming them compare equal), and raw connections."""

    name: str
    bootstrap: str
    prefix: str
    clients: list[RawClient] = field(default_factory=list)

    async def client(self, client_id: str = "streams-test") -> RawClient:
        c = await RawClient.connect(self.bootstrap, client_id)
        self.clients.append(c)
        return c

    def create_topics(self, partitions: dict[str, int], configs: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(t, n, 1, config=dict(configs or {})) for t, n in partitions.items()], operation_timeout=30)
        for future in futures.values():
            future.result(60)

    async def topics(self, partitions: dict[str, int]) -> None:
        """Create the topics, then wait until the group coordinator sees them (Kafka's coordinator
        learns of new topics from its metadata image a moment after CreateTopics answers)."""
        await asyncio.get_running_loop().run_in_executor(None, self.create_topics, partitions)
        client = await self.client("topic-probe")
        probe = f"{self.prefix}-probe"
        deadline = time.monotonic() + 30
        names = list(partitions)
        try:
            while True:
                resp = await heartbeat(client, probe, "probe", 0, topology=topology(subtopology("0", names)))
                if resp.error_code == 0:
                    await heartbeat(client, probe, "probe", -1, process_id=None, client_tags=None)
                    if not any(s.status_code == MISSING_SOURCE_TOPICS for s in resp.status):
                        return
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.name}: topics {names} not seen by the group coordinator")
                await asyncio.sleep(0.1)
        finally:
            await delete_groups(client, [probe])

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
        for future in admin.incremental_alter_configs(
            [ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)]
        ).values():
            future.result(30)

        # Kafka applies a group config once its metadata log has it, a moment after answering:
        # wait until DescribeConfigs shows every value, so the group's next heartbeat sees them.
        def shown() -> dict[str, str]:
            (described,) = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, group)]).values()
            return {k: e.value for k, e in described.result(30).items()}

        wait_until(
            lambda: all(shown().get(k) == v for k, v in configs.items()),
            timeout=30,
            interval=0.05,
            message=lambda: f"{group}'s configs {configs} visible: {shown()}",
        )

    async def streams_records(self, group: str) -> list[tuple[int, str | None, Any]]:
        """The streams-group records of `group` in `__consumer_offsets`, in log order, decoded:
        (type, member id, value); the value None for a tombstone."""
        return await asyncio.get_running_loop().run_in_executor(None, _read_streams_records, self.bootstrap, group)

    async def close(self) -> None:
        for c in self.clients:
            await c.close()


def _read_streams_records(bootstrap: str, group: str) -> list[tuple[int, str | None, Any]]:
    from confluent_kafka import Consumer, TopicPartition

    from storage import streams_records as srec

    parsers = {
        17: srec.parse_group_metadata_value,
        19: srec.parse_member_metadata_value,
        20: srec.parse_target_assignment_metadata_value,
        21: srec.parse_target_assignment_value,
        22: srec.parse_current_assignment_value,
        23: srec.parse_topology_value,
    }
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "records-reader", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition("__consumer_offsets", p, 0) for p in partitions])
        out: list[tuple[int, str | None, Any]] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 30
        while len(done) < len(ends) and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=0.5):
                if m.error():
                    continue
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
                key = m.key()
                if key is None or int.from_bytes(key[:2], "big") not in srec.STREAMS_GROUP_RECORD_TYPES:
                    continue
                kind, g, member = srec.parse_streams_group_key(key)
                if g == group:
                    value = m.value()
                    out.append((kind, member, None if value is None else parsers[kind](value)))
        return out
    finally:
        consumer.close()


Scenario = Callable[[Side], Awaitable[Any]]


class Both:
    def __init__(self, kaflet: str, kafka: str) -> None:
        self.addresses = {"kaflet": kaflet, "kafka": kafka}

    def run(self, scenario: Scenario) -> dict[str, Any]:
        """The scenario's outcome on each broker (run at the same time, with the same prefix)."""
        prefix = f"sg{uuid.uuid4().hex[:6]}"

        async def one(name: str) -> Any:
            side = Side(name, self.addresses[name], prefix)
            try:
                return await scenario(side)
            finally:
                await side.close()

        async def both() -> list[Any]:
            return await asyncio.gather(one("kaflet"), one("kafka"), return_exceptions=True)

        kaflet, kafka = asyncio.run(both())
        for name, outcome in (("kaflet", kaflet), ("kafka", kafka)):
            if isinstance(outcome, BaseException):
                raise AssertionError(f"the scenario failed on {name}: {outcome!r}") from outcome
        return {"kaflet": kaflet, "kafka": kafka}

    def same(self, scenario: Scenario) -> Any:
        """Run the scenario on both and assert the outcomes are equal; kaflet's outcome."""
        out = self.run(scenario)
        dump = os.environ.get("KAFLET_STREAMS_DIFF_DUMP")  # a directory: each scenario's outcomes, to read
        if dump:
            import pprint

            for name, outcome in out.items():
                (Path(dump) / f"{scenario.__qualname__.split('.')[0]}-{name}.txt").write_text(pprint.pformat(outcome, width=140))
        assert out["kaflet"] == out["kafka"], _diff(out["kaflet"], out["kafka"])
        return out["kaflet"]


def _diff(ours: Any, theirs: Any) -> str:
    """Where the outcomes differ: each differing path with both values (the first 25)."""
    import pprint

    found: list[str] = []

    def walk(path: str, a: Any, b: Any) -> None:
        if len(found) >= 25 or a == b:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in list(a) + [k for k in b if k not in a]:
                walk(f"{path}.{k}", a.get(k, "<absent>"), b.get(k, "<absent>"))
        elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(f"{path}[{i}]", x, y)
        else:
            found.append(f"{path}:\n  kaflet: {pprint.pformat(a, width=120)}\n  kafka:  {pprint.pformat(b, width=120)}")

    walk("", ours, theirs)
    return "\n" + "\n".join(found)


@pytest.fixture(scope="module")
def both(kaflet_streams: BrokerProcess, kafka_reference: Any) -> Both:
    return Both(kaflet_streams.bootstrap, kafka_reference.bootstrap)
