"""TLS listeners (issue 27): PEM files made by `kaflet certs`, TLS 1.2 and 1.3, client
authentication none/requested/required, mTLS principals with ssl.principal.mapping.rules, and TLS
garbage or stalled handshakes closed while other clients are served."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from broker import Broker, Config
from broker.security.certs import client_cert, tls_settings
from broker.security.principal import SslPrincipalMapper
from tests.support.waiting import wait_until


def client_context(certs: Path, user: str | None = None, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    if user is not None:
        files = client_cert(certs, user)
        ctx.load_cert_chain(str(files.cert), str(files.key))
    return ctx


def api_versions_over(ctx: ssl.SSLContext, address: tuple[str, int]) -> tuple[str, bytes]:
    """One ApiVersions v0 over TLS: (negotiated protocol, response frame)."""
    with socket.create_connection(address, timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(bytes.fromhex("0000000a00120000000000070000"))
        size = int.from_bytes(s.recv(4), "big")
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        return s.version() or "", body


def address(b: Any) -> tuple[str, int]:
    return "127.0.0.1", b.broker.listeners[0].bound_port


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls_one_line_and_both_versions(tmp_path: Path, version: ssl.TLSVersion) -> None:
    config = Config(
        port=0,
        data_dir=str(tmp_path / "d"),
        metrics=False,
        offsets_partitions=3,
        listeners="SSL://127.0.0.1:0",
        **tls_settings(tmp_path / "certs"),
    )
    with Broker.in_thread(config) as b:
        negotiated, frame = api_versions_over(client_context(tmp_path / "certs", version=version), address(b))
        assert negotiated == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
        assert frame[:4] == bytes.fromhex("00000007") and frame[4:6] == b"\0\0"


def test_tls13_only_refuses_tls12(tmp_path: Path) -> None:
    config = Config(
        port=0, data_dir=str(tmp_path / "d"), metrics=False, offsets_partitions=3, listeners="SSL://127.0.0.1:0",
        ssl_enabled_protocols="TLSv1.3", **tls_settings(tmp_path / "certs"),
    )  # fmt: skip
    with Broker.in_thread(config) as b:
        with pytest.raises(ssl.SSLError):
            api_versions_over(client_context(tmp_path / "certs", version=ssl.TLSVersion.TLSv1_2), address(b))
        assert api_versions_over(client_context(tmp_path / "certs"), address(b))[0] == "TLSv1.3"


@pytest.mark.parametrize("client_auth", ["none", "requested", "required"])
def test_client_auth_and_mtls_principals(tmp_path: Path, client_auth: str) -> None:
    certs = tmp_path / "certs"
    config = Config(
        port=0, data_dir=str(tmp_path / "d"), metrics=False, offsets_partitions=3, listeners="SSL://127.0.0.1:0",
        ssl_principal_mapping_rules="RULE:^CN=([a-z]+),O=.*$/$1/U,DEFAULT", **tls_settings(certs, client_auth=client_auth),
    )  # fmt: skip
    with Broker.in_thread(config) as b:
        # Without a client certificate.
        if client_auth == "required":  # refused: an alert during the handshake, or (TLS 1.3) a close before any answer
            try:
                answered = api_versions_over(client_context(certs), address(b))[1]
            except (ssl.SSLError, ConnectionError, OSError):
                answered = b""
            assert answered == b""
        else:
            api_versions_over(client_context(certs), address(b))
        # With one: its subject is the principal (mapped), except with client auth none.
        ctx = client_context(certs, "alice")
        with socket.create_connection(address(b), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(bytes.fromhex("0000000a001200000000000700000"[:-1]))
            s.recv(4)
            principals = wait_until(lambda: {str(c.principal) for c in b.broker.connections} or None, message="the connection")
        assert principals == {"User:ANONYMOUS"} if client_auth == "none" else {"User:ALICE"}


def test_principal_mapping_rules_as_kafka() -> None:
    dn = "CN=kafka-client,OU=ops,O=example,C=US"
    assert SslPrincipalMapper("DEFAULT").name(dn) == dn
    assert SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L,DEFAULT").name(dn) == "kafka-client@ops"
    assert SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/U").name(dn) == "KAFKA-CLIENT"
    assert SslPrincipalMapper("RULE:^OU=nomatch$/x/, DEFAULT").name(dn) == dn
    with pytest.raises(ValueError):
        SslPrincipalMapper("RULE:^OU=nomatch$/x/").name(dn)


def test_tls_garbage_and_stalled_handshakes_are_closed_while_others_are_served(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    config = Config(
        port=0, data_dir=str(tmp_path / "d"), metrics=False, offsets_partitions=3, listeners="SSL://127.0.0.1:0",
        request_read_timeout_ms=1000, **tls_settings(certs),
    )  # fmt: skip
    with Broker.in_thread(config) as b:
        garbage = socket.create_connection(address(b), timeout=10)
        garbage.sendall(b"\x16\x03\x01\x00\x05hello, this is not TLS" * 10)
        stalled = socket.create_connection(address(b), timeout=10)  # says nothing at all
        started = time.monotonic()
        assert api_versions_over(client_context(certs), address(b))[1][4:6] == b"\0\0"  # served meanwhile
        for s in (garbage, stalled):
            s.settimeout(10)
            try:
                while s.recv(4096):
                    pass
            except (ConnectionResetError, OSError):
                pass
            s.close()
        assert time.monotonic() - started < 8  # the handshake timeout is --request-read-timeout-ms


def test_kaflet_certs_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "broker", "certs", "--dir", str(tmp_path), "--host", "kafka.test", "--client", "bob"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert {p.name for p in tmp_path.iterdir()} >= {"ca.pem", "ca.key", "broker.pem", "broker.key", "client-bob.pem", "client-bob.key"}
    assert (tmp_path / "broker.key").stat().st_mode & 0o077 == 0  # keys are the owner's only
    from cryptography import x509

    cert = x509.load_pem_x509_certificate((tmp_path / "broker.pem").read_bytes())
    assert "kafka.test" in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
