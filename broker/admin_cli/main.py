"""The admin subcommands' parsers and the run loop: connect, run, print, exit code."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from broker.admin_cli import FAILED, UNREACHABLE, USAGE, groups, topics, transactions
from broker.admin_cli.output import CommandError, emit, fail

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap-server",
        default=os.environ.get("KAFLET_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP),
        help=f"host:port[,host:port...] of the cluster [env KAFLET_BOOTSTRAP_SERVER; default {DEFAULT_BOOTSTRAP}]",
    )
    common.add_argument("--output", choices=("table", "json"), default="table", help="readable tables (default) or JSON for scripts")
    common.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the cluster (default 10)")
    return common


def add_parsers(sub: Any) -> None:
    common = common_options()
    topics.add_parsers(sub, common)
    groups.add_parsers(sub, common)
    transactions.add_parsers(sub, common)


def _wants_json(argv: list[str]) -> bool:
    return any(a == "--output=json" or (a == "--output" and b == "json") for a, b in zip(argv, [*argv[1:], ""], strict=True))


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 2 as usual; with --output json they are a JSON document on stdout."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            sys.exit(fail(f"{self.prog}: {message}", USAGE, "json"))
        super().error(message)


def main(argv: list[str]) -> int:
    """`kaflet topics ...` / `kaflet groups ...` (argv starts with the command)."""
    _Parser.json_errors = _wants_json(argv)
    parser = _Parser(prog="kaflet", description="Admin commands over the Kafka protocol.")
    add_parsers(parser.add_subparsers(dest="command", required=True, parser_class=_Parser))
    return run(parser.parse_args(argv))


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
