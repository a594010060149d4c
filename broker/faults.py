"""The one place errors are injected: rules that make the broker misbehave on purpose.

A request rule matches requests by API key (and optionally client id) and then answers with
an error code through the API's own error response, delays the answer, or closes the
connection; the connection consults them before the handler runs. An append rule makes
writes to a partition log fail as a broken or full disk would (OSError: EIO by default,
ENOSPC for a full disk): while one is armed, every partition log calls `check_append` before
it writes (Produce, the coordinator's `__consumer_offsets` appends, everything). A timer rule
makes a group's next coordinator timer callbacks raise, as a coordinator bug would.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import RequestContext
    from broker.server import Broker


@dataclass
class Fault:
    api_key: int | None = None
    error: ErrorCode | None = None
    delay_ms: int = 0
    close: bool = False
    count: int | None = 1
    client_id: str | None = None
    hits: int = field(default=0)

    def matches(self, ctx: RequestContext) -> bool:
        if self.api_key is not None and self.api_key != ctx.api_key:
            return False
        if self.client_id is not None and self.client_id != ctx.client_id:
            return False
        return True

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count


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
        # The storage layer's hook (LogManager.set_write_check): armed only while append rules exist.
        self._install_write_check: Callable[[Callable[[str, int], None] | None], None] | None = None

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

    def remove(self, fault: Fault) -> None:
        if fault in self.rules:
            self.rules.remove(fault)

    def clear(self) -> None:
        self.rules.clear()
        self.append_rules.clear()
        self.timer_rules.clear()
        self.rename_rules.clear()


def match(broker: Broker, ctx: RequestContext, request: Any) -> Fault | None:
    rules = broker.faults.rules
    if not rules:
        return None
    for rule in rules:
        if rule.matches(ctx):
            rule.hits += 1
            if rule.exhausted:
                rules.remove(rule)
            return rule
    return None
