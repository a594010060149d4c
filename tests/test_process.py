"""`kaflet serve` as a process: the ready line, environment twins, signals, the data dir."""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from broker.embed import BrokerProcess


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_gracefully_with_exit_0(broker_proc: Any, sig: int) -> None:
    bp = broker_proc()
    assert AdminClient({"bootstrap.servers": bp.bootstrap}).list_topics(timeout=10).controller_id == 1
    assert bp.stop(sig) == 0
    bp.wait_for(lambda r: r.get("event") == "broker stopped")


def test_environment_twins_configure_the_broker(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "d", env={"KAFLET_NODE_ID": "7", "KAFLET_ADVERTISED_HOST": "localhost"}).start()
    try:
        md = AdminClient({"bootstrap.servers": bp.bootstrap}).list_topics(timeout=10)
        assert md.controller_id == 7
        assert [(b.id, b.host) for b in md.brokers.values()] == [(7, "localhost")]
    finally:
        assert bp.stop() == 0


def test_flag_beats_environment(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "d", "--node-id", "3", env={"KAFLET_NODE_ID": "9"}).start()
    try:
        assert AdminClient({"bootstrap.servers": bp.bootstrap}).list_topics(timeout=10).controller_id == 3
    finally:
        bp.stop()


def test_localhost_listens_on_both_loopbacks(tmp_path: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    bp = BrokerProcess(tmp_path / "d", "--host", "localhost").start()
    try:
        ready = bp.wait_for(lambda r: r.get("event") == "broker ready")
        assert sorted(ready["listen"]) == sorted([f"127.0.0.1:{bp.port}", f"[::1]:{bp.port}"])
        for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect((addr, bp.port))
    finally:
        bp.stop()


def test_cluster_id_is_stable_per_data_dir(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "d").start()
    first = bp.wait_for(lambda r: r.get("event") == "broker ready")["cluster_id"]
    bp.restart()
    second = bp.wait_for(lambda r: r.get("event") == "broker ready" and r is not None)["cluster_id"]
    bp.stop()
    assert first == second


def test_changed_offsets_partitions_is_refused(tmp_path: Path) -> None:
    BrokerProcess(tmp_path / "d", "--offsets-partitions", "5").start().stop()
    bp = BrokerProcess(tmp_path / "d", "--offsets-partitions", "6")
    with pytest.raises(RuntimeError, match="offsets-partitions 5"):
        bp.start()
    assert bp.proc is not None and bp.proc.wait(10) == 1


def test_second_broker_on_same_data_dir_is_refused(tmp_path: Path) -> None:
    first = BrokerProcess(tmp_path / "d").start()
    try:
        second = BrokerProcess(tmp_path / "d")
        with pytest.raises(RuntimeError, match="in use"):
            second.start()
    finally:
        first.stop()
