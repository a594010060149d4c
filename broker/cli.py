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
    except DataDirError as exc:
        import structlog

        structlog.get_logger("kaflet.broker").error("cannot start", reason=str(exc))
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kaflet", description="A lightweight Kafka-compatible broker.")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the broker")
    Config.add_arguments(serve)
    serve.set_defaults(func=_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv or argv[0].startswith("-"):
        argv = ["serve", *argv]  # `python -m broker` alone serves
    args = parser.parse_args(argv)
    return int(args.func(args))
