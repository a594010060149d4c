"""Fixtures of the share-group conformance suite (KIP-932): an in-process broker with the share
test bounds (tests/support/share.py SHARE_BOUNDS), its coordinators loaded, and a ready raw
connection. `@pytest.mark.broker_config(...)` overrides settings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from broker import Broker, Config
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient
from tests.support.share import SHARE_BOUNDS


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "broker_config(**overrides): Config overrides for the conformance broker")


@pytest.fixture
async def broker(make_config: Callable[..., Config], request: Any) -> AsyncIterator[Broker]:
    marker = request.node.get_closest_marker("broker_config")
    async with Broker(make_config(**{**SHARE_BOUNDS, **(marker.kwargs if marker else {})})) as b:
        await asyncio.wait_for(b.coordinator.loaded.wait(), 10)
        yield b


@pytest.fixture
async def client(raw: Callable[..., Any]) -> RawClient:
    c = await raw()
    await wait_ready(c)
    return c
