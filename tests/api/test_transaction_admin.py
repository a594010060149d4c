"""ListTransactions, DescribeTransactions and DescribeProducers over the wire; `kaflet
transactions list|describe` against a broker process; the transaction metrics."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from kafka.protocol.admin import DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest

from broker import Broker
from protocol.errors import ErrorCode
from tests.support.procs import BrokerProcess
from tests.support.raw_client import RawClient
from tests.support.txn import Producer as RawProducer
from tests.support.waiting import async_wait_until, wait_until


async def _two_transactions(broker: Broker, client: RawClient) -> tuple[RawProducer, RawProducer]:
    assert broker.txn is not None
    await async_wait_until(lambda: broker.txn.all_loaded, message="loaded")  # type: ignore[union-attr]
    broker.topics.create("t", 2)
    open_ = RawProducer(client, "adm-open")
    assert (await open_.init()).error_code == 0
    await open_.add({"t": [0, 1]})
    assert (await open_.produce("t", 1, 2)).error_code == 0
    done = RawProducer(client, "adm-done")
    assert (await done.init()).error_code == 0
    await done.add({"t": [0]})
    await done.produce("t", 0)
    assert await done.end(commit=True) == 0
    return open_, done


async def test_list_transactions_filters(broker: Broker, raw: Callable[..., Any]) -> None:
    client: RawClient = await raw()
    open_, done = await _two_transactions(broker, client)

    async def listed(version: int = 2, **kw: Any) -> tuple[int, list[str], dict[str, tuple[int, str]]]:
        fields = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None} | kw
        resp = await client.request(ListTransactionsRequest(version=version, **fields), version=version)
        return (
            resp.error_code,
            resp.unknown_state_filters,
            {s.transactional_id: (s.producer_id, s.transaction_state) for s in resp.transaction_states},
        )

    everything = {"adm-open": (open_.pid, "Ongoing"), "adm-done": (done.pid, "CompleteCommit")}
    assert await listed() == (0, [], everything)
    assert await listed(version=0) == (0, [], everything)
    assert await listed(state_filters=["Ongoing", "Bogus"]) == (0, ["Bogus"], {"adm-open": everything["adm-open"]})
    assert await listed(producer_id_filters=[done.pid]) == (0, [], {"adm-done": everything["adm-done"]})
    assert await listed(transactional_id_pattern="adm-d.*") == (0, [], {"adm-done": everything["adm-done"]})
    assert await listed(transactional_id_pattern="adm") == (0, [], {})  # the whole id must match
    assert (await listed(duration_filter=3_600_000))[2] == {}
    assert set((await listed(duration_filter=0))[2]) == {"adm-open", "adm-done"}
    assert (await listed(transactional_id_pattern="("))[0] == ErrorCode.INVALID_REGULAR_EXPRESSION


async def test_describe_transactions_and_producers(broker: Broker, raw: Callable[..., Any]) -> None:
    client: RawClient = await raw()
    open_, done = await _two_transactions(broker, client)
    resp = await client.request(DescribeTransactionsRequest(version=0, transactional_ids=["adm-open", "adm-done", "nobody"]))
    by_id = {s.transactional_id: s for s in resp.transaction_states}
    o = by_id["adm-open"]
    assert (o.error_code, o.transaction_state, o.producer_id, o.producer_epoch, o.transaction_timeout_ms) == (
        0,
        "Ongoing",
        open_.pid,
        0,
        60000,
    )
    assert o.transaction_start_time_ms > 0 and [(t.topic, sorted(t.partitions)) for t in o.topics] == [("t", [0, 1])]
    assert (by_id["adm-done"].transaction_state, by_id["adm-done"].topics) == ("CompleteCommit", [])
    assert by_id["nobody"].error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    topic = DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0, 1, 7])
    resp = await client.request(DescribeProducersRequest(version=0, topics=[topic]))
    parts = {p.partition_index: p for p in resp.topics[0].partitions}
    assert parts[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    p0 = {s.producer_id: (s.producer_epoch, s.last_sequence, s.current_txn_start_offset) for s in parts[0].active_producers}
    p1 = {s.producer_id: (s.producer_epoch, s.last_sequence, s.current_txn_start_offset) for s in parts[1].active_producers}
    assert p0 == {done.pid: (0, 0, -1)}
    assert p1 == {open_.pid: (0, 1, 0)}


def kaflet(bootstrap: str, *args: str) -> tuple[int, Any]:
    cmd = [sys.executable, "-m", "broker", *args, "--bootstrap-server", bootstrap, "--output", "json", "--timeout", "10"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return done.returncode, json.loads(done.stdout)


def test_kaflet_transactions_cli_and_metrics(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc("--metrics-port", "0")
    producer = Producer({"bootstrap.servers": bp.bootstrap, "transactional.id": "cli-1"})
    producer.init_transactions(30)
    began_ms = math.floor(time.time() * 1000)
    producer.begin_transaction()
    producer.produce("cli-topic", b"x")
    assert producer.flush(30) == 0
    code, out = kaflet(bp.bootstrap, "transactions", "list")
    assert code == 0 and [(t["transactional_id"], t["state"]) for t in out["transactions"]] == [("cli-1", "Ongoing")]
    code, out = kaflet(bp.bootstrap, "transactions", "describe", "cli-1", "missing")
    assert code == 1 and out["errors"] == ["missing: TRANSACTIONAL_ID_NOT_FOUND"]
    (described,) = out["transactions"]
    assert described["state"] == "Ongoing" and described["partitions"] == ["cli-topic-0"]
    # Open since the first record was added, which was after began_ms (the broker reads the same clock).
    assert 0 <= described["duration_ms"] <= math.ceil(time.time() * 1000) - began_ms
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("cli-topic", b"y")
    assert producer.flush(30) == 0  # sent: its partition is in the transaction, so the abort reaches the broker
    producer.abort_transaction(30)
    import urllib.request

    def scraped() -> dict[str, float]:
        text = urllib.request.urlopen(f"http://{bp.metrics}/metrics", timeout=10).read().decode()
        return {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in text.splitlines()
            if line.startswith(("kaflet_transactions", "kaflet_transactional_ids"))
        }

    wanted = {
        "kaflet_transactions_open": 0.0,
        "kaflet_transactions_committed_total": 1.0,
        "kaflet_transactions_aborted_total": 1.0,
        "kaflet_transactional_ids": 1.0,
    }
    wait_until(lambda: all(scraped().get(k) == v for k, v in wanted.items()), timeout=10, message="transaction metrics")
    metrics = scraped()
    assert metrics["kaflet_transactions_timed_out_total"] == 0.0
