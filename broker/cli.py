"""The `kaflet` command: `kaflet serve` runs the broker."""

from __future__ import annotations

import argparse
import asyncio
import sys

from broker.config import Config


def _serve(args: argparse.Namespace) -> int:
    from broker.lean_imports import skip_client_package_inits

    skip_client_package_inits()
    from broker import logging as kaflet_logging
    from broker.datadir import DataDirError
    from broker.server import Broker

    try:
        config = Config.from_namespace(args)
    except ValueError as exc:
        print(f"kaflet: {exc}", file=sys.stderr)
        return 2
    kaflet_logging.configure(config.log_format, config.log_level)
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency, but keep serving without it
        runner = asyncio.run
    try:
        runner(Broker(config).serve_forever())
    except (DataDirError, OSError) as exc:  # OSError: a listen address is taken or not ours
        import structlog

        structlog.get_logger("kaflet.broker").error("cannot start", reason=str(exc))
        return 1
    return 0


# Admin commands over the Kafka protocol (broker/admin_cli): parsed there, so that `serve`
# does not import them.
ADMIN_COMMANDS = {"topics": "list, describe, create and delete topics", "groups": "list, describe, delete groups; lag; reset offsets"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kaflet", description="A lightweight Kafka-compatible broker.")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the broker")
    Config.add_arguments(serve)
    serve.set_defaults(func=_serve)
    for name, text in ADMIN_COMMANDS.items():
        sub.add_parser(name, help=text + f" (kaflet {name} --help)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv or argv[0].startswith("-"):
        argv = ["serve", *argv]  # `python -m broker` alone serves
    if argv[0] in ADMIN_COMMANDS:
        from broker.admin_cli.main import main as admin_main

        return admin_main(argv)
    args = parser.parse_args(argv)
    return int(args.func(args))
