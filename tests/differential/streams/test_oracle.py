"""KS-15 and KS-18: kaflet's sticky task assignor and task reconciliation against Kafka 4.4's own
classes (StickyTaskAssignor, streams CurrentAssignmentBuilder from the kafka-group-coordinator
4.4.0 jar), on the same random cases: one JVM (tests/jvm/streams-oracle) answers them all.

The cases are drawn from a fixed seed: members with random ids on a few processes, each owning
random active and standby tasks and reporting offsets, sub-topologies stateful or not, 0-2
standby replicas; members in every reconciliation state, with targets, owned tasks and the
processes that still hold tasks. kaflet must give exactly Kafka's answer, ties included.
"""

from __future__ import annotations

import random
import subprocess
from typing import Any

import pytest

from broker.coordinator.streams import assignor as sticky
from broker.coordinator.streams.member import MemberState, StreamsMember
from broker.coordinator.streams.reconcile import CurrentAssignmentBuilder
from broker.coordinator.streams.tasks import TasksTuple, TasksWithEpochs
from broker.runtime.errors import CoordinatorError
from tests.support.jvm import JvmUnavailable, classpath, java_binary

SEED = 1071
ASSIGN_CASES = 300
RECONCILE_CASES = 600

Task = tuple[str, int]


def _oracle(lines: list[str]) -> list[str]:
    try:
        cmd = [java_binary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath("streams-oracle")]
    except JvmUnavailable as exc:
        pytest.fail(f"Kafka's streams coordinator classes cannot run: {exc}", pytrace=False)
    out = subprocess.run(
        [*cmd, "dev.kaflet.streams.CoordinatorOracle"], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300
    )
    answers = [line for line in out.stdout.split("\n") if line]
    assert len(answers) == len(lines), out.stderr[-2000:]
    return answers


def _fmt(tasks: dict[str, Any]) -> str:
    return ";".join(f"{s}-{p}" for s in sorted(tasks) for p in sorted(tasks[s])) or "-"


def _fmt_epochs(tasks: dict[str, dict[int, int]]) -> str:
    return ";".join(f"{s}-{p}@{e}" for s in sorted(tasks) for p, e in sorted(tasks[s].items())) or "-"


def _tasks(items: list[Task]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in items:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


def _assign_cases(
    rng: random.Random,
) -> list[tuple[int, list[tuple[str, str, list[Task], list[Task], dict[Task, int]]], list[tuple[str, int, bool]]]]:
    cases = []
    while len(cases) < ASSIGN_CASES:
        subs = [(str(i), rng.randint(1, 8), rng.random() < 0.6) for i in range(rng.randint(1, 4))]
        processes = [f"{rng.choice(['p', 'proc-', '00000000-0000-0000-0000-00000000000'])}{i}" for i in range(rng.randint(1, 5))]
        everything = [(s, p) for s, n, _ in subs for p in range(n)]
        members = []
        for i in range(rng.randint(1, 7)):
            member_id = rng.choice([f"member-{i}", f"m{i}", f"{rng.getrandbits(64):x}"])
            active = [t for t in everything if rng.random() < 0.2]
            standby = [t for t in everything if rng.random() < 0.15]
            offsets = {t: rng.randint(0, 1000) for t in everything if rng.random() < 0.1}
            members.append((member_id, rng.choice(processes), active, standby, offsets))
        if len({m[0] for m in members}) == len(members):
            cases.append((rng.randint(0, 2), members, subs))
    return cases


def test_ks_15_sticky_assignor_answers_as_kafkas() -> None:
    cases = _assign_cases(random.Random(SEED))
    lines = []
    for standby, members, subs in cases:
        text = ",".join(
            f"{m}:{p}:{';'.join(f'{s}-{t}' for s, t in a)}:{';'.join(f'{s}-{t}' for s, t in sb)}:{';'.join(f'{s}-{t}-{o}' for (s, t), o in off.items())}"
            for m, p, a, sb, off in members
        )
        lines.append(f"assign {standby} {text} {','.join(f'{s}:{n}:{int(st)}' for s, n, st in subs)}")
    answers = _oracle(lines)
    differ = []
    for (standby, members, subs), answer in zip(cases, answers, strict=True):
        specs = {}
        for m, p, a, sb, off in members:
            offsets: dict[str, dict[int, int]] = {}
            for (s, t), o in off.items():
                offsets.setdefault(s, {})[t] = o
            specs[m] = sticky.MemberSpec(p, _tasks(a), _tasks(sb), offsets)
        topology = sticky.TopologySpec({s: n for s, n, _ in subs}, frozenset(s for s, _, st in subs if st))
        result = sticky.assign(specs, topology, standby)
        ours = ";;".join(f"{m}={_fmt(result[m].active)}|{_fmt(result[m].standby)}" for m in sorted(result))
        theirs = answer
        if ours != theirs:
            differ.append((standby, members, subs, theirs, ours))
    assert not differ, f"{len(differ)} of {len(cases)} assignments differ from Kafka's, e.g. {differ[0]}"


def test_ks_18_reconciliation_answers_as_kafkas() -> None:
    rng = random.Random(SEED)
    everything = [(s, p) for s in ("0", "1") for p in range(4)]

    def pick(chance: float) -> list[Task]:
        return sorted(t for t in everything if rng.random() < chance)

    cases = []
    for _ in range(RECONCILE_CASES):
        epoch = rng.randint(1, 6)
        state = rng.choice([1, 1, 2, 3, 127])
        active = {t: rng.randint(0, epoch) for t in pick(0.3)}
        standby, warmup = pick(0.2), pick(0.1)
        revoking = ({t: rng.randint(0, epoch) for t in pick(0.15)}, pick(0.1), pick(0.05)) if state == 2 else ({}, [], [])
        target_epoch = epoch + rng.choice([0, 1, 1, 2])
        target = (pick(0.3), pick(0.2), pick(0.1))
        owned = None if rng.random() < 0.2 else (pick(0.2) if rng.random() < 0.5 else sorted(active), pick(0.1), pick(0.05))
        if state == 127 and rng.random() < 0.5:
            owned = ([], [], [])
        names = ["me", "other", "third"]
        active_processes = {t: rng.choice(names) for t in everything if rng.random() < 0.3}
        standby_processes = {t: set(rng.sample(names, rng.randint(1, 2))) for t in everything if rng.random() < 0.2}
        warmup_processes = {t: set(rng.sample(names, 1)) for t in everything if rng.random() < 0.1}
        cases.append(
            (
                epoch,
                rng.randint(0, epoch),
                state,
                active,
                standby,
                warmup,
                revoking,
                target_epoch,
                target,
                owned,
                active_processes,
                standby_processes,
                warmup_processes,
            )
        )

    def fe(d: dict[Task, int]) -> str:
        return ";".join(f"{s}-{p}@{e}" for (s, p), e in sorted(d.items())) or "-"

    def ft(ts: list[Task]) -> str:
        return ";".join(f"{s}-{p}" for s, p in ts) or "-"

    def fp(d: dict[Task, Any]) -> str:
        return ";".join(f"{s}-{p}={v if isinstance(v, str) else '+'.join(sorted(v))}" for (s, p), v in d.items()) or "-"

    lines = []
    for c in cases:
        epoch, prev, state, active, standby, warmup, revoking, target_epoch, target, owned, ap, sp, wp = c
        owned_text = "null" if owned is None else "/".join(ft(x) for x in owned)
        lines.append(
            f"reconcile {epoch} {prev} {state} me|{fe(active)}|{ft(standby)}|{ft(warmup)}|{fe(revoking[0])}|{ft(revoking[1])}|{ft(revoking[2])}"
            f"|{target_epoch}|{ft(target[0])}|{ft(target[1])}|{ft(target[2])}|{owned_text}|{fp(ap)}|{fp(sp)}|{fp(wp)}"
        )
    answers = _oracle(lines)
    differ = []
    for c, line, theirs in zip(cases, lines, answers, strict=True):
        epoch, prev, state, active, standby, warmup, revoking, target_epoch, target, owned, ap, sp, wp = c

        def with_epochs(d: dict[Task, int]) -> dict[str, dict[int, int]]:
            out: dict[str, dict[int, int]] = {}
            for (s, p), e in d.items():
                out.setdefault(s, {})[p] = e
            return out

        member = StreamsMember(
            "m",
            epoch,
            prev,
            MemberState.of(state),
            process_id="me",
            assigned=TasksWithEpochs(with_epochs(active), _tasks(standby), _tasks(warmup)),
            pending_revocation=TasksWithEpochs(with_epochs(revoking[0]), _tasks(revoking[1]), _tasks(revoking[2])),
        )
        owned_tasks = None if owned is None else TasksTuple(_tasks(owned[0]), _tasks(owned[1]), _tasks(owned[2]))
        builder = CurrentAssignmentBuilder(
            member,
            target_epoch,
            TasksTuple(_tasks(target[0]), _tasks(target[1]), _tasks(target[2])),
            lambda s, p: ap.get((s, p)),  # noqa: B023
            lambda s, p: sp.get((s, p), set()),  # noqa: B023
            lambda s, p: wp.get((s, p), set()),  # noqa: B023
            owned_tasks,
        )
        try:
            r = builder.build()
            ours = (
                f"{r.member_epoch} {r.previous_member_epoch} {int(r.state)}|{_fmt_epochs(r.assigned.active)}|{_fmt(r.assigned.standby)}"
                f"|{_fmt(r.assigned.warmup)}|{_fmt_epochs(r.pending_revocation.active)}|{_fmt(r.pending_revocation.standby)}"
                f"|{_fmt(r.pending_revocation.warmup)}"
            )
        except CoordinatorError:
            ours = "ERR FencedMemberEpochException"
        if ours != theirs:
            differ.append((line, theirs, ours))
    assert not differ, f"{len(differ)} of {len(cases)} reconciliations differ from Kafka's, e.g. {differ[0]}"
