"""Server-side assignor cost and quality, in this process (no broker, no mock: assignors are pure functions).

Time: one `assign()` for `uniform`, `range` and `lag-aware`, homogeneous subscriptions to 10 topics, 1,000
partitions x 100 members and 10,000 partitions x 1,000 members, on two inputs: a fresh group (no current
assignment, uniform's cheapest case) and a settled group that one member just joined (each member's current
assignment is uniform's previous answer: the usual epoch bump).
The lag closure is the coordinator's own over stand-ins for the partition logs and the offsets store (raw
OffsetCommitValue records), with a few partitions never committed. Baseline: `uniform` on the same input; issue 13's target is lag-aware at most
2x uniform (ratio uniform/lag-aware >= 0.5).

Quality: the lag spread (max minus min total assigned lag per member) of each assignor on a skewed workload
(one partition in ten is hot: lag 100,000..200,000 against 0..10,000 for the rest), 1,000 partitions x 100
members and 120 partitions x 7 members.
"""

from __future__ import annotations

import gc
import itertools
import random
import time

from bench.context import Context, Row, Target, median
from broker.coordinator.assignors import GroupSpec, MemberSpec, get
from broker.coordinator.assignors.base import lag_spread
from broker.coordinator.consumer.lag import lag_function
from storage.offsets_records import offset_commit_value

ABOUT = "server-side assignors: assign() time for uniform, range, lag-aware; lag spread on a skewed workload"

TOPICS = 10


class _Log:
    """What the lag closure reads of a PartitionLog: its next offset and log start offset."""

    __slots__ = ("log_start_offset", "next_offset")

    def __init__(self, start: int, end: int) -> None:
        self.log_start_offset = start
        self.next_offset = end


class _Logs:
    """The LogManager's lookup: (topic, partition) -> log."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], _Log] = {}

    def get(self, topic: str, partition: int) -> _Log | None:
        return self.logs.get((topic, partition))


def make_spec(partitions: int, members: int, lags: list[int] | None = None, seed: int = 1) -> GroupSpec:
    """A group of `members` on 10 topics of `partitions` in all. The lag closure is the coordinator's own
    (broker/coordinator/consumer/lag.py) over stand-ins for the partition logs and for the offsets store's
    topic -> partition -> OffsetCommitValue bytes; one partition in 97 was never committed (`earliest`)."""
    rng = random.Random(seed)
    per_topic = partitions // TOPICS
    topics = [f"topic-{i:03d}" for i in range(TOPICS)]
    counts = dict.fromkeys(topics, per_topic)
    if lags is None:
        lags = [rng.randrange(0, 100_000) for _ in range(partitions)]
    logs = _Logs()
    committed: dict[str, dict[int, bytes]] = {t: {} for t in topics}
    for i, lag in enumerate(lags):
        t, p = topics[i // per_topic], i % per_topic
        end = lag + 1_000_000
        if i % 97 == 0:
            logs.logs[(t, p)] = _Log(end - lag, end)
        else:
            logs.logs[(t, p)] = _Log(0, end)
            committed[t][p] = offset_commit_value(end - lag, -1, "", 0)
    ids = [f"consumer-{rng.getrandbits(64):016x}" for _ in range(members)]
    spec_members = {m: MemberSpec(m, None, None, frozenset(topics)) for m in ids}
    return GroupSpec("bench", spec_members, counts, lag_function(logs, committed, "earliest"))


def time_all(spec: GroupSpec, reps: int) -> dict[str, float]:
    """Median CPU seconds of one assign() per assignor, the assignors interleaved so that load hits all alike."""
    runs: dict[str, list[float]] = {name: [] for name in ("uniform", "range", "lag-aware")}
    for _ in range(reps):
        for name, out in runs.items():
            assignor = get(name)
            gc.collect()
            gc.disable()
            try:
                t0 = time.process_time()
                assignor.assign(spec)
                out.append(time.process_time() - t0)
            finally:
                gc.enable()
    return {name: median(out) for name, out in runs.items()}


def skewed_lags(partitions: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(100_000, 200_000) if rng.random() < 0.1 else rng.randrange(0, 10_000) for _ in range(partitions)]


def joined(spec: GroupSpec) -> GroupSpec:
    """The same group one member later: the others hold uniform's assignment for the group without it."""
    mids = list(spec.members)
    before = GroupSpec(spec.group_id, {m: spec.members[m] for m in mids[:-1]}, spec.partitions, spec.lag)
    prev = get("uniform").assign(before)
    members = {m: MemberSpec(m, s.instance_id, s.rack_id, s.topics, prev.get(m, {})) for m, s in spec.members.items()}
    return GroupSpec(spec.group_id, members, spec.partitions, spec.lag)


def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    reps = max(ctx.reps, 1 if ctx.quick else 15)
    sizes = [(1_000, 100), (10_000, 1_000)] if not ctx.quick else [(200, 20)]
    for (partitions, members), (case, shape) in itertools.product(
        sizes, [("fresh", make_spec), ("join", lambda p, m: joined(make_spec(p, m)))]
    ):
        spec = shape(partitions, members)
        times = time_all(spec, reps)
        label = f"{partitions:,}p x {members:,}m {case}"
        ctx.raw[label] = times
        uniform_ms = times["uniform"] * 1000
        rows.append(Row(f"uniform assign {label}", "ms CPU", uniform_ms, compare=False))
        rows.append(
            Row(f"range assign {label}", "ms CPU", times["range"] * 1000, uniform_ms, higher_is_better=False, baseline_name="uniform")
        )
        rows.append(
            Row(
                f"lag-aware assign {label}",
                "ms CPU",
                times["lag-aware"] * 1000,
                uniform_ms,
                higher_is_better=False,
                baseline_name="uniform",
                target=Target("ratio>=", 0.5),
            )
        )
    for partitions, members in [(1_000, 100), (120, 7)] if not ctx.quick else [(120, 7)]:
        spec = make_spec(partitions, members, lags=skewed_lags(partitions))
        spreads = {name: lag_spread(get(name).assign(spec), spec.lag) for name in ("lag-aware", "uniform", "range")}
        label = f"{partitions:,}p x {members}m"
        ctx.raw[f"spread {label}"] = spreads
        base = spreads["range"]
        for name, spread in spreads.items():
            rows.append(
                Row(
                    f"lag spread {name}, skewed {label}",
                    "records",
                    float(spread),
                    float(base) if name != "range" else None,
                    higher_is_better=False,
                    baseline_name="range",
                )
            )
    return rows
