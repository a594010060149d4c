"""Transaction requests for raw-protocol tests: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, transactional batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from protocol import records as r
from tests.support import data as d
from tests.support.raw_client import RawClient

_AT = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
_ATX = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
_CT = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
_CP = _CT.TxnOffsetCommitRequestPartition


@dataclass
class Producer:
    """A transactional producer driven by hand: its id, epoch and per-partition sequences."""

    client: RawClient
    tid: str
    pid: int = -1
    epoch: int = -1
    seq: dict[tuple[str, int], int] | None = None

    async def init(self, timeout_ms: int = 60000, version: int = 4, expected: bool = False) -> Any:
        resp = await init_producer_id(
            self.client, self.tid, timeout_ms, version, self.pid if expected else -1, self.epoch if expected else -1
        )
        if resp.error_code == 0:
            self.pid, self.epoch, self.seq = resp.producer_id, resp.producer_epoch, {}
        return resp

    async def add(self, parts: dict[str, list[int]], version: int = 3) -> dict[tuple[str, int], int]:
        return await add_partitions(self.client, self.tid, self.pid, self.epoch, parts, version)

    async def add_offsets(self, group: str, version: int = 3) -> int:
        resp = await self.client.request(
            AddOffsetsToTxnRequest(
                version=version, transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch, group_id=group
            )
        )
        return resp.error_code

    async def produce(self, topic: str, partition: int, n: int = 1, value: bytes = b"v", epoch: int | None = None) -> Any:
        assert self.seq is not None
        seq = self.seq.get((topic, partition), 0)
        batch = d.batch(
            n,
            value=value,
            producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=seq,
            attributes=r.TRANSACTIONAL_BIT,
        )
        res = d.produce_result(await self.client.request(d.produce(topic, partition, batch, transactional_id=self.tid)))
        if res.error_code == 0:
            self.seq[(topic, partition)] = seq + n
        return res

    async def end(self, commit: bool, version: int = 3) -> int:
        resp = await self.client.request(
            EndTxnRequest(version=version, transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch, committed=commit)
        )
        return resp.error_code

    async def commit_offsets(
        self, group: str, offsets: dict[tuple[str, int], int], version: int = 3, **kw: Any
    ) -> dict[tuple[str, int], int]:
        return await txn_offset_commit(self.client, self.tid, group, self.pid, self.epoch, offsets, version, **kw)


async def init_producer_id(
    client: RawClient, tid: str | None, timeout_ms: int = 60000, version: int = 4, pid: int = -1, epoch: int = -1
) -> Any:
    req = InitProducerIdRequest(
        version=version, transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch
    )
    return await client.request(req, version=version)


async def add_partitions(
    client: RawClient, tid: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3
) -> dict[tuple[str, int], int]:
    topics = [_AT(name=t, partitions=ps) for t, ps in parts.items()]
    if version >= 4:
        req = AddPartitionsToTxnRequest(
            version=version,
            transactions=[_ATX(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=False, topics=topics)],
        )
        resp = await client.request(req, version=version)
        assert resp.error_code == 0
        (result,) = resp.results_by_transaction
        results = result.topic_results
    else:
        req = AddPartitionsToTxnRequest(
            version=version,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=topics,
        )
        resp = await client.request(req, version=version)
        results = resp.results_by_topic_v3_and_below
    return {(t.name, p.partition_index): p.partition_error_code for t in results for p in t.results_by_partition}


async def txn_offset_commit(
    client: RawClient,
    tid: str,
    group: str | None,
    pid: int,
    epoch: int,
    offsets: dict[tuple[str, int], int],
    version: int = 3,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "",
) -> dict[tuple[str, int], int]:
    topics: dict[str, list[Any]] = {}
    for (topic, p), offset in offsets.items():
        topics.setdefault(topic, []).append(
            _CP(partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=metadata)
        )
    req = TxnOffsetCommitRequest(
        version=version,
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[_CT(name=t, partitions=ps) for t, ps in topics.items()],
    )
    resp = await client.request(req, version=version)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
