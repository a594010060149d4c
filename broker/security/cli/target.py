"""What `kaflet users` and `kaflet acls` act on: a running broker over the Kafka protocol
(`--bootstrap-server`, with the client's security settings), or a stopped broker's data dir
(`--data-dir`, e.g. to seed users and ACLs before the first start; refused while a broker holds it).

Secrets never come from the command line, where `ps` would show them: the SASL password is read
from KAFLET_SASL_PASSWORD, a new user's password from KAFLET_USER_PASSWORD, --password-stdin or a
prompt.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

USAGE, FAILED, UNREACHABLE = 2, 1, 3


class CliError(Exception):
    def __init__(self, message: str, code: int = FAILED) -> None:
        super().__init__(message)
        self.code = code


def add_target(p: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    """The options of every `kaflet users|acls` action, taken anywhere after the command (see
    broker.cli.shared_options: `default` is identity on the command's parser, SUPPRESS on its
    actions')."""
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--bootstrap-server",
        default=default(None),
        metavar="HOST:PORT[,...]",
        help="a running broker [env KAFLET_BOOTSTRAP_SERVER; default 127.0.0.1:9092]",
    )
    where.add_argument("--data-dir", default=default(None), metavar="DATA_DIR", help="a stopped broker's data dir (it must not be running)")
    protocols = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    p.add_argument("--security-protocol", default=default("PLAINTEXT"), choices=protocols)
    p.add_argument("--sasl-mechanism", default=default("PLAIN"), choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    p.add_argument("--sasl-username", default=default(None), help="who connects (the password comes from KAFLET_SASL_PASSWORD)")
    p.add_argument("--ssl-ca", default=default(None), help="PEM CA file the broker's certificate is checked against")
    p.add_argument("--ssl-cert", default=default(None), help="PEM client certificate (mTLS)")
    p.add_argument("--ssl-key", default=default(None), help="PEM key of --ssl-cert")
    p.add_argument("--timeout", type=float, default=default(10.0), metavar="SECONDS", help="how long to wait for the broker (default 10)")
    add_output(p, default)


def add_output(p: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    p.add_argument("--output", choices=("text", "json"), default=default("text"), help="readable text (default) or JSON for scripts")
    p.add_argument("--json", action="store_true", default=default(False), help=argparse.SUPPRESS)  # the spelling of earlier versions


def parse(p: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse, and what argparse cannot check when options come before or after the action."""
    args = p.parse_args(argv)
    if args.json:
        sys.stderr.write(f"{p.prog}: --json is deprecated; use --output json\n")
        args.output = "json"
    if getattr(args, "bootstrap_server", None) and args.data_dir:
        p.error("argument --data-dir: not allowed with argument --bootstrap-server")
    return args


@contextlib.contextmanager
def locked_data_dir(path: str) -> Iterator[Path]:
    d = Path(path)
    if not (d / "meta.properties").is_file():
        raise CliError(f"{d} is not a kaflet data dir (no meta.properties)", USAGE)
    fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CliError(f"{d} is in use by a running broker: stop it, or use --bootstrap-server") from None
        yield d
    finally:
        os.close(fd)


def admin(args: argparse.Namespace) -> Any:
    import kafka.errors as errors
    from kafka import KafkaAdminClient

    bootstrap = args.bootstrap_server or os.environ.get("KAFLET_BOOTSTRAP_SERVER", "127.0.0.1:9092")
    kw: dict[str, Any] = {"security_protocol": args.security_protocol}
    if args.security_protocol.startswith("SASL"):
        password = os.environ.get("KAFLET_SASL_PASSWORD")
        if not args.sasl_username or password is None:
            raise CliError("SASL needs --sasl-username and the password in KAFLET_SASL_PASSWORD", USAGE)
        kw.update(sasl_mechanism=args.sasl_mechanism, sasl_plain_username=args.sasl_username, sasl_plain_password=password)
    if args.security_protocol.endswith("SSL"):
        kw.update(ssl_cafile=args.ssl_ca, ssl_certfile=args.ssl_cert, ssl_keyfile=args.ssl_key, ssl_check_hostname=False)
    timeout_ms = max(1, int(args.timeout * 1000))
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="kaflet-admin", request_timeout_ms=timeout_ms, **kw)
    except (errors.KafkaError, OSError) as exc:
        raise CliError(f"cannot reach the broker at {bootstrap}: {exc}", UNREACHABLE) from None


def new_password(args: argparse.Namespace) -> str:
    if getattr(args, "password_stdin", False):
        password = sys.stdin.readline().rstrip("\n")
    elif "KAFLET_USER_PASSWORD" in os.environ:
        password = os.environ["KAFLET_USER_PASSWORD"]
    elif sys.stdin.isatty():
        import getpass

        password = getpass.getpass("password: ")
    else:
        raise CliError("give the password on stdin with --password-stdin, or in KAFLET_USER_PASSWORD", USAGE)
    if not password:
        raise CliError("the password must not be empty", USAGE)
    return password


def run(main: Any, args: argparse.Namespace) -> int:
    try:
        return int(main(args) or 0)
    except CliError as exc:
        sys.stderr.write(f"kaflet: {exc}\n")
        return exc.code
