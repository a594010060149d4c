"""`kaflet users`: SCRAM users (salted credentials, never passwords) of a running broker
(AlterUserScramCredentials / DescribeUserScramCredentials) or of a stopped broker's data dir.

    KAFLET_USER_PASSWORD=alice-secret kaflet users add alice --data-dir ./data
    kaflet users list --bootstrap-server 127.0.0.1:9092
    kaflet users delete alice --mechanism SCRAM-SHA-512 --data-dir ./data
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from broker.cli import shared_options
from broker.security.cli.target import add_target, admin, locked_data_dir, new_password, parse, run
from broker.security.sasl.scram import MIN_ITERATIONS, TYPES

BOTH = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kaflet users",
        description="Add, list and delete SCRAM users, of a running broker (--bootstrap-server) or a stopped one's data dir (--data-dir).",
        epilog="Options go anywhere after the command. A new user's password comes from KAFLET_USER_PASSWORD, "
        "--password-stdin or a prompt; never from the command line.",
    )
    shared_options(p, add_target, _actions)
    return p


def _actions(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    for name, text in (
        ("list", "list the SCRAM users and their mechanisms"),
        ("add", "add a user, or set a user's password (both mechanisms unless --mechanism)"),
        ("delete", "delete a user's credentials (both mechanisms unless --mechanism)"),
    ):
        s = sub.add_parser(name, help=text, description=text)
        common(s)
        if name != "list":
            s.add_argument("user", metavar="USER")
            s.add_argument("--mechanism", choices=(*BOTH, "both"), default="both")
        if name == "add":
            s.add_argument("--iterations", type=int, default=MIN_ITERATIONS, help=f"PBKDF2 iterations, {MIN_ITERATIONS}..16384")
            s.add_argument("--password-stdin", action="store_true", help="read the password from stdin")


def _mechs(args: argparse.Namespace) -> tuple[str, ...]:
    return BOTH if args.mechanism == "both" else (args.mechanism,)


def _main(args: argparse.Namespace) -> int:
    if args.data_dir:
        return _on_data_dir(args)
    return _on_broker(args)


def _on_data_dir(args: argparse.Namespace) -> int:
    from broker.security.scram_store import ScramStore

    with locked_data_dir(args.data_dir) as d:
        store = ScramStore(d)
        store.load()
        if args.action == "list":
            return _print(store.users(), args)
        password = new_password(args) if args.action == "add" else ""
        failed = False
        for mech in _mechs(args):
            results = (
                store.set_password(args.user, mech, password, args.iterations) if args.action == "add" else store.delete(args.user, mech)
            )
            for user, code, message in results:
                if code:
                    failed = True
                    sys.stderr.write(f"kaflet users: {user} {mech}: {code.name}: {message}\n")
        return 1 if failed else 0


def _on_broker(args: argparse.Namespace) -> int:
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

    client = admin(args)
    try:
        if args.action == "list":
            described = client.describe_user_scram_credentials()
            return _print(_users_of(described), args)
        password = new_password(args) if args.action == "add" else ""
        failed = False
        for mech in _mechs(args):  # one request per mechanism: Kafka refuses a user altered twice in one
            m = ScramMechanism(TYPES[mech])
            if args.action == "add":  # the client salts it: only the salted password travels
                alteration = UserScramCredentialUpsertion(args.user, m, password, iterations=args.iterations, salt=os.urandom(32))
            else:
                alteration = UserScramCredentialDeletion(args.user, m)
            result = client.alter_user_scram_credentials([alteration])
            for user, error in (result or {}).items():
                if error:
                    failed = True
                    sys.stderr.write(f"kaflet users: {user} {mech}: {error}\n")
        return 1 if failed else 0
    finally:
        client.close()


def _users_of(described: object) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    items = described.items() if isinstance(described, dict) else []
    for user, infos in items:
        if isinstance(infos, Exception) or infos is None:
            continue
        for info in infos:
            mech = getattr(info, "mechanism", None)
            name = getattr(mech, "name", str(mech)).replace("_", "-")
            out.setdefault(user, {})[name] = getattr(info, "iterations", 0)
    return out


def _print(users: dict[str, dict[str, int]], args: argparse.Namespace) -> int:
    if args.output == "json":
        sys.stdout.write(json.dumps(users, sort_keys=True) + "\n")
        return 0
    if not users:
        sys.stdout.write("no SCRAM users\n")
    for user, mechs in sorted(users.items()):
        sys.stdout.write(f"{user}  " + ", ".join(f"{m} (iterations {i})" for m, i in sorted(mechs.items())) + "\n")
    return 0


def main(argv: list[str]) -> int:
    """`kaflet users ...` (argv[0] is "users")."""
    return run(_main, parse(parser(), argv[1:]))
