"""Development certificates (`kaflet certs`): a CA, a broker certificate for given host names and
addresses, and client certificates for mTLS, made with the `cryptography` library.

`tls_settings(directory)` makes them (once) and returns the broker settings that switch TLS on,
so that a test suite needs one line: `Broker(listeners="SSL://127.0.0.1:0", **tls_settings(d))`.
Keys are EC P-256, written with mode 0600; nothing here is meant for production.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Files:
    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common_name: str, org: str = "kaflet development") -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _pem(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def make_ca(directory: Path, days: int = 3650) -> Files:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    directory.mkdir(parents=True, exist_ok=True)
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    name = _name("kaflet development CA")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = Files(directory / "ca.pem", directory / "ca.key", directory / "ca.pem", directory / "ca.key")
    _write(files.ca_cert, _pem(cert))
    _write(files.ca_key, _pem_key(key), private=True)
    return files


def _load_ca(directory: Path) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    if not (directory / "ca.pem").exists():
        make_ca(directory)
    cert = x509.load_pem_x509_certificate((directory / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
    return cert, key


def issue(directory: Path, name: str, common_name: str, hosts: list[str] | None = None, client: bool = False, days: int = 825) -> Files:
    """A certificate signed by the directory's CA (made if absent): `NAME.pem` and `NAME.key`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_cert, ca_key = _load_ca(directory)
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    )
    if hosts:
        names: list[Any] = []
        for h in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                names.append(x509.DNSName(h))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    files = Files(directory / "ca.pem", directory / "ca.key", directory / f"{name}.pem", directory / f"{name}.key")
    _write(files.cert, _pem(cert))
    _write(files.key, _pem_key(key), private=True)
    return files


DEFAULT_HOSTS = ["localhost", "127.0.0.1", "::1"]


def broker_cert(directory: Path, hosts: list[str] | None = None) -> Files:
    return issue(directory, "broker", (hosts or DEFAULT_HOSTS)[0], hosts or DEFAULT_HOSTS)


def client_cert(directory: Path, user: str) -> Files:
    return issue(directory, f"client-{user}", user, client=True)


def tls_settings(directory: str | os.PathLike[str], hosts: list[str] | None = None, client_auth: str = "none") -> dict[str, Any]:
    """Make (once) a CA and a broker certificate in `directory`; the Config settings using them."""
    d = Path(directory)
    if not (d / "broker.pem").exists():
        broker_cert(d, hosts)
    return {
        "ssl_cert": str(d / "broker.pem"),
        "ssl_key": str(d / "broker.key"),
        "ssl_ca": str(d / "ca.pem"),
        "ssl_client_auth": client_auth,
    }
