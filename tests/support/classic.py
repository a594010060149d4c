"""Classic-group members driven over the raw protocol, for the conformance suite of spec section 3.

A `Member` is one consumer: it owns its connections (a parked JoinGroup or SyncGroup keeps its
connection busy, so every request that may park goes out on a connection with nothing pending)
and remembers what the coordinator told it (member id, generation, leader). `GroupEnv` ties
members to one broker and holds a control connection for DescribeGroups, waits and barriers.

Ordering without sleeps: the broker decodes and runs a request as soon as its bytes are read,
and the in-process broker shares the test's event loop, so after a request is written a
round trip on another connection (`GroupEnv.barrier`) returns only once the earlier request
has been processed (loopback sockets become readable in write order). `GroupEnv.elapse(ms)`
proves that the broker's timers due within `ms` have fired: it waits for a sentinel member with
that session timeout, armed after the call, to expire (the loop fires timers in deadline order).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.metadata import MetadataRequest

from tests.support.groups import (
    assignment,
    commit,
    describe,
    heartbeat,
    join_request,
    leave,
    subscription,
    sync_request,
)
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until

# Error codes used throughout the classic-group suite (Kafka's Errors.java).
NONE = 0
UNKNOWN_SERVER_ERROR = -1
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82

WAIT = 10.0  # seconds: the deadline of every "eventually"
LONG_MS = 60_000  # a timeout that never fires during a test

Protocols = list[tuple[str, bytes]]


def range_protocols(topics: list[str] | None = None) -> Protocols:
    return [("range", subscription(topics or ["t"]))]


async def settle(fut: Awaitable[Any], timeout: float = WAIT) -> Any:
    """The response behind `fut`, failing the test if it does not come within `timeout`."""
    return await asyncio.wait_for(asyncio.shield(fut), timeout)


async def answered_within(fut: asyncio.Future[Any], seconds: float) -> bool:
    """Whether `fut` completes within `seconds` (a bounded wait that the caller expects to time out)."""
    done, _ = await asyncio.wait({fut}, timeout=seconds)
    return bool(done)


def first_done(*futs: asyncio.Future[Any]) -> Callable[[], Awaitable[asyncio.Future[Any]]]:
    async def wait() -> asyncio.Future[Any]:
        done, _ = await asyncio.wait(set(futs), timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        assert done, "none of the responses came"
        return next(iter(done))

    return wait


@dataclass
class Described:
    state: str
    protocol_type: str
    protocol_data: str
    members: dict[str, Any]  # member id -> DescribedGroupMember
    error_code: int = 0


class GroupEnv:
    def __init__(self, broker: Any, connect: Callable[..., Awaitable[RawClient]]) -> None:
        self.broker = broker
        self.connect = connect
        self._ctl: RawClient | None = None
        self._sentinels = 0

    async def ctl(self) -> RawClient:
        if self._ctl is None:
            self._ctl = await self.connect("ctl")
        return self._ctl

    def member(self, group: str, client_id: str = "consumer", **kwargs: Any) -> Member:
        return Member(self, group, client_id, **kwargs)

    async def describe(self, group: str) -> Described:
        resp = await describe(await self.ctl(), [group])
        (g,) = resp.groups
        return Described(g.group_state, g.protocol_type, g.protocol_data, {m.member_id: m for m in g.members}, g.error_code)

    async def state(self, group: str) -> str:
        return (await self.describe(group)).state

    async def wait_state(self, group: str, state: str, timeout: float = WAIT) -> Described:
        async def check() -> Described | None:
            d = await self.describe(group)
            return d if d.state == state else None

        return await async_wait_until(check, timeout=timeout, message=f"group {group} in state {state}")

    async def barrier(self) -> None:
        """Returns once every request already written by the test has been processed (see module doc)."""
        await describe(await self.ctl(), ["barrier"])

    async def create_topic(self, topic: str, partitions: int = 1) -> None:
        """Auto-create `topic` through Metadata (auto.create.topics.enable is kaflet's default)."""
        ctl = await self.ctl()
        req = MetadataRequest[4](topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True)
        resp = await ctl.request(req)
        assert resp.topics[0].error_code in (0, 5), resp  # 5 = LEADER_NOT_AVAILABLE while being created

    async def elapse(self, ms: int) -> None:
        """Returns once every broker timer due within `ms` from now has fired.

        A sentinel group with one member of session timeout `ms` is made Stable; it turns Empty
        only when that member's liveness timer fires, which the event loop does after every
        timer with an earlier deadline.
        """
        self._sentinels += 1
        group = f"sentinel-{self._sentinels}-{uuid.uuid4().hex[:8]}"
        m = self.member(group, "sentinel", session_ms=ms, rebalance_ms=LONG_MS)
        await m.join()
        assert m.generation >= 1
        await m.sync()
        await self.wait_state(group, "Empty", timeout=WAIT + ms / 1000)


class Member:
    """One classic-group member. Requests that may park go out on a connection with nothing pending."""

    def __init__(
        self,
        env: GroupEnv,
        group: str,
        client_id: str = "consumer",
        *,
        version: int = 9,
        session_ms: int = 30_000,
        rebalance_ms: int = 30_000,
        instance_id: str | None = None,
        protocols: Protocols | None = None,
        protocol_type: str = "consumer",
    ) -> None:
        self.env = env
        self.group = group
        self.client_id = client_id
        self.version = version
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.instance_id = instance_id
        self.protocols = protocols if protocols is not None else range_protocols()
        self.protocol_type = protocol_type
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.protocol_name: str | None = None
        self.last_join: Any = None
        self._conns: list[RawClient] = []

    def __repr__(self) -> str:
        return f"Member({self.member_id or '<no id>'}, gen {self.generation})"

    @property
    def is_leader(self) -> bool:
        return self.member_id != "" and self.member_id == self.leader

    async def conn(self) -> RawClient:
        """A connection of this member with no request outstanding."""
        for c in self._conns:
            if not c._pending:
                return c
        c = await self.env.connect(self.client_id)
        self._conns.append(c)
        return c

    # -- JoinGroup ------------------------------------------------------------------------

    def join_request(self, member_id: str | None = None, **overrides: Any) -> Any:
        kwargs: dict[str, Any] = {
            "version": self.version,
            "session_timeout_ms": self.session_ms,
            "rebalance_timeout_ms": self.rebalance_ms,
            "instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocols": self.protocols,
        }
        kwargs.update(overrides)
        return join_request(self.group, self.member_id if member_id is None else member_id, **kwargs)

    async def send_join(self, member_id: str | None = None, **overrides: Any) -> asyncio.Future[Any]:
        """Write one JoinGroup exactly as given; the future gets its response (it may park)."""
        return (await self.conn()).send(self.join_request(member_id, **overrides))

    @property
    def needs_member_id(self) -> bool:
        return self.member_id == "" and self.instance_id is None and self.version >= 4

    async def get_member_id(self, **overrides: Any) -> Any:
        """JG-7: the MEMBER_ID_REQUIRED round trip of a v4+ dynamic member."""
        resp = await settle(await self.send_join("", **overrides))
        assert resp.error_code == MEMBER_ID_REQUIRED, resp
        self.member_id = resp.member_id
        return resp

    async def start_join(self, **overrides: Any) -> asyncio.Future[Any]:
        """Join (fetching a member id first if needed) and return the possibly parked response."""
        if self.needs_member_id and "member_id" not in overrides:
            await self.get_member_id(**overrides)
        member_id = overrides.pop("member_id", None)
        fut = await self.send_join(member_id, **overrides)
        fut.add_done_callback(self._joined)
        return fut

    def _joined(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        resp = fut.result()
        self.last_join = resp
        if resp.error_code == NONE:
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.leader = resp.leader
            self.protocol_name = resp.protocol_name

    async def join(self, **overrides: Any) -> Any:
        return await settle(await self.start_join(**overrides))

    # -- SyncGroup, Heartbeat, LeaveGroup, OffsetCommit -----------------------------------

    def sync_request(self, assignments: dict[str, bytes] | None = None, **overrides: Any) -> Any:
        kwargs: dict[str, Any] = {"version": 5, "instance_id": self.instance_id, "assignments": assignments}
        if "protocol_name" not in overrides:
            kwargs["protocol_name"] = self.protocol_name if self.protocol_name is not None else "range"
        kwargs["protocol_type"] = self.protocol_type
        generation = overrides.pop("generation", self.generation)
        member_id = overrides.pop("member_id", self.member_id)
        kwargs.update(overrides)
        if kwargs["version"] < 3:
            kwargs["instance_id"] = None
        return sync_request(self.group, member_id, generation, **kwargs)

    async def start_sync(self, assignments: dict[str, bytes] | None = None, **overrides: Any) -> asyncio.Future[Any]:
        return (await self.conn()).send(self.sync_request(assignments, **overrides))

    async def sync(self, assignments: dict[str, bytes] | None = None, **overrides: Any) -> Any:
        return await settle(await self.start_sync(assignments, **overrides))

    async def heartbeat(self, **overrides: Any) -> int:
        version = overrides.pop("version", 4)
        instance_id = overrides.pop("instance_id", self.instance_id if version >= 3 else None)
        resp = await heartbeat(
            await self.conn(),
            self.group,
            overrides.pop("member_id", self.member_id),
            overrides.pop("generation", self.generation),
            version=version,
            instance_id=instance_id,
        )
        return resp.error_code

    async def leave(self, version: int = 5, **overrides: Any) -> Any:
        member_id = overrides.pop("member_id", self.member_id)
        instance_id = overrides.pop("instance_id", self.instance_id if version >= 3 else None)
        return await leave(await self.conn(), self.group, [(member_id, instance_id)], version=version)

    async def commit(self, offsets: dict[tuple[str, int], int], **overrides: Any) -> dict[tuple[str, int], int]:
        kwargs: dict[str, Any] = {"generation": self.generation, "member_id": self.member_id, "instance_id": self.instance_id}
        kwargs.update(overrides)
        return await commit(await self.conn(), self.group, offsets, **kwargs)

    async def keep_alive(self, interval_ms: int | None = None) -> asyncio.Task[None]:
        """Heartbeat in the background (the way a client's heartbeat thread does); cancel the task to stop."""
        interval = (interval_ms if interval_ms is not None else max(self.session_ms // 5, 10)) / 1000
        conn = await self.env.connect(self.client_id)

        async def beat() -> None:
            while True:
                await heartbeat(conn, self.group, self.member_id, self.generation, instance_id=self.instance_id)
                await asyncio.sleep(interval)  # pacing a background heartbeat, not waiting on a condition

        return asyncio.get_running_loop().create_task(beat())


def default_assignments(members: list[Member]) -> dict[str, bytes]:
    """One distinct assignment per member (partition i of topic "t" to member i)."""
    return {m.member_id: assignment({"t": [i]}) for i, m in enumerate(members)}


async def joined_group(env: GroupEnv, group: str, n: int, **member_kwargs: Any) -> list[Member]:
    """n members that completed one join phase together (group CompletingRebalance); the leader is first.

    The first member joins alone (generation 1); the others join next and the leader rejoins,
    which completes a join phase with all of them (JG-13d).
    """
    members = [env.member(group, f"consumer-{i}", **member_kwargs) for i in range(n)]
    first = members[0]
    await first.join()
    if n == 1:
        return members
    futs = [await m.start_join() for m in members[1:]]
    await env.barrier()
    futs.append(await first.start_join())
    for f in futs:
        await settle(f)
    generations = {m.generation for m in members}
    assert len(generations) == 1, members
    members.sort(key=lambda m: not m.is_leader)
    assert members[0].is_leader
    return members


async def stable_group(
    env: GroupEnv, group: str, n: int, assignments: dict[str, bytes] | None = None, **member_kwargs: Any
) -> list[Member]:
    """n members of a Stable group (leader first), each holding its assignment."""
    members = await joined_group(env, group, n, **member_kwargs)
    leader = members[0]
    plan = assignments if assignments is not None else default_assignments(members)
    futs = [await m.start_sync() for m in members[1:]]
    resp = await leader.sync(plan)
    assert resp.error_code == NONE, resp
    for f in futs:
        r = await settle(f)
        assert r.error_code == NONE, r
    return members


async def answers_while_the_coordinator_stops(
    make_config: Callable[..., Any], requests_of: Callable[[GroupEnv], Awaitable[dict[str, tuple[Any, int | None]]]]
) -> dict[str, Any]:
    """The answers to requests in flight while the broker stops, its coordinator made inactive for
    real (GE-5): `requests_of` makes the groups and names the requests (and their versions); each
    goes on a connection of its own, held 3 s by a chaos delay rule before its handler runs."""
    from broker import Broker
    from tests.support.coordinator import wait_ready

    broker = Broker(make_config())
    await broker.start()
    clients: list[RawClient] = []

    async def connect(client_id: str | None = "raw-client") -> RawClient:
        clients.append(await RawClient.connect(broker.bootstrap, client_id))
        return clients[-1]

    try:
        env = GroupEnv(broker, connect)
        await wait_ready(await env.ctl())
        requests = await requests_of(env)
        rule = broker.faults.add(client_id="held", delay_ms=3000, count=None)
        futures = {name: (await connect("held")).send(req, version) for name, (req, version) in requests.items()}
        await async_wait_until(lambda: rule.hits == len(requests), message="every request held")
        stopping = asyncio.get_running_loop().create_task(broker.stop())
        await async_wait_until(lambda: not broker.coordinator.active, message="the coordinator stopped")
        got = {name: await asyncio.wait_for(f, 30) for name, f in futures.items()}
        await stopping
    finally:
        for c in clients:
            await c.close()
        await broker.stop()
    return got


def fail_writes(broker: Any, group: str) -> None:
    """Storage fault: appends to `group`'s __consumer_offsets partition fail with an I/O error.

    Kafka sees a failed disk as KAFKA_STORAGE_ERROR, which the coordinator maps to
    NOT_COORDINATOR (GE-3); the broker's fault injector makes the append fail that way.
    """
    shard = broker.coordinator.shard_for(group)
    broker.faults.fail_appends(shard.service.topic_name, shard.partition)
