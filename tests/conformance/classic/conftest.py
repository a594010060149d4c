"""Fixtures of the classic-group conformance suite (spec sections 2 and 3).

The `broker` fixture is overridden here so that timer rules run in milliseconds: the minimum
session timeout is lowered (Kafka's default bound is tested explicitly by JG-1). A test changes
other settings with `@pytest.mark.broker_config(name=value, ...)`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from broker import Broker, Config
from tests.support.classic import GroupEnv

CONFORMANCE_CONFIG: dict[str, Any] = {"group_min_session_timeout_ms": 10}


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "broker_config(**overrides): Config overrides for the conformance broker")


def broker_overrides(request: Any) -> dict[str, Any]:
    marker = request.node.get_closest_marker("broker_config")
    return {**CONFORMANCE_CONFIG, **(marker.kwargs if marker else {})}


@pytest.fixture
async def broker(make_config: Callable[..., Config], request: Any) -> AsyncIterator[Broker]:
    async with Broker(make_config(**broker_overrides(request))) as b:
        assert b.coordinator is not None
        await asyncio.wait_for(b.coordinator.loaded.wait(), 10)
        yield b


@pytest.fixture
async def env(broker: Broker, raw: Callable[..., Any]) -> GroupEnv:
    return GroupEnv(broker, raw)
