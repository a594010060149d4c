"""`kaflet transactions list|describe`: kafka-transactions.sh's list and describe.

list asks every broker of the cluster (ListTransactions) and merges the answers; describe asks
each transactional id's coordinator (FindCoordinator with key type TRANSACTION, then
DescribeTransactions). Columns follow kafka-transactions.sh.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from broker.admin_cli import FAILED
from broker.admin_cli.output import Result, table


def add_actions(actions: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """The actions of `kaflet transactions`; `common(p)` adds the options every action takes."""
    p = actions.add_parser("list", help="transactional ids, their producer ids and states")
    p.add_argument("--state", action="append", default=[], help="only these states (Ongoing, CompleteCommit, ...; repeatable)")
    p.add_argument("--producer-id", action="append", type=int, default=[], help="only these producer ids (repeatable)")
    p.add_argument("--duration-ms", type=int, default=-1, help="only transactions running at least this long")
    p.set_defaults(run=list_transactions)
    common(p)
    p = actions.add_parser("describe", help="state, producer, timeout and partitions of transactions")
    p.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    p.set_defaults(run=describe_transactions)
    common(p)


def _error_name(code: int) -> str:
    from kafka.errors import for_code

    return str(for_code(code).message)


def list_transactions(args: argparse.Namespace, admin: Any) -> Result:
    from kafka.protocol.admin import ListTransactionsRequest

    async def run() -> list[tuple[int, Any]]:
        out = []
        for node in sorted(b.node_id for b in admin._manager.cluster.brokers()):
            request = ListTransactionsRequest(
                version=1, state_filters=args.state, producer_id_filters=args.producer_id, duration_filter=args.duration_ms
            )
            out.append((node, await admin._manager.send(request, node_id=node)))
        return out

    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for node, response in admin._manager.run(run):
        if response.error_code:
            errors.append(f"broker {node}: {_error_name(response.error_code)}")
            continue
        for unknown in response.unknown_state_filters:
            errors.append(f"unknown state {unknown!r}")
        for s in response.transaction_states:
            rows.append(
                {"transactional_id": s.transactional_id, "coordinator": node, "producer_id": s.producer_id, "state": s.transaction_state}
            )
    rows.sort(key=lambda r: r["transactional_id"])
    text = table(["TRANSACTIONAL-ID", "COORDINATOR-ID", "PRODUCER-ID", "STATE"], [list(r.values()) for r in rows])
    return Result({"transactions": rows}, text, FAILED if errors else 0, errors)


def describe_transactions(args: argparse.Namespace, admin: Any) -> Result:
    from kafka.protocol.admin import DescribeTransactionsRequest
    from kafka.protocol.metadata.find_coordinator import CoordinatorType

    ids: list[str] = list(dict.fromkeys(args.transactional_ids))

    async def run() -> list[tuple[int, Any]]:
        by_node: dict[int, list[str]] = {}
        for tid, node in (await admin._find_coordinator_ids(ids, key_type=CoordinatorType.TRANSACTION)).items():
            by_node.setdefault(node, []).append(tid)
        out = []
        for node, tids in by_node.items():
            out.append((node, await admin._manager.send(DescribeTransactionsRequest(version=0, transactional_ids=tids), node_id=node)))
        return out

    now = int(time.time() * 1000)
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for node, response in admin._manager.run(run):
        for s in response.transaction_states:
            if s.error_code:
                errors.append(f"{s.transactional_id}: {_error_name(s.error_code)}")
                continue
            rows.append(
                {
                    "transactional_id": s.transactional_id,
                    "coordinator": node,
                    "producer_id": s.producer_id,
                    "producer_epoch": s.producer_epoch,
                    "timeout_ms": s.transaction_timeout_ms,
                    "state": s.transaction_state,
                    "start_time_ms": s.transaction_start_time_ms if s.transaction_start_time_ms >= 0 else None,
                    "duration_ms": now - s.transaction_start_time_ms
                    if s.transaction_start_time_ms >= 0 and s.transaction_state == "Ongoing"
                    else None,
                    "partitions": [f"{t.topic}-{p}" for t in s.topics for p in t.partitions],
                }
            )
    rows.sort(key=lambda r: ids.index(r["transactional_id"]))
    headers = ["COORDINATOR-ID", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "TRANSACTION-STATE", "TRANSACTION-TIMEOUT-MS"]
    headers += ["CURRENT-TRANSACTION-START-TIME", "TRANSACTION-DURATION-MS", "TOPIC-PARTITIONS"]
    columns = ("coordinator", "transactional_id", "producer_id", "producer_epoch", "state", "timeout_ms", "start_time_ms")
    columns += ("duration_ms", "partitions")
    text = table(headers, [[r[c] for c in columns] for r in rows])
    return Result({"transactions": rows}, text, FAILED if errors else 0, errors)
