"""The one place errors are injected: rules that make the broker misbehave on purpose.

A rule matches requests by API key (and optionally client id) and then answers with an
error code through the API's own error response, delays the answer, or closes the
connection. Rules are consulted by the connection before the handler runs.
"""

from __future__ import annotations

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


class FaultInjector:
    def __init__(self) -> None:
        self.rules: list[Fault] = []

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
