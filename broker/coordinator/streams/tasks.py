"""Sets of tasks, as Kafka's TasksTuple (a target assignment: active, standby and warm-up tasks
by sub-topology) and TasksTupleWithEpochs (a member's current assignment, where each active task
carries the epoch at which the member was given it, KIP-1251's fencing of zombie commits).

Maps never hold an empty set for a sub-topology, as Kafka's builders never put one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from storage import streams_records as srec

Tasks = dict[str, frozenset[int]]  # subtopology id -> partitions
ActiveWithEpochs = dict[str, dict[int, int]]  # subtopology id -> partition -> assignment epoch


def tasks_from(items: Iterable[tuple[str, Iterable[int]]]) -> Tasks:
    """From (subtopology, partitions) pairs; a sub-topology named twice keeps its last entry, as
    Kafka's `Collectors.toMap` would refuse and its record replay would overwrite."""
    out: Tasks = {}
    for subtopology, partitions in items:
        out[subtopology] = frozenset(partitions)
    return out


def to_task_ids(tasks: Mapping[str, Iterable[int]]) -> srec.TaskIds:
    """Sorted by sub-topology, partitions ascending (Kafka's record helpers)."""
    return [(s, sorted(ps)) for s, ps in sorted(tasks.items())]


def tasks_string(tasks: Mapping[str, Iterable[int]]) -> str:
    """Kafka's TasksTuple.taskAssignmentToString: [0-0, 0-1, 1-0]."""
    return "[" + ", ".join(f"{s}-{p}" for s in sorted(tasks) for p in sorted(tasks[s])) + "]"


def merge_tasks(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Tasks:
    out = dict(a)
    for s, ps in b.items():
        out[s] = out.get(s, frozenset()) | ps
    return out


@dataclass(frozen=True)
class TasksTuple:
    """A target assignment."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not self.active and not self.standby and not self.warmup

    def contains_any(self, other: TasksWithEpochs) -> bool:
        """Whether any task of this tuple is in `other`, role for role."""
        for mine, theirs in ((self.active, other.active), (self.standby, other.standby), (self.warmup, other.warmup)):
            for s, ps in mine.items():
                held = theirs.get(s)
                if held is not None and not ps.isdisjoint(held):
                    return True
        return False

    def same_tasks(self, other: TasksWithEpochs) -> bool:
        if self.warmup != other.warmup or self.standby != other.standby:
            return False
        if len(self.active) != len(other.active):
            return False
        return all(s in other.active and ps == other.active[s].keys() for s, ps in self.active.items())

    @classmethod
    def from_record(cls, v: srec.TargetAssignmentValue) -> TasksTuple:
        return cls(tasks_from(v.active), tasks_from(v.standby), tasks_from(v.warmup))

    def record(self) -> srec.TargetAssignmentValue:
        return srec.TargetAssignmentValue(to_task_ids(self.active), to_task_ids(self.standby), to_task_ids(self.warmup))

    def __str__(self) -> str:
        return f"(active={tasks_string(self.active)}, standby={tasks_string(self.standby)}, warmup={tasks_string(self.warmup)})"


EMPTY_TASKS = TasksTuple()


@dataclass(frozen=True)
class TasksWithEpochs:
    """A member's current assignment (or the tasks it must revoke)."""

    active: ActiveWithEpochs = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not self.active and not self.standby and not self.warmup

    def active_tasks(self) -> Tasks:
        return {s: frozenset(ps) for s, ps in self.active.items()}

    def standby_and_warmup(self) -> Tasks:
        return merge_tasks(self.standby, self.warmup)

    def merge(self, other: TasksWithEpochs) -> TasksWithEpochs:
        active = {s: dict(ps) for s, ps in self.active.items()}
        for s, ps in other.active.items():
            active.setdefault(s, {}).update(ps)
        return TasksWithEpochs(active, merge_tasks(self.standby, other.standby), merge_tasks(self.warmup, other.warmup))

    def with_zero_epochs(self) -> TasksWithEpochs:
        return TasksWithEpochs({s: dict.fromkeys(ps, 0) for s, ps in self.active.items()}, self.standby, self.warmup)

    @classmethod
    def from_record(cls, active: srec.TaskIdsWithEpochs, standby: srec.TaskIds, warmup: srec.TaskIds, member_epoch: int) -> TasksWithEpochs:
        """TasksTupleWithEpochs.fromCurrentAssignmentRecord: epochs missing or of another length
        than the partitions fall back to the member epoch."""
        with_epochs: ActiveWithEpochs = {}
        for s, partitions, epochs in active:
            if epochs is not None and len(epochs) == len(partitions):
                with_epochs[s] = dict(zip(partitions, epochs, strict=True))
            else:
                with_epochs[s] = dict.fromkeys(partitions, member_epoch)
        return cls(with_epochs, tasks_from(standby), tasks_from(warmup))

    def record_active(self) -> srec.TaskIdsWithEpochs:
        out: srec.TaskIdsWithEpochs = []
        for s in sorted(self.active):
            ps = sorted(self.active[s])
            out.append((s, ps, [self.active[s][p] for p in ps]))
        return out

    def __str__(self) -> str:
        active = ", ".join(f"{s}-{p}@{self.active[s][p]}" for s in sorted(self.active) for p in sorted(self.active[s]))
        return f"(active=[{active}], standby={tasks_string(self.standby)}, warmup={tasks_string(self.warmup)})"


EMPTY_ASSIGNED = TasksWithEpochs()
