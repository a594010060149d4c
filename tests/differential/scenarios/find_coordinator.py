"""FindCoordinator v0-v6: groups and transactional ids, single and batched keys (CO rules)."""

from __future__ import annotations

from tests.differential.harness import Registry
from tests.differential.scenarios.common import ApiKey, Side

scenarios = Registry()

VERSIONS = range(0, 7)
GROUP, TXN, SHARE = 0, 1, 2


async def find(s: Side, v: int, keys: list[str], key_type: int = GROUP) -> None:
    if v >= 4:
        await s.call("a", ApiKey.FIND_COORDINATOR, v, key_type=key_type, coordinator_keys=keys)
    elif v >= 1:
        await s.call("a", ApiKey.FIND_COORDINATOR, v, key=keys[0], key_type=key_type)
    else:
        await s.call("a", ApiKey.FIND_COORDINATOR, v, key=keys[0])


@scenarios.versions("co_6_group_coordinator", VERSIONS, rule="CO-6")
async def _(s: Side, v: int) -> None:
    await find(s, v, [s.group()])


@scenarios.versions("co_4_transaction_coordinator", range(1, 7), rule="CO-4")
async def _(s: Side, v: int) -> None:
    await find(s, v, [s.txn()], TXN)


@scenarios.versions("co_10_empty_key", VERSIONS, rule="CO-10")
async def _(s: Side, v: int) -> None:
    await find(s, v, [""])


@scenarios.versions("co_10_batched_keys", range(4, 7), rule="CO-10")
async def _(s: Side, v: int) -> None:
    await find(s, v, [s.group("x"), "", s.group("y"), s.group("x")])
    await find(s, v, [s.txn("x"), s.txn("y")], TXN)


@scenarios.versions("co_10_no_keys", range(4, 7), rule="CO-10")
async def _(s: Side, v: int) -> None:
    await find(s, v, [])


@scenarios.versions("co_8_share_key_before_v6", (4, 5), rule="CO-8")
async def _(s: Side, v: int) -> None:
    await find(s, v, [s.group()], SHARE)


@scenarios.versions("co_8_unknown_key_type", (1, 3, 4, 6), rule="CO-8")
async def _(s: Side, v: int) -> None:
    await find(s, v, [s.group(), s.group("b")], 7)


@scenarios.versions("co_8_transaction_key_type_with_empty_id", (1, 4), rule="CO-8")
async def _(s: Side, v: int) -> None:
    await find(s, v, [""], TXN)
