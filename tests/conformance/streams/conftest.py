"""Fixtures of the streams-group (KIP-1071) conformance suite: an in-process broker with its
coordinator loaded, topics created in-process, raw connections. `@pytest.mark.broker_config(...)`
overrides settings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from broker import Broker, Config


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "broker_config(**overrides): Config overrides for the conformance broker")


@pytest.fixture
async def broker(make_config: Callable[..., Config], request: Any) -> AsyncIterator[Broker]:
    marker = request.node.get_closest_marker("broker_config")
    async with Broker(make_config(**(marker.kwargs if marker else {}))) as b:
        await asyncio.wait_for(b.coordinator.loaded.wait(), 10)
        yield b
