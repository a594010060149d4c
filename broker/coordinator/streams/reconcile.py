"""A member's next assignment on its way to the target (Kafka 4.4's streams
CurrentAssignmentBuilder).

A member first keeps what it has of its target and must revoke the rest (UNREVOKED_TASKS, at its
current epoch) until its heartbeat shows it no longer owns them; only then does it move to the
target epoch and get the new tasks, and only those that no other member still runs: an active
task while any process still runs it, a standby or warm-up while its own process holds the task
in another role (UNRELEASED_TASKS until they are released). A standby or warm-up that becomes the
member's active task is kept until the active one is granted; an active task that becomes a
standby of the same member is granted at once.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.coordinator.streams.member import MemberState, StreamsMember
from broker.coordinator.streams.tasks import ActiveWithEpochs, Tasks, TasksTuple, TasksWithEpochs
from broker.runtime.errors import CoordinatorError
from protocol.errors import ErrorCode

ActiveProcess = Callable[[str, int], str | None]
ProcessSet = Callable[[str, int], set[str]]


class CurrentAssignmentBuilder:
    def __init__(
        self,
        member: StreamsMember,
        target_epoch: int,
        target: TasksTuple,
        active_process: ActiveProcess,
        standby_processes: ProcessSet,
        warmup_processes: ProcessSet,
        owned: TasksTuple | None,
    ) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.active_process = active_process
        self.standby_processes = standby_processes
        self.warmup_processes = warmup_processes
        self.owned = owned

    def build(self) -> StreamsMember:
        m = self.member
        if m.state is MemberState.STABLE:
            if m.member_epoch != self.target_epoch:
                return self._next(m.member_epoch, m.assigned)
            return m
        if m.state is MemberState.UNREVOKED_TASKS:
            if self._not_released(m.pending_revocation):
                return m
            return self._next(m.member_epoch + 1, m.assigned)
        if m.state is MemberState.UNRELEASED_TASKS:
            return self._next(m.member_epoch, m.assigned)
        if self.owned is None or not self.owned.is_empty():
            raise CoordinatorError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin.",
            )
        return self._next(self.target_epoch, m.assigned)

    def _not_released(self, pending: TasksWithEpochs) -> bool:
        return self.owned is None or self.owned.contains_any(pending)

    # -- differences -------------------------------------------------------------------------

    @staticmethod
    def _difference(
        current: Tasks, target: Tasks, unreleased: Callable[[str, int], bool]
    ) -> tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]], bool]:
        assigned: dict[str, set[int]] = {}
        revoking: dict[str, set[int]] = {}
        pending: dict[str, set[int]] = {}
        held = False
        for s in set(target) | set(current):
            cur = current.get(s, frozenset())
            tgt = target.get(s, frozenset())
            keep = set(cur & tgt)
            revoke = set(cur - keep)
            want = set(tgt - keep)
            blocked = {p for p in want if unreleased(s, p)}
            if blocked:
                held = True
                want -= blocked
            if keep:
                assigned[s] = keep
            if revoke:
                revoking[s] = revoke
            if want:
                pending[s] = want
        return assigned, revoking, pending, held

    def _difference_with_epochs(
        self, current: ActiveWithEpochs, target: Tasks, unreleased: Callable[[str, int], bool]
    ) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int]], dict[str, dict[int, int]], bool]:
        assigned: dict[str, dict[int, int]] = {}
        revoking: dict[str, dict[int, int]] = {}
        pending: dict[str, dict[int, int]] = {}
        held = False
        for s in set(target) | set(current):
            cur = current.get(s, {})
            tgt = target.get(s, frozenset())
            keep = {p: e for p, e in cur.items() if p in tgt}
            revoke = {p: e for p, e in cur.items() if p not in keep}
            want = {p: self.target_epoch for p in tgt if p not in keep}
            blocked = [p for p in want if unreleased(s, p)]
            if blocked:
                held = True
                for p in blocked:
                    del want[p]
            if keep:
                assigned[s] = keep
            if revoke:
                revoking[s] = revoke
            if want:
                pending[s] = want
        return assigned, revoking, pending, held

    # -- unreleased tasks -----------------------------------------------------------------------

    def _unreleased_active(self, assigned: TasksWithEpochs, s: str, p: int) -> bool:
        return (
            self.active_process(s, p) is not None
            or self._held_by_another_member_here(self.standby_processes, assigned.standby, s, p)
            or self._held_by_another_member_here(self.warmup_processes, assigned.warmup, s, p)
        )

    def _unreleased_standby(self, assigned: TasksWithEpochs, s: str, p: int) -> bool:
        return (
            self._run_by_another_member_here(assigned, s, p)
            or self.member.process_id in self.standby_processes(s, p)
            or self._held_by_another_member_here(self.warmup_processes, assigned.warmup, s, p)
        )

    def _unreleased_warmup(self, assigned: TasksWithEpochs, s: str, p: int) -> bool:
        return (
            self.active_process(s, p) == self.member.process_id
            or self._held_by_another_member_here(self.standby_processes, assigned.standby, s, p)
            or self.member.process_id in self.warmup_processes(s, p)
        )

    def _run_by_another_member_here(self, assigned: TasksWithEpochs, s: str, p: int) -> bool:
        return self.active_process(s, p) == self.member.process_id and p not in assigned.active.get(s, {})

    def _held_by_another_member_here(self, processes: ProcessSet, mine: Tasks, s: str, p: int) -> bool:
        return self.member.process_id in processes(s, p) and p not in mine.get(s, frozenset())

    # -- the next assignment ------------------------------------------------------------------------

    def _next(self, member_epoch: int, assigned: TasksWithEpochs) -> StreamsMember:
        a_assigned, a_revoke, a_pending, a_held = self._difference_with_epochs(
            assigned.active, self.target.active, lambda s, p: self._unreleased_active(assigned, s, p)
        )
        s_assigned, s_revoke, s_pending, s_held = self._difference(
            assigned.standby, self.target.standby, lambda s, p: self._unreleased_standby(assigned, s, p)
        )
        w_assigned, w_revoke, w_pending, w_held = self._difference(
            assigned.warmup, self.target.warmup, lambda s, p: self._unreleased_warmup(assigned, s, p)
        )
        # An active task that becomes a standby of the same member is granted now.
        for s, ps in assigned.active.items():
            for p in ps:
                if p in s_pending.get(s, set()):
                    _grant(s_pending, s_assigned, s, p)
        # Standby <-> warm-up role changes are granted now too, and not revoked.
        _convert(assigned.standby, s_revoke, w_pending, w_assigned)
        _convert(assigned.warmup, w_revoke, s_pending, s_assigned)
        # A standby or warm-up promoted to active is not revoked, and kept until the active is granted.
        target_active = self.target.active
        for mine, revoke in ((assigned.standby, s_revoke), (assigned.warmup, w_revoke)):
            for s, ps in mine.items():
                for p in ps:
                    if p in target_active.get(s, frozenset()):
                        _remove(revoke, s, p)
        revoking = TasksWithEpochs(a_revoke, _frozen(s_revoke), _frozen(w_revoke))
        to_revoke = not revoking.is_empty() and self._not_released(revoking)
        for mine, kept in ((assigned.standby, s_assigned), (assigned.warmup, w_assigned)):
            for s, ps in mine.items():
                granted = a_pending.get(s, {})
                for p in ps:
                    promoted_now = not to_revoke and p in granted
                    if p in target_active.get(s, frozenset()) and not promoted_now:
                        kept.setdefault(s, set()).add(p)
        new_assigned = TasksWithEpochs(a_assigned, _frozen(s_assigned), _frozen(w_assigned))
        new_pending = TasksWithEpochs(a_pending, _frozen(s_pending), _frozen(w_pending))
        held = a_held or s_held or w_held
        m = self.member
        if to_revoke:
            return m.copy(
                state=MemberState.UNREVOKED_TASKS,
                previous_member_epoch=m.member_epoch,
                member_epoch=member_epoch,
                assigned=new_assigned,
                pending_revocation=revoking,
            )
        empty = TasksWithEpochs()
        if not new_pending.is_empty():
            return m.copy(
                state=MemberState.UNRELEASED_TASKS if held else MemberState.STABLE,
                previous_member_epoch=m.member_epoch,
                member_epoch=self.target_epoch,
                assigned=new_assigned.merge(new_pending),
                pending_revocation=empty,
            )
        return m.copy(
            state=MemberState.UNRELEASED_TASKS if held else MemberState.STABLE,
            previous_member_epoch=m.member_epoch,
            member_epoch=self.target_epoch,
            assigned=new_assigned,
            pending_revocation=empty,
        )


def _grant(pending: dict[str, set[int]], assigned: dict[str, set[int]], s: str, p: int) -> None:
    _remove(pending, s, p)
    assigned.setdefault(s, set()).add(p)


def _remove(tasks: dict[str, set[int]], s: str, p: int) -> None:
    ps = tasks.get(s)
    if ps is not None and p in ps:
        ps.discard(p)
        if not ps:
            del tasks[s]


def _convert(
    outgoing: Tasks, outgoing_revoke: dict[str, set[int]], incoming_pending: dict[str, set[int]], incoming_assigned: dict[str, set[int]]
) -> None:
    for s, ps in outgoing.items():
        for p in ps:
            if p in incoming_pending.get(s, set()):
                _grant(incoming_pending, incoming_assigned, s, p)
                _remove(outgoing_revoke, s, p)


def _frozen(tasks: dict[str, set[int]]) -> Tasks:
    return {s: frozenset(ps) for s, ps in tasks.items() if ps}
