"""The metrics endpoint itself: /healthz, /readyz (also while shards load), routing, start-up errors.

In-process brokers run on the test's event loop, so these tests speak HTTP with asyncio
(a blocking client would wait for a loop it blocks).
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker import Broker
from broker.embed import BrokerProcess
from tests.support import groups as g
from tests.support.coordinator import NONE, create_topic, serving
from tests.support.metrics import aget, ascrape, parse, ready
from tests.support.offsets_log import write_ballast
from tests.support.waiting import wait_until


def metrics_config(make_config: Callable[..., Any], **overrides: Any) -> Any:
    return make_config(metrics=True, metrics_port=0, **overrides)


@pytest.fixture
def discard_data(make_config: Callable[..., Any]) -> Iterator[None]:
    yield
    shutil.rmtree(make_config().data_dir, ignore_errors=True)


async def test_healthz_readyz_and_unknown_paths(make_config: Callable[..., Any]) -> None:
    async with serving(metrics_config(make_config)) as served:
        await served.ready()
        address = served.broker.metrics.address
        status, headers, body = await aget(address, "/healthz")
        assert (status, json.loads(body)) == (200, {"status": "ok"})
        status, headers, body = await aget(address, "/readyz")
        assert status == 200 and headers["content-type"] == "application/json"
        assert json.loads(body) == {
            "ready": True,
            "listening": True,
            "coordinator_loaded": True,
            "shards": {"active": 5},
            "transaction_coordinator_loaded": True,
        }
        status, headers, body = await aget(address, "/metrics")
        assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert int(headers["content-length"]) == len(body)
        parse(body.decode())
        status, headers, body = await aget(address, "/metrics", method="HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0
        assert (await aget(address, "/nothing-here"))[0] == 404
        status, headers, _ = await aget(address, "/metrics", method="POST")
        assert status == 405 and headers["allow"] == "GET, HEAD"


async def test_readyz_is_not_ready_while_coordinator_shards_load(make_config: Callable[..., Any], discard_data: None) -> None:
    config = metrics_config(make_config)
    async with serving(config) as served:
        create_topic(served.broker, "t", 3)
        client = await served.ready()
        assert await g.commit(client, "loaded-later", {("t", 0): 42}) == {("t", 0): NONE}
        write_ballast(served.broker, 0)  # ~96 MB in partition 0: loading takes many loop turns
    broker = Broker(config)
    await broker.start()
    try:
        address = broker.metrics.address
        # The Kafka listener is up (start() returned) while the shards are still loading.
        status, _, body = await aget(address, "/readyz")
        detail = json.loads(body)
        assert status == 503, detail
        assert detail["listening"] is True and detail["coordinator_loaded"] is False
        assert detail["shards"].get("loading", 0) >= 1
        during = await ascrape(address)
        assert (during.value("kaflet_coordinator_partitions", state="loading") or 0) >= 1
        assert during.samples("kafka_consumergroup_members") == []  # as ListGroups: nothing while loading
        await broker.coordinator.loaded.wait()
        status, _, body = await aget(address, "/readyz")
        assert (status, json.loads(body)["shards"]) == (200, {"active": 5})
        after = await ascrape(address)
        assert after.value("kafka_consumergroup_current_offset", consumergroup="loaded-later", topic="t", partition="0") == 42
        assert after.value("kaflet_coordinator_partitions", state="active") == 5
        assert (after.value("kaflet_coordinator_load_seconds") or 0) > 0
        assert (after.value("kaflet_coordinator_partition_load_seconds", partition="0") or 0) > 0
    finally:
        await broker.stop()


async def test_no_metrics_serves_no_endpoint(make_config: Callable[..., Any]) -> None:
    async with serving(make_config(metrics=False)) as served:
        assert served.broker.metrics is None
        assert served.broker.observe_response is None  # nothing on the request path


def test_a_taken_metrics_port_stops_start_up_with_a_clear_error(broker_proc: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        bp = BrokerProcess(tmp_path / "data", "--metrics-port", str(port))
        with pytest.raises(RuntimeError, match="exited"):
            bp.start(timeout=20)
        assert bp.proc is not None and bp.proc.wait(10) == 1
        [error] = [r for r in bp.records if r.get("level") == "error"]
        assert error["event"] == "cannot start" and "Errno" not in error["reason"]
        assert error["reason"] == (
            f"the metrics endpoint cannot listen on 127.0.0.1:{port}: the port is already in use (another kaflet or Kafka?); "
            "choose another with --metrics-port PORT, or --metrics-port 0 for a free one, or turn metrics off with --no-metrics"
        )
        assert not (tmp_path / "data").exists()  # refused before the data dir was touched


def test_ready_line_names_the_metrics_address(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc("--metrics-port", "0", "--metrics-host", "127.0.0.1")
    assert bp.metrics is not None and bp.metrics.startswith("127.0.0.1:")
    address = bp.metrics
    # The ready line comes once the listener accepts; the shards may finish loading just after.
    wait_until(
        lambda: (
            ready(address)
            == (
                200,
                {
                    "ready": True,
                    "listening": True,
                    "coordinator_loaded": True,
                    "shards": {"active": 5},
                    "transaction_coordinator_loaded": True,
                },
            )
        )
    )
