"""kaflet's pytest plugin, installed with the package (entry point `pytest11`: kaflet).

Fixtures (each a started broker on ephemeral ports with a temporary data dir, served from its
own thread, so plain and pytest-asyncio tests use it alike):

- `kaflet_broker`: one per test; `kaflet_broker_session`: one for the whole session.
  Each is a `KafletBroker`: `.bootstrap` for clients' bootstrap.servers, `.chaos` (a
  ChaosHandle: rules, error stacks, latency, black holes, down and up), `.broker` (the
  BrokerThread: `.run(fn)` runs `fn(broker)` on the broker's loop), `.metrics_address`.
- `kaflet_cluster` / `kaflet_cluster_session`: 3 brokers in one process (`KafletCluster`; another
  number with `@pytest.mark.parametrize("kaflet_cluster", [5], indirect=True)`); `.chaos` also
  moves leaders and coordinators, `.chaos.node(id)` acts on one node.
- `@pytest.mark.kaflet(default_partitions=3, ...)` passes Config fields to `kaflet_broker` and `kaflet_cluster`.

When a test that used one of them fails, its report gets a section "kaflet broker log" with the
broker's recent log lines (structlog events, recorded from the first fixture on).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from broker.cluster.handle import ChaosHandle
    from broker.embed.thread import BrokerThread

FIXTURES = ("kaflet_broker", "kaflet_broker_session", "kaflet_cluster", "kaflet_cluster_session")
LOG_LINES = 200  # kept in memory
SHOWN_LINES = 60  # shown with a failure

_recent: deque[str] = deque(maxlen=LOG_LINES)


def _record(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    fields = {k: v for k, v in event.items() if k not in ("event", "timestamp", "level")}
    _recent.append(f"{method:7} {event.get('event')} {json.dumps(fields, default=str) if fields else ''}".rstrip())
    return event


def _start_recording() -> None:
    """Put the recorder first among structlog's processors (whatever the test set up keeps working;
    checked at each start, since a test may have configured structlog anew)."""
    import structlog

    processors = structlog.get_config()["processors"]
    if _record not in processors:
        structlog.configure(processors=[_record, *processors])


def recent_log(lines: int = SHOWN_LINES) -> list[str]:
    return list(_recent)[-lines:]


@dataclass
class KafletBroker:
    broker: BrokerThread
    bootstrap: str
    chaos: ChaosHandle
    metrics_address: str | None

    def logs(self, lines: int = SHOWN_LINES) -> list[str]:
        """The most recent log lines of the brokers of this process."""
        return recent_log(lines)


def start_broker(data_dir: Path, **overrides: Any) -> KafletBroker:
    from broker.config import Config
    from broker.embed.thread import BrokerThread

    _start_recording()
    values: dict[str, Any] = {"port": 0, "data_dir": str(data_dir)}
    values.update(overrides)
    thread = BrokerThread(Config(**values)).start()
    return KafletBroker(thread, thread.bootstrap, thread.chaos, thread.metrics_address)


@dataclass
class KafletCluster(KafletBroker):
    """`bootstrap` names every node; `chaos.move_leader(...)`, `chaos.move_coordinator(...)`, and
    `chaos.node(id)` for one node's operations (down, up, hole, rules, latency)."""

    node_ids: list[int]


def start_cluster(data_dir: Path, brokers: int = 3, **overrides: Any) -> KafletCluster:
    from broker.cluster.handle import ChaosHandle
    from broker.cluster.thread import ClusterThread
    from broker.config import Config

    _start_recording()
    values: dict[str, Any] = {"port": 0, "data_dir": str(data_dir)}
    values.update(overrides)
    thread = ClusterThread(Config(**values), brokers).start()
    ids = thread.run(lambda c: c.node_ids)
    return KafletCluster(thread, thread.bootstrap, ChaosHandle.in_thread(thread), thread.metrics_address, ids)


def _overrides(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("kaflet")
    return dict(marker.kwargs) if marker is not None else {}


@pytest.fixture
def kaflet_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafletBroker]:
    """A kaflet broker for this test: `kaflet_broker.bootstrap`, `kaflet_broker.chaos`."""
    started = start_broker(tmp_path_factory.mktemp("kaflet"), **_overrides(request))
    try:
        yield started
    finally:
        started.broker.stop()


@pytest.fixture(scope="session")
def kaflet_broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafletBroker]:
    """One kaflet broker for the whole session (its chaos is cleared after each test that used it)."""
    started = start_broker(tmp_path_factory.mktemp("kaflet-session"))
    try:
        yield started
    finally:
        started.broker.stop()


@pytest.fixture
def kaflet_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafletCluster]:
    """A cluster of brokers in one process for this test (3; `@pytest.mark.parametrize("kaflet_cluster",
    [5], indirect=True)` asks for another number; `@pytest.mark.kaflet(...)` passes Config fields)."""
    brokers = getattr(request, "param", 3)
    started = start_cluster(tmp_path_factory.mktemp("kaflet-cluster"), brokers, **_overrides(request))
    try:
        yield started
    finally:
        started.broker.stop()


@pytest.fixture(scope="session")
def kaflet_cluster_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafletCluster]:
    """One 3-broker cluster for the whole session (its chaos is cleared after each test that used it)."""
    started = start_cluster(tmp_path_factory.mktemp("kaflet-cluster-session"), 3)
    try:
        yield started
    finally:
        started.broker.stop()


@pytest.fixture(autouse=True)
def _kaflet_clear_session_chaos(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    for name in ("kaflet_broker_session", "kaflet_cluster_session"):
        if name in request.fixturenames:
            # What one test broke must not break the next one.
            request.getfixturevalue(name).chaos.clear()


# The warnings a broker of these fixtures causes in a user's suite, ignored there. kafka-python
# (kaflet's codec) loads each message schema with importlib.resources.read_text, deprecated on
# Python 3.11 and 3.12, the first time the broker meets an API: two DeprecationWarnings per schema,
# raised inside the user's tests. pytest re-enables DeprecationWarning in every test, before the
# ini file's filters, so the filters go there. They name the module that warns, so a user's own
# use of read_text still warns.
IGNORED_WARNINGS = (
    "ignore:read_text is deprecated:DeprecationWarning:kafka.protocol.schemas.load_json",
    "ignore:open_text is deprecated:DeprecationWarning:importlib.resources._legacy",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kaflet(**config): Config fields for the kaflet_broker fixture (e.g. default_partitions=3)")
    for line in IGNORED_WARNINGS:
        config.addinivalue_line("filterwarnings", line)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and any(name in getattr(item, "fixturenames", ()) for name in FIXTURES):
        lines = recent_log()
        report.sections.append(("kaflet broker log", "\n".join(lines) if lines else "(no log lines recorded)"))
