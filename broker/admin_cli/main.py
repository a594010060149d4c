"""The admin subcommands' parsers and the run loop: connect, run, print, exit code."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from broker.admin_cli import FAILED, UNREACHABLE, groups, topics
from broker.admin_cli.output import CommandError, emit

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


def main(argv: list[str]) -> int:
    """`kaflet topics ...` / `kaflet groups ...` (argv starts with the command)."""
    parser = argparse.ArgumentParser(prog="kaflet", description="Admin commands over the Kafka protocol.")
    add_parsers(parser.add_subparsers(dest="command", required=True))
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
        sys.stderr.write(f"Error: cannot reach the cluster at {args.bootstrap_server}: {exc}\n")
        return UNREACHABLE
    try:
        result = args.run(args, admin)
    except CommandError as exc:
        sys.stderr.write(f"Error: {exc.message}\n")
        return exc.code
    except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
        sys.stderr.write(f"Error: the cluster did not answer: {exc}\n")
        return UNREACHABLE
    except errors.KafkaError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return FAILED
    finally:
        admin.close()
    return emit(result, args.output)
