"""The chaos control API (HTTP on the metrics listener, only with --control) and `kaflet chaos`
against a running `kaflet serve` process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest

from broker import Broker
from broker.cluster.control import ControlClient, ControlError
from broker.config import Config, ConfigError


def http(address: str, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """A control request as its owner sends it: JSON (the API refuses anything else, issue 27)."""
    wanted = {"Content-Type": "application/json"} if body is not None else {}
    wanted.update(headers or {})
    req = urllib.request.Request(f"http://{address}{path}", data=body, method=method, headers=wanted)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            return exc.code, json.loads(text)
        except ValueError:
            return exc.code, text


def connects(bootstrap: str) -> bool:
    host, port = bootstrap.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return True
    except ConnectionRefusedError:
        return False


def test_control_is_off_unless_asked_and_says_so() -> None:
    off = "the control API is off on this broker: start it with `kaflet serve --control` (or KAFLET_CONTROL=true)"
    with Broker.in_thread() as b:
        assert b.metrics_address is not None
        assert http(b.metrics_address, "POST", "/control/latency", b'{"ms": 5}') == (404, {"error": off, "control": False})
        assert http(b.metrics_address, "GET", "/control") == (404, {"error": off, "control": False})
        assert b.run(lambda broker: broker.faults.latency_ms) == 0
        done = kaflet_chaos(b.metrics_address, "state")
        assert (done.returncode, done.stderr) == (1, f"kaflet chaos state: {off}\n")
    with pytest.raises(ConfigError, match="--control"):
        Config(control=True, metrics=False).validate()


def test_http_control_api_runs_lists_and_clears_operations() -> None:
    with Broker.in_thread(control=True) as b:
        address = b.metrics_address
        assert address is not None
        status, rule = http(address, "POST", "/control/rule", json.dumps({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}).encode())
        assert status == 200 and rule["api_key"] == 0 and rule["error"] == "NOT_LEADER_OR_FOLLOWER"
        status, stack = http(address, "POST", "/control/push-errors", json.dumps({"api": 11, "errors": [15, ["NONE", 100]]}).encode())
        assert status == 200 and [e["error"] for e in stack["errors"]] == ["COORDINATOR_NOT_AVAILABLE", "NONE"]
        assert http(address, "POST", "/control/latency", b'{"ms": 7}')[0] == 200
        status, state = http(address, "GET", "/control")
        assert status == 200 and state["latency_ms"] == 7 and [r["id"] for r in state["rules"]] == [rule["id"]]
        assert http(address, "POST", "/control/remove", json.dumps({"id": stack["id"]}).encode()) == (200, {"removed": True})
        assert http(address, "GET", "/control/connections") == (200, [])
        # bad requests: parameters, JSON, operation, method, size
        assert http(address, "POST", "/control/rule", b'{"api": "Produce", "error": "NOPE"}')[0] == 400
        assert http(address, "POST", "/control/rule", b"not json")[0] == 400
        assert http(address, "POST", "/control/rule", b"[1]")[0] == 400
        assert http(address, "POST", "/control/frobnicate", b"{}")[0] == 404
        assert http(address, "PUT", "/control/latency", b"{}")[0] == 405
        assert http(address, "POST", "/control/latency", b"{" + b" " * 70_000 + b"}")[0] == 413
        status, cleared = http(address, "DELETE", "/control")
        assert status == 200 and (cleared["rules"], cleared["latency_ms"]) == ([], 0)
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert 'kaflet_chaos_operations_total{op="latency"} 1.0' in text
        assert 'kaflet_chaos_operations_total{op="clear"} 1.0' in text


def kaflet_chaos(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", "chaos", "--control-address", address, *args], capture_output=True, text=True, timeout=60
    )


def test_kaflet_chaos_against_a_running_process() -> None:
    with Broker.in_subprocess("--control") as b:
        assert b.metrics is not None
        done = kaflet_chaos(b.metrics, "push-errors", "--api", "JoinGroup", "COORDINATOR_NOT_AVAILABLE", "NONE:50")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["errors"][1] == {"error": "NONE", "delay_ms": 50}
        assert kaflet_chaos(b.metrics, "rule", "--api", "Fetch", "--delay-ms", "20", "--forever", "--client-id", "c").returncode == 0
        assert kaflet_chaos(b.metrics, "hole", "--client-id", "victim", "--duration-ms", "60000").returncode == 0
        state = json.loads(kaflet_chaos(b.metrics, "state").stdout)
        assert state["rules"][0]["count"] is None and state["holes"][0]["client_id"] == "victim"
        assert kaflet_chaos(b.metrics, "down").returncode == 0
        assert not connects(b.bootstrap)
        refused = kaflet_chaos(b.metrics, "down", "--mode", "hang")
        assert refused.returncode == 1 and "already down" in refused.stderr
        assert kaflet_chaos(b.metrics, "up").returncode == 0
        assert connects(b.bootstrap)
        assert kaflet_chaos(b.metrics, "clear").returncode == 0
        assert ControlClient(b.metrics).apply("state")["holes"] == []
        events = [r for r in b.records if r.get("event") == "chaos"]
        assert [e["op"] for e in events] == ["push_errors", "rule", "hole", "down", "up", "hole_closed", "clear"]
    with pytest.raises(ControlError, match="cannot reach"):
        ControlClient("127.0.0.1:1").apply("state")


def test_kaflet_serve_brokers_3_and_chaos_moves() -> None:
    with Broker.in_subprocess("--brokers", "3", "--control", "--offsets-partitions", "6") as b:
        assert b.bootstrap.count(",") == 2 and all(connects(one) for one in b.bootstrap.split(","))
        assert b.metrics is not None
        done = kaflet_chaos(b.metrics, "move-coordinator", "g", "--to", "2")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["leader"] == 2
        refused = kaflet_chaos(b.metrics, "move-leader", "no-such-topic", "0")
        assert refused.returncode == 1 and "no partition" in refused.stderr
        assert kaflet_chaos(b.metrics, "--node", "3", "down").returncode == 0
        third = b.bootstrap.split(",")[2]
        assert not connects(third) and connects(b.bootstrap.split(",")[0])
        state = json.loads(kaflet_chaos(b.metrics, "state").stdout)
        assert state["nodes"]["3"]["down"] == "refuse" and state["nodes"]["1"]["down"] is None
        assert kaflet_chaos(b.metrics, "clear").returncode == 0
        assert connects(third)


def test_an_address_that_is_not_a_control_api_is_named_as_such() -> None:
    """A 404 without kaflet's JSON (another HTTP server at --control-address) says what to check."""
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # answers 501 to everything
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ControlError, match=r"no control API at http://127\.0\.0\.1:\d+ \(HTTP 501 .*\): is that the broker's metrics"):
            ControlClient(address).apply("state")
    finally:
        server.shutdown()
        server.server_close()


def test_kaflet_serve_brokers_3_with_racks_fences_a_node_taken_down() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    args = ("--brokers", "3", "--control", "--offsets-partitions", "3", "--broker-rack", "r1,r2,r3")
    with Broker.in_subprocess(*args) as b:
        assert b.metrics is not None
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("replicated", 2, 3)])["replicated"].result(20)
        described = admin.describe_cluster(request_timeout=20).result(20)
        assert sorted((n.id, n.rack) for n in described.nodes) == [(1, "r1"), (2, "r2"), (3, "r3")]
        assert kaflet_chaos(b.metrics, "--node", "2", "down").returncode == 0
        state = json.loads(kaflet_chaos(b.metrics, "state").stdout)
        assert state["fenced"] == [2]
        parts = admin.list_topics("replicated", timeout=20).topics["replicated"].partitions
        assert all(sorted(p.isrs) == [1, 3] and len(p.replicas) == 3 and p.leader in (1, 3) for p in parts.values())
        assert kaflet_chaos(b.metrics, "--node", "2", "up").returncode == 0
        assert json.loads(kaflet_chaos(b.metrics, "state").stdout)["fenced"] == []


@pytest.mark.parametrize(
    ("racks", "message"),
    [
        ("r1,r2", "--broker-rack (KAFLET_BROKER_RACK) names 2 racks for 3 brokers: give one, or one per broker"),
        ("r1,,r3", "--broker-rack (KAFLET_BROKER_RACK) must name racks of 1 to 255 characters, comma-separated"),
    ],
)
def test_one_rack_per_broker_or_one_for_all(racks: str, message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--brokers", "3", "--broker-rack", racks, "--port", "0", "--metrics-port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.strip().endswith(message), done.stderr
    assert Config(brokers=3, broker_rack="same").broker_racks() == ["same", "same", "same"]
    with pytest.raises(ConfigError, match="255 characters"):
        Config(broker_rack="x" * 256).validate()
