"""Run one client step against kaflet and Kafka 4.4 at once, and compare the outcomes.

`Peers.java(op, **args)` sends a command of the Java client driver (tests/support/client_driver.py)
to both brokers together; member names get the broker's name as a prefix so that each side has
its own consumers, and `{bootstrap}` in a tool's arguments becomes that broker's address.
`Peers.same(...)` asserts that both outcomes are equal once normalized (`normalize`): what
differs between any two runs of the same broker (member ids, ports, producer ids) is replaced by
placeholders, nothing else. A difference kaflet keeps on purpose is written in docs/decisions.md
and asserted as such by the scenario that shows it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.support.client_driver import JavaDriver
from tests.support.waiting import wait_until

SIDES = ("kaflet", "kafka")

# Classic member ids are "<client id or instance id>-<UUID>"; KIP-848 ones 22 characters of
# URL-safe base64 (a UUID); both are random per run.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_B64_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
_PORT = re.compile(r"127\.0\.0\.1:\d+")


def normalize_text(text: str) -> str:
    text = _UUID.sub("<uuid>", text)
    return _PORT.sub("127.0.0.1:<port>", text)


def member_id(value: str) -> str:
    return "<member-id>" if _B64_ID.match(value) else normalize_text(value)


def normalize(value: Any, drop: frozenset[str] = frozenset()) -> Any:
    """Placeholders for run-specific strings (member ids, ports); keys in `drop` removed."""
    if isinstance(value, dict):
        return {
            k: member_id(v) if k == "member_id" and isinstance(v, str) else normalize(v, drop) for k, v in value.items() if k not in drop
        }
    if isinstance(value, list):
        return [normalize(v, drop) for v in value]
    if isinstance(value, str):
        return normalize_text(value)
    return value


# The groups these scenarios make: the reference Kafka is shared with the rest of the session
# (Kafka Streams apps leave their groups on it), so listings are compared over these alone.
OWN_GROUPS = ("cg-", "jc-", "ck-")


def own_groups(value: Any) -> Any:
    """A listing of groups (the Admin's, or the tool's rows) with other tests' groups left out:
    their rows, the header that stands above only them, and the tool's notes that name them."""
    if isinstance(value, dict) and isinstance(value.get("value"), list):
        return {**value, "value": [g for g in value["value"] if not isinstance(g, dict) or str(g.get("group", "")).startswith(OWN_GROUPS)]}
    if isinstance(value, dict) and isinstance(value.get("out"), list):
        out: list[list[str]] = []
        header = None
        for row in value["out"]:
            if row and row[0] == "GROUP":
                header = row
            elif not row or row[0].startswith(OWN_GROUPS):
                if header is not None:
                    out.append(header)
                    header = None
                out.append(row)
        if header is not None and not out:
            out.append(header)  # a listing of no group still shows its header
        quoted = re.compile(r"'([^']+)'")
        err = [r for r in value.get("err", []) if all(g.startswith(OWN_GROUPS) for g in quoted.findall(" ".join(r)))]
        return {**value, "out": out, "err": err}
    return value


def table(text: str) -> list[list[str]]:
    """A tool's output as rows of cells: column widths follow the longest cell (a port's digits),
    and rows about members come in the order the broker listed them, which is no contract."""
    rows = [normalize_text(line).split() for line in text.splitlines()]
    rows = [r for r in rows if r]
    heads = [i for i, r in enumerate(rows) if r and r[0] in ("GROUP", "TOPIC")]
    column = None
    for i, row in enumerate(rows):
        if i in heads:
            column = row.index("CONSUMER-ID") if "CONSUMER-ID" in row else None
        elif column is not None and len(row) > column:
            row[column] = member_id(row[column])
    out: list[list[str]] = []
    bounds = sorted({0, *heads, len(rows)})
    for start, end in itertools.pairwise(bounds):
        block = rows[start:end]
        out += [block[0], *sorted(block[1:])] if start in heads else block
    return out


def on(side: str, name: str) -> str:
    return f"{side}/{name}"


class Peers:
    """kaflet and Kafka side by side, with the Java client driver."""

    def __init__(self, driver: JavaDriver, kaflet: str, kafka: str) -> None:
        self.driver = driver
        self.bootstrap = {"kaflet": kaflet, "kafka": kafka}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="peers")

    def _args(self, side: str, args: dict[str, Any]) -> dict[str, Any]:
        args = dict(args)
        if "name" in args:
            args["name"] = on(side, args["name"])
        if "names" in args:
            args["names"] = [on(side, n) for n in args["names"]]
        if "args" in args:
            args["args"] = [a.replace("{bootstrap}", self.bootstrap[side]) for a in args["args"]]
        return args

    def java(self, op: str, timeout: float = 120.0, **args: Any) -> dict[str, dict[str, Any]]:
        """Both sides' whole answers ({"ok", "result" | "error"}), run at the same time."""
        futures = {side: self.driver.submit(op, bootstrap=self.bootstrap[side], **self._args(side, args)) for side in SIDES}
        return {side: f.result(timeout) for side, f in futures.items()}

    def ok(self, op: str, **args: Any) -> dict[str, Any]:
        """Both sides' results; the step must succeed on both."""
        answers = self.java(op, **args)
        for side, answer in answers.items():
            assert answer["ok"], f"{op} failed on {side}: {answer['error']}"
        return {side: answers[side]["result"] for side in SIDES}

    def same(self, op: str, view: Callable[[Any], Any] = normalize, **args: Any) -> Any:
        """The step's outcome (result or error type), equal on both once seen through `view`."""
        answers = self.java(op, **args)
        seen = {side: view(outcome(answers[side])) for side in SIDES}
        assert seen["kaflet"] == seen["kafka"], f"{op} {args}: kaflet and Kafka differ\nkaflet: {seen['kaflet']}\nkafka:  {seen['kafka']}"
        return seen["kaflet"]

    def both(self, fn: Callable[[str, str], Any]) -> dict[str, Any]:
        """fn(side, bootstrap) on both sides at once (a Python client's scenario)."""
        futures = {side: self._pool.submit(fn, side, self.bootstrap[side]) for side in SIDES}
        return {side: f.result(300) for side, f in futures.items()}


def outcome(answer: dict[str, Any]) -> Any:
    """A result, or the error's type only (its message may word things differently)."""
    if answer["ok"]:
        return answer["result"]
    return {"error": answer["error"]["type"]}


def unkeyed(result: dict[str, Any]) -> dict[str, Any]:
    """Member-keyed results ("kaflet/a") keyed by the member's own name ("a")."""
    return {k.split("/", 1)[1]: v for k, v in result.items()}


def commit_to_the_end(peers: Peers, names: tuple[str, ...], ends: dict[str, int]) -> None:
    """Each member commits its positions until, on both brokers, every partition it holds is
    committed at the partition's end (`ends`, by "topic:partition"). group_wait counts the records
    a member delivered before a rebalance took some of its partitions (and gave them back, or to a
    member that joined): until its next fetch the holder has no position for those, and commitSync
    commits only the positions it has."""

    def committed_at_the_end() -> bool:
        for name in names:
            peers.ok("member_call", name=name, call="commit")
        committed = [side for name in names for side in peers.ok("member_call", name=name, call="committed").values()]
        return all(o is not None and o["offset"] == ends[tp] for c in committed for tp, o in c.items())

    wait_until(committed_at_the_end, timeout=30, message="every member's partitions committed at their end")
