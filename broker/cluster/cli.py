"""`kaflet chaos ...`: the chaos operations against a running broker, through its control API
(`kaflet serve --control`; the API listens on the metrics address, 127.0.0.1:9644 by default).

Each subcommand is one operation of broker/cluster/chaos.py; the answer is printed as JSON.
Exit status 0, 1 when the API refused the operation or could not be reached, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from broker.config import SERVE_METRICS_PORT


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kaflet chaos",
        description="Break a running broker on purpose (it must run with --control). APIs and errors by name or number.",
    )
    p.add_argument(
        "--control-address",
        default=os.environ.get("KAFLET_CONTROL_ADDRESS", f"127.0.0.1:{SERVE_METRICS_PORT}"),
        help=f"host:port of the broker's metrics listener (env KAFLET_CONTROL_ADDRESS; default 127.0.0.1:{SERVE_METRICS_PORT})",
    )
    p.add_argument("--node", type=int, help="in a cluster (serve --brokers N): the node to act on (default: the first)")
    sub = p.add_subparsers(dest="op", required=True, metavar="OPERATION")
    move = sub.add_parser("move-leader", help="move a partition's leadership (cluster only); its leader epoch bumps")
    move.add_argument("topic")
    move.add_argument("partition", type=int)
    move.add_argument("--to", type=int, help="node id (default: the next node)")
    coord = sub.add_parser("move-coordinator", help="move a group's __consumer_offsets partition (cluster only): its coordinator changes")
    which = coord.add_mutually_exclusive_group(required=True)
    which.add_argument("--group")
    which.add_argument("--partition", type=int)
    coord.add_argument("--to", type=int, help="node id (default: the next node)")
    share = sub.add_parser(
        "move-share-coordinator",
        help="move a __share_group_state partition (cluster only): its share partitions' share coordinator changes",
    )
    which = share.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", help="a share partition, as group:topicId:partition (the topic id in Kafka's base64 form)")
    which.add_argument("--partition", type=int)
    share.add_argument("--to", type=int, help="node id (default: the next node)")
    sub.add_parser("state", help="list every rule, error stack, hole, the latency and whether the broker is down")
    sub.add_parser("connections", help="list open client connections (peer, client id, hole)")
    rule = sub.add_parser("rule", help="answer matching requests with an error, a delay or a closed connection")
    rule.add_argument("--api", help="API name (Produce) or key (0); default: any")
    rule.add_argument("--error", help="error name (NOT_LEADER_OR_FOLLOWER) or code (6)")
    rule.add_argument("--delay-ms", type=int, default=0)
    rule.add_argument("--close", action="store_true", help="close the connection instead of answering")
    rule.add_argument("--count", type=int, default=1, help="how many requests it answers (default 1)")
    rule.add_argument("--forever", action="store_true", help="answer every matching request until removed")
    rule.add_argument("--client-id")
    rule.add_argument("--version", type=int, help="only this request version")
    rule.add_argument("--min-version", type=int)
    rule.add_argument("--max-version", type=int)
    stack = sub.add_parser("push-errors", help="the next requests of an API get these errors in order (librdkafka's error stack)")
    stack.add_argument("--api", required=True)
    stack.add_argument("--client-id")
    stack.add_argument("errors", nargs="+", metavar="ERROR[:DELAY_MS]", help="NONE lets that request through")
    latency = sub.add_parser("latency", help="add MS to every response of the broker (0: none)")
    latency.add_argument("ms", type=int)
    remove = sub.add_parser("remove", help="remove one rule or error stack by id")
    remove.add_argument("id", type=int)
    hole = sub.add_parser("hole", help="black-hole a client id's connections or one connection")
    who = hole.add_mutually_exclusive_group(required=True)
    who.add_argument("--client-id")
    who.add_argument("--peer", help="the client's end of one connection, host:port (see `connections`)")
    hole.add_argument("--duration-ms", type=int, help="close the hole by itself after this long (default: until restored)")
    restore = sub.add_parser("restore", help="close one black hole (by id) or all")
    restore.add_argument("id", type=int, nargs="?")
    down = sub.add_parser("down", help="take the broker down")
    down.add_argument("--mode", choices=("refuse", "hang"), default="refuse", help="refuse connections, or accept and never answer")
    down.add_argument("--failover", action="store_true", help="in a cluster: move its partition leaderships and coordinators to the others")
    sub.add_parser("up", help="bring the broker back")
    sub.add_parser("clear", help="undo every rule, stack, latency and hole, and bring the broker up")
    return p


CLUSTER_MOVES = ("move_leader", "move_coordinator", "move_share_coordinator")


def _stack_entry(text: str) -> Any:
    code, sep, delay = text.partition(":")
    if not sep:
        return code
    try:
        return [code, int(delay)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad error stack entry {text!r}: ERROR or ERROR:DELAY_MS") from None


def request_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    op, params = _request_of(args)
    if args.node is not None and op not in CLUSTER_MOVES:
        params["node"] = args.node
    return op, params


def _request_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    op = args.op.replace("-", "_")
    if op in CLUSTER_MOVES:
        params = {k: v for k in ("topic", "partition", "group", "key") if (v := getattr(args, k, None)) is not None}
        if args.to is not None:
            params["node"] = args.to
        return op, params
    if op == "rule":
        params: dict[str, Any] = {"delay_ms": args.delay_ms, "close": args.close, "count": None if args.forever else args.count}
        for name in ("api", "error", "client_id", "version", "min_version", "max_version"):
            if getattr(args, name) is not None:
                params[name] = getattr(args, name)
        return op, params
    if op == "push_errors":
        params = {"api": args.api, "errors": [_stack_entry(e) for e in args.errors]}
        if args.client_id is not None:
            params["client_id"] = args.client_id
        return op, params
    if op == "latency":
        return op, {"ms": args.ms}
    if op == "remove":
        return op, {"id": args.id}
    if op == "hole":
        params = {k: v for k in ("client_id", "peer", "duration_ms") if (v := getattr(args, k)) is not None}
        return op, params
    if op == "restore":
        return op, {} if args.id is None else {"id": args.id}
    if op == "down":
        return op, {"mode": args.mode, **({"failover": True} if args.failover else {})}
    return op, {}


def main(argv: list[str]) -> int:
    """`kaflet chaos OPERATION [ARGS]` (argv[0] is "chaos")."""
    from broker.cluster.control import ControlClient, ControlError

    p = parser()
    args = p.parse_args(argv[1:])
    try:
        op, params = request_of(args)
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    try:
        result = ControlClient(args.control_address).apply(op, params)
    except ControlError as exc:
        sys.stderr.write(f"kaflet chaos {args.op}: {exc}\n")
        return 1
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0
