"""Server-side assignors for KIP-848 consumer groups: a registry by name (KA-1).

A new assignor is one module plus one line in `ASSIGNORS`. `--group-consumer-assignors` is validated against
`names()`; the coordinator looks the group's assignor up with `get()`.
"""

from __future__ import annotations

from .base import Assignment, Assignor, AssignorError, GroupSpec, MemberSpec
from .lag_aware import LagAwareAssignor
from .range_assignor import RangeAssignor
from .uniform import UniformAssignor

ASSIGNORS: dict[str, type[Assignor]] = {
    UniformAssignor.name: UniformAssignor,
    RangeAssignor.name: RangeAssignor,
    LagAwareAssignor.name: LagAwareAssignor,
}

# Assignors are stateless: one shared instance per name.
_INSTANCES: dict[str, Assignor] = {}


def get(name: str) -> Assignor:
    """The assignor registered under `name`; KeyError for an unknown name."""
    inst = _INSTANCES.get(name)
    if inst is None:
        inst = _INSTANCES[name] = ASSIGNORS[name]()
    return inst


def names() -> list[str]:
    return list(ASSIGNORS)


__all__ = ["ASSIGNORS", "Assignment", "Assignor", "AssignorError", "GroupSpec", "MemberSpec", "get", "names"]
