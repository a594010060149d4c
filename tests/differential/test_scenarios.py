"""Each scenario of tests/differential/scenarios, run against kaflet and Apache Kafka 4.4: the two
normalized transcripts must be the same, or differ exactly as tests/differential/expected.py
says (each difference there documented in docs/decisions.md or naming its pending fix)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.differential.conftest import record_result
from tests.differential.expected import EXPECTED
from tests.differential.harness import Scenario
from tests.differential.normalize import compare, normalized
from tests.differential.scenarios import ALL

DECISIONS = Path(__file__).resolve().parents[2] / "docs" / "decisions.md"


def _headings() -> set[str]:
    text = DECISIONS.read_text() if DECISIONS.exists() else ""
    return {m.group(1).strip() for m in re.finditer(r"^#+\s+(.+)$", text, re.M)}


def _show(diffs: list[tuple[str, Any, Any]]) -> str:
    return "\n".join(f"  {path}: kaflet {ours!r} | kafka {theirs!r}" for path, ours, theirs in diffs)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("scenario", ALL, ids=lambda s: s.name)
def test_scenario(scenario: Scenario, differential: Any, request: pytest.FixtureRequest) -> None:
    ours, theirs = differential.outcome(scenario.name)
    record_result(request.config, scenario.name, "different")
    assert ours.error is None and theirs.error is None, f"the scenario did not run through: {ours.error or ''} {theirs.error or ''}"
    diffs = compare(normalized(ours.side), normalized(theirs.side))
    expected = EXPECTED.get(scenario.name)
    if expected is None:
        assert not diffs, f"kaflet and Kafka 4.4 answer differently:\n{_show(diffs)}"
        record_result(request.config, scenario.name, "same")
        return
    assert diffs == list(expected.diffs), (
        f"the documented difference drifted.\nexpected:\n{_show(list(expected.diffs))}\nfound:\n{_show(diffs)}"
    )
    if expected.pending is not None:
        # A known kaflet bug whose fix waits for other work: red until the fix lands, and
        # then the entry goes (the differences above must be exactly the known ones).
        record_result(request.config, scenario.name, "pending")
        pytest.fail(f"pending fix (known, not yet applied): {expected.pending}", pytrace=False)
    assert expected.decision in _headings(), f"docs/decisions.md has no heading {expected.decision!r}"
    record_result(request.config, scenario.name, "documented")


def test_every_expected_difference_names_a_scenario() -> None:
    names = {s.name for s in ALL}
    assert sorted(set(EXPECTED) - names) == []
