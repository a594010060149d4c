"""kaflet and Kafka 4.4 side by side for the client-level differential tests, with the session's
one Java client driver JVM (tests/conftest.py: JVM start-up costs seconds on 2 cores)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from broker.embed import BrokerProcess
from tests.differential.clients.peers import Peers


@pytest.fixture(scope="session")
def kaflet_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A kaflet process set up as the reference broker is: 5 offsets and transaction-state
    partitions, the share-group bounds of the tests (SHARE_TEST_BOUNDS)."""
    data = tmp_path_factory.mktemp("kaflet-peer") / "data"
    share = ["--group-share-min-record-lock-duration-ms", "1000", "--group-share-min-session-timeout-ms", "6000"]
    broker = BrokerProcess(data, "--offsets-partitions", "5", "--transaction-state-partitions", "5", *share).start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def peers(kaflet_peer: BrokerProcess, kafka_reference: Any, java_driver: Any) -> Peers:
    return Peers(java_driver, kaflet_peer.bootstrap, kafka_reference.bootstrap)
