"""Structured logs of a broker process: request-scoped fields, group events at INFO, DEBUG request lines.

The broker runs as a child process logging JSON lines (stderr is a pipe, not a terminal).
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from broker.embed import BrokerProcess
from tests.support import groups as g
from tests.support.coordinator import FENCED_INSTANCE_ID, NONE, form_group
from tests.support.raw_client import RawClient

REQUEST_FIELDS = {"peer", "client_id", "api", "api_version", "correlation_id"}


def traffic(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "log-producer"})
    for i in range(5):
        producer.produce("logged", value=b"%d" % i)
    assert producer.flush(20) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "log-group", "client.id": "log-consumer", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["logged"])
    got = 0
    for _ in range(100):
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            got += 1
            if got == 5:
                break
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == 5


def test_debug_logs_every_request_and_response_with_its_context(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc("--log-level", "debug", "--no-auto-create-topics")
    consumer = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "dbg", "client.id": "debug-client"})
    md = consumer.list_topics("missing-topic", timeout=10)
    assert md.topics["missing-topic"].error is not None
    consumer.close()
    bp.wait_for(lambda r: r.get("event") == "response" and r.get("api") == "METADATA" and r.get("errors"))
    requests = [r for r in bp.records if r.get("event") == "request" and r.get("client_id") == "debug-client"]
    responses = [r for r in bp.records if r.get("event") == "response" and r.get("client_id") == "debug-client"]
    assert requests and len(responses) >= len(requests) - 1  # the last request may still be in flight
    for r in requests + responses:
        assert r["level"] == "debug" and REQUEST_FIELDS <= r.keys(), r
    assert {r["api"] for r in requests} >= {"API_VERSIONS", "METADATA"}
    failed = [r for r in responses if r["api"] == "METADATA" and r["errors"]]
    assert failed and failed[0]["errors"] == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert all(isinstance(r["duration_ms"], float) and r["sent"] is True for r in responses)
    by_corr = {r["correlation_id"]: r for r in requests}
    assert all(r["correlation_id"] in by_corr for r in responses)


def test_info_logs_nothing_per_request(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc()
    traffic(bp.bootstrap)
    bp.wait_for(lambda r: r.get("event") == "rebalance completed")
    bp.stop()
    per_request = [r for r in bp.records if r.get("event") in ("request", "response") or "correlation_id" in r]
    assert per_request == []
    assert all(r["level"] != "debug" for r in bp.records)


async def test_group_events_are_logged_at_info(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc("--group-min-session-timeout-ms", "100")
    clients: list[RawClient] = []

    async def connect(client_id: str | None = "raw-client") -> RawClient:
        client = await RawClient.connect(bp.bootstrap, client_id)
        clients.append(client)
        return client

    def events(name: str) -> list[dict[str, Any]]:
        return [r for r in bp.records if r.get("event") == name]

    try:
        # A static member forms the group: joined, rebalance started and completed.
        began = time.monotonic()
        [static] = await form_group(connect, "logged-group", 1, instance_ids=["instance-1"])
        completed = await asyncio.to_thread(bp.wait_for, lambda r: r.get("event") == "rebalance completed")
        assert completed["level"] == "info" and completed["group"] == "logged-group"
        assert completed["generation"] == 1 and completed["members"] == 1
        # The rebalance took place inside the time this test spent forming the group.
        assert 0 <= completed["duration_ms"] <= (time.monotonic() - began) * 1000
        [started] = events("rebalance started")
        assert started["generation"] == 0 and started["members"] == 1 and started["reason"]
        [joined] = events("member joined")
        assert joined["member"] == static.member_id and joined["instance_id"] == "instance-1"
        # The same instance id joins again: the old member is replaced, then fenced when it heartbeats.
        other = await connect("replacement")
        again = await g.join(other, "logged-group", "", instance_id="instance-1", session_timeout_ms=10_000)
        assert again.error_code == NONE
        replaced = await asyncio.to_thread(bp.wait_for, lambda r: r.get("event") == "static member replaced")
        assert replaced["old_member"] == static.member_id and replaced["new_member"] == again.member_id
        zombie = await g.heartbeat(static.client, "logged-group", static.member_id, static.generation, instance_id="instance-1")
        assert zombie.error_code == FENCED_INSTANCE_ID
        fenced = await asyncio.to_thread(bp.wait_for, lambda r: r.get("event") == "member fenced")
        assert fenced["member"] == static.member_id and fenced["current_member"] == again.member_id
        # A dynamic member that joins and leaves; another that stops heartbeating and expires.
        [leaver] = await form_group(connect, "leaving-group", 1)
        assert (await g.leave(leaver.client, "leaving-group", [(leaver.member_id, None)])).error_code == NONE
        left = await asyncio.to_thread(bp.wait_for, lambda r: r.get("event") == "member left")
        assert left["member"] == leaver.member_id and left["group"] == "leaving-group"
        [silent] = await form_group(connect, "expiring-group", 1, session_timeout_ms=200)
        expired = await asyncio.to_thread(bp.wait_for, lambda r: r.get("event") == "member expired", 20)
        assert expired["member"] == silent.member_id and expired["session_timeout_ms"] == 200
        for r in bp.records:
            if r.get("event") in ("member joined", "member left", "member expired", "member fenced", "static member replaced"):
                assert r["level"] == "info"
    finally:
        for client in clients:
            await client.close()


def test_console_lines_on_a_terminal_json_lines_otherwise(tmp_path: Path) -> None:
    """The same start-up, once with stderr on a pseudo-terminal and once on a pipe."""
    cmd = [sys.executable, "-m", "broker", "serve", "--port", "0", "--no-metrics", "--data-dir", str(tmp_path / "tty")]
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    text = ""
    try:
        deadline = time.monotonic() + 30
        while "broker ready" not in text and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                text += os.read(leader, 65536).decode(errors="replace")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        os.close(leader)
    line = next(line for line in text.splitlines() if "broker ready" in line)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", line)
    assert "\x1b[" in line and "[info" in plain and "bootstrap=" in plain  # structlog's console renderer, in colour
    piped = subprocess.Popen(
        [*cmd[:-1], str(tmp_path / "pipe")], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        assert piped.stderr is not None
        for raw in piped.stderr:
            record = json.loads(raw)
            if record["event"] == "broker ready":
                assert record["level"] == "info" and "timestamp" in record
                break
    finally:
        piped.send_signal(signal.SIGTERM)
        piped.wait(20)
