"""KS-15..KS-17: the sticky task assignor and Java's iteration orders it depends on.

The expected assignments were computed by Kafka 4.4's own StickyTaskAssignor (its class in the
kafka-group-coordinator 4.4.0 jar, called with the same GroupSpec and TopologyDescriber); the
HashMap orders by Java 17's HashMap. A case is "standby replicas", members as
"id:process:active tasks:standby tasks:task offsets", and sub-topologies as "id:tasks:stateful".
tests/differential/streams/ compares whole groups' assignments with a live Kafka as well.
"""

from __future__ import annotations

import pytest

from broker.coordinator.streams import assignor as sticky
from broker.coordinator.streams.javaorder import JavaPriorityQueue, compare_numbers, hashmap_order, topic_partition_hash

KAFKA_ASSIGNMENTS = [
    (
        1,
        "m0:pA::,m1:pA::,m2:pB::,m3:pC::",
        "0:6:1,1:4:0,2:6:1",
        {
            "m0": "0-0;0-5;1-3;2-3|0-1;0-4;2-2",
            "m1": "0-3;1-1;2-1;2-5|0-2;2-0",
            "m2": "0-2;0-4;2-0;2-2|0-0;0-5;2-3;2-4",
            "m3": "0-1;1-0;1-2;2-4|0-3;2-1;2-5",
        },
    ),
    (0, "a:p1::,b:p2::,c:p3::", "0:5:0,1:5:1", {"a": "0-0;1-0;1-2;1-4|", "b": "0-2;0-4;1-1|", "c": "0-1;0-3;1-3|"}),
    (2, "a:p1::,b:p2::", "0:4:1", {"a": "0-1;0-3|0-0;0-2", "b": "0-0;0-2|0-1;0-3"}),
    (
        1,
        "x:p1:0-0;0-1;0-2;1-0:0-3,y:p2:0-3;1-1:0-0;0-1,z:p3::",
        "0:4:1,1:2:0",
        {"x": "0-0;1-0|0-2;0-3", "y": "0-3;1-1|0-1", "z": "0-1;0-2|0-0"},
    ),
    (
        1,
        "m1:pA:0-0;0-1:,m2:pB:0-2:0-0,m3:pC::0-1,m4:pD::,m5:pD::",
        "0:6:1,1:3:1",
        {"m1": "0-0;0-1|0-4;1-1", "m2": "0-2;1-2|0-0;0-5", "m3": "0-3;1-0|0-1;0-2", "m4": "0-4;1-1|1-0", "m5": "0-5|0-3;1-2"},
    ),
    (1, "r:pX::0-0:0-1-100;0-2-50,s:pY::0-2:0-1-70;0-0-10,t:pZ::", "0:3:1", {"r": "0-0|0-1", "s": "0-1|0-2", "t": "0-2|0-0"}),
    (
        0,
        "9a73b97448563f0:proc-0:0-0:1-0:1-1-866,m1:00000000-0000-0000-0000-000000000004:0-0;0-1:1-0;1-1:1-1-405",
        "0:5:0,1:2:0",
        {"9a73b97448563f0": "0-0;0-2;0-4;1-1|", "m1": "0-1;0-3;1-0|"},
    ),
    (
        1,
        "195f84885c13282b:00000000-0000-0000-0000-000000000001:1-0:1-6:,m1:p2:1-1:1-6:1-0-342,m2:00000000-0000-0000-0000-000000000000:1-2;1-4;1-6::,m3:p2:1-1:1-1:,m4:proc-3::1-2;1-6:0-0-722;1-6-166,member-5:proc-3:1-4:0-0:",
        "0:1:0,1:7:1",
        {
            "195f84885c13282b": "1-0;1-5|1-4",
            "m1": "1-3|1-0",
            "m2": "1-2;1-6|1-3",
            "m3": "1-1|1-5",
            "m4": "|1-1;1-2;1-6",
            "member-5": "0-0;1-4|",
        },
    ),
    (
        2,
        "member-0:p0::,member-1:p0::,member-2:p1::,member-3:p1::,member-4:p2::,member-5:p3::,member-6:p3::",
        "0:8:1,1:3:1,2:5:0",
        {
            "member-0": "0-5;2-0|0-2;0-4;1-1",
            "member-1": "0-0;0-7|0-1;0-3;0-6;1-2",
            "member-2": "0-2;1-2;2-3|0-0;0-5;1-0",
            "member-3": "0-4;2-1|0-1;0-7;1-1",
            "member-4": "0-3;1-1|0-0;0-6;1-0;1-2",
            "member-5": "0-1;1-0;2-4|0-3;0-5",
            "member-6": "0-6;2-2|0-2;0-4;0-7",
        },
    ),
]


def _tasks(text: str) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for t in filter(None, text.split(";")):
        sub, partition = t.split("-")[:2]
        out.setdefault(sub, set()).add(int(partition))
    return {k: frozenset(v) for k, v in out.items()}


def _offsets(text: str) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for t in filter(None, text.split(";")):
        sub, partition, offset = t.split("-")
        out.setdefault(sub, {})[int(partition)] = int(offset)
    return out


def _run(standby: int, members: str, subtopologies: str) -> dict[str, str]:
    specs = {}
    for m in members.split(","):
        f = m.split(":")
        specs[f[0]] = sticky.MemberSpec(f[1], _tasks(f[2]), _tasks(f[3]), _offsets(f[4] if len(f) > 4 else ""))
    tasks, stateful = {}, set()
    for s in subtopologies.split(","):
        sid, n, state = s.split(":")
        tasks[sid] = int(n)
        if state == "1":
            stateful.add(sid)
    result = sticky.assign(specs, sticky.TopologySpec(tasks, frozenset(stateful)), standby)

    def fmt(m: dict[str, set[int]]) -> str:
        return ";".join(f"{k}-{p}" for k in sorted(m) for p in sorted(m[k]))

    return {mid: fmt(a.active) + "|" + fmt(a.standby) for mid, a in result.items()}


@pytest.mark.parametrize(("standby", "members", "subtopologies", "expected"), KAFKA_ASSIGNMENTS)
def test_ks_15_sticky_assignor_assigns_as_kafka(standby: int, members: str, subtopologies: str, expected: dict[str, str]) -> None:
    assert _run(standby, members, subtopologies) == expected


def test_ks_16_every_task_once_balanced_and_standbys_off_the_active_process() -> None:
    members = ",".join(f"m{i}:p{i % 3}::" for i in range(6))
    result = _run(1, members, "0:12:1,1:6:0")
    active = [t for r in result.values() for t in filter(None, r.split("|")[0].split(";"))]
    assert sorted(active) == sorted([f"0-{p}" for p in range(12)] + [f"1-{p}" for p in range(6)])
    counts = [len(list(filter(None, r.split("|")[0].split(";")))) for r in result.values()]
    assert max(counts) - min(counts) <= 1
    process_of = {f"m{i}": f"p{i % 3}" for i in range(6)}
    active_process = {t: process_of[m] for m, r in result.items() for t in filter(None, r.split("|")[0].split(";"))}
    standbys = [(m, t) for m, r in result.items() for t in filter(None, r.split("|")[1].split(";"))]
    assert sorted(t for _, t in standbys) == sorted(f"0-{p}" for p in range(12))  # stateful tasks only, one replica each
    assert all(active_process[t] != process_of[m] for m, t in standbys)


def test_ks_17_tasks_stay_with_their_member() -> None:
    first = _run(0, "a:p1::,b:p2::", "0:4:0")
    previous = ",".join(f"{m}:p{i + 1}:{r.split('|')[0]}:" for i, (m, r) in enumerate(sorted(first.items())))
    again = _run(0, previous + ",c:p3::", "0:4:0")
    for member in ("a", "b"):
        kept = set(again[member].split("|")[0].split(";")) & set(first[member].split("|")[0].split(";"))
        assert kept, (first, again)  # each keeps some of its tasks; the newcomer takes the rest
    assert again["c"].split("|")[0]


def test_java_hashmap_orders() -> None:
    """Java 17's HashMap.keySet() for these keys, put in this order (and with computeIfAbsent)."""
    assert hashmap_order(["c", "a", "b", "zz", "member-1", "member-2"]) == ["zz", "a", "b", "c", "member-1", "member-2"]
    fifteen = [f"member-{i}" for i in range(15)]
    java = "member-5,member-6,member-14,member-3,member-13,member-4,member-12,member-9,member-11,member-10,member-7,member-8,member-1,member-2,member-0"
    assert hashmap_order(fifteen) == java.split(",") == hashmap_order(fifteen, 15)
    assert hashmap_order(["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa"]) == ["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa"]  # equal hashCodes
    assert hashmap_order(["p1", "p2"], 2) == ["p1", "p2"]
    assert hashmap_order(["p1", "p2"], 2, compute_if_absent=True) == ["p2", "p1"]
    uuid4, proc0 = "00000000-0000-0000-0000-000000000004", "proc-0"
    assert hashmap_order([uuid4, proc0], 2, compute_if_absent=True) == [proc0, uuid4]
    # TopicPartition.hashCode(), which orders StreamsGroupDescribe's answers by coordinator partition
    assert (topic_partition_hash("__consumer_offsets", 3), topic_partition_hash("__consumer_offsets", 49)) == (-970370315, -970368889)


def test_java_priority_queue_order() -> None:
    """java.util.PriorityQueue with equal keys: the same polls as Java's (checked against Java 17)."""
    queue: JavaPriorityQueue[list[int]] = JavaPriorityQueue(lambda a, b: compare_numbers(a[0], b[0]))
    for item in ([1, 0], [0, 1], [1, 2], [0, 3], [2, 4], [0, 5], [1, 6], [0, 7]):
        queue.add(item)
    polled = []
    while len(queue):
        x = queue.poll()
        assert x is not None
        polled.append(x[1])
        if x[0] == 0 and x[1] < 4:
            x[0] = 1
            queue.add(x)
    assert polled == [1, 3, 7, 5, 6, 2, 1, 0, 3, 4]
