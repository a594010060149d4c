"""The `kaflet` command: one table of commands, each a line in `kaflet --help`.

`kaflet`, `kaflet -h` and `kaflet --help` list every command of COMMANDS; `kaflet --version`
prints the installed version. `python -m broker` with no arguments serves (as it always did),
and so does a first argument that is a flag (`kaflet --port 0` is `kaflet serve --port 0`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from broker.config import Config, ConfigError


@dataclass(frozen=True)
class Command:
    """A `kaflet NAME ...` command: `run` ("module:function") is imported only when it runs, and
    gets the arguments from the command name on (argv[0] == name); it returns the exit status."""

    name: str
    summary: str  # the one line of `kaflet --help`
    run: str


# Every command of `kaflet`, in the order `kaflet --help` shows them. A new command is one line here.
COMMANDS: list[Command] = [
    Command("serve", "run the broker (the default of `python -m broker`)", "broker.cli:serve_main"),
    Command("topics", "list, describe, create and delete topics", "broker.admin_cli.main:main"),
    Command("groups", "list, describe and delete groups; their lag; reset their offsets", "broker.admin_cli.main:main"),
    Command("transactions", "list and describe transactions", "broker.admin_cli.main:main"),
    Command("chaos", "break a running broker on purpose through its control API (serve --control)", "broker.cluster.cli:main"),
    Command("check", "CRC-check a stopped broker's data dir; --repair fixes what it finds", "broker.admin_cli.check:main"),
    Command("certs", "make development TLS certificates: a CA, the broker's, clients' (mTLS)", "broker.security.cli.certs:main"),
    Command("users", "add, list and delete SCRAM users (running broker or stopped data dir)", "broker.security.cli.users:main"),
    Command("acls", "list, add and remove ACLs (running broker or stopped data dir)", "broker.security.cli.acls:main"),
    Command("configs", "read and delete a stopped broker's stored dynamic broker configs", "broker.security.cli.configs:main"),
    Command("pipeline", "group analytics on Spark: lag history, rebalance timeline, audit, report", "pipeline.analytics.cli:kaflet_main"),
]


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("kaflet")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def usage() -> str:
    width = max(len(c.name) for c in COMMANDS)
    lines = [
        "usage: kaflet [-h] [--version] COMMAND [ARGS...]",
        "",
        "kaflet: a lightweight Kafka-compatible broker.",
        "",
        "commands:",
        *(f"  {c.name.ljust(width)}  {c.summary}" for c in COMMANDS),
        "",
        "options:",
        "  -h, --help  show this list and exit",
        "  --version   print kaflet's version and exit",
        "",
        "`kaflet COMMAND --help` shows a command's own options.",
    ]
    return "\n".join(lines) + "\n"


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kaflet serve",
        usage="kaflet serve [FLAGS]  (kaflet serve --help lists them)",
        description="Run the broker. Every flag has a KAFLET_* environment twin; a flag wins over its variable.",
    )
    Config.add_arguments(parser)
    return parser


def serve_main(argv: list[str]) -> int:
    """`kaflet serve [FLAGS]` (argv[0] is "serve")."""
    parser = serve_parser()
    args = parser.parse_args(argv[1:])
    try:
        config = Config.from_namespace(args)
    except ConfigError as exc:
        parser.error(str(exc))  # usage and exit 2, as for a bad flag
    return _serve(config)


def _serve(config: Config) -> int:
    from broker.node.lean_imports import skip_client_package_inits

    skip_client_package_inits()
    from broker.node import logging as kaflet_logging
    from broker.node.datadir import DataDirError
    from broker.server import Broker

    kaflet_logging.configure(config.log_format, config.log_level)
    try:
        import uvloop

        runner: Callable[..., object] = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency, but keep serving without it
        runner = asyncio.run
    try:
        if config.brokers > 1:
            from broker.cluster.cluster import Cluster

            runner(Cluster(config, config.brokers).serve_forever())
        else:
            runner(Broker(config).serve_forever())
    except (DataDirError, OSError) as exc:  # OSError: a listen address is taken or not ours
        import structlog

        structlog.get_logger("kaflet.broker").error("cannot start", reason=str(exc))
        return 1
    return 0


def main(argv: list[str] | None = None, serve_by_default: bool = False) -> int:
    """`kaflet ...`; `python -m broker` passes serve_by_default (no arguments: serve)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv and not serve_by_default:
        sys.stdout.write(usage())
        return 0
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    if argv and argv[0] == "--version":
        from protocol.compiled import PATH

        sys.stdout.write(f"kaflet {version()} ({PATH})\n")  # PATH: the compiled fast path or pure Python
        return 0
    if not argv or argv[0].startswith("-"):
        argv = ["serve", *argv]
    command = next((c for c in COMMANDS if c.name == argv[0]), None)
    if command is None:
        sys.stderr.write(usage())
        sys.stderr.write(f"\nkaflet: unknown command {argv[0]!r} (commands: {', '.join(c.name for c in COMMANDS)})\n")
        return 2
    if command.name != "serve":
        gc.enable()  # `kaflet` turns it off for a broker's start-up only (broker/__main__.py)
    module, _, function = command.run.partition(":")
    entry = getattr(importlib.import_module(module), function)
    return int(entry(argv))
