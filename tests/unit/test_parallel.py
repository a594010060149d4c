"""How make test shares the suite between worker processes (tests/support/parallel.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.parallel import GROUPS, SHARED_FIXTURES, UNIT_SECONDS, check_groups, longest_first, unit_of

ROOT = Path(__file__).resolve().parents[2]


def test_a_module_is_one_unit_unless_it_is_in_a_group() -> None:
    assert unit_of("tests/clients/test_data_path.py::test_x[confluent]") == "tests/clients/test_data_path.py"
    assert unit_of("tests/clients/test_data_path.py::TestA::test_y") == "tests/clients/test_data_path.py"
    assert unit_of("tests/differential/test_scenarios.py::test_scenario[jg_1_v0]") == "differential"
    assert unit_of("tests/pipeline/test_analytics.py::test_lag_history_has_a_row_per_commit") == "spark"


def test_every_named_module_and_unit_exists() -> None:
    assert set(GROUPS.values()) == set(SHARED_FIXTURES.values())
    for module in GROUPS:
        assert (ROOT / module).is_file(), module
    for unit in UNIT_SECONDS:
        assert unit in SHARED_FIXTURES.values() or (ROOT / unit).is_file(), unit


def test_a_test_using_a_shared_fixture_outside_its_group_fails_the_collection() -> None:
    inside = SimpleNamespace(nodeid="tests/pipeline/test_analytics.py::test_a", fixturenames=["spark", "tmp_path"])
    elsewhere = SimpleNamespace(nodeid="tests/clients/test_new.py::test_b", fixturenames=["tmp_path", "spark"])
    check_groups([inside, SimpleNamespace(nodeid="tests/clients/test_new.py::test_c", fixturenames=["tmp_path"])])
    with pytest.raises(pytest.UsageError, match=r"tests/clients/test_new.py uses the `spark` fixture.*'spark'"):
        check_groups([inside, elsewhere])


def test_units_start_longest_first_and_the_rest_keep_their_order() -> None:
    queue = {"tests/a.py": 1, "tests/test_readme.py": 2, "tests/b.py": 3, "spark": 4, "differential": 5}
    order = [unit for unit, _ in longest_first(queue)]
    measured = sorted((u for u in queue if u in UNIT_SECONDS), key=lambda u: -UNIT_SECONDS[u])
    assert order == [*measured, "tests/a.py", "tests/b.py"]
    assert order[0] == "spark"
