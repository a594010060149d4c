"""A synchronous handle on a broker's chaos operations, for code that is not on its event loop.

`ChaosHandle` has one method per operation of broker/cluster/chaos.py and sends each through
`apply(op, params)`: on the loop of an embedded broker (`BrokerThread.chaos`, the pytest
fixtures) or over the HTTP control API of a running one (`ChaosHandle.over_http(address)`).
Results are the JSON the control API answers (dicts and lists).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.embed.thread import BrokerThread

Apply = Callable[[str, dict[str, Any]], Any]


def _params(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


class ChaosHandle:
    def __init__(self, apply: Apply) -> None:
        self.apply = apply

    @classmethod
    def in_thread(cls, thread: BrokerThread) -> ChaosHandle:
        return cls(lambda op, params: thread.run(lambda b: b.chaos.apply(op, params)))

    @classmethod
    def over_http(cls, address: str) -> ChaosHandle:
        """The control API of a broker started with --control, at its metrics address host:port."""
        from broker.cluster.control import ControlClient

        return cls(ControlClient(address).apply)

    def node(self, node_id: int) -> ChaosHandle:
        """The same operations on one node of a cluster (without it: the first node)."""
        return ChaosHandle(lambda op, params: self.apply(op, {**params, "node": node_id}))

    def move_leader(self, topic: str, partition: int, node: int | None = None) -> dict[str, Any]:
        """Move a partition's leadership to `node` (default: the next in-sync replica); its leader epoch bumps."""
        return self.apply("move_leader", _params(topic=topic, partition=partition, node=node))  # type: ignore[no-any-return]

    def move_coordinator(self, *, group: str | None = None, partition: int | None = None, node: int | None = None) -> dict[str, Any]:
        """Move the `__consumer_offsets` partition of `group` (or `partition`): its coordinator changes."""
        return self.apply("move_coordinator", _params(group=group, partition=partition, node=node))  # type: ignore[no-any-return]

    def move_share_coordinator(self, *, key: str | None = None, partition: int | None = None, node: int | None = None) -> dict[str, Any]:
        """Move the `__share_group_state` partition of a share partition (key "group:topicId:partition") or by number."""
        return self.apply("move_share_coordinator", _params(key=key, partition=partition, node=node))  # type: ignore[no-any-return]

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
    ) -> dict[str, Any]:
        """Answer the next `count` matching requests (None: all, until removed) with `error`, after `delay_ms`, or by closing."""
        params = _params(api=api, error=error, client_id=client_id, version=version, min_version=min_version, max_version=max_version)
        params.update(count=count, delay_ms=delay_ms, close=close)
        return self.apply("rule", params)  # type: ignore[no-any-return]

    def push_errors(self, api: Any, errors: list[Any], *, client_id: str | None = None) -> dict[str, Any]:
        """The next len(errors) requests of `api` get these codes in order (an entry may be [code, delay_ms])."""
        return self.apply("push_errors", _params(api=api, errors=list(errors), client_id=client_id))  # type: ignore[no-any-return]

    def latency(self, ms: int) -> dict[str, Any]:
        return self.apply("latency", {"ms": ms})  # type: ignore[no-any-return]

    def remove(self, rule_id: int) -> dict[str, Any]:
        return self.apply("remove", {"id": rule_id})  # type: ignore[no-any-return]

    def hole(self, *, client_id: str | None = None, peer: str | None = None, duration_ms: int | None = None) -> dict[str, Any]:
        return self.apply("hole", _params(client_id=client_id, peer=peer, duration_ms=duration_ms))  # type: ignore[no-any-return]

    def restore(self, hole_id: int | None = None) -> dict[str, Any]:
        return self.apply("restore", _params(id=hole_id))  # type: ignore[no-any-return]

    def down(self, mode: str = "refuse", *, failover: bool = False) -> dict[str, Any]:
        """Take the broker down (in a cluster it is fenced: out of the ISRs, its leaderships elected away);
        `failover=True` also reassigns the partitions it leaves without an in-sync replica."""
        return self.apply("down", {"mode": mode, **({"failover": True} if failover else {})})  # type: ignore[no-any-return]

    def up(self) -> dict[str, Any]:
        return self.apply("up", {})  # type: ignore[no-any-return]

    def clear(self) -> dict[str, Any]:
        return self.apply("clear", {})  # type: ignore[no-any-return]

    def state(self) -> dict[str, Any]:
        return self.apply("state", {})  # type: ignore[no-any-return]

    def connections(self) -> list[dict[str, Any]]:
        return self.apply("connections", {})  # type: ignore[no-any-return]
