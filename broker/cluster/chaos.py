"""The chaos control layer: every operation that breaks a broker on purpose, one call each.

`broker.chaos` does the operations; the rules themselves live in broker/network/faults.py (the one place
errors are injected) and the connection (broker/network/connection.py) carries them out. Every operation
logs one structured event (`chaos`, with `op` and its parameters) and counts in
`kaflet_chaos_operations_total{op}`; every injected answer counts in
`kaflet_chaos_injected_total{kind}`. `apply(op, params)` is the one entry that the HTTP control
API (control.py) and `kaflet chaos` (cli.py) share, with names or numbers for APIs and errors.

Where Kafka is silent (it has no such tools) kaflet decides:
- a black-holed connection is neither read nor written, and not closed: frames the client sends
  wait unread in the socket, answers produced meanwhile are held; when the hole closes both go
  through, as TCP delivers retransmitted bytes after a network partition heals. The broker's own
  idle timer (connections.max.idle.ms) still runs, as it would on a real broker.
- down "refuse" closes the listeners (new connections are refused) and every connection, as a
  stopped broker would; down "hang" keeps accepting but answers nothing (every connection is in a
  hole) until `up`. State (logs, groups) stays as it was: this is a network failure, not a restart.
  In a cluster the node is fenced at once, as Kafka's controller fences a broker that stopped
  (broker/cluster/cluster.py): it leaves the ISRs, its partitions elect other leaders; `up`
  unfences it.
- an error stack entry NONE lets that request through to its handler, as librdkafka's does.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.network import faults as faults_mod
from broker.network.faults import ErrorStack, Fault, Hole
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import Config


class ClusterControl(Protocol):
    """The cluster a node belongs to, as chaos reaches it: its state broker, whose control entry
    takes every node's operations and the moves (broker/cluster/cluster.py)."""

    state: object

    async def apply(self, op: str, params: dict[str, Any]) -> Any: ...

    def node_down(self, node_id: int) -> Any: ...

    async def node_up(self, node_id: int) -> Any: ...


class ChaosTarget(Protocol):
    """One node as chaos breaks it: its connections, its listener, its fault rules."""

    config: Config
    connections: set[Any]
    faults: faults_mod.FaultInjector
    bound_port: int
    cluster: ClusterControl | None

    def stop_listening(self) -> None: ...

    async def listen_again(self) -> None: ...


log = structlog.get_logger("kaflet.chaos")

DOWN_MODES = ("refuse", "hang")


class ChaosError(ValueError):
    """A chaos operation was asked with bad parameters (HTTP 400, `kaflet chaos` exit 2)."""


def api_key(value: Any) -> int:
    """An API by number (18), Kafka's name (ApiVersions) or the enum's (API_VERSIONS)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text).upper().replace("-", "_")
    try:
        return int(ApiKey[name])
    except KeyError:
        raise ChaosError(f"unknown API {value!r}") from None


def error_code(value: Any) -> ErrorCode:
    """An error by number (6) or name (NOT_LEADER_OR_FOLLOWER)."""
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            return ErrorCode(value)
        text = str(value).strip()
        if text.lstrip("-").isdigit():
            return ErrorCode(int(text))
        return ErrorCode[text.upper().replace("-", "_")]
    except (KeyError, ValueError):
        raise ChaosError(f"unknown error code {value!r}") from None


HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
# Upper bounds of every numeric parameter (finding 2 of the security review: 1e30 ms latencies and
# 1e300 ms holes were accepted): latency and delays at most an hour, durations at most a day.
_MAXIMA = {"ms": HOUR_MS, "delay_ms": HOUR_MS, "duration_ms": DAY_MS, "count": 1_000_000}


def _opt_int(value: Any, name: str, minimum: int = 0, maximum: int | None = None) -> int | None:
    """An integer parameter: a JSON integer or a string of digits (`kaflet chaos`), never a float,
    a boolean or anything larger than its bound."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ChaosError(f"{name} must be an integer")
    try:
        number = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise ChaosError(f"{name} must be an integer") from None
    top = _MAXIMA.get(name, 2_147_483_647) if maximum is None else maximum
    if not minimum <= number <= top:
        raise ChaosError(f"{name} must be an integer between {minimum} and {top}")
    return number


def _opt_str(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ChaosError(f"{name} must be a string")
    if value is not None and len(value) > 1024:
        raise ChaosError(f"{name} is longer than 1024 characters")
    return value


class Chaos:
    """The chaos operations of one broker (`broker.chaos`). Call on the broker's event loop."""

    def __init__(self, broker: ChaosTarget) -> None:
        self.broker = broker
        self.faults = broker.faults

    def _event(self, op: str, **fields: Any) -> None:
        self.faults.operations[op] += 1
        log.info("chaos", op=op, node_id=self.broker.config.node_id, **fields)

    # -- per-request rules ------------------------------------------------------------------

    def rule(
        self,
        api: Any = None,
        error: Any = None,
        *,
        count: int | None = 1,
        client_id: str | None = None,
        version: int | None = None,
        min_version: int | None = None,
        max_version: int | None = None,
        delay_ms: int = 0,
        close: bool = False,
    ) -> Fault:
        """Answer the next `count` matching requests (None: every one until removed) with `error`
        (through the API's own error response), after `delay_ms`, or by closing the connection."""
        if version is not None:
            min_version = max_version = version
        fault = Fault(
            api_key=None if api is None else api_key(api),
            error=None if error is None else error_code(error),
            delay_ms=_opt_int(delay_ms, "delay_ms") or 0,
            close=bool(close),
            count=_opt_int(count, "count", 1),
            client_id=_opt_str(client_id, "client_id"),
            min_version=_opt_int(min_version, "min_version"),
            max_version=_opt_int(max_version, "max_version"),
        )
        if fault.error is None and not fault.delay_ms and not fault.close:
            raise ChaosError("a rule needs an error, a delay_ms or close")
        self.faults.add(fault)
        self._event("rule", **{k: v for k, v in fault.describe().items() if v not in (None, 0, False) or k == "count"})
        return fault

    def push_errors(self, api: Any, errors: list[Any], *, client_id: str | None = None) -> ErrorStack:
        """The next len(errors) requests of `api` get these codes in order; an entry may be
        [code, delay_ms]. librdkafka's `rd_kafka_mock_push_request_errors`."""
        if not isinstance(errors, list) or not errors:
            raise ChaosError("errors must be a non-empty list")
        entries: list[tuple[ErrorCode, int]] = []
        for entry in errors:
            if isinstance(entry, (list, tuple)):
                if len(entry) != 2:
                    raise ChaosError("an error stack entry is a code or [code, delay_ms]")
                entries.append((error_code(entry[0]), _opt_int(entry[1], "delay_ms") or 0))
            else:
                entries.append((error_code(entry), 0))
        if len(entries) > 10_000:
            raise ChaosError("at most 10000 errors per stack")
        stack = self.faults.push_errors(api_key(api), *entries, client_id=_opt_str(client_id, "client_id"))
        self._event("push_errors", **stack.describe())
        return stack

    def latency(self, ms: int) -> None:
        """Add `ms` to every response of this broker (its RTT); 0 removes it."""
        self.faults.latency_ms = _opt_int(ms, "ms") or 0
        self._event("latency", ms=self.faults.latency_ms)

    def remove(self, rule_id: int) -> bool:
        """Remove one request rule or error stack by id."""
        removed = self.faults.remove(int(rule_id))
        self._event("remove", id=rule_id, removed=removed)
        return removed

    # -- black holes ------------------------------------------------------------------------

    def hole(self, *, client_id: str | None = None, peer: str | None = None, duration_ms: int | None = None) -> Hole:
        """Black-hole every connection of `client_id` (also those it opens later), or the one
        connection whose client end is `peer` ("host:port"), for `duration_ms` or until restored."""
        client_id, peer = _opt_str(client_id, "client_id"), _opt_str(peer, "peer")
        if (client_id is None) == (peer is None):
            raise ChaosError("a hole needs exactly one of client_id and peer")
        duration = _opt_int(duration_ms, "duration_ms", 1)
        loop = asyncio.get_running_loop()
        hole = Hole(client_id=client_id, peer=peer, until=None if duration is None else loop.time() + duration / 1000)
        if duration is not None:
            hole.timer = loop.call_later(duration / 1000, self._close_hole, hole, "expired")
        self.faults.holes.append(hole)
        swallowed = 0
        for conn in self.broker.connections:
            if conn.hole is None and not conn.closing and hole.matches(conn.peer_text, conn.client_id):
                conn.enter_hole(hole)
                swallowed += 1
        self._event("hole", id=hole.id, client_id=client_id, peer=peer, duration_ms=duration, connections=swallowed)
        return hole

    def restore(self, hole_id: int | None = None) -> int:
        """Close one black hole (by id) or all; returns how many were closed."""
        holes = [h for h in self.faults.holes if hole_id is None or h.id == int(hole_id)]
        for hole in holes:
            self._close_hole(hole, "restored")
        return len(holes)

    def _close_hole(self, hole: Hole, why: str) -> None:
        if hole not in self.faults.holes:
            return
        self.faults.holes.remove(hole)
        if hole.timer is not None:
            hole.timer.cancel()
        released = 0
        for conn in list(self.broker.connections):
            if conn.hole is hole:
                if self.faults.down == "hang":
                    conn.hole = faults_mod.DOWN  # still down: still unanswered
                else:
                    conn.leave_hole()
                released += 1
        self._event("hole_closed", id=hole.id, reason=why, connections=released)

    def connections(self) -> list[dict[str, Any]]:
        """The open client connections: peer, client id, and the hole each is in."""
        return [
            {"peer": c.peer_text, "client_id": c.client_id, "hole": None if c.hole is None else c.hole.id}
            for c in sorted(self.broker.connections, key=lambda c: c.peer_text)
        ]

    # -- down and up ------------------------------------------------------------------------

    def down(self, mode: str = "refuse") -> None:
        """Take the broker down: "refuse" closes its listeners and connections, "hang" accepts
        connections and never answers. Its metrics and control endpoint stay up."""
        if mode not in DOWN_MODES:
            raise ChaosError(f"mode must be one of {', '.join(DOWN_MODES)}")
        if self.faults.down is not None:
            raise ChaosError(f"the broker is already down ({self.faults.down})")
        broker = self.broker
        self.faults.down = mode
        if mode == "refuse":
            broker.stop_listening()
            for conn in list(broker.connections):
                conn.close()
        else:
            for conn in list(broker.connections):
                if conn.hole is None:
                    conn.enter_hole(faults_mod.DOWN)
        self._event("down", mode=mode, port=broker.bound_port)
        cluster = broker.cluster
        if cluster is not None and broker is not cluster.state:
            cluster.node_down(broker.config.node_id)  # fenced: out of the ISRs, its leaderships elected away

    async def up(self) -> None:
        """Bring the broker back (on the same port)."""
        mode = self.faults.down
        if mode is None:
            raise ChaosError("the broker is not down")
        broker = self.broker
        if mode == "refuse":
            await broker.listen_again()
        self.faults.down = None
        cluster = broker.cluster
        if cluster is not None and broker is not cluster.state:
            await cluster.node_up(broker.config.node_id)  # unfenced before answering again: back in the ISRs
        for conn in list(broker.connections):
            if conn.hole is faults_mod.DOWN:
                conn.leave_hole()
        self._event("up", mode=mode, port=broker.bound_port)

    # -- listing and clearing -----------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        now = asyncio.get_running_loop().time()
        return {
            "node_id": self.broker.config.node_id,
            "down": self.faults.down,
            **self.faults.describe(),
            "holes": [h.describe(now) for h in self.faults.holes],
            "operations": dict(self.faults.operations),
            "injected": dict(self.faults.injected),
        }

    async def clear(self) -> None:
        """Undo everything: rules, stacks, latency, holes, and bring the broker up."""
        self.faults.clear()
        for hole in list(self.faults.holes):
            self._close_hole(hole, "cleared")
        if self.faults.down is not None:
            await self.up()
        self._event("clear")

    # -- the shared entry of the HTTP API and `kaflet chaos` -----------------------------------

    async def apply(self, op: str, params: dict[str, Any]) -> Any:
        """Run operation `op` with JSON parameters; returns a JSON-able result. ChaosError on bad input."""
        if not isinstance(params, dict):
            raise ChaosError("parameters must be a JSON object")
        cluster = self.broker.cluster
        if cluster is not None and self.broker is cluster.state:
            return await cluster.apply(op, dict(params))  # a cluster's control API: per node, or moves
        if op in CLUSTER_OPERATIONS:
            raise ChaosError(f"{op} needs a cluster (kaflet serve --brokers N)")
        p = dict(params)

        def take(*names: str) -> dict[str, Any]:
            unknown = set(p) - set(names)
            if unknown:
                raise ChaosError(f"unknown parameter(s) for {op}: {', '.join(sorted(unknown))}")
            return p

        if op == "state":
            take()
            return self.state()
        if op == "connections":
            take()
            return self.connections()
        if op == "rule":
            kw = take("api", "error", "count", "client_id", "version", "min_version", "max_version", "delay_ms", "close")
            return self.rule(kw.pop("api", None), kw.pop("error", None), **kw).describe()
        if op == "push_errors":
            kw = take("api", "errors", "client_id")
            if "api" not in kw or "errors" not in kw:
                raise ChaosError("push_errors needs api and errors")
            return self.push_errors(kw["api"], kw["errors"], client_id=kw.get("client_id")).describe()
        if op == "latency":
            kw = take("ms")
            if "ms" not in kw:
                raise ChaosError("latency needs ms")
            self.latency(kw["ms"])
            return {"latency_ms": self.faults.latency_ms}
        if op == "remove":
            kw = take("id")
            if "id" not in kw:
                raise ChaosError("remove needs id")
            return {"removed": self.remove(_opt_int(kw["id"], "id", 1) or 0)}
        if op == "hole":
            kw = take("client_id", "peer", "duration_ms")
            hole = self.hole(**kw)
            return hole.describe(asyncio.get_running_loop().time())
        if op == "restore":
            kw = take("id")
            return {"restored": self.restore(_opt_int(kw.get("id"), "id", 1))}
        if op == "down":
            kw = take("mode")
            self.down(kw.get("mode", "refuse"))
            return {"down": self.faults.down}
        if op == "up":
            take()
            await self.up()
            return {"down": None}
        if op == "clear":
            take()
            await self.clear()
            return self.state()
        raise ChaosError(f"unknown operation {op!r} (operations: {', '.join(OPERATIONS)})")


CLUSTER_OPERATIONS = ("move_leader", "move_coordinator", "move_share_coordinator")
OPERATIONS = (
    "state",
    "connections",
    "rule",
    "push_errors",
    "latency",
    "remove",
    "hole",
    "restore",
    "down",
    "up",
    "clear",
    *CLUSTER_OPERATIONS,
)
