"""The one place errors are injected: rules that make the broker misbehave on purpose.

A request rule matches requests by API key (and optionally version range and client id) and
then answers with an error code through the API's own error response, delays the answer, or
closes the connection; the connection consults them before the handler runs. An error stack
(librdkafka's mock cluster `push_request_errors`) gives the next K requests of one API these
codes in order (NONE: answered normally), each optionally after a delay; stacks are consulted
before rules. `latency_ms` is added to every response of the broker where it is written (RTT,
librdkafka's `broker_set_rtt`). Black holes (a connection, or every connection of a client id)
and the broker being down are kept here too, and carried out by the connection and by the
control layer (broker/cluster/chaos.py), which also logs and counts each operation. An append rule makes
writes to a partition log fail as a broken or full disk would (OSError: EIO by default,
ENOSPC for a full disk): while one is armed, every partition log calls `check_append` before
it writes (Produce, the coordinator's `__consumer_offsets` appends, everything). A timer rule
makes a group's next coordinator timer callbacks raise, as a coordinator bug would.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.network.context import RequestContext


_ids = itertools.count(1)


def _next_id() -> int:
    return next(_ids)


@dataclass
class Fault:
    api_key: int | None = None
    error: ErrorCode | None = None
    delay_ms: int = 0
    close: bool = False
    count: int | None = 1
    client_id: str | None = None
    hits: int = field(default=0)
    min_version: int | None = None
    max_version: int | None = None
    id: int = field(default_factory=_next_id)

    def matches(self, ctx: RequestContext) -> bool:
        if self.api_key is not None and self.api_key != ctx.api_key:
            return False
        if self.client_id is not None and self.client_id != ctx.client_id:
            return False
        if self.min_version is not None and ctx.api_version < self.min_version:
            return False
        if self.max_version is not None and ctx.api_version > self.max_version:
            return False
        return True

    @property
    def kind(self) -> str:
        return "close" if self.close else "error" if self.error is not None else "delay"

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "api_key": self.api_key,
            "min_version": self.min_version,
            "max_version": self.max_version,
            "client_id": self.client_id,
            "error": self.error.name if self.error is not None else None,
            "delay_ms": self.delay_ms,
            "close": self.close,
            "count": self.count,
            "hits": self.hits,
        }

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count


@dataclass
class ErrorStack:
    """The next requests of `api_key` (from `client_id`, or anyone) get these codes in order."""

    api_key: int
    errors: deque[tuple[ErrorCode, int]]  # (code, delay_ms); NONE: the request is handled normally
    client_id: str | None = None
    id: int = field(default_factory=_next_id)

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "api_key": self.api_key,
            "client_id": self.client_id,
            "errors": [{"error": code.name, "delay_ms": delay} for code, delay in self.errors],
        }


@dataclass
class Hole:
    """A black hole: matching connections are neither read nor written until it closes.
    `client_id` holes also swallow connections that later present that client id; `peer`
    ("host:port" of the client's end) names one connection."""

    client_id: str | None = None
    peer: str | None = None
    until: float | None = None  # loop.time() when it closes by itself; None: until restored
    id: int = field(default_factory=_next_id)
    timer: Any = field(default=None, repr=False)

    def matches(self, peer: str, client_id: str | None) -> bool:
        if self.peer is not None:
            return self.peer == peer
        return self.client_id is not None and self.client_id == client_id

    def describe(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "client_id": self.client_id,
            "peer": self.peer,
            "remaining_ms": None if self.until is None else max(0, round((self.until - now) * 1000)),
        }


# The hole a connection is in while its broker is down in "hang" mode (accepted, never answered).
DOWN = Hole(id=0)


@dataclass
class AppendFault:
    topic: str | None  # None: every topic
    partition: int | None = None
    count: int | None = None
    error: int = errno.EIO
    hits: int = field(default=0)


@dataclass
class TimerFault:
    group: str
    count: int | None = 1
    hits: int = field(default=0)


class FaultInjector:
    def __init__(self) -> None:
        self.rules: list[Fault] = []
        self.append_rules: list[AppendFault] = []
        self.timer_rules: list[TimerFault] = []
        self.rename_rules: list[AppendFault] = []
        self.stacks: list[ErrorStack] = []
        self.latency_ms = 0
        self.holes: list[Hole] = []
        # None while up; "refuse" (listeners closed) or "hang" (accepted, never answered) while down.
        self.down: str | None = None
        # Chaos operations done and faults injected, by kind (kaflet_chaos_*_total).
        self.operations: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        # The storage layer's hook (LogManager.set_write_check): armed only while append rules exist.
        self._install_write_check: Callable[[Callable[[str, int], None] | None], None] | None = None

    @property
    def active(self) -> bool:
        """Whether any request rule or error stack may answer instead of the handler."""
        return bool(self.rules or self.stacks)

    def push_errors(self, api_key: int, *errors: ErrorCode | int | tuple[ErrorCode | int, int], client_id: str | None = None) -> ErrorStack:
        """The next len(errors) requests of `api_key` get these codes in order (librdkafka's
        `rd_kafka_mock_push_request_errors`); an entry (code, delay_ms) also delays that answer."""
        entries: deque[tuple[ErrorCode, int]] = deque()
        for entry in errors:
            code, delay = entry if isinstance(entry, tuple) else (entry, 0)
            entries.append((ErrorCode(code), int(delay)))
        stack = ErrorStack(int(api_key), entries, client_id)
        if entries:
            self.stacks.append(stack)
        return stack

    def hole_for(self, peer: str, client_id: str | None) -> Hole | None:
        for hole in self.holes:
            if hole.matches(peer, client_id):
                return hole
        return None

    def bind_storage(self, install: Callable[[Callable[[str, int], None] | None], None]) -> None:
        self._install_write_check = install
        self._append_rules_changed()

    def _append_rules_changed(self) -> None:
        if self._install_write_check is not None:
            self._install_write_check(self.check_append if self.append_rules else None)

    def fail_timers(self, group: str, count: int | None = 1) -> TimerFault:
        """Make the next `count` coordinator timer callbacks of `group` raise (a coordinator bug)."""
        rule = TimerFault(group, count)
        self.timer_rules.append(rule)
        return rule

    def fail_renames(self, topic: str, count: int | None = 1) -> AppendFault:
        """Make renaming `topic`'s partition directories aside (topic deletion) fail with an I/O error."""
        rule = AppendFault(topic, None, count)
        self.rename_rules.append(rule)
        return rule

    def check_rename(self, directory: Any) -> None:
        """Raise the injected OSError if a rename rule matches this partition directory."""
        for rule in self.rename_rules:
            if directory.name.rpartition("-")[0] == rule.topic:
                rule.hits += 1
                if rule.count is not None and rule.hits >= rule.count:
                    self.rename_rules.remove(rule)
                raise OSError(errno.EIO, f"injected I/O error renaming {directory.name}")

    def check_timer(self, group: str | None, key: str) -> None:
        """Raise the injected error if a timer rule matches this group's firing timer."""
        for rule in self.timer_rules:
            if rule.group == group:
                rule.hits += 1
                if rule.count is not None and rule.hits >= rule.count:
                    self.timer_rules.remove(rule)
                raise RuntimeError(f"injected failure of coordinator timer {key}")

    def fail_appends(
        self, topic: str | None, partition: int | None = None, count: int | None = None, error: int = errno.EIO
    ) -> AppendFault:
        """Make appends to `topic` (one partition, or all; None: every topic) raise OSError(`error`),
        `count` times or until removed; `error=errno.ENOSPC` is a full disk."""
        rule = AppendFault(topic, partition, count, error)
        self.append_rules.append(rule)
        self._append_rules_changed()
        return rule

    def remove_append_rule(self, rule: AppendFault) -> None:
        if rule in self.append_rules:
            self.append_rules.remove(rule)
            self._append_rules_changed()

    def check_append(self, topic: str, partition: int) -> None:
        """Raise the injected OSError if an append rule matches this partition."""
        for rule in self.append_rules:
            if rule.topic in (None, topic) and rule.partition in (None, partition):
                rule.hits += 1
                if rule.count is not None and rule.hits >= rule.count:
                    self.remove_append_rule(rule)
                raise OSError(rule.error, f"injected {os.strerror(rule.error)} appending to {topic}-{partition}")

    def add(self, fault: Fault | None = None, **kwargs: Any) -> Fault:
        """Add a rule, e.g. `add(api_key=ApiKey.JOIN_GROUP, error=ErrorCode.REBALANCE_IN_PROGRESS, count=2)`."""
        rule = fault if fault is not None else Fault(**kwargs)
        self.rules.append(rule)
        return rule

    def remove(self, fault: Fault | ErrorStack | int) -> bool:
        """Remove a request rule or an error stack (the object or its id); False if absent."""
        for rules in (self.rules, self.stacks):
            for rule in rules:
                if rule is fault or rule.id == fault:
                    rules.remove(rule)  # type: ignore[arg-type]
                    return True
        return False

    def clear(self) -> None:
        """Every rule, stack and the latency (holes and down are undone by the control layer)."""
        self.rules.clear()
        self.stacks.clear()
        self.latency_ms = 0
        self.append_rules.clear()
        self.timer_rules.clear()
        self.rename_rules.clear()
        self._append_rules_changed()

    def describe(self) -> dict[str, Any]:
        return {
            "rules": [rule.describe() for rule in self.rules],
            "error_stacks": [stack.describe() for stack in self.stacks],
            "latency_ms": self.latency_ms,
            "append_rules": [
                {"topic": r.topic, "partition": r.partition, "errno": r.error, "count": r.count, "hits": r.hits} for r in self.append_rules
            ],
            "rename_rules": [{"topic": r.topic, "count": r.count, "hits": r.hits} for r in self.rename_rules],
            "timer_rules": [{"group": r.group, "count": r.count, "hits": r.hits} for r in self.timer_rules],
        }


def match(injector: FaultInjector, ctx: RequestContext, request: Any) -> Fault | None:
    for stack in injector.stacks:
        if stack.api_key == ctx.api_key and (stack.client_id is None or stack.client_id == ctx.client_id):
            code, delay = stack.errors.popleft()
            if not stack.errors:
                injector.stacks.remove(stack)
            injector.injected["error_stack"] += 1
            if code == ErrorCode.NONE and not delay:
                return None
            return Fault(ctx.api_key, None if code == ErrorCode.NONE else code, delay, count=None, id=0)
    rules = injector.rules
    for rule in rules:
        if rule.matches(ctx):
            rule.hits += 1
            if rule.exhausted:
                rules.remove(rule)
            injector.injected[rule.kind] += 1
            return rule
    return None
