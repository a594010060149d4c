"""The differential harness: one scenario, run against kaflet and against Apache Kafka 4.4.

A scenario is an async function of one `Side` (one broker's run). It sends raw requests with
explicit API versions through `side.call(...)`, each answer going into the side's transcript;
the same function runs against both brokers at once, and the two transcripts are then
normalized (normalize.py) and compared field by field (`compare`).

Both brokers are shared by every scenario of a session, so a scenario names its groups,
transactional ids and topics after itself (`side.group()`, `side.txn()`, `side.topic()`): the
same names on both brokers, different from every other scenario's.

Ordering: Kafka answers one request per connection at a time, so a request that parks (a
JoinGroup waiting for the rest of the group) goes out on its actor's own connection
(`side.send`), and a later step that must see it processed waits on a condition
(`side.until`), never on a sleep.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol.apis import MESSAGE_CLASSES, message_name
from tests.support.raw_client import RawClient

CALL_TIMEOUT = 20.0  # seconds: a request that is expected to be answered
WAIT = 20.0  # seconds: the deadline of every "until"


# -- requests ---------------------------------------------------------------------------------


def _build(struct_field: Any, value: Any, version: int) -> Any:
    """`value` (dicts and lists) as the kafka-python data classes that struct `struct_field` expects."""
    if value is None or not isinstance(value, dict):
        return value
    fields = struct_field.fields
    kwargs = {}
    for name, v in value.items():
        f = fields[name]
        if f.is_struct_array() and v is not None:
            kwargs[name] = [_build(f.array_of, item, version) for item in v]
        elif f.is_struct() and v is not None:
            kwargs[name] = _build(f, v, version)
        else:
            kwargs[name] = v
    return struct_field.data_class(**kwargs)


def build_request(api_key: int, version: int, fields: dict[str, Any]) -> Any:
    """A request of `api_key` at `version` from plain values: nested structs as dicts, arrays as lists."""
    req_cls = MESSAGE_CLASSES[api_key][0]
    top = req_cls._struct.fields
    kwargs: dict[str, Any] = {}
    for name, v in fields.items():
        if name not in top:
            raise KeyError(f"{message_name(api_key)}Request has no field {name!r}")
        f = top[name]
        if f.is_struct_array() and v is not None:
            kwargs[name] = [_build(f.array_of, item, version) for item in v]
        elif f.is_struct() and v is not None:
            kwargs[name] = _build(f, v, version)
        else:
            kwargs[name] = v
    return req_cls[version](**kwargs)


def as_plain(message: Any) -> Any:
    """A decoded message as plain dicts and lists, the fields of its version only."""
    return message.to_dict(json=False)


# -- one broker's run -------------------------------------------------------------------------


@dataclass
class Entry:
    """One line of a transcript: what was asked, and the answer (plain values, not yet normalized)."""

    label: str
    answer: Any
    api: str = ""  # the API's name ("JoinGroup"); "" for a note of the scenario's own


class Pending:
    """A request sent without waiting (it may park); `Side.answer` collects it."""

    def __init__(self, side: Side, label: str, api: str, fut: asyncio.Future[Any]) -> None:
        self.side = side
        self.label = label
        self.api = api
        self.fut = fut

    def done(self) -> bool:
        return self.fut.done()


@dataclass
class Target:
    """What a scenario knows of one broker: its name and address, and its topics' ids."""

    name: str  # "kaflet" or "kafka"
    bootstrap: str
    topic_ids: dict[uuid.UUID, str] = field(default_factory=dict)
    prefix: str = ""  # put before every name a scenario makes (a run of its own on long-lived brokers)


class Side:
    """One scenario's run against one broker: connections per actor, the transcript, id aliases."""

    def __init__(self, broker: Target, scenario: str) -> None:
        self.broker = broker
        self.scenario = scenario
        self.own = broker.prefix + scenario  # every name this scenario makes starts so
        self.transcript: list[Entry] = []
        self.calls: set[tuple[int, int]] = set()  # (api key, version) of every recorded call
        self._conns: dict[str, RawClient] = {}
        self._counts: dict[str, int] = {}
        # Ids the broker generated, named after the actor they were given to: "<a>", "<a#2>".
        self.aliases: dict[str, str] = {}
        self.id_shapes: list[tuple[str, str]] = []

    @property
    def name(self) -> str:
        return self.broker.name

    # -- names ------------------------------------------------------------------------------

    def group(self, tag: str = "") -> str:
        """A group id of this scenario's own (the same on both brokers)."""
        return f"{self.own}.{tag}" if tag else self.own

    def txn(self, tag: str = "") -> str:
        return f"{self.own}.txn{('.' + tag) if tag else ''}"

    def topic(self, tag: str = "") -> str:
        return f"{self.own}.t{('.' + tag) if tag else ''}"

    # -- connections ------------------------------------------------------------------------

    async def conn(self, actor: str) -> RawClient:
        """The connection of `actor` (its client id is the actor's name)."""
        client = self._conns.get(actor)
        if client is None:
            client = self._conns[actor] = await RawClient.connect(self.broker.bootstrap, actor)
        return client

    async def close(self) -> None:
        for client in self._conns.values():
            await client.close()
        self._conns.clear()

    # -- requests ---------------------------------------------------------------------------

    def _label(self, actor: str, api_key: int, version: int, label: str | None) -> str:
        base = label or f"{actor}:{message_name(api_key)}v{version}"
        n = self._counts[base] = self._counts.get(base, 0) + 1
        return base if n == 1 else f"{base}#{n}"

    async def call(self, actor: str, api_key: int, version: int, label: str | None = None, **fields: Any) -> Any:
        """Send a request on `actor`'s connection, wait for the answer and record it."""
        pending = await self.send(actor, api_key, version, label, **fields)
        return await self.answer(pending)

    async def send(self, actor: str, api_key: int, version: int, label: str | None = None, **fields: Any) -> Pending:
        """Send a request that may park; `answer` (or `unanswered`) records it later."""
        client = await self.conn(actor)
        request = build_request(api_key, version, fields)
        self.calls.add((api_key, version))
        fut = client.send(request)
        return Pending(self, self._label(actor, api_key, version, label), message_name(api_key), fut)

    async def answer(self, pending: Pending, timeout: float = CALL_TIMEOUT) -> Any:
        try:
            response = await asyncio.wait_for(asyncio.shield(pending.fut), timeout)
        except TimeoutError:
            raise AssertionError(f"{self.name}: no answer to {pending.label} within {timeout:.0f} s") from None
        self.record(pending.label, pending.api, response)
        return response

    async def unanswered(self, pending: Pending, seconds: float) -> bool:
        """Whether `pending` stays unanswered for `seconds` (a bounded wait expected to run out);
        the transcript gets the answer if one came, else the word "unanswered"."""
        done, _ = await asyncio.wait({pending.fut}, timeout=seconds)
        if done:
            self.record(pending.label, pending.api, pending.fut.result())
            return False
        self.transcript.append(Entry(pending.label, "unanswered", pending.api))
        return True

    async def quiet(self, actor: str, api_key: int, version: int, **fields: Any) -> Any:
        """A request whose answer is not compared (set-up, polling)."""
        client = await self.conn(actor)
        return await client.request(build_request(api_key, version, fields), timeout=CALL_TIMEOUT)

    def record(self, label: str, api: str, response: Any) -> None:
        answer = as_plain(response)
        self._learn_ids(label, answer)
        self.transcript.append(Entry(label, answer, api))

    def note(self, label: str, value: Any) -> None:
        """Record an observation of the scenario's own (compared like an answer)."""
        self.transcript.append(Entry(label, value))

    async def until(self, probe: Callable[[], Awaitable[Any]], check: Callable[[Any], bool], what: str, timeout: float = WAIT) -> Any:
        """Poll `probe()` until `check(result)`; fail with `what` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = await probe()
            if check(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: timed out after {timeout:.0f} s waiting for {what}; last: {result!r}"[:2000])
            await asyncio.sleep(0.02)

    # -- generated ids ----------------------------------------------------------------------

    _GENERATED = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$|^[A-Za-z0-9_-]{22}$")

    def _learn_ids(self, label: str, answer: Any) -> None:
        """A member id the broker handed to this actor gets the actor's name as its alias."""
        if not isinstance(answer, dict):
            return
        member_id = answer.get("member_id")
        if isinstance(member_id, str) and member_id and member_id not in self.aliases and self._GENERATED.search(member_id):
            actor = label.split(":", 1)[0]
            taken = sum(1 for a in self.aliases.values() if a == f"<{actor}>" or a.startswith(f"<{actor}#"))
            alias = f"<{actor}>" if taken == 0 else f"<{actor}#{taken + 1}>"
            self.aliases[member_id] = alias
            self.id_shapes.append((alias, id_shape(member_id)))

    def alias(self, generated: str) -> str:
        """The alias of an id not handed out through a member_id field (first seen elsewhere)."""
        if generated not in self.aliases:
            self.aliases[generated] = f"<id{len(self.aliases) + 1}>"
            self.id_shapes.append((self.aliases[generated], id_shape(generated)))
        return self.aliases[generated]


def id_shape(generated: str) -> str:
    """What a generated id looks like with its random part masked: JG-8 (`<client id>-<UUID>`) and
    KIP-848 (22 URL-safe base64 characters) are compared by shape."""
    shape = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", generated)
    if re.fullmatch(r"[A-Za-z0-9_-]{22}", shape):
        return "<base64-uuid>"
    return shape


# -- scenarios --------------------------------------------------------------------------------

ScenarioFn = Callable[[Side], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    """A named sequence of requests; `rule` is the rule it pins (docs/coordinator-rules.md), if one."""

    name: str
    run: ScenarioFn
    rule: str | None = None
    slow: bool = False  # waits on a broker timer (session expiry, rebalance timeout)
    # Runs alone, after the others: Kafka's answer would depend on what other scenarios do at the
    # same moment (its transaction verifications from all clients go out in shared batches).
    exclusive: bool = False


class Registry:
    """The scenarios of a family module, in definition order; names are unique suite-wide."""

    def __init__(self) -> None:
        self.scenarios: list[Scenario] = []

    def add(self, name: str, run: ScenarioFn, *, rule: str | None = None, slow: bool = False, exclusive: bool = False) -> None:
        self.scenarios.append(Scenario(name, run, rule, slow, exclusive))

    def __call__(
        self, name: str, *, rule: str | None = None, slow: bool = False, exclusive: bool = False
    ) -> Callable[[ScenarioFn], ScenarioFn]:
        """Decorator form: `@scenarios("jg_1_session_timeout_below_minimum", rule="JG-1")`."""

        def register(fn: ScenarioFn) -> ScenarioFn:
            self.add(name, fn, rule=rule, slow=slow, exclusive=exclusive)
            return fn

        return register

    def versions(
        self, name: str, versions: Iterable[int], *, rule: str | None = None, slow: bool = False, exclusive: bool = False
    ) -> Callable[[Callable[[Side, int], Awaitable[None]]], Callable[[Side, int], Awaitable[None]]]:
        """Decorator: one scenario per version, named `<name>_v<version>`."""

        def register(fn: Callable[[Side, int], Awaitable[None]]) -> Callable[[Side, int], Awaitable[None]]:
            for v in versions:
                self.add(f"{name}_v{v}", _bind(fn, v), rule=rule, slow=slow, exclusive=exclusive)
            return fn

        return register


def _bind(fn: Callable[[Side, int], Awaitable[None]], version: int) -> ScenarioFn:
    async def run(side: Side) -> None:
        await fn(side, version)

    return run


# -- running ----------------------------------------------------------------------------------


@dataclass
class Run:
    """One scenario's outcome on one broker: its transcript, or the error that stopped it."""

    side: Side
    error: str | None = None
    seconds: float = 0.0


async def run_side(scenario: Scenario, broker: Target, timeout: float) -> Run:
    side = Side(broker, scenario.name)
    t0 = time.monotonic()
    run = Run(side)
    try:
        await asyncio.wait_for(scenario.run(side), timeout)
    except TimeoutError:
        run.error = f"{broker.name}: the scenario did not finish within {timeout:.0f} s"
    except Exception as exc:  # a scenario error is reported, not raised: the other side still ran
        run.error = f"{broker.name}: {type(exc).__name__}: {exc}"
    finally:
        await side.close()
    run.seconds = time.monotonic() - t0
    return run


async def run_both(scenario: Scenario, kaflet: Target, kafka: Target, timeout: float) -> tuple[Run, Run]:
    """The scenario against both brokers at once (each side independent of the other)."""
    ours, theirs = await asyncio.gather(run_side(scenario, kaflet, timeout), run_side(scenario, kafka, timeout))
    return ours, theirs
