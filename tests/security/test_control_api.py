"""The control API only its owner drives, and a metrics listener that cannot starve the Kafka port
(issue 27, findings 2 and 3)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from broker import Broker
from broker.cluster.control import ControlClient, ControlError
from broker.config import Config, ConfigError
from tests.cluster.test_control import http
from tests.support.waiting import wait_until


@pytest.fixture
def controlled(tmp_path: Any) -> Iterator[Any]:
    with Broker.in_thread(
        Config(port=0, data_dir=str(tmp_path / "d"), control=True, metrics_port=0, offsets_partitions=3, metrics_max_connections=8)
    ) as b:
        yield b


def raw_http(address: str, request: bytes) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_only_json_bodies_drive_it(controlled: Any) -> None:
    a = controlled.metrics_address
    assert http(a, "POST", "/control/latency", b'{"ms": 5}')[0] == 200
    # What a web page can send without a preflight: text/plain and form bodies.
    assert http(a, "POST", "/control/latency", b'{"ms": 5}', {"Content-Type": "text/plain"})[0] == 415
    assert http(a, "POST", "/control/down", b"mode=refuse", {"Content-Type": "application/x-www-form-urlencoded"})[0] == 415
    assert controlled.broker.faults.down is None


def test_foreign_origin_and_host_are_refused(controlled: Any) -> None:
    a = controlled.metrics_address
    port = a.rsplit(":", 1)[1]
    assert http(a, "POST", "/control/down", b"{}", {"Origin": "http://evil.example"})[0] == 403
    assert http(a, "POST", "/control/down", b"{}", {"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert http(a, "POST", "/control/down", b"{}", {"Host": f"evil.example:{port}"})[0] == 421  # DNS rebinding
    assert http(a, "GET", "/control", None, {"Host": f"localhost:{port}"})[0] == 200  # the same listener, by another name
    assert http(a, "GET", "/control", None, {"Origin": f"http://127.0.0.1:{port}"})[0] == 200
    assert controlled.broker.faults.down is None


def test_absurd_parameters_are_refused(controlled: Any) -> None:
    a = controlled.metrics_address
    for op, params in (
        ("latency", {"ms": 1e30}),
        ("latency", {"ms": 3_600_001}),
        ("latency", {"ms": True}),
        ("rule", {"api": "Produce", "delay_ms": 10**12}),
        ("hole", {"client_id": "x", "duration_ms": 1e300}),
        ("hole", {"client_id": 12345}),
        ("hole", {"peer": ["a"]}),
        ("push_errors", {"api": "Produce", "errors": [[6, 1e30]]}),
        ("rule", {"api": "Produce", "error": 6, "count": 10**9}),
    ):
        status, body = http(a, "POST", f"/control/{op}", json.dumps(params).encode())
        assert status == 400, (op, params, body)
    assert http(a, "POST", "/control/latency", b'{"ms": 3600000}')[0] == 200  # an hour is allowed


def test_repeated_content_length_is_refused(controlled: Any) -> None:
    host, port = controlled.metrics_address.rsplit(":", 1)
    body = b'{"ms": 7}'
    head = f"POST /control/latency HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\nContent-Length: 1\r\nContent-Length: {len(body)}\r\n\r\n"
    answer = raw_http(controlled.metrics_address, head.encode() + body)
    assert answer.startswith(b"HTTP/1.1 400")
    assert controlled.broker.faults.latency_ms == 0


def test_bearer_token(tmp_path: Any) -> None:
    config = Config(port=0, data_dir=str(tmp_path / "d"), control=True, metrics_port=0, offsets_partitions=3, control_token="s3cret")
    with Broker.in_thread(config) as b:
        assert http(b.metrics_address, "GET", "/control")[0] == 401
        assert http(b.metrics_address, "GET", "/control", None, {"Authorization": "Bearer wrong"})[0] == 401
        assert ControlClient(b.metrics_address, token="s3cret").apply("latency", {"ms": 3}) == {"latency_ms": 3}
        with pytest.raises(ControlError, match="401"):
            ControlClient(b.metrics_address, token="nope").apply("state")
    # Off loopback the token is required.
    with pytest.raises(ConfigError, match="control-token"):
        Config(port=0, data_dir=str(tmp_path / "e"), control=True, metrics_host="0.0.0.0").validate()


def test_held_sockets_on_the_metrics_port_cannot_starve_the_kafka_port(controlled: Any) -> None:
    """Finding 3: sockets held on the metrics listener beyond its limit are closed at once; the
    Kafka listener keeps accepting and answering."""
    host, port = controlled.metrics_address.rsplit(":", 1)
    held = [socket.create_connection((host, int(port)), timeout=5) for _ in range(40)]
    try:
        guard = controlled.broker.metrics.guard
        wait_until(lambda: guard.open == 8 and guard.refused >= 32, message=lambda: f"open {guard.open}, refused {guard.refused}")
        from confluent_kafka.admin import AdminClient

        assert "t" not in AdminClient({"bootstrap.servers": controlled.bootstrap}).list_topics(timeout=10).topics
    finally:
        for s in held:
            s.close()
    wait_until(lambda: controlled.broker.metrics.guard.open == 0, message="held sockets released")
    assert http(controlled.metrics_address, "GET", "/control")[0] == 200
