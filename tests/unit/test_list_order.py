"""LI-4: the order of a ListGroups answer. kaflet's models of the two maps Kafka 4.4 iterates for
it (broker/coordinator/list_order.py) against the orders a real JVM gave for the same keys and
operations (tests/unit/kafka_hash_orders.json, written by tests/support/hash_orders.py with
Kafka 4.4's own TimelineHashMap and JDK 17's ConcurrentHashMap), and the shard's group dicts that
keep the model of each shard's table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from broker.coordinator.list_order import GroupTable, concurrent_hashmap_order_by, coordinator_partitions
from broker.coordinator.streams.javaorder import topic_partition_hash
from protocol.javahash import java_string_hashcode

DATA = Path(__file__).parent / "kafka_hash_orders.json"
CASES: list[dict[str, Any]] = json.loads(DATA.read_text())


def _case(name: str) -> dict[str, Any]:
    return next(c for c in CASES if c["name"] == name)


def _table_orders(ops: list[list[str]]) -> list[list[str]]:
    table = GroupTable()
    d: Any = table.new_dict()
    orders = []
    for op in ops:
        if op[0] == "put":
            d[op[1]] = op[1]
        elif op[0] == "remove":
            d.pop(op[1], None)
        elif op[0] == "table":
            table = GroupTable()
            d = table.new_dict()
        else:
            orders.append(list(table))
    return orders


@pytest.mark.parametrize("name", [c["name"] for c in CASES if "ops" in c])
def test_li_4_group_table_iterates_as_kafkas_timeline_hashmap(name: str) -> None:
    case = _case(name)
    assert _table_orders(case["ops"]) == case["orders"]


@pytest.mark.parametrize("name", [c["name"] for c in CASES if "chm" in c])
def test_li_4_coordinator_partitions_iterate_as_a_concurrent_hashmap(name: str) -> None:
    case = _case(name)
    keys = [(t, p) for t, p in case["chm"]]
    got = concurrent_hashmap_order_by(keys, lambda k: topic_partition_hash(*k))
    assert [x for t, p in got for x in (t, str(p))] == case["orders"][0]


def test_li_4_the_jvm_data_covers_what_the_model_must_get_right() -> None:
    """The cases are not trivial: tables that grew and reordered, bins shared and split."""
    growing = _case("table_growing")["orders"]
    assert any(o != sorted(o, key=lambda g: int(g.split("-")[1])) for o in growing)
    same = _case("table_same_hash")
    hashes = {java_string_hashcode(k) for k in ("xAaAa", "xAaBB", "xBBAa", "xBBBB")}
    assert len(hashes) == 1 and same["orders"][0].index("xBBBB") < same["orders"][0].index("xBBAa")
    # Kafka's 50 partitions of __consumer_offsets come in neither numeric order nor reversed.
    fifty = [int(p) for p in _case("chm_offsets_50")["orders"][0][1::2]]
    assert sorted(fifty) == list(range(50)) and fifty not in (list(range(50)), list(range(49, -1, -1)))
    assert list(coordinator_partitions("__consumer_offsets", 50)) == fifty
    assert list(coordinator_partitions("__consumer_offsets", 5)) == [0, 3, 4, 1, 2]


def test_li_4_a_replacement_keeps_the_place_and_a_full_table_grows_on_it() -> None:
    table = GroupTable()
    table.put("a")
    table.put("b")
    assert table.capacity == 2
    table.put("a")  # (2 + 1) * 0.75 > 2: BaseHashTable grows before it looks for the key
    assert (table.capacity, len(table)) == (4, 2)


def test_li_4_removal_never_shrinks_the_table() -> None:
    table = GroupTable()
    for i in range(30):
        table.put(f"g{i}")
    grown = table.capacity
    for i in range(29):
        table.remove(f"g{i}")
    assert (table.capacity, list(table)) == (grown, ["g29"])


def _same_slot_ids() -> list[str]:
    """Ids of one String.hashCode, so one slot of the table at every size."""
    return ["pAaAa", "pAaBB", "pBBAa", "pBBBB"]


def test_li_4_a_group_that_changes_type_keeps_its_place_when_put_over() -> None:
    """A consumer group replacing a simple classic group takes its place (Kafka puts the new
    group over the old one); one made after the old group's tombstone goes to the end of its slot."""
    a, b, c, _ = _same_slot_ids()
    table = GroupTable()
    classic: Any = table.new_dict()
    consumer: Any = table.new_dict()
    classic[a] = "simple"
    classic[b] = "simple"
    classic[c] = "simple"
    assert list(table) == [c, b, a]
    consumer[a] = "consumer"  # put over the classic group, then the classic dict lets it go
    del classic[a]
    assert list(table) == [c, b, a]
    del classic[b]  # a tombstone first, then the consumer group's records
    consumer[b] = "consumer"
    assert list(table) == [b, c, a]


def test_li_4_swap_changes_the_group_without_a_put() -> None:
    table = GroupTable()
    groups: Any = table.new_dict()
    groups["a"] = 1
    groups["b"] = 2
    groups.swap("a", 3)  # a put here would grow the full table
    assert (groups["a"], table.capacity) == (3, 2)
    with pytest.raises(KeyError):
        groups.swap("nope", 1)


def test_li_4_group_dicts_change_only_through_the_table() -> None:
    table = GroupTable()
    groups: Any = table.new_dict()
    groups["a"] = 1
    assert groups.pop("a") == 1 and groups.pop("a", None) is None and "a" not in table
    for change in (lambda: groups.update(b=1), lambda: groups.setdefault("b", 1), groups.clear, groups.popitem):
        with pytest.raises(TypeError):
            change()
    with pytest.raises(KeyError):
        groups.pop("missing")
