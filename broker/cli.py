"""The `kaflet` command: one table of commands, and one grammar for all of them.

    kaflet COMMAND [ACTION] [ARGUMENTS] [OPTIONS]

What a command acts on is an argument (TOPIC, GROUP, TRANSACTIONAL_ID, DATA_DIR); everything else is
an option, and options go anywhere after the command, before or after the action (`kaflet groups
--bootstrap-server H:P lag G` is `kaflet groups lag G --bootstrap-server H:P`). The same thing has
the same spelling everywhere: `--bootstrap-server` (env KAFLET_BOOTSTRAP_SERVER) for the Kafka
cluster, `--control-address` (env KAFLET_CONTROL_ADDRESS) for a broker's control API.

`kaflet`, `kaflet -h` and `kaflet --help` list every command of COMMANDS with its actions;
`kaflet --version` prints the installed version. `python -m broker` with no arguments serves (as
it always did), and so does a first argument that is a flag (`kaflet --port 0` is `kaflet serve
--port 0`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.config import Config, ConfigError


@dataclass(frozen=True)
class Command:
    """A `kaflet NAME ...` command: `run` ("module:function") is imported only when it runs, and
    gets the arguments from the command name on (argv[0] == name); it returns the exit status.
    `parser` ("module:function") builds its argparse parser, for `kaflet --help` and the tests."""

    name: str
    summary: str  # the line of `kaflet --help`
    run: str
    parser: str | None = None  # every command has one: tests/test_cli_grammar.py holds it to the grammar


# Every command of `kaflet`, in the order `kaflet --help` shows them. A new command is one line here.
COMMANDS: list[Command] = [
    Command("serve", "run the broker (the default of `python -m broker`)", "broker.cli:serve_main", "broker.cli:serve_parser"),
    Command(
        "topics",
        "list, describe, create and delete topics, and change their configs",
        "broker.admin_cli.main:main",
        "broker.admin_cli.main:topics_parser",
    ),
    Command(
        "groups",
        "list, describe and delete groups; their lag; reset their offsets; rebalance a consumer group now",
        "broker.admin_cli.main:main",
        "broker.admin_cli.main:groups_parser",
    ),
    Command("transactions", "list and describe transactions", "broker.admin_cli.main:main", "broker.admin_cli.main:transactions_parser"),
    Command(
        "chaos",
        "break a running broker on purpose through its control API (serve --control)",
        "broker.cluster.cli:main",
        "broker.cluster.cli:parser",
    ),
    Command(
        "check",
        "CRC-check a stopped broker's data dir; --repair fixes what it finds",
        "broker.admin_cli.check:main",
        "broker.admin_cli.check:parser",
    ),
    Command(
        "certs",
        "make development TLS certificates: a CA, the broker's, clients' (mTLS)",
        "broker.security.cli.certs:main",
        "broker.security.cli.certs:parser",
    ),
    Command(
        "users",
        "add, list and delete SCRAM users (running broker or stopped data dir)",
        "broker.security.cli.users:main",
        "broker.security.cli.users:parser",
    ),
    Command(
        "acls",
        "list, add and remove ACLs (running broker or stopped data dir)",
        "broker.security.cli.acls:main",
        "broker.security.cli.acls:parser",
    ),
    Command(
        "configs",
        "read and delete a stopped broker's stored dynamic broker configs",
        "broker.security.cli.configs:main",
        "broker.security.cli.configs:parser",
    ),
    Command(
        "pipeline",
        "group analytics on Spark: lag history, rebalance timeline, audit, report",
        "pipeline.analytics.cli:kaflet_main",
        "pipeline.analytics.cli:kaflet_parser",
    ),
]


def _load(target: str) -> Any:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def command_parser(command: Command) -> argparse.ArgumentParser:
    if command.parser is None:  # a command added without one: its help is its own, and a test says so
        return argparse.ArgumentParser(prog=f"kaflet {command.name}", description=command.summary)
    return _load(command.parser)()  # type: ignore[no-any-return]


def actions_of(parser: argparse.ArgumentParser) -> list[str]:
    """The actions (sub-commands) of a command's parser, in order; [] for a command without."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def shared_options(
    parser: argparse.ArgumentParser,
    add_options: Callable[[argparse.ArgumentParser, Callable[[Any], Any]], None],
    add_actions: Callable[[Any, Callable[[argparse.ArgumentParser], None]], None],
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> None:
    """Give a command with actions options that go anywhere after the command: `add_options(p,
    default)` adds them to the command's parser with their defaults and to every action's parser
    with argparse.SUPPRESS, so that a value given before the action survives the action's parse."""
    add_options(parser, lambda value: value)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)

    def common(action_parser: argparse.ArgumentParser) -> None:
        add_options(action_parser, lambda value: argparse.SUPPRESS)

    add_actions(actions, common)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("kaflet")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def usage() -> str:
    """`kaflet --help`: every command with its one line and its actions."""
    width = max(len(c.name) for c in COMMANDS)
    lines = [
        "usage: kaflet COMMAND [ACTION] [ARGUMENTS] [OPTIONS]",
        "       kaflet [-h | --help | --version]",
        "",
        "kaflet: a lightweight Kafka-compatible broker.",
        "",
        "commands:",
    ]
    for c in COMMANDS:
        lines.append(f"  {c.name.ljust(width)}  {c.summary}")
        actions = actions_of(command_parser(c))
        if actions:
            lines.append(f"  {' ' * width}    {' | '.join(actions)}")
    lines += [
        "",
        "options:",
        "  -h, --help  show this list and exit",
        "  --version   print kaflet's version and which code path runs, and exit",
        "",
        "Options go anywhere after the command, before or after its action. What a command acts on is",
        "an argument (TOPIC, GROUP, TRANSACTIONAL_ID, DATA_DIR). --bootstrap-server (KAFLET_BOOTSTRAP_SERVER)",
        "names the Kafka cluster; --control-address (KAFLET_CONTROL_ADDRESS) a broker's control API.",
        "`kaflet COMMAND --help` shows a command's actions and options; `kaflet COMMAND ACTION --help` an action's.",
    ]
    return "\n".join(lines) + "\n"


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kaflet serve",
        usage="kaflet serve [OPTIONS]  (kaflet serve --help lists them)",
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
    return int(_load(command.run)(argv))
