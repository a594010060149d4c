"""The sticky task assignor of streams groups (Kafka 4.4's StickyTaskAssignor, name `sticky`,
the only built-in one and the default of `group.streams.assignors`).

Active tasks first: each task stays with the member that had it, while that member is under its
quota (ceil(tasks / members), recomputed as members fill up); then with a member that had it as a
standby (or reported offsets for it), the least loaded first; the rest go, in (subtopology,
partition) order, to the least loaded process and its least loaded member. Then, with
`num.standby.replicas` > 0, standby tasks of the stateful sub-topologies: to the member that had
the task active, then to previous standbys ranked by (was a standby, highest reported offset sum),
then to the least loaded process that does not hold the task yet; a replica that fits nowhere is
logged ("There is not enough available capacity ..."), as Kafka does.

Ties between equally loaded processes and members are broken by Java's HashMap and PriorityQueue
orders (broker/coordinator/streams/javaorder.py), so the assignment is Kafka's for the same
member ids and process ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from broker.coordinator.streams.javaorder import JavaPriorityQueue, compare_numbers, hashmap_order

log = structlog.get_logger("kaflet.coordinator")

NAME = "sticky"
TaskId = tuple[str, int]  # (subtopology id, partition)


class TaskAssignorError(Exception):
    """Kafka's TaskAssignorException: the group's heartbeat fails with UNKNOWN_SERVER_ERROR."""


@dataclass
class MemberSpec:
    """What the assignor knows of a member (Kafka's MemberMetadataAndStateImpl)."""

    process_id: str
    active: Mapping[str, frozenset[int]] = field(default_factory=dict)
    standby: Mapping[str, frozenset[int]] = field(default_factory=dict)
    task_offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)


@dataclass
class TopologySpec:
    """Kafka's TopologyDescriber: each sub-topology's task count and whether it has state."""

    tasks: Mapping[str, int]  # subtopology id -> number of tasks
    stateful: frozenset[str]

    def subtopologies(self) -> list[str]:
        return sorted(self.tasks)


@dataclass
class MemberAssignment:
    active: dict[str, set[int]] = field(default_factory=dict)
    standby: dict[str, set[int]] = field(default_factory=dict)


class _Process:
    """Kafka's ProcessState."""

    __slots__ = (
        "active_by_member",
        "assigned",
        "capacity",
        "load",
        "member_counts",
        "members_by_load",
        "process_id",
        "standby_by_member",
        "task_count",
    )

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.capacity = 0
        self.load = float("inf")  # Double.MAX_VALUE until a member is added
        self.task_count = 0
        self.member_counts: dict[str, int] = {}  # insertion order; iterated in Java HashMap order
        self.active_by_member: dict[str, set[TaskId]] = {}
        self.standby_by_member: dict[str, set[TaskId]] = {}
        self.assigned: set[TaskId] = set()
        self.members_by_load: JavaPriorityQueue[list[object]] | None = None

    def add_member(self, member_id: str) -> None:
        self.member_counts[member_id] = 0
        self.capacity += 1
        self._compute_load()

    def _compute_load(self) -> None:
        self.load = -1.0 if self.capacity <= 0 else self.task_count / self.capacity

    def has_task(self, task: TaskId) -> bool:
        return task in self.assigned

    def add_task(self, member_id: str, task: TaskId, active: bool) -> int:
        count = self._add(member_id, task, active)
        self.members_by_load = None
        return count

    def _add(self, member_id: str, task: TaskId, active: bool) -> int:
        self.task_count += 1
        self.assigned.add(task)
        (self.active_by_member if active else self.standby_by_member).setdefault(member_id, set()).add(task)
        count = self.member_counts[member_id] + 1
        self.member_counts[member_id] = count
        self._compute_load()
        return count

    def add_to_least_loaded_member(self, task: TaskId, active: bool) -> int:
        if not self.member_counts:
            return -1
        if len(self.member_counts) == 1:
            return self._add(hashmap_order(self.member_counts)[0], task, active)
        if self.members_by_load is None:
            queue: JavaPriorityQueue[list[object]] = JavaPriorityQueue(lambda a, b: compare_numbers(a[1], b[1]))  # type: ignore[arg-type]
            for member_id in hashmap_order(self.member_counts):
                queue.add([member_id, self.member_counts[member_id]])
            self.members_by_load = queue
        entry = self.members_by_load.poll()
        if entry is None:
            raise TaskAssignorError(f"No members available to assign task {task[0]}_{task[1]}")
        count = self._add(str(entry[0]), task, active)
        entry[1] = count
        self.members_by_load.add(entry)
        return count


@dataclass
class _Member:
    process_id: str
    member_id: str


class _State:
    def __init__(self) -> None:
        self.active_prev: dict[TaskId, _Member] = {}
        self.standby_prev: dict[TaskId, list[_Member]] = {}
        self.processes: dict[str, _Process] = {}
        self.process_order: list[str] = []
        self.standby_replicas = 0
        self.total_active = 0
        self.total_tasks = 0
        self.members_with_active_capacity = 0
        self.members_with_capacity = 0
        self.active_per_member = 0
        self.tasks_per_member = 0


def _per_member(tasks: int, members: int) -> int:
    if members == 0:
        return 0
    return tasks // members + (1 if tasks % members else 0)


def assign(members: Mapping[str, MemberSpec], topology: TopologySpec, standby_replicas: int) -> dict[str, MemberAssignment]:
    """Kafka's StickyTaskAssignor.assign: member id -> its active and standby tasks. `members` in
    the order Kafka's target assignment builder puts them into its HashMap (the group's members)."""
    member_ids = hashmap_order(members)
    state = _initialize(members, member_ids, topology, standby_replicas)
    active_tasks = _task_ids(topology, active=True)
    _assign_active(state, active_tasks)
    if state.standby_replicas > 0:
        _assign_standby(state, _task_ids(topology, active=False))
    return _build(state, member_ids)


def _task_ids(topology: TopologySpec, active: bool) -> list[TaskId]:
    out = []
    for subtopology in topology.subtopologies():
        if not active and subtopology not in topology.stateful:
            continue
        out += [(subtopology, i) for i in range(topology.tasks[subtopology])]
    return out


def _initialize(members: Mapping[str, MemberSpec], member_ids: list[str], topology: TopologySpec, standby_replicas: int) -> _State:
    state = _State()
    state.standby_replicas = standby_replicas
    for subtopology in topology.subtopologies():
        n = topology.tasks[subtopology]
        state.total_tasks += n
        state.total_active += n
        if subtopology in topology.stateful:
            state.total_tasks += n * standby_replicas
    state.members_with_active_capacity = len(member_ids)
    state.members_with_capacity = len(member_ids)
    state.active_per_member = _per_member(state.total_active, state.members_with_active_capacity)
    state.tasks_per_member = _per_member(state.total_tasks, state.members_with_capacity)
    candidates: dict[TaskId, list[tuple[_Member, bool, int]]] = {}
    for member_id in member_ids:
        spec = members[member_id]
        member = _Member(spec.process_id, member_id)
        process = state.processes.get(spec.process_id)
        if process is None:
            process = state.processes[spec.process_id] = _Process(spec.process_id)
        process.add_member(member_id)
        for subtopology, partitions in spec.active.items():
            for p in partitions:
                state.active_prev[(subtopology, p)] = member
        for subtopology, partitions in spec.standby.items():
            for p in partitions:
                offset = spec.task_offsets.get(subtopology, {}).get(p, 0)
                candidates.setdefault((subtopology, p), []).append((member, True, offset))
        for subtopology, offsets in spec.task_offsets.items():
            for p, offset in offsets.items():
                if p in spec.standby.get(subtopology, frozenset()):
                    continue
                candidates.setdefault((subtopology, p), []).append((member, False, offset))
    # processIdToState: a HashMap sized by the member count, filled by computeIfAbsent
    state.process_order = hashmap_order(state.processes, len(member_ids), compute_if_absent=True)
    for task, ranked in candidates.items():
        ranked.sort(key=lambda c: (0 if c[1] else 1, -c[2]))  # a stable sort, as List.sort
        state.standby_prev[task] = [c[0] for c in ranked]
    return state


def _processes_by_load(state: _State) -> JavaPriorityQueue[_Process]:
    queue: JavaPriorityQueue[_Process] = JavaPriorityQueue(lambda a, b: compare_numbers(a.load, b.load))
    for process_id in state.process_order:
        queue.add(state.processes[process_id])
    return queue


def _assign_active(state: _State, tasks: list[TaskId]) -> None:
    tasks.sort(key=lambda t: (t[1], t[0]))
    left = []
    for task in tasks:
        prev = state.active_prev.get(task)
        if prev is not None:
            process = state.processes[prev.process_id]
            if _under_active_quota(state, process, prev):
                _after_active(state, process.add_task(prev.member_id, task, True))
                continue
        left.append(task)
    tasks = left
    left = []
    for task in tasks:
        prev = _least_loaded_prev(state, state.standby_prev.get(task), None)
        if prev is not None:
            process = state.processes[prev.process_id]
            if _under_active_quota(state, process, prev):
                _after_active(state, process.add_task(prev.member_id, task, True))
                continue
        left.append(task)
    left.sort()
    queue = _processes_by_load(state)
    for task in left:
        process = queue.poll()
        if process is None:
            raise TaskAssignorError(f"No process available to assign active task {task[0]}_{task[1]}.")
        count = process.add_to_least_loaded_member(task, True)
        if count == -1:
            raise TaskAssignorError(f"No member available to assign active task {task[0]}_{task[1]}.")
        _after_active(state, count)
        queue.add(process)


def _after_active(state: _State, count: int) -> None:
    if count == state.active_per_member:
        state.members_with_active_capacity -= 1
        state.total_active -= count
        state.active_per_member = _per_member(state.total_active, state.members_with_active_capacity)
    _after_any(state, count)


def _after_any(state: _State, count: int) -> None:
    if count == state.tasks_per_member:
        state.members_with_capacity -= 1
        state.total_tasks -= count
        state.tasks_per_member = _per_member(state.total_tasks, state.members_with_capacity)


def _under_active_quota(state: _State, process: _Process, member: _Member) -> bool:
    return process.member_counts[member.member_id] < state.active_per_member


def _under_quota(state: _State, process: _Process, member: _Member) -> bool:
    return process.member_counts[member.member_id] < state.tasks_per_member


def _least_loaded_prev(state: _State, members: list[_Member] | None, standby_task: TaskId | None) -> _Member | None:
    if not members:
        return None
    candidate = None
    process_load = member_load = float("inf")
    for member in members:
        process = state.processes[member.process_id]
        if standby_task is not None and process.has_task(standby_task):
            continue
        new_process_load = process.load
        new_member_load = float(process.member_counts[member.member_id])
        if candidate is not None and not (new_process_load < process_load and new_member_load < member_load):
            continue
        process_load, member_load, candidate = new_process_load, new_member_load, member
    return candidate


def _assign_standby(state: _State, tasks: list[TaskId]) -> None:
    to_least_loaded: list[tuple[TaskId, int]] = []
    tasks.sort(key=lambda t: (t[1], t[0]), reverse=True)
    for task in tasks:
        for i in range(state.standby_replicas):
            prev_active = state.active_prev.get(task)
            if prev_active is not None:
                process = state.processes[prev_active.process_id]
                if not process.has_task(task) and _under_quota(state, process, prev_active):
                    _after_any(state, process.add_task(prev_active.member_id, task, False))
                    continue
            prev_standby = _least_loaded_prev(state, state.standby_prev.get(task), task)
            if prev_standby is not None:
                process = state.processes[prev_standby.process_id]
                if _under_quota(state, process, prev_standby):
                    _after_any(state, process.add_task(prev_standby.member_id, task, False))
                    continue
            to_least_loaded.append((task, state.standby_replicas - i))
            break
    to_least_loaded.sort(key=lambda e: (e[0][0], e[0][1]), reverse=True)
    queue = _processes_by_load(state)
    for task, remaining in to_least_loaded:
        for i in range(remaining):
            if not _standby_to_least_loaded(state, queue, task):
                log.warning(
                    f"Unable to assign {state.standby_replicas - i} of {state.standby_replicas} standby tasks for task "
                    f"[{task[0]}_{task[1]}]. There is not enough available capacity. You should increase the number of "
                    "threads and/or application instances to maintain the requested number of standby replicas."
                )
                break


def _standby_to_least_loaded(state: _State, queue: JavaPriorityQueue[_Process], task: TaskId) -> bool:
    process = queue.poll()
    if process is None:
        return False
    found = False
    if not process.has_task(task):
        count = process.add_to_least_loaded_member(task, False)
        if count != -1:
            found = True
            _after_any(state, count)
    elif len(queue):
        found = _standby_to_least_loaded(state, queue, task)
    queue.add(process)
    return found


def _build(state: _State, member_ids: list[str]) -> dict[str, MemberAssignment]:
    active: dict[str, set[TaskId]] = {}
    standby: dict[str, set[TaskId]] = {}
    for process in state.processes.values():
        for member_id, tasks in process.active_by_member.items():
            active.setdefault(member_id, set()).update(tasks)
        for member_id, tasks in process.standby_by_member.items():
            standby.setdefault(member_id, set()).update(tasks)
    out = {}
    for member_id in member_ids:
        assignment = MemberAssignment()
        for subtopology, p in active.get(member_id, ()):
            assignment.active.setdefault(subtopology, set()).add(p)
        for subtopology, p in standby.get(member_id, ()):
            assignment.standby.setdefault(subtopology, set()).add(p)
        out[member_id] = assignment
    return out
