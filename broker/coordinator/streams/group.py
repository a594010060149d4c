"""A streams group (Kafka's StreamsGroup): epochs, members, target assignment, topology and the
soft state the coordinator keeps beside its records.

What the records carry is applied by `replay` in broker/coordinator/streams/manager.py; the rest
is soft state, as in Kafka: the configured topology (recomputed when the group's topics change),
the task offsets members report, the endpoint-information epoch and the shutdown request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from broker.coordinator.streams.member import StreamsMember
from broker.coordinator.streams.tasks import EMPTY_TASKS, TasksTuple, TasksWithEpochs
from broker.coordinator.streams.topics import ConfiguredTopology
from broker.coordinator.streams.topology import StreamsTopology

# Kafka's StreamsGroup.STORED_TOPOLOGY_EPOCH_NONE
STORED_TOPOLOGY_EPOCH_NONE = -1


class StreamsGroupState:
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    @staticmethod
    def lower(state: str) -> str:
        """Kafka's toLowerCaseString: ListGroups' state filter (`not_ready`)."""
        return "not_ready" if state == StreamsGroupState.NOT_READY else state.lower()


@dataclass
class MemberTaskOffsets:
    """Changelog offset sums a member reported (subtopology -> partition -> offset)."""

    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    end_offsets: dict[str, dict[int, int]] = field(default_factory=dict)


class StreamsGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1
        self.assignment_epoch = 1  # TargetAssignmentMetadata.INITIAL
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.stored_description_topology_epoch = STORED_TOPOLOGY_EPOCH_NONE
        self.failed_description_topology_epoch = -1
        self.last_assignment_configs: dict[str, str] = {}
        self.members: dict[str, StreamsMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, TasksTuple] = {}
        self.topology: StreamsTopology | None = None
        # Soft state.
        self.configured_topology: ConfiguredTopology | None = None
        self.described_topology: ConfiguredTopology | None = None  # the configured topology as of the group's last write
        self.metadata_refresh = True  # the group's topics changed (or it was just loaded): recompute the metadata hash
        self.task_offsets: dict[str, MemberTaskOffsets] = {}
        self.shutdown_request_member_id: str | None = None
        self.endpoint_information_epoch = 0
        self.active_process: dict[tuple[str, int], str] = {}  # task -> process id running it
        self.standby_processes: dict[tuple[str, int], set[str]] = {}
        self.warmup_processes: dict[tuple[str, int], set[str]] = {}
        self.last_stable_ms: float | None = time.monotonic() * 1000
        self.created_ms = time.time() * 1000

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        epoch = self.assignment_epoch
        for member in self.members.values():
            if not member.is_reconciled_to(epoch):
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def current_topology_epoch(self) -> int:
        return self.topology.epoch if self.topology is not None else -1

    def static_member(self, instance_id: str | None) -> StreamsMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def target_of(self, member_id: str) -> TasksTuple:
        return self.target.get(member_id, EMPTY_TASKS)

    # -- what the offsets code asks (OR-2, OD-1) ------------------------------------------------

    def is_subscribed_to(self, topic: str) -> bool:
        """StreamsGroup.isSubscribedToTopic: a source (or repartition source) topic of a group
        that is neither Empty nor Dead."""
        if not self.members or self.topology is None:
            return False
        return topic in self.topology.source_topic_map

    def offset_expiration_base(self) -> str | None:
        return "commit"

    current_state_timestamp: int | None = None

    # -- members (StreamsGroup.updateMember / removeMember) ----------------------------------

    def put_member(self, member: StreamsMember) -> None:
        old = self.members.get(member.member_id)
        self.members[member.member_id] = member
        if old is not None:
            self._remove_processes(old)
            if old.instance_id is not None:
                self.static_members.pop(old.instance_id, None)
        self._add_processes(member)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._remove_processes(old)
            if old.instance_id is not None:
                self.static_members.pop(old.instance_id, None)
        self.task_offsets.pop(member_id, None)
        if not self.members:
            self.shutdown_request_member_id = None

    # -- which process runs a task (CurrentAssignmentBuilder's "unreleased" checks) -----------

    def _add_processes(self, member: StreamsMember) -> None:
        process = member.process_id
        if process is None:
            return
        for tasks in (member.assigned, member.pending_revocation):
            for s, ps in tasks.active.items():
                for p in ps:
                    self.active_process[(s, p)] = process
            for s, ps in tasks.standby.items():
                for p in ps:
                    self.standby_processes.setdefault((s, p), set()).add(process)
            for s, ps in tasks.warmup.items():
                for p in ps:
                    self.warmup_processes.setdefault((s, p), set()).add(process)

    def _remove_processes(self, member: StreamsMember) -> None:
        process = member.process_id
        for tasks in (member.assigned, member.pending_revocation):
            self._remove(tasks, process)

    def _remove(self, tasks: TasksWithEpochs, process: str) -> None:
        for s, ps in tasks.active.items():
            for p in ps:
                if self.active_process.get((s, p)) == process:
                    del self.active_process[(s, p)]
        for table, assigned in ((self.standby_processes, tasks.standby), (self.warmup_processes, tasks.warmup)):
            for s, ps in assigned.items():
                for p in ps:
                    owners = table.get((s, p))
                    if owners is not None:
                        owners.discard(process)
                        if not owners:
                            del table[(s, p)]

    def active_process_of(self, subtopology: str, partition: int) -> str | None:
        return self.active_process.get((subtopology, partition))

    def standby_processes_of(self, subtopology: str, partition: int) -> set[str]:
        return self.standby_processes.get((subtopology, partition), set())

    def warmup_processes_of(self, subtopology: str, partition: int) -> set[str]:
        return self.warmup_processes.get((subtopology, partition), set())
