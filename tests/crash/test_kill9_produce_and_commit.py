"""Issue 11: 20 rounds of SIGKILL while an idempotent producer produces and groups commit, with
`--fsync never` and `--fsync always`. After every restart: each acknowledged commit reads back at
least as new as acknowledged, and the partition holds the producer's records exactly once and in
order. The producer resends an unanswered batch with the same sequence after the restart, as
clients do; the broker must take it once (a duplicate answers the first offsets).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest

from broker.embed import BrokerProcess
from protocol import records as rec
from protocol.errors import ErrorCode
from tests.crash.test_kill9_offsets import CLIENTS, TOPIC, _committer, _verify
from tests.support import data as d
from tests.support.raw_client import RawClient

ROUNDS = 20
PER_BATCH = 5
PRODUCE_TOPIC = "kill-produce"


class Producer:
    """A raw idempotent producer: one batch in flight, resent unchanged until answered."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self.next_value = 0  # the first value of the batch in flight (or the next one)
        self.acked = 0  # values below this were acknowledged

    def batch(self) -> bytes:
        records = [(b"k", b"%d" % v) for v in range(self.next_value, self.next_value + PER_BATCH)]
        return bytes(rec.build_batch(records, producer_id=self.producer_id, producer_epoch=self.epoch, base_sequence=self.next_value))

    async def run(self, bootstrap: str, stop: asyncio.Event) -> None:
        try:
            client = await RawClient.connect(bootstrap, "idempotent")
        except OSError:
            return
        try:
            if self.producer_id < 0:
                try:
                    init = await client.request(d.init_producer_id())
                except (ConnectionError, OSError, TimeoutError):
                    return  # killed before the id came back: asked again after the restart
                assert init.error_code == ErrorCode.NONE
                self.producer_id, self.epoch = init.producer_id, init.producer_epoch
            while not stop.is_set():
                try:
                    resp = await client.request(d.produce(PRODUCE_TOPIC, 0, self.batch()))
                except (ConnectionError, OSError, TimeoutError):
                    return  # killed mid-request: resent after the restart
                result = d.produce_result(resp)
                assert result.error_code == ErrorCode.NONE, result
                self.next_value += PER_BATCH
                self.acked = self.next_value
        finally:
            await client.close()


async def _stored_values(bootstrap: str) -> list[int]:
    client = await RawClient.connect(bootstrap, "reader")
    values: list[int] = []
    try:
        offset = 0
        while True:
            resp = await client.request(d.fetch([(PRODUCE_TOPIC, 0, offset)], max_bytes=1 << 22, partition_max_bytes=1 << 22))
            part = resp.responses[0].partitions[0]
            assert part.error_code == ErrorCode.NONE
            raw = bytes(part.records or b"")
            if not raw:
                return values
            for pos, header in rec.iter_batches(raw):
                for record in rec.iter_all_records(raw, pos, header):
                    values.append(int(record.value))
                    offset = record.offset + 1
    finally:
        await client.close()


@pytest.mark.parametrize("fsync", ["never", "always"])
async def test_idempotent_produce_and_commits_survive_20_sigkills(tmp_path: Path, fsync: str) -> None:
    rng = random.Random(11_20 + len(fsync))
    bp = BrokerProcess(tmp_path / "data", "--offsets-partitions", "3", "--default-partitions", "4", "--fsync", fsync).start()
    client = await RawClient.connect(bp.bootstrap, "setup")

    topics = [MetadataRequest.MetadataRequestTopic(name=TOPIC), MetadataRequest.MetadataRequestTopic(name=PRODUCE_TOPIC)]
    await client.request(MetadataRequest[4](topics=topics, allow_auto_topic_creation=True))
    await client.close()
    bp.wait_for(lambda r: r.get("event") == "coordinator loaded", 30)
    producer = Producer()
    acked: dict[tuple[str, int], int] = {}
    sent: dict[tuple[str, int], int] = {}
    try:
        for _ in range(ROUNDS):
            stop = asyncio.Event()
            tasks = [asyncio.create_task(_committer(bp.bootstrap, f"crash-group-{i}", acked, sent, stop)) for i in range(CLIENTS)]
            tasks.append(asyncio.create_task(producer.run(bp.bootstrap, stop)))
            await asyncio.sleep(rng.uniform(0.05, 0.3))
            bp.kill()
            stop.set()
            await asyncio.gather(*tasks)
            bp.start()
            await _verify(bp, acked, sent)
            stored = await _stored_values(bp.bootstrap)
            # Exactly once and in order: everything acknowledged, plus the unanswered batch if it landed.
            assert stored == list(range(len(stored))), stored[-20:]
            assert len(stored) in (producer.acked, producer.acked + PER_BATCH), (len(stored), producer.acked)
        assert producer.acked > ROUNDS * PER_BATCH and sum(acked.values()) > ROUNDS * CLIENTS, "too little load to prove anything"
    finally:
        if bp.alive:
            bp.kill()
