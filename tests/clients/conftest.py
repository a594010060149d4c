"""Fixtures for scenarios with consumers in child processes (tests/support/agents.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import Agents


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    pool = Agents(tmp_path)
    yield pool
    pool.teardown()
