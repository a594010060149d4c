"""Every scenario of the differential suite, family by family (one module per family)."""

from __future__ import annotations

from tests.differential.harness import Scenario
from tests.differential.scenarios import (
    admin,
    classic,
    configs,
    consumer,
    describe_order,
    find_coordinator,
    list_order,
    offsets,
    transactions,
)

FAMILIES = (find_coordinator, classic, offsets, admin, consumer, describe_order, list_order, transactions, configs)

ALL: list[Scenario] = [s for family in FAMILIES for s in family.scenarios.scenarios]

_names = [s.name for s in ALL]
assert len(_names) == len(set(_names)), sorted({n for n in _names if _names.count(n) > 1})
