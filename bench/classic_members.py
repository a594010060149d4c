"""Cheap classic group members for benchmarks and tests of large groups: a thousand raw JoinGroup/SyncGroup/
Heartbeat/LeaveGroup clients in one asyncio process, one connection each (a parked JoinGroup holds its
connection on every broker, as Kafka's network layer reads one request at a time per connection).

Each member behaves as a consumer with the range assignor does: it joins (v4+: MEMBER_ID_REQUIRED, then again
with the id it was given) with a ConsumerProtocolSubscription to one topic; the leader computes a range
assignment (members by id, contiguous runs of partitions) and sends it in its SyncGroup, the others send none;
each member then heartbeats every `heartbeat_s` and rejoins when told the group rebalances (or that it is
unknown). Requests are kafka-python's schema classes over bench/group_members.py's pipelined Connection.

`run_rebalances(bootstrap, spec)` forms the group, times the first rebalance (first JoinGroup sent -> every
member synced at one generation with partitions covering the topic exactly once), then makes one member leave
and times the second (LeaveGroup sent -> every survivor synced again, covering the topic exactly once).
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

from bench.group_members import Connection
from broker.coordinator.consumer_protocol import subscribed_topics
from tests.support.groups import assignment, subscription

MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 79, 25, 27

# The same versions on every broker: the newest before each API turned flexible (KIP-482), which the librdkafka
# mock serves (it closes the connection of a flexible JoinGroup); from JoinGroup v5 and SyncGroup/Heartbeat/
# LeaveGroup v3 requests carry group_instance_id and LeaveGroup takes a list of members.
VERSIONS = {"join": 5, "sync": 3, "heartbeat": 3, "leave": 3}
API_KEYS = {"join": 11, "sync": 14, "heartbeat": 12, "leave": 13}


def versions_for(bootstrap: str, **override: int) -> dict[str, int]:
    """VERSIONS (with `override`), once the broker says it serves them."""
    from bench.wire import api_versions

    served = api_versions(bootstrap)
    versions = {**VERSIONS, **override}
    for name, key in API_KEYS.items():
        low, high = served.get(key, (0, -1))
        if not low <= versions[name] <= high:
            raise RuntimeError(f"the broker serves {name} v{low}-v{high}; classic members send v{versions[name]}")
    return versions


def leave_request(group: str, member_id: str, version: int) -> Any:
    if version < 3:
        return LeaveGroupRequest[version](group_id=group, member_id=member_id)
    identity = LeaveGroupRequest.MemberIdentity(member_id=member_id, group_instance_id=None, reason=None)
    return LeaveGroupRequest[version](group_id=group, members=[identity])


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """A ConsumerProtocolAssignment's partitions (the v0 layout every version starts with)."""
    if not data:
        return {}
    pos = 2
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(topics):
        (n,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
        (count,) = struct.unpack_from(">i", data, pos)
        out[topic] = list(struct.unpack_from(f">{count}i", data, pos + 4))
        pos += 4 + 4 * count
    return out


def range_assign(members: list[tuple[str, bytes]], topic: str, partitions: int) -> dict[str, bytes]:
    """The leader's assignment: the members subscribed to `topic`, by member id, each given a contiguous run of
    its partitions (the first `partitions % n` one more), as Kafka's RangeAssignor does for one topic."""
    subscribed = sorted(mid for mid, metadata in members if topic in (subscribed_topics(metadata) or ()))
    out = {mid: assignment({}) for mid, _ in members}
    if not subscribed:
        return out
    per, extra = divmod(partitions, len(subscribed))
    start = 0
    for i, mid in enumerate(subscribed):
        count = per + (1 if i < extra else 0)
        out[mid] = assignment({topic: list(range(start, start + count))})
        start += count
    return out


@dataclass
class ClassicSpec:
    group: str
    members: int
    topic: str
    partitions: int
    versions: dict[str, int] = field(default_factory=lambda: dict(VERSIONS))
    session_timeout_ms: int = 30_000
    rebalance_timeout_ms: int = 60_000
    heartbeat_s: float = 1.0
    deadline_s: float = 120.0  # for each rebalance
    leave_one: bool = True  # then time a second rebalance after one member leaves
    broker_pid: int = 0  # when on this machine: its RSS before the first join and once the group is stable


@dataclass
class ClassicMember:
    conn: Connection
    member_id: str = ""
    generation: int = -1
    synced: bool = False  # holds the assignment of `generation`
    owned: dict[str, list[int]] = field(default_factory=dict)
    joins: int = 0
    errors: Counter[int] = field(default_factory=Counter)


class ClassicGroup:
    """`spec.members` raw classic members of one group, each a task on its own connection."""

    def __init__(self, spec: ClassicSpec, conns: list[Connection]) -> None:
        self.spec = spec
        self.members = [ClassicMember(c) for c in conns]
        self.changed = asyncio.Event()  # a member synced or lost its assignment
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.leader_assignments = 0
        self.syncs_sent: Counter[int] = Counter()  # generation -> followers that sent their SyncGroup
        self.sync_sent = asyncio.Event()

    @classmethod
    async def open(cls, bootstrap: str, spec: ClassicSpec) -> ClassicGroup:
        conns = await asyncio.gather(*(Connection.open(bootstrap) for _ in range(spec.members)))
        return cls(spec, list(conns))

    def start(self) -> None:
        for i, m in enumerate(self.members):
            self.tasks[i] = asyncio.ensure_future(self._live_or_report(m))

    def _join(self, m: ClassicMember) -> Any:
        s = self.spec
        return JoinGroupRequest[s.versions["join"]](
            group_id=s.group,
            session_timeout_ms=s.session_timeout_ms,
            rebalance_timeout_ms=s.rebalance_timeout_ms,
            member_id=m.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription([s.topic]))],
            reason=None,
        )

    def _sync(self, m: ClassicMember, generation: int, assignments: dict[str, bytes]) -> Any:
        return SyncGroupRequest[self.spec.versions["sync"]](
            group_id=self.spec.group,
            generation_id=generation,
            member_id=m.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=k, assignment=v) for k, v in assignments.items()],
        )

    async def _live_or_report(self, m: ClassicMember) -> None:
        try:
            await self._live(m)
        finally:
            self.changed.set()  # wakes wait_complete, which reports a member that failed

    def _lost(self, m: ClassicMember) -> None:
        if m.synced:
            m.synced = False
            self.changed.set()

    async def _join_and_sync(self, m: ClassicMember) -> None:
        s = self.spec
        while True:
            self._lost(m)
            m.joins += 1
            joined = await m.conn.request(self._join(m))
            if joined.error_code:
                m.errors[joined.error_code] += 1
                if joined.error_code == MEMBER_ID_REQUIRED:
                    m.member_id = joined.member_id
                    continue
                if joined.error_code == UNKNOWN_MEMBER_ID:
                    m.member_id = ""
                await asyncio.sleep(0.1)  # a client's retry backoff
                continue
            m.member_id = joined.member_id
            assignments: dict[str, bytes] = {}
            if joined.leader == joined.member_id:
                assignments = range_assign([(x.member_id, x.metadata) for x in joined.members], s.topic, s.partitions)
                self.leader_assignments += 1
                await self._followers_synced(joined.generation_id, len(joined.members) - 1)
            else:
                self.syncs_sent[joined.generation_id] += 1
                self.sync_sent.set()
            synced = await m.conn.request(self._sync(m, joined.generation_id, assignments))
            if synced.error_code:
                m.errors[synced.error_code] += 1
                if synced.error_code == UNKNOWN_MEMBER_ID:
                    m.member_id = ""
                continue
            m.generation, m.owned, m.synced = joined.generation_id, parse_assignment(synced.assignment), True
            self.changed.set()
            return

    async def _followers_synced(self, generation: int, followers: int) -> None:
        """The leader sends its SyncGroup after its followers sent theirs (or after a second), as happens with
        clients whose leader spends time computing the assignment. Kafka and kaflet do not mind the order; the
        librdkafka mock completes the sync as soon as the leader's assignments arrive and answers a later
        SyncGroup INVALID_REQUEST, so without this a large group never forms on it."""
        deadline = time.perf_counter() + 1.0
        while self.syncs_sent[generation] < followers and (left := deadline - time.perf_counter()) > 0:
            self.sync_sent.clear()
            try:
                await asyncio.wait_for(self.sync_sent.wait(), left)
            except TimeoutError:
                break

    async def _live(self, m: ClassicMember) -> None:
        version = self.spec.versions["heartbeat"]
        while True:
            await self._join_and_sync(m)
            while True:
                await asyncio.sleep(self.spec.heartbeat_s * random.uniform(0.9, 1.0))
                beat = await m.conn.request(
                    HeartbeatRequest[version](
                        group_id=self.spec.group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None
                    )
                )
                if beat.error_code:
                    m.errors[beat.error_code] += 1
                    if beat.error_code == UNKNOWN_MEMBER_ID:
                        m.member_id = ""
                    break  # rejoin (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID)

    def complete(self, live: list[int], after_generation: int = -1) -> int | None:
        """The generation at which every member in `live` is synced, past `after_generation`, with the
        topic's partitions covered exactly once; None when not (yet)."""
        ms = [self.members[i] for i in live]
        generation = ms[0].generation
        if generation <= after_generation or not all(m.synced and m.generation == generation for m in ms):
            return None
        owned = [p for m in ms for p in m.owned.get(self.spec.topic, ())]
        if len(owned) != self.spec.partitions or set(owned) != set(range(self.spec.partitions)):
            return None
        if any(t != self.spec.topic for m in ms for t in m.owned):
            return None
        return generation

    async def wait_complete(self, live: list[int], after_generation: int = -1, deadline_s: float | None = None) -> int:
        deadline = time.perf_counter() + (deadline_s or self.spec.deadline_s)
        while (generation := self.complete(live, after_generation)) is None:
            for task in self.tasks.values():
                if task.done() and not task.cancelled() and task.exception() is not None:
                    synced = sum(self.members[i].synced for i in live)
                    raise RuntimeError(
                        f"a member failed: {task.exception()!r}; {synced} of {len(live)} synced; errors {dict(self.errors())}"
                    )
            left = deadline - time.perf_counter()
            if left <= 0:
                synced = sum(self.members[i].synced for i in live)
                raise TimeoutError(f"{synced} of {len(live)} members synced; errors {dict(self.errors())}")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                pass
        return generation

    def errors(self) -> Counter[int]:
        total: Counter[int] = Counter()
        for m in self.members:
            total += m.errors
        return total

    async def leave(self, index: int) -> None:
        """Member `index` stops and leaves the group (LeaveGroup, as a consumer's close() sends)."""
        task = self.tasks.pop(index)
        task.cancel()
        m = self.members[index]
        m.synced = False
        answer = await m.conn.request(leave_request(self.spec.group, m.member_id, self.spec.versions["leave"]))
        if answer.error_code:
            raise RuntimeError(f"LeaveGroup answered error {answer.error_code}")

    async def close(self) -> None:
        """Every remaining member stops and leaves (not timed), then the connections close."""
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        leaving = list(self.tasks)
        self.tasks = {}
        await asyncio.gather(*(self._leave_quietly(i) for i in leaving), return_exceptions=True)
        for m in self.members:
            await m.conn.close()

    async def _leave_quietly(self, index: int) -> None:
        m = self.members[index]
        if m.member_id:
            await asyncio.wait_for(m.conn.request(leave_request(self.spec.group, m.member_id, self.spec.versions["leave"])), 10)


async def rebalances(bootstrap: str, spec: ClassicSpec) -> dict[str, Any]:
    """Form the group and time its first rebalance, then (`leave_one`) the second after one member leaves."""
    from bench.procs import rss_bytes

    group = await ClassicGroup.open(bootstrap, spec)
    try:
        rss_before = rss_bytes(spec.broker_pid) if spec.broker_pid else 0
        everyone = list(range(spec.members))
        first_join = time.perf_counter()
        group.start()
        generation = await group.wait_complete(everyone)
        formed = time.perf_counter() - first_join
        rss_stable = rss_bytes(spec.broker_pid) if spec.broker_pid else 0
        out: dict[str, Any] = {
            "members": spec.members,
            "first_rebalance_s": formed,
            "generation": generation,
            "joins": sum(m.joins for m in group.members),
            "rss_per_member_kb": (rss_stable - rss_before) / spec.members / 1024 if spec.broker_pid else None,
        }
        if spec.leave_one:
            victim = next(i for i, m in enumerate(group.members) if 0 in m.owned.get(spec.topic, ()))
            survivors = [i for i in everyone if i != victim]
            left = time.perf_counter()
            await group.leave(victim)
            out["second_generation"] = await group.wait_complete(survivors, after_generation=generation)
            out["second_rebalance_s"] = time.perf_counter() - left
        out["errors"] = {str(k): v for k, v in sorted(group.errors().items())}
        out["leader_assignments"] = group.leader_assignments
        return out
    finally:
        await group.close()


def run_rebalances(conn: Any, bootstrap: str, spec: ClassicSpec) -> dict[str, Any]:
    """Worker entry point (bench.procs.run_worker)."""
    return asyncio.run(rebalances(bootstrap, spec))
