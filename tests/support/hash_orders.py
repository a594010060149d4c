"""The iteration orders of the two maps behind Kafka 4.4's ListGroups answer, as a real JVM gives
them for chosen keys: GroupMetadataManager's `groups` (a TimelineHashMap, BaseHashTable's order)
and CoordinatorRuntime's `coordinators` (a ConcurrentHashMap<TopicPartition, _>).

The cases below run through `dev.kaflet.tests.HashOrders` (tests/jvm/kafka-api-facts, on Kafka
4.4's own kafka-server-common) and their orders are kept in tests/unit/kafka_hash_orders.json,
which tests/unit/test_list_order.py checks kaflet's model against without a JVM;
tests/differential/test_reference_hash_orders.py checks that file against the JVM. To write it
again (after `make jvm`): `python -m tests.support.hash_orders --write`.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path
from typing import Any

from broker.coordinator.list_order import java_spread
from broker.coordinator.streams.javaorder import topic_partition_hash
from tests.support.jvm import classpath, java_binary

DATA = Path(__file__).resolve().parents[1] / "unit" / "kafka_hash_orders.json"
OFFSETS = "__consumer_offsets"


def _table_growing(n: int) -> list[list[str]]:
    """`n` ids put one after the other, the order after each (the table grows from 2 slots)."""
    ops: list[list[str]] = []
    for i in range(n):
        ops += [["put", f"group-{i}"], ["order"]]
    return ops


def _table_removals() -> list[list[str]]:
    """Removals never shrink the table; an id put again goes last into its slot."""
    ids = [f"g{i}" for i in range(12)]
    ops: list[list[str]] = [["put", g] for g in ids] + [["order"]]
    for g in ("g3", "g7", "g0", "g11", "g5"):
        ops += [["remove", g], ["order"]]
    for g in ("g0", "g7", "g12", "g3"):
        ops += [["put", g], ["order"]]
    for g in [*ids, "g12"]:
        ops.append(["remove", g])
    ops += [["order"], ["put", "g4"], ["put", "g9"], ["order"]]
    return ops


def _table_full_replace() -> list[list[str]]:
    """A put of an id already there grows a full table all the same (2 ids in 2 slots, then 5 in 4)."""
    ops: list[list[str]] = [["put", "a"], ["put", "b"], ["order"], ["put", "a"], ["order"]]
    ops += [["put", k] for k in ("c", "d", "e")] + [["order"], ["put", "d"], ["order"], ["put", "f"], ["order"]]
    # Five ids fill 4 slots; putting the first again makes 8, which shows once the fifth is gone.
    full = [f"full-6-{i}" for i in range(5)]
    ops += [["table"], *(["put", k] for k in full), ["put", full[0]], ["remove", full[4]], ["order"]]
    return ops


def _table_same_hash() -> list[list[str]]:
    """Ids of one String.hashCode ("Aa" and "BB") share a slot at every size: newest first."""
    same = ["xAaAa", "xAaBB", "xBBAa", "xBBBB"]
    ops: list[list[str]] = [["put", "other-1"], ["put", same[2]], ["put", same[0]], ["put", "other-2"], ["put", same[3]]]
    ops += [["order"], ["remove", same[0]], ["order"], ["put", same[1]], ["put", same[0]], ["order"]]
    ops += [["put", f"more-{i}"] for i in range(20)] + [["order"], ["put", same[2]], ["order"]]
    return ops


def _table_random(seed: int, pool: int, steps: int, every: int) -> list[list[str]]:
    """Puts and removes drawn at random over a pool of ids, the order every `every` steps."""
    rnd = random.Random(seed)
    ids = [f"{rnd.choice(['cg', 'orders', 'app', 'x'])}-{rnd.randrange(10**6)}" for _ in range(pool)]
    present: set[str] = set()
    ops: list[list[str]] = []
    for step in range(steps):
        g = rnd.choice(ids)
        if g in present and rnd.random() < 0.4:
            present.discard(g)
            ops.append(["remove", g])
        else:
            present.add(g)
            ops.append(["put", g])
        if step % every == every - 1:
            ops.append(["order"])
    return ops


def _colliding_topics(count: int, bits: int, seed: int) -> list[str]:
    """Topic names whose partition 0 falls into one ConcurrentHashMap bin of every table up to 2**bits."""
    rnd = random.Random(seed)
    mask = (1 << bits) - 1
    target = None
    out: list[str] = []
    while len(out) < count:
        name = f"t{rnd.randrange(10**9)}"
        b = java_spread(topic_partition_hash(name, 0)) & mask
        if target is None:
            target = b
        if b == target:
            out.append(name)
    return out


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "table_growing", "ops": _table_growing(48)},
        {"name": "table_removals", "ops": _table_removals()},
        {"name": "table_full_replace", "ops": _table_full_replace()},
        {"name": "table_same_hash", "ops": _table_same_hash()},
        {"name": "table_random_small", "ops": _table_random(1, 30, 200, 10)},
        {"name": "table_random_large", "ops": _table_random(2, 400, 1500, 250)},
    ]
    for n in (1, 5, 12, 13, 24, 25, 48, 49, 50, 100, 200):
        out.append({"name": f"chm_offsets_{n}", "chm": [[OFFSETS, p] for p in range(n)]})
    shuffled = list(range(50))
    random.Random(3).shuffle(shuffled)
    out.append({"name": "chm_offsets_50_shuffled", "chm": [[OFFSETS, p] for p in shuffled]})
    # Bins of several nodes: split at a resize (the lastRun rule), a ninth node resizing a small table
    # (tryPresize) and, in a table of 64 or more, a tree bin taking new nodes first.
    out.append({"name": "chm_shared_bins", "chm": [[t, 0] for t in _colliding_topics(6, 3, 4)] + [["s", p] for p in range(30)]})
    presize = [[t, 0] for t in _colliding_topics(12, 8, 7)] + [[f"v{i}", i % 3] for i in range(20)]
    out.append({"name": "chm_ninth_in_a_small_table", "chm": presize})
    rnd = random.Random(5)
    mixed = [[t, 0] for t in _colliding_topics(24, 12, 6)] + [[f"u{rnd.randrange(10**6)}", rnd.randrange(8)] for _ in range(60)]
    rnd.shuffle(mixed)
    out.append({"name": "chm_tree_bin", "chm": mixed})
    return out


def _script(case: dict[str, Any]) -> list[str]:
    if "chm" in case:
        return ["\t".join(["chm", *(f"{t}\t{p}" for t, p in case["chm"])])]
    return ["table", *("\t".join(op) for op in case["ops"])]  # ["table"]: a new map within the case


def run_jvm(all_cases: list[dict[str, Any]]) -> list[list[list[str]]]:
    """Each case's orders (a list of key lists; a partition as its decimal string), from the JVM."""
    script: list[str] = []
    counts = []
    for case in all_cases:
        lines = _script(case)
        script += lines
        counts.append(1 if "chm" in case else sum(1 for op in case["ops"] if op[0] == "order"))
    cmd = [java_binary(), "-cp", classpath("kafka-api-facts"), "dev.kaflet.tests.HashOrders"]
    out = subprocess.run(cmd, input="\n".join(script) + "\n", capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.split("\n")[:-1]
    assert len(lines) == sum(counts), (len(lines), sum(counts))
    result = []
    for n in counts:
        result.append([line.split("\t") if line else [] for line in lines[:n]])
        lines = lines[n:]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {DATA}")
    args = parser.parse_args()
    all_cases = cases()
    for case, orders in zip(all_cases, run_jvm(all_cases), strict=True):
        case["orders"] = orders
    text = json.dumps(all_cases, separators=(",", ":")) + "\n"
    if args.write:
        DATA.write_text(text)
        print(f"wrote {DATA} ({len(text)} bytes)")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
