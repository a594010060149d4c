"""The admin commands' parsers and the run loop: connect, run, print, exit code.

`kaflet topics|groups|transactions ACTION [ARGS] [OPTIONS]`: the options shared by every action
(--bootstrap-server, --output, --timeout) go anywhere after the command, before or after the
action, as every `kaflet` command takes its options (broker/cli.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from broker.admin_cli import FAILED, UNREACHABLE, USAGE, groups, topics, transactions
from broker.admin_cli.output import CommandError, emit, fail
from broker.cli import COMMANDS, shared_options

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# command -> the module that adds its actions: add_actions(actions, common)
MODULES = {"topics": topics, "groups": groups, "transactions": transactions}


def add_common_options(parser: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    """The options every admin action takes; `default` is identity on the command's parser and
    SUPPRESS on its actions', so that a value given before the action is not overwritten."""
    bootstrap = os.environ.get("KAFLET_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP)
    parser.add_argument(
        "--bootstrap-server",
        default=default(bootstrap),
        metavar="HOST:PORT[,...]",
        help=f"the cluster to talk to [env KAFLET_BOOTSTRAP_SERVER; default {DEFAULT_BOOTSTRAP}]",
    )
    parser.add_argument(
        "--output", choices=("table", "json"), default=default("table"), help="readable tables (default) or JSON for scripts"
    )
    parser.add_argument(
        "--timeout", type=float, default=default(10.0), metavar="SECONDS", help="how long to wait for the cluster (default 10)"
    )


def _wants_json(argv: list[str]) -> bool:
    return any(a == "--output=json" or (a == "--output" and b == "json") for a, b in zip(argv, [*argv[1:], ""], strict=True))


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 2 as usual; with --output json they are a JSON document on stdout."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            sys.exit(fail(f"{self.prog}: {message}", USAGE, "json"))
        super().error(message)


def parser(command: str) -> argparse.ArgumentParser:
    """The parser of `kaflet COMMAND` (topics, groups or transactions) and its actions."""
    module = MODULES[command]
    summary = next(c.summary for c in COMMANDS if c.name == command)
    p = _Parser(
        prog=f"kaflet {command}",
        description=f"{summary[0].upper()}{summary[1:]}, over the Kafka protocol (it works against any Kafka cluster).",
        epilog="Options go anywhere after the command. Exit status: 0 success, 1 the cluster reported an error, "
        "2 usage, 3 cluster unreachable, 4 refused because a group has active members.",
    )
    shared_options(p, add_common_options, module.add_actions, parser_class=_Parser)
    return p


def topics_parser() -> argparse.ArgumentParser:
    return parser("topics")


def groups_parser() -> argparse.ArgumentParser:
    return parser("groups")


def transactions_parser() -> argparse.ArgumentParser:
    return parser("transactions")


def main(argv: list[str]) -> int:
    """`kaflet topics ...` / `kaflet groups ...` / `kaflet transactions ...` (argv starts with the command)."""
    _Parser.json_errors = _wants_json(argv)
    p = parser(argv[0])
    args = p.parse_args(argv[1:])
    check = getattr(args, "check", None)  # an action's own checks of what argparse cannot express
    if check is not None:
        check(args)
    return run(args)


def run(args: argparse.Namespace) -> int:
    import kafka.errors as errors
    from kafka import KafkaAdminClient

    timeout_ms = max(1, int(args.timeout * 1000))
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=args.bootstrap_server.split(","),
            client_id="kaflet-admin",
            bootstrap_timeout_ms=timeout_ms,
            request_timeout_ms=timeout_ms,
        )
    except (errors.KafkaConnectionError, errors.KafkaTimeoutError, OSError) as exc:
        return fail(f"cannot reach the cluster at {args.bootstrap_server}: {exc}", UNREACHABLE, args.output)
    try:
        result = args.run(args, admin)
    except CommandError as exc:
        return fail(exc.message, exc.code, args.output)
    except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
        return fail(f"the cluster did not answer: {exc}", UNREACHABLE, args.output)
    except errors.KafkaError as exc:
        return fail(str(exc), FAILED, args.output)
    finally:
        admin.close()
    return emit(result, args.output)
