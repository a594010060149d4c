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
from collections.abc import Callable
from typing import Any

from broker.cli import shared_options
from broker.config import SERVE_METRICS_PORT


def _options(p: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    """The options every operation takes (anywhere after `kaflet chaos`)."""
    address = os.environ.get("KAFLET_CONTROL_ADDRESS", f"127.0.0.1:{SERVE_METRICS_PORT}")
    p.add_argument(
        "--control-address",
        default=default(address),
        metavar="HOST:PORT",
        help=f"the broker's metrics address, where --control serves the API [env KAFLET_CONTROL_ADDRESS; default 127.0.0.1:{SERVE_METRICS_PORT}]",
    )
    p.add_argument(
        "--node", type=int, default=default(None), help="in a cluster (serve --brokers N): the node to act on (default: the first)"
    )


def _operations(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    sub.add_parser(
        "state",
        help="list every rule, error stack, hole, the latency and whether the broker is down (a cluster: fenced nodes, moved leaders, offline partitions)",
    )
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
    latency.add_argument("ms", type=int, metavar="MS")
    remove = sub.add_parser("remove", help="remove one rule or error stack by id")
    remove.add_argument("id", type=int, metavar="ID")
    hole = sub.add_parser("hole", help="black-hole a client id's connections or one connection")
    who = hole.add_mutually_exclusive_group(required=True)
    who.add_argument("--client-id")
    who.add_argument("--peer", help="the client's end of one connection, host:port (see `connections`)")
    hole.add_argument("--duration-ms", type=int, help="close the hole by itself after this long (default: until restored)")
    restore = sub.add_parser("restore", help="close one black hole (by id) or all")
    restore.add_argument("id", type=int, nargs="?", metavar="ID")
    down = sub.add_parser("down", help="take the broker down")
    down.add_argument("--mode", choices=("refuse", "hang"), default="refuse", help="refuse connections, or accept and never answer")
    down.add_argument(
        "--failover", action="store_true", help="in a cluster: also give the partitions it leaves without an in-sync replica another node"
    )
    sub.add_parser("up", help="bring the broker back")
    sub.add_parser("clear", help="undo every rule, stack, latency and hole, and bring the broker up")
    move = sub.add_parser("move-leader", help="move a partition's leadership (cluster only); its leader epoch bumps")
    move.add_argument("topic", metavar="TOPIC")
    move.add_argument("partition", type=int, metavar="PARTITION")
    move.add_argument(
        "--to",
        type=int,
        metavar="NODE",
        help="node id (default: the next in-sync replica); a node that is not a replica takes the leader's place",
    )
    coord = sub.add_parser("move-coordinator", help="move a group's __consumer_offsets partition (cluster only): its coordinator changes")
    coord.add_argument("group", nargs="?", metavar="GROUP", help="the group whose coordinator moves")
    coord.add_argument("--partition", type=int, help="or: this partition of __consumer_offsets")
    coord.add_argument("--group", dest="group_option", help=argparse.SUPPRESS)  # the spelling of earlier versions
    coord.add_argument("--to", type=int, metavar="NODE", help="node id (default: the next node)")
    share = sub.add_parser(
        "move-share-coordinator",
        help="move a __share_group_state partition (cluster only): its share partitions' share coordinator changes",
    )
    share.add_argument("--key", metavar="GROUP:TOPIC_ID:PARTITION", help="a share partition (the topic id in Kafka's base64 form)")
    share.add_argument("--partition", type=int, help="or: this partition of __share_group_state")
    share.add_argument("--to", type=int, metavar="NODE", help="node id (default: the next node)")
    for name in sub.choices:
        common(sub.choices[name])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kaflet chaos",
        description="Break a running broker on purpose through its control API (the broker runs with --control). "
        "APIs and errors by name or number.",
        epilog="Options go anywhere after the command. Exit status: 0 done, 1 refused by the broker or unreachable, 2 usage.",
    )
    shared_options(p, _options, _operations)
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
    op = args.action.replace("-", "_")
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


def _check(args: argparse.Namespace, p: argparse.ArgumentParser) -> None:
    """move-coordinator: GROUP or --partition (and `--group G` of earlier versions, with a note);
    move-share-coordinator: --key or --partition."""
    if args.action == "move-share-coordinator" and (args.key is None) == (args.partition is None):
        p.error("move-share-coordinator: give --key GROUP:TOPIC_ID:PARTITION or --partition P (one of them)")
    if args.action != "move-coordinator":
        return
    if args.group_option is not None:
        sys.stderr.write(f"kaflet chaos move-coordinator: --group is deprecated; give the group as an argument: {args.group_option}\n")
        if args.group is not None:
            p.error("move-coordinator: the group twice (GROUP and --group)")
        args.group = args.group_option
    if (args.group is None) == (args.partition is None):
        p.error("move-coordinator: give a GROUP or --partition P (one of them)")


def main(argv: list[str]) -> int:
    """`kaflet chaos OPERATION [ARGS] [OPTIONS]` (argv[0] is "chaos")."""
    from broker.cluster.control import ControlClient, ControlError

    p = parser()
    args = p.parse_args(argv[1:])
    _check(args, p)
    try:
        op, params = request_of(args)
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    try:
        result = ControlClient(args.control_address).apply(op, params)
    except ControlError as exc:
        sys.stderr.write(f"kaflet chaos {args.action}: {exc}\n")
        return 1
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0
