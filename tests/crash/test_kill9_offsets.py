"""Kill -9 under load: every acknowledged offset commit survives, never an older value (issue 4).

Several raw clients commit increasing offsets for their own groups while the broker is killed
with SIGKILL at random moments, many times; after each restart OffsetFetch must return, for
every partition, at least the last offset whose commit was acknowledged.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from broker.embed import BrokerProcess
from tests.support import groups as g
from tests.support.raw_client import RawClient

TOPIC = "crash-topic"
PARTITIONS = 4
CLIENTS = 4
ROUNDS = 12


async def _committer(
    bootstrap: str, group: str, acked: dict[tuple[str, int], int], sent: dict[tuple[str, int], int], stop: asyncio.Event
) -> None:
    try:
        client = await RawClient.connect(bootstrap, f"committer-{group}")
    except OSError:
        return
    try:
        while not stop.is_set():
            offsets = {}
            for p in range(PARTITIONS):
                sent[(group, p)] = sent.get((group, p), 0) + 1
                offsets[(TOPIC, p)] = sent[(group, p)]
            try:
                result = await g.commit(client, group, offsets, version=8)
            except (ConnectionError, OSError, TimeoutError):
                return  # killed mid-request: nothing acknowledged
            for (topic, p), code in result.items():
                assert code == 0, (group, topic, p, code)
                acked[(group, p)] = offsets[(topic, p)]
    finally:
        await client.close()


async def _one_round(bp: BrokerProcess, rng: random.Random, acked: dict[tuple[str, int], int], sent: dict[tuple[str, int], int]) -> None:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_committer(bp.bootstrap, f"crash-group-{i}", acked, sent, stop)) for i in range(CLIENTS)]
    await asyncio.sleep(rng.uniform(0.05, 0.4))  # a random moment in the middle of the load
    bp.kill()
    stop.set()
    await asyncio.gather(*tasks)


async def _verify(bp: BrokerProcess, acked: dict[tuple[str, int], int], sent: dict[tuple[str, int], int]) -> None:
    bp.wait_for(lambda r: r.get("event") == "coordinator loaded", 30)
    client = await RawClient.connect(bp.bootstrap, "verifier")
    try:
        for i in range(CLIENTS):
            group = f"crash-group-{i}"
            fetched = await g.fetched_offsets(client, group, {TOPIC: list(range(PARTITIONS))})
            for p in range(PARTITIONS):
                got = fetched[(TOPIC, p)]
                assert got >= acked.get((group, p), -1), f"{group}-{p}: fetched {got}, acknowledged {acked.get((group, p))}"
                assert got <= sent.get((group, p), -1) or got == -1
    finally:
        await client.close()


async def test_acknowledged_commits_survive_sigkill(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    bp = BrokerProcess(tmp_path / "data", "--offsets-partitions", "5", "--default-partitions", str(PARTITIONS)).start()
    client = await RawClient.connect(bp.bootstrap, "setup")
    await client.request(MetadataRequest[4](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True))
    await client.close()
    acked: dict[tuple[str, int], int] = {}
    sent: dict[tuple[str, int], int] = {}
    try:
        for _ in range(ROUNDS):
            await _one_round(bp, rng, acked, sent)
            bp.start()
            await _verify(bp, acked, sent)
        assert sum(acked.values()) > ROUNDS * CLIENTS, "the load acknowledged too few commits to prove anything"
    finally:
        if bp.alive:
            bp.kill()
