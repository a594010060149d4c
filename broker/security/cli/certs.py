"""`kaflet certs`: a development CA, a broker certificate and client certificates (PEM).

    kaflet certs --dir ./certs                         # CA + broker certificate for localhost
    kaflet certs --dir ./certs --host kafka.test       # ... for other names or addresses
    kaflet certs --dir ./certs --client alice          # a client certificate (CN=alice) for mTLS

Then: `kaflet serve --listeners SSL://127.0.0.1:9093 --ssl-cert certs/broker.pem --ssl-key
certs/broker.key [--ssl-ca certs/ca.pem --ssl-client-auth required]`, and clients trust certs/ca.pem.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kaflet certs", description="Make development TLS certificates (a CA, the broker's, clients').")
    parser.add_argument("--dir", required=True, help="directory for the PEM files (made if absent; an existing CA is reused)")
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        help="host name or address the broker certificate is for (repeatable; default localhost, 127.0.0.1, ::1)",
    )
    parser.add_argument("--client", action="append", default=[], help="make a client certificate with this common name (repeatable)")
    parser.add_argument("--no-broker", action="store_true", help="make client certificates only")
    return parser


def main(argv: list[str]) -> int:
    """`kaflet certs ...` (argv[0] is "certs")."""
    args = parser().parse_args(argv[1:])
    try:
        from broker.security import certs
    except ImportError as exc:  # pragma: no cover - cryptography is a dependency
        sys.stderr.write(f"kaflet certs needs the cryptography package: {exc}\n")
        return 1
    directory = Path(args.dir)
    try:
        made = []
        if not args.no_broker:
            files = certs.broker_cert(directory, args.host or None)
            made += [files.ca_cert, files.cert, files.key]
        for user in args.client:
            files = certs.client_cert(directory, user)
            made += [files.cert, files.key]
    except OSError as exc:
        sys.stderr.write(f"kaflet certs: {exc}\n")
        return 1
    for path in dict.fromkeys(made):
        sys.stdout.write(f"{path}\n")
    return 0
