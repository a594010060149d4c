"""Transactions as the group coordinator meets them: InitProducerId v0-5, AddPartitionsToTxn v0-5,
AddOffsetsToTxn v0-4, EndTxn v0-4, TxnOffsetCommit v0-5 (TX), DescribeTransactions v0 and
ListTransactions v0-2. Producer ids differ between brokers and are compared by order of
appearance (normalize.py)."""

from __future__ import annotations

from typing import Any

from tests.differential.harness import Registry
from tests.differential.scenarios.common import (
    T1,
    T3,
    ApiKey,
    Side,
    commit,
    fetch,
    join_dynamic,
    stable_group,
    sync,
)

scenarios = Registry()

INIT_VERSIONS = range(0, 6)
ADD_PARTITIONS_VERSIONS = range(0, 6)
ADD_OFFSETS_VERSIONS = range(0, 5)
END_VERSIONS = range(0, 5)
TXN_COMMIT_VERSIONS = range(0, 6)
LIST_VERSIONS = range(0, 3)

TIMEOUT_MS = 60_000


def init_fields(v: int, txn: str | None, timeout_ms: int = TIMEOUT_MS, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    fields: dict[str, Any] = {"transactional_id": txn, "transaction_timeout_ms": timeout_ms}
    if v >= 3:
        fields.update(producer_id=producer_id, producer_epoch=epoch)
    return fields


async def init(s: Side, v: int, txn: str | None, actor: str = "p", **kw: Any) -> Any:
    return await s.call(actor, ApiKey.INIT_PRODUCER_ID, v, **init_fields(v, txn, **kw))


async def add_partitions(s: Side, v: int, txn: str, pid: int, epoch: int, topics: dict[str, list[int]], actor: str = "p") -> Any:
    listed = [{"name": t, "partitions": ps} for t, ps in topics.items()]
    if v >= 4:
        return await s.call(
            actor,
            ApiKey.ADD_PARTITIONS_TO_TXN,
            v,
            transactions=[{"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "verify_only": False, "topics": listed}],
        )
    return await s.call(
        actor,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        v,
        v3_and_below_transactional_id=txn,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=listed,
    )


async def add_offsets(s: Side, v: int, txn: str, pid: int, epoch: int, group: str, actor: str = "p") -> Any:
    return await s.call(actor, ApiKey.ADD_OFFSETS_TO_TXN, v, transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group)


async def end(s: Side, v: int, txn: str, pid: int, epoch: int, commit_it: bool, actor: str = "p") -> Any:
    return await s.call(actor, ApiKey.END_TXN, v, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit_it)


async def txn_commit(
    s: Side,
    v: int,
    txn: str,
    pid: int,
    epoch: int,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    actor: str = "p",
) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in offsets.items():
        entry: dict[str, Any] = {"partition_index": p, "committed_offset": o, "committed_metadata": "txn"}
        if v >= 2:
            entry["committed_leader_epoch"] = -1
        by_topic.setdefault(t, []).append(entry)
    fields: dict[str, Any] = {
        "transactional_id": txn,
        "group_id": group,
        "producer_id": pid,
        "producer_epoch": epoch,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    if v >= 3:
        fields.update(generation_id=generation, member_id=member_id, group_instance_id=instance_id)
    return await s.call(actor, ApiKey.TXN_OFFSET_COMMIT, v, **fields)


async def describe_txns(s: Side, ids: list[str]) -> Any:
    return await s.call("ctl", ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=ids)


async def settled(s: Side, txn: str) -> None:
    """Until the transaction's markers are written (PrepareCommit/PrepareAbort are over)."""
    await s.until(
        lambda: s.quiet("ctl", ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[txn]),
        lambda r: r.transaction_states[0].transaction_state in ("CompleteCommit", "CompleteAbort", "Empty"),
        f"{txn} completed",
    )


async def ongoing(s: Side, v_add: int = 3) -> tuple[str, Any]:
    """A transactional producer with an open transaction on T3-0."""
    txn = s.txn()
    p = await init(s, 4, txn)
    await add_partitions(s, v_add, txn, p.producer_id, p.producer_epoch, {T3: [0]})
    return txn, p


# -- InitProducerId ------------------------------------------------------------------------------


@scenarios.versions("ip_idempotent_producer", INIT_VERSIONS)
async def _(s: Side, v: int) -> None:
    await init(s, v, None)


@scenarios.versions("ip_transactional_producer_and_its_epochs", INIT_VERSIONS)
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    first = await init(s, v, txn)
    await init(s, v, txn)
    await describe_txns(s, [txn])
    _ = first


@scenarios.versions("ip_transaction_timeout_bounds", (0, 4))
async def _(s: Side, v: int) -> None:
    await init(s, v, s.txn("over"), timeout_ms=900_001)
    await init(s, v, s.txn("max"), timeout_ms=900_000)
    await init(s, v, s.txn("zero"), timeout_ms=0)
    await init(s, v, s.txn("negative"), timeout_ms=-1)
    await init(s, v, None, timeout_ms=-1)


@scenarios.versions("ip_empty_transactional_id", (0, 4))
async def _(s: Side, v: int) -> None:
    await init(s, v, "")


@scenarios("ip_resume_with_producer_id_and_epoch")
async def _(s: Side) -> None:
    txn = s.txn()
    p = await init(s, 4, txn)
    await init(s, 4, txn, producer_id=p.producer_id, epoch=p.producer_epoch)
    await init(s, 4, txn, producer_id=p.producer_id, epoch=p.producer_epoch)  # the old epoch again: fenced
    await init(s, 4, txn, producer_id=p.producer_id + 1000, epoch=0)
    await init(s, 4, s.txn("fresh"), producer_id=12345, epoch=3)


@scenarios("ip_init_aborts_the_open_transaction")
async def _(s: Side) -> None:
    txn, _p = await ongoing(s)
    await describe_txns(s, [txn])
    await init(s, 4, txn)
    await settled(s, txn)
    await describe_txns(s, [txn])


# -- AddPartitionsToTxn --------------------------------------------------------------------------


@scenarios.versions("apt_add_partitions", ADD_PARTITIONS_VERSIONS)
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    p = await init(s, 4, txn)
    await add_partitions(s, v, txn, p.producer_id, p.producer_epoch, {T3: [0, 1], T1: [0]})
    await add_partitions(s, v, txn, p.producer_id, p.producer_epoch, {T3: [1, 2]})
    await describe_txns(s, [txn])


@scenarios.versions("apt_unknown_topic_and_partition", (0, 3, 4, 5))
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    p = await init(s, 4, txn)
    await add_partitions(s, v, txn, p.producer_id, p.producer_epoch, {T3: [0, 9], s.topic("missing"): [0], T1: [0]})
    await describe_txns(s, [txn])


@scenarios.versions("apt_unknown_producer", (0, 3, 4))
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    await add_partitions(s, v, txn, 424242, 0, {T3: [0]})
    p = await init(s, 4, txn)
    await add_partitions(s, v, txn, p.producer_id + 7, p.producer_epoch, {T3: [0]})


@scenarios.versions("apt_old_and_future_epochs", (0, 2, 3, 4))
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    first = await init(s, 4, txn)
    second = await init(s, 4, txn)
    await add_partitions(s, v, txn, first.producer_id, first.producer_epoch, {T3: [0]})
    await add_partitions(s, v, txn, second.producer_id, second.producer_epoch + 1, {T3: [0]})


# -- AddOffsetsToTxn and TxnOffsetCommit ------------------------------------------------------------


@scenarios.versions("aot_add_offsets", ADD_OFFSETS_VERSIONS)
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    p = await init(s, 4, txn)
    await add_offsets(s, v, txn, p.producer_id, p.producer_epoch, s.group())
    await describe_txns(s, [txn])


@scenarios.versions("aot_unknown_producer_and_fenced_epoch", (0, 3))
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    await add_offsets(s, v, txn, 424242, 0, s.group())
    p = await init(s, 4, txn)
    await init(s, 4, txn)
    await add_offsets(s, v, txn, p.producer_id, p.producer_epoch, s.group())


@scenarios.versions("tx_4_offsets_pending_until_commit", TXN_COMMIT_VERSIONS, rule="TX-4")
async def _(s: Side, v: int) -> None:
    txn, g = s.txn(), s.group()
    await commit(s, "c", g, 9, {(T3, 0): 1})
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 5, (T3, 1): 6})
    await fetch(s, "c", g, 8, {T3: [0, 1]}, require_stable=True)
    await fetch(s, "c", g, 8, {T3: [0, 1]})
    await end(s, 3, txn, p.producer_id, p.producer_epoch, True)
    await settled(s, txn)
    await fetch(s, "c", g, 8, {T3: [0, 1]}, require_stable=True)


@scenarios("tx_4_aborted_offsets_are_dropped", rule="TX-4")
async def _(s: Side) -> None:
    txn, g = s.txn(), s.group()
    await commit(s, "c", g, 9, {(T3, 0): 1})
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await txn_commit(s, 3, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 5})
    await end(s, 3, txn, p.producer_id, p.producer_epoch, False)
    await settled(s, txn)
    await fetch(s, "c", g, 8, {T3: [0]}, require_stable=True)


@scenarios("tx_4_a_later_plain_commit_wins", rule="TX-4")
async def _(s: Side) -> None:
    txn, g = s.txn(), s.group()
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await txn_commit(s, 3, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 5})
    await commit(s, "c", g, 9, {(T3, 0): 9})
    await end(s, 3, txn, p.producer_id, p.producer_epoch, True)
    await settled(s, txn)
    await fetch(s, "c", g, 8, {T3: [0]})


@scenarios.versions("tx_1_without_add_offsets", (0, 2, 3, 4, 5), rule="TX-1", exclusive=True)
async def _(s: Side, v: int) -> None:
    txn, g = s.txn(), s.group()
    p = await init(s, 4, txn)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 5})


@scenarios.versions("tx_1_unknown_topic_and_empty_group", (0, 3, 5), rule="TX-1")
async def _(s: Side, v: int) -> None:
    txn, g = s.txn(), s.group()
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 5, (T3, 8): 1, (s.topic("missing"), 0): 2})
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, "", {(T3, 0): 5})


@scenarios.versions("tx_2_member_validation", (3, 5), rule="TX-2")
async def _(s: Side, v: int) -> None:
    txn, g = s.txn(), s.group()
    grp = await stable_group(s, g)
    a, gen = grp["members"]["a"], grp["generation"]
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 1}, generation=gen, member_id=a)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 2}, generation=gen + 1, member_id=a)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 3}, generation=gen, member_id="nobody")
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 4})
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, s.group("absent"), {(T3, 0): 5}, generation=3, member_id="m")


@scenarios("tx_2_completing_rebalance_is_not_refused", rule="TX-2")
async def _(s: Side) -> None:
    txn, g = s.txn(), s.group()
    a = await join_dynamic(s, "a", g, 9)
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await txn_commit(s, 3, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 1}, generation=a.generation_id, member_id=a.member_id)
    await sync(s, "a", g, 5, a.member_id, a.generation_id)


@scenarios.versions("tx_3_fenced_producer", (1, 3, 5), rule="TX-3")
async def _(s: Side, v: int) -> None:
    txn, g = s.txn(), s.group()
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await init(s, 4, txn)  # a new epoch: the open transaction is aborted, its markers written meanwhile
    await settled(s, txn)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 1})
    await txn_commit(s, v, txn, 424242, 0, g, {(T3, 0): 1})


# -- EndTxn -------------------------------------------------------------------------------------


@scenarios.versions("et_commit_and_abort", END_VERSIONS)
async def _(s: Side, v: int) -> None:
    txn, p = await ongoing(s)
    await end(s, v, txn, p.producer_id, p.producer_epoch, True)
    await settled(s, txn)
    await describe_txns(s, [txn])
    await add_partitions(s, 3, txn, p.producer_id, p.producer_epoch, {T1: [0]})
    await end(s, v, txn, p.producer_id, p.producer_epoch, False)
    await settled(s, txn)
    await describe_txns(s, [txn])


@scenarios.versions("et_without_a_transaction", (0, 3, 4))
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    p = await init(s, 4, txn)
    await end(s, v, txn, p.producer_id, p.producer_epoch, True)
    await end(s, v, txn, p.producer_id, p.producer_epoch, False)


@scenarios("et_repeated_and_opposite")
async def _(s: Side) -> None:
    txn, p = await ongoing(s)
    await end(s, 3, txn, p.producer_id, p.producer_epoch, True)
    await settled(s, txn)
    await end(s, 3, txn, p.producer_id, p.producer_epoch, True)  # a retry of the same: accepted
    await end(s, 3, txn, p.producer_id, p.producer_epoch, False)


@scenarios.versions("et_unknown_and_fenced", (0, 4))
async def _(s: Side, v: int) -> None:
    txn = s.txn()
    await end(s, v, txn, 424242, 0, True)
    p = await init(s, 4, txn)
    await init(s, 4, txn)
    await end(s, v, txn, p.producer_id, p.producer_epoch, True)


# -- DescribeTransactions and ListTransactions ----------------------------------------------------


@scenarios("dt_describe")
async def _(s: Side) -> None:
    txn, p = await ongoing(s)
    empty = s.txn("empty")
    await init(s, 4, empty, actor="q")
    await describe_txns(s, [txn, empty, s.txn("unknown"), txn])
    await describe_txns(s, [])
    _ = p


@scenarios.versions("lt_list", LIST_VERSIONS)
async def _(s: Side, v: int) -> None:
    _txn, p = await ongoing(s)
    await init(s, 4, s.txn("empty"), actor="q")
    fields: dict[str, Any] = {"state_filters": [], "producer_id_filters": []}
    if v >= 1:
        fields["duration_filter"] = -1
    if v >= 2:
        fields["transactional_id_pattern"] = None
    await s.call("ctl", ApiKey.LIST_TRANSACTIONS, v, **fields)
    await s.call("ctl", ApiKey.LIST_TRANSACTIONS, v, **{**fields, "state_filters": ["Ongoing", "NoSuchState"]})
    await s.call("ctl", ApiKey.LIST_TRANSACTIONS, v, **{**fields, "producer_id_filters": [p.producer_id]})
    if v >= 1:
        await s.call("ctl", ApiKey.LIST_TRANSACTIONS, v, **{**fields, "duration_filter": 3_600_000})
    if v >= 2:
        await s.call("ctl", ApiKey.LIST_TRANSACTIONS, v, **{**fields, "transactional_id_pattern": ".*txn\\.empty"})
        await s.call("ctl", ApiKey.LIST_TRANSACTIONS, v, **{**fields, "transactional_id_pattern": "("})


@scenarios.versions("tx_2_consumer_group_member", (3, 5), rule="TX-2")
async def _(s: Side, v: int) -> None:
    txn, g = s.txn(), s.group()
    k = await s.call(
        "k",
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=g,
        member_id="k-member-id-of-22chars",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[T3],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )
    p = await init(s, 4, txn)
    await add_offsets(s, 3, txn, p.producer_id, p.producer_epoch, g)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 1}, generation=k.member_epoch, member_id=k.member_id)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 2}, generation=k.member_epoch - 1, member_id=k.member_id)
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 3}, generation=k.member_epoch, member_id="nobody")
    await txn_commit(s, v, txn, p.producer_id, p.producer_epoch, g, {(T3, 0): 4})
