"""A streams group member (Kafka's StreamsGroupMember): what its StreamsGroupMemberMetadata and
StreamsGroupCurrentMemberAssignment records carry."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum

from broker.coordinator.streams.tasks import EMPTY_ASSIGNED, TasksWithEpochs, to_task_ids
from storage import streams_records as srec

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """Kafka's streams MemberState, with its record values."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    assigned: TasksWithEpochs = EMPTY_ASSIGNED
    pending_revocation: TasksWithEpochs = EMPTY_ASSIGNED

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def copy(self, **changes: object) -> StreamsMember:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    # -- records -------------------------------------------------------------------------

    def metadata_value(self) -> srec.MemberMetadataValue:
        return srec.MemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            topology_epoch=self.topology_epoch,
            process_id=self.process_id,
            user_endpoint=self.user_endpoint,
            client_tags=sorted(self.client_tags.items()),
        )

    def assignment_value(self) -> srec.CurrentAssignmentValue:
        return srec.CurrentAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            active=self.assigned.record_active(),
            standby=to_task_ids(self.assigned.standby),
            warmup=to_task_ids(self.assigned.warmup),
            active_pending=self.pending_revocation.record_active(),
            standby_pending=to_task_ids(self.pending_revocation.standby),
            warmup_pending=to_task_ids(self.pending_revocation.warmup),
        )

    def same_metadata(self, other: StreamsMember) -> bool:
        return self.metadata_value() == other.metadata_value()

    def same_assignment(self, other: StreamsMember) -> bool:
        return (
            self.member_epoch == other.member_epoch
            and self.previous_member_epoch == other.previous_member_epoch
            and self.state is other.state
            and self.assigned == other.assigned
            and self.pending_revocation == other.pending_revocation
        )

    def apply_metadata(self, v: srec.MemberMetadataValue) -> None:
        self.instance_id = v.instance_id
        self.rack_id = v.rack_id
        self.client_id = v.client_id
        self.client_host = v.client_host
        self.rebalance_timeout_ms = v.rebalance_timeout_ms
        self.topology_epoch = v.topology_epoch
        self.process_id = v.process_id
        self.user_endpoint = v.user_endpoint
        self.client_tags = dict(v.client_tags)

    def apply_assignment(self, v: srec.CurrentAssignmentValue) -> None:
        self.member_epoch = v.member_epoch
        self.previous_member_epoch = v.previous_member_epoch
        self.state = MemberState.of(v.state)
        self.assigned = TasksWithEpochs.from_record(v.active, v.standby, v.warmup, v.member_epoch)
        self.pending_revocation = TasksWithEpochs.from_record(v.active_pending, v.standby_pending, v.warmup_pending, v.member_epoch)


def assigned_tasks_changed(a: StreamsMember, b: StreamsMember) -> bool:
    return a.assigned != b.assigned
