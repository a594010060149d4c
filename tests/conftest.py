"""Shared fixtures: in-process brokers (async and threaded), child-process brokers, raw clients."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from broker import Broker, Config
from broker.embed import BrokerProcess, BrokerThread
from broker.node import logging as kaflet_logging
from tests.support.raw_client import RawClient

# tests/image checks a container image with a local Docker daemon: only `make test-image` runs it
# (it sets KAFLET_TEST_IMAGE), never `make test`.
collect_ignore = [] if os.environ.get("KAFLET_TEST_IMAGE") else ["image"]

kaflet_logging.configure("json", "warning")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.support.parallel import check_groups

    check_groups(items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` (make test) hands out whole modules and groups of them, longest first."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.support.parallel import ModuleScheduling

    return ModuleScheduling(config, log)


_WORKER_SUMMARY: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """A worker's lines for the closing summary (the differential tally), printed by the main process."""
    from tests.support.parallel import SUMMARY_LINES

    _WORKER_SUMMARY.extend(getattr(node, "workeroutput", {}).get(SUMMARY_LINES, []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _WORKER_SUMMARY:
        terminalreporter.write_line(line)


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, Any]:
    """Async tests run on uvloop, as the broker does in production."""
    return {"uvloop": uvloop.new_event_loop}


def test_config(data_dir: Path, **overrides: Any) -> Config:
    """A broker config for tests: ephemeral port, no metrics endpoint, data under tmp."""
    values: dict[str, Any] = {
        "port": 0,
        "data_dir": str(data_dir),
        "metrics": False,
        "offsets_partitions": 5,
        "transaction_state_partitions": 5,
    }
    values.update(overrides)
    return Config(**values)


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., Config]:
    def make(**overrides: Any) -> Config:
        return test_config(tmp_path / "data", **overrides)

    return make


@pytest.fixture
async def broker(make_config: Callable[..., Config]) -> AsyncIterator[Broker]:
    """An in-process broker on the test's event loop (for raw-protocol tests)."""
    async with Broker(make_config()) as b:
        yield b


@pytest.fixture
async def raw(broker: Broker) -> AsyncIterator[Callable[..., Any]]:
    """Factory of raw protocol connections to `broker`; all are closed at teardown."""
    clients: list[RawClient] = []

    async def connect(client_id: str | None = "raw-client") -> RawClient:
        client = await RawClient.connect(broker.bootstrap, client_id)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        await client.close()


@pytest.fixture
def broker_thread(make_config: Callable[..., Config]) -> Iterator[Callable[..., BrokerThread]]:
    """Factory of brokers running on a background thread (for synchronous clients)."""
    started: list[BrokerThread] = []

    def start(**overrides: Any) -> BrokerThread:
        bt = BrokerThread(make_config(**overrides)).start()
        started.append(bt)
        return bt

    yield start
    for bt in started:
        bt.stop()


@pytest.fixture
def broker_proc(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Factory of brokers in child processes, started through the CLI."""
    started: list[BrokerProcess] = []

    def start(*args: str, data_dir: Path | None = None, env: dict[str, str] | None = None) -> BrokerProcess:
        bp = BrokerProcess(data_dir or tmp_path / "data", "--offsets-partitions", "5", *args, env=env).start()
        started.append(bp)
        return bp

    yield start
    for bp in started:
        if bp.alive:
            bp.kill()


@pytest.fixture(scope="session")
def kafka_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Apache Kafka 4.4 in KRaft combined mode on free loopback ports, one per test session
    (tests/support/kafka_reference.py), with kaflet's group settings (initial delay 0, 250 ms
    consumer and share heartbeats) and the short share-group bounds tests use. A test that needs
    it and cannot have it fails with the reason."""
    from tests.support.jvm import JvmUnavailable
    from tests.support.kafka_reference import SHARE_TEST_BOUNDS, KafkaReference

    kafka = KafkaReference(tmp_path_factory.mktemp("kafka-reference"), properties=SHARE_TEST_BOUNDS)
    try:
        kafka.start()
    except JvmUnavailable as exc:
        pytest.fail(f"the reference broker (Apache Kafka 4.4) cannot run: {exc}", pytrace=False)
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="session")
def java_driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Java client driver JVM (tests/jvm/client-driver) for the whole session: every test that
    drives the Java client shares it (JVM start-up costs seconds on 2 cores)."""
    from tests.support.client_driver import JavaDriver
    from tests.support.jvm import JvmUnavailable

    driver = JavaDriver(tmp_path_factory.mktemp("client-driver"))
    try:
        driver.start()
    except JvmUnavailable as exc:
        pytest.fail(f"the Java client driver cannot run: {exc}", pytrace=False)
    try:
        yield driver
    finally:
        driver.stop()
