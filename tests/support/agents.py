"""The test side of tests/support/consumer_agent.py: consumers in child processes, their events,
and the group as the broker describes it.

An `Agent` tracks its consumer's assignment from the rebalance callbacks it reports (eager
callbacks carry whole assignments, cooperative ones increments; both are applied as
increments). `wait_group` waits, with a deadline, until the broker describes the group as
Stable with exactly the given agents as members, every partition owned by exactly one of them,
and each agent's own view of its assignment equal to the broker's: the point after a
rebalance where the group has settled, observed from both sides.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient

from tests.support.waiting import wait_until

TP = tuple[str, int]
LIBS = ("confluent", "kafka-python", "aiokafka")
REPO = Path(__file__).resolve().parents[2]

# Short timers so that expirations happen within seconds; the broker's minimum is lowered to allow them.
FAST = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 300, "max_poll_interval_ms": 20_000}


class Agent:
    def __init__(self, spec: dict[str, Any], log_path: Path) -> None:
        self.spec = spec
        self.name: str = spec["name"]
        self.log_path = log_path
        self.events: list[dict[str, Any]] = []
        self.assignment: set[TP] = set()
        self.member_id: str | None = None
        self._cond = threading.Condition()
        self._log = open(log_path, "wb")  # closed by _pump when the process ends
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.consumer_agent", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))},
        )
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            with self._cond:
                kind = event["e"]
                if kind == "assigned":
                    self.assignment |= {(t, p) for t, p in event["parts"]}
                elif kind in ("revoked", "lost"):
                    self.assignment -= {(t, p) for t, p in event["parts"]}
                elif kind == "member":
                    self.member_id = event["id"]
                self.events.append(event)
                self._cond.notify_all()
        self.proc.wait()
        self.proc.stdout.close()
        self._log.close()
        with self._cond:
            self._cond.notify_all()

    # -- observing --------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[Agent], Any], timeout: float = 60.0, message: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self)
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"{self.name}: timed out after {timeout}s waiting for {message}\n{self.tail()}")
                self._cond.wait(min(remaining, 0.2))

    def wait_event(self, kind: str, timeout: float = 60.0, since: int = 0) -> dict[str, Any]:
        return self.wait_for(lambda a: next((e for e in a.events[since:] if e["e"] == kind), None), timeout, f"event {kind}")

    def of_kind(self, *kinds: str, since: int = 0) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events[since:] if e["e"] in kinds]

    def moved(self, kind: str, since: int = 0) -> set[TP]:
        """Every partition named by `kind` events ("revoked", "assigned", "lost") since event `since`."""
        return {(t, p) for e in self.of_kind(kind, since=since) for t, p in e["parts"]}

    @property
    def mark(self) -> int:
        """An index into the events, to look only at what happens after now."""
        with self._cond:
            return len(self.events)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            text = []
        return f"--- {self.name} ({self.spec['lib']}) events: {self.events[-10:]}\n--- stderr:\n" + "\n".join(text)

    # -- driving ----------------------------------------------------------------------------

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = 60.0) -> None:
        """Close the consumer cleanly (a dynamic member sends LeaveGroup) and wait for the process to exit."""
        self.send("close")
        self.wait_for(lambda a: a.proc.poll() is not None, timeout, "a clean exit")
        assert self.proc.returncode == 0, self.tail()
        assert self.of_kind("closed"), self.tail()

    def kill(self) -> None:
        """SIGKILL: the consumer vanishes without a LeaveGroup."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Agents:
    """Starts agents against one bootstrap address and kills whatever is left at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[Agent] = []

    def start(self, lib: str, name: str, bootstrap: str, group: str, topics: Iterable[str], **spec: Any) -> Agent:
        full = {"lib": lib, "name": name, "bootstrap": bootstrap, "group": group, "topics": list(topics), **FAST, **spec}
        agent = Agent(full, self.tmp_path / f"agent-{name}-{len(self.started)}.log")
        self.started.append(agent)
        return agent

    def teardown(self) -> None:
        for agent in self.started:
            agent.kill()


def describe(admin: AdminClient, group: str) -> Any:
    return admin.describe_consumer_groups([group])[group].result(30)


def wait_group(admin: AdminClient, group: str, members: list[Agent], partitions: set[TP], timeout: float = 90.0) -> dict[str, set[TP]]:
    """Wait until the group is Stable with exactly `members`, who own `partitions` once each, as
    the broker describes it and as each agent sees it. Returns each agent's partitions by name."""
    last: list[Any] = [None]

    def settled() -> dict[str, set[TP]] | None:
        try:
            last[0] = describe(admin, group)
        except KafkaException as exc:
            last[0] = exc
        result = _settled(last[0], members, partitions)
        if result is None:
            for agent in members:
                if not agent.alive:
                    raise AssertionError(f"{agent.name} exited\n{agent.tail()}")
        return result

    def failure() -> str:
        tails = "\n".join(a.tail() for a in members)
        return f"group {group} to settle over {[a.name for a in members]}: {_render(last[0])}\n{tails}"

    return wait_until(settled, timeout=timeout, interval=0.1, message=failure)


def _settled(description: Any, members: list[Agent], partitions: set[TP]) -> dict[str, set[TP]] | None:
    if isinstance(description, Exception) or description.state != ConsumerGroupState.STABLE:
        return None
    # By member id, not client id: a replaced static member keeps its predecessor's client id (as in Kafka).
    by_id = {m.member_id: m for m in description.members}
    if len(description.members) != len(members) or set(by_id) != {a.member_id for a in members}:
        return None
    owned: dict[str, set[TP]] = {}
    for agent in members:
        broker_side = {(tp.topic, tp.partition) for tp in by_id[agent.member_id].assignment.topic_partitions}
        if agent.assignment != broker_side:
            return None
        owned[agent.name] = broker_side
    if sum(len(s) for s in owned.values()) != len(partitions) or set().union(*owned.values()) != partitions:
        return None
    return owned


def _render(description: Any) -> str:
    if description is None or isinstance(description, Exception):
        return repr(description)
    members = {
        f"{m.client_id}/{m.member_id}": sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        for m in description.members
    }
    return f"state={description.state} members={members}"
