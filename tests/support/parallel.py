"""How `make test` shares the suite between worker processes (pytest-xdist, `-n N --dist loadscope`).

The suite mostly waits (on JVMs, real clients and the brokers' own timers), so two or three
processes on two cores finish it in a fraction of the time one takes. A unit of work goes whole
to one worker:

- a test module, so that its module-scoped fixtures (a Streams app's broker, a Java client
  driver) start once;
- a named group of modules (GROUPS), for tests that share a session-scoped resource one worker
  should own: the differential scenarios, which all run on their first use, and the Spark
  session. The main process sees test ids only, so the groups are listed by module here, and
  every worker checks at collection that each test using such a resource is in its group
  (`check_groups`).

Units start longest first, as the last profile of the suite measured them (UNIT_SECONDS), so
that no long unit starts last and runs alone while the other workers stand idle; the units not
listed follow, those with the most tests first.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# The key under which a worker hands lines for the run's closing summary to the main process.
SUMMARY_LINES = "kaflet_summary_lines"

# Seconds each of the longest units took in a one-process run on a quiet 2-core machine
# (pytest --durations=0); only their order matters.
UNIT_SECONDS: dict[str, float] = {
    "spark": 100.4,
    "tests/test_readme.py": 55.0,
    "tests/clients/test_kafka_streams.py": 50.2,
    "differential": 45.5,
    "tests/clients/test_group_scenarios.py": 39.6,
    "tests/pipeline/test_cluster.py": 29.9,
    "tests/clients/test_transactions_clients.py": 28.8,
    "tests/differential/clients/test_share_clients_java.py": 28.3,
    "tests/clients/test_consumer_protocol_clients.py": 26.8,
    "tests/pipeline/test_worker_timeout.py": 24.3,
    "tests/test_bench_smoke.py": 20.4,
    "tests/clients/test_at_least_once.py": 20.1,
    "tests/cluster/test_scenarios.py": 18.1,
    "tests/crash/test_kill9_produce_and_commit.py": 17.9,
    "tests/clients/test_share_consumer_clients.py": 17.1,
    "tests/clients/test_security_clients.py": 16.2,
    "tests/crash/test_kill9_share_acks.py": 14.1,
    "tests/observability/test_admin_cli.py": 12.6,
    "tests/clients/test_group_reload_clients.py": 11.3,
    "tests/differential/clients/test_java_client.py": 10.4,
}


# A session-scoped fixture one worker should own -> the group of every module whose tests use it.
SHARED_FIXTURES = {"differential": "differential", "spark": "spark"}
GROUPS: dict[str, str] = {
    "tests/differential/test_api_versions.py": "differential",
    "tests/differential/test_scenarios.py": "differential",
    "tests/pipeline/test_analytics.py": "spark",
    "tests/pipeline/test_kafka_connector.py": "spark",
    "tests/pipeline/test_source_batch.py": "spark",
    "tests/pipeline/test_source_errors.py": "spark",
    "tests/pipeline/test_source_stream.py": "spark",
    "tests/pipeline/test_source_write.py": "spark",
}


def unit_of(nodeid: str) -> str:
    """The unit a test belongs to: its module's group, else its module."""
    module = nodeid.split("::", 1)[0]
    return GROUPS.get(module, module)


def check_groups(items: list[Any]) -> None:
    """Fail the collection when a test uses a shared fixture from a module outside its group:
    its worker would start the resource a second time (and the differential scenarios all run
    again)."""
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        for fixture, group in SHARED_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and GROUPS.get(module) != group:
                raise pytest.UsageError(
                    f"{module} uses the `{fixture}` fixture: add it to GROUPS in tests/support/parallel.py as {group!r}"
                )


def longest_first(queue: dict[str, Any]) -> list[tuple[str, Any]]:
    """The work queue's units, the longest measured first; the others keep their order after them."""
    return sorted(queue.items(), key=lambda unit: -UNIT_SECONDS.get(unit[0], 0.0))


class ModuleScheduling(LoadScopeScheduling):
    """LoadScopeScheduling whose unit is a module or a group of modules, longest first."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:  # the queue is whole by the first assignment: order it once
            self._ordered = True
            units = longest_first(self.workqueue)
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)
