"""The differential suite's brokers and runner: every selected scenario runs once per session,
all of them at once against one kaflet and one Apache Kafka 4.4 (the `kafka_reference` session
fixture), and each test then judges its scenario's two transcripts. Scenarios that wait on a
broker timer (a session timeout, a rebalance timeout) run beside the others instead of after
them, so the suite takes about as long as its slowest scenario plus Kafka's start.

At the end of the session one line sums it up:
`differential: N scenarios, S same, D documented differences`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from broker.embed import BrokerProcess
from tests.differential.brokers import prepare
from tests.differential.harness import Run, Target, run_both
from tests.differential.scenarios import ALL
from tests.differential.scenarios.common import SHARED_TOPICS
from tests.support.parallel import SUMMARY_LINES

CONCURRENCY = 24  # scenarios in flight at once (each opens a few connections per broker)
SCENARIO_TIMEOUT = 120.0  # seconds, per scenario and broker (the slowest waits ~50 s on a timer)

_SELECTED = pytest.StashKey[list[str]]()
_RESULTS = pytest.StashKey[dict[str, str]]()
_STATS = pytest.StashKey[dict[str, float]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Which scenarios this session runs: those whose tests were selected (after `-k` and the rest)."""
    config = session.config
    names = [
        item.callspec.params["scenario"].name
        for item in session.items
        if getattr(item, "module", None) is not None
        and item.module.__name__ == "tests.differential.test_scenarios"
        and hasattr(item, "callspec")
    ]
    config.stash[_SELECTED] = names
    config.stash[_RESULTS] = {}


def record_result(config: pytest.Config, name: str, result: str) -> None:
    """ "same", "documented", "pending" (a known bug, failing until fixed) or "different" (a
    failure), for the summary line."""
    config.stash.setdefault(_RESULTS, {})[name] = result


def summary_line(config: pytest.Config) -> str | None:
    """`differential: N scenarios, S same, D documented differences`, once scenarios have run."""
    results = config.stash.get(_RESULTS, {})
    if not results:
        return None
    same = sum(1 for r in results.values() if r == "same")
    documented = sum(1 for r in results.values() if r == "documented")
    line = f"differential: {len(results)} scenarios, {same} same, {documented} documented differences"
    pending = sum(1 for r in results.values() if r == "pending")
    failed = len(results) - same - documented - pending
    if pending:
        line += f", {pending} pending fixes"
    if failed:
        line += f", {failed} not same and not documented"
    stats = config.stash.get(_STATS, {})
    if "seconds" in stats:
        line += f" (scenarios run in {stats['seconds']:.1f} s; Kafka 4.4 started in {stats.get('kafka_start', 0):.1f} s)"
    return line


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a worker process (make test runs several), the line goes to the main process to print."""
    workeroutput = getattr(session.config, "workeroutput", None)
    line = summary_line(session.config)
    if workeroutput is not None and line:
        workeroutput.setdefault(SUMMARY_LINES, []).append(line)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    line = summary_line(config)
    if line:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def kaflet_differential(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """kaflet as users run it (`kaflet serve`), with the internal topics' partition counts of
    the reference broker; every other setting at kaflet's defaults."""
    data = Path(tmp_path_factory.mktemp("kaflet-differential")) / "data"
    proc = BrokerProcess(data, "--offsets-partitions", "5", "--transaction-state-partitions", "5").start()
    try:
        yield proc
    finally:
        proc.close()


class DifferentialRun:
    """The outcomes of this session's scenarios, run together on first use."""

    def __init__(self, config: pytest.Config, kaflet: Target, kafka: Target) -> None:
        self.config = config
        self.kaflet = kaflet
        self.kafka = kafka
        self.outcomes: dict[str, tuple[Run, Run]] | None = None

    def outcome(self, name: str) -> tuple[Run, Run]:
        if self.outcomes is None:
            selected = set(self.config.stash.get(_SELECTED, [])) or {s.name for s in ALL}
            t0 = time.monotonic()
            self.outcomes = uvloop.run(self._run_all([s for s in ALL if s.name in selected]))
            self.config.stash.setdefault(_STATS, {})["seconds"] = time.monotonic() - t0
        if name not in self.outcomes:  # selected after the run (not expected): run it alone
            scenario = next(s for s in ALL if s.name == name)
            self.outcomes.update(uvloop.run(self._run_all([scenario])))
        return self.outcomes[name]

    def every_outcome(self) -> dict[str, tuple[Run, Run]]:
        """Every scenario's outcome, running those this session has not run yet."""
        self.outcome(ALL[0].name)
        assert self.outcomes is not None
        missing = [s for s in ALL if s.name not in self.outcomes]
        if missing:
            self.outcomes.update(uvloop.run(self._run_all(missing)))
        return self.outcomes

    async def _run_all(self, scenarios: list[Any]) -> dict[str, tuple[Run, Run]]:
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(scenario: Any) -> tuple[str, tuple[Run, Run]]:
            async with limit:
                return scenario.name, await run_both(scenario, self.kaflet, self.kafka, SCENARIO_TIMEOUT)

        # Slow scenarios first: their waits then overlap everything else; exclusive ones last, alone.
        ordered = sorted((s for s in scenarios if not s.exclusive), key=lambda s: not s.slow)
        outcomes = dict(await asyncio.gather(*(one(s) for s in ordered)))
        for s in scenarios:
            if s.exclusive:
                outcomes[s.name] = await run_both(s, self.kaflet, self.kafka, SCENARIO_TIMEOUT)
        return outcomes


@pytest.fixture(scope="session")
def differential(request: pytest.FixtureRequest, kafka_reference: Any, kaflet_differential: BrokerProcess) -> DifferentialRun:
    kaflet = Target("kaflet", kaflet_differential.bootstrap)
    kafka = Target("kafka", kafka_reference.bootstrap)
    prepare([kaflet, kafka], SHARED_TOPICS)
    request.config.stash.setdefault(_STATS, {})["kafka_start"] = kafka_reference.start_seconds
    return DifferentialRun(request.config, kaflet, kafka)
