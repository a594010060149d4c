"""TLS for the SSL and SASL_SSL listeners: a server context from PEM files, and the peer's
certificate subject as Kafka's principal builder reads it.

- `--ssl-cert` (the broker's certificate chain, PEM), `--ssl-key` (its private key, PEM, with
  `--ssl-key-password` when encrypted), `--ssl-ca` (the CAs client certificates are checked
  against, PEM);
- `--ssl-client-auth none|requested|required` (Kafka's ssl.client.auth);
- `--ssl-enabled-protocols TLSv1.2,TLSv1.3` (Kafka's ssl.enabled.protocols).

An SSL listener's principal is the client certificate's subject, as RFC 2253 writes it
(`CN=alice,OU=dev,O=kaflet`), mapped by `--ssl-principal-mapping-rules`; without a client
certificate it is User:ANONYMOUS, as in Kafka.
"""

from __future__ import annotations

import ssl
from typing import Any

CLIENT_AUTH = ("none", "requested", "required")
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsError(ValueError):
    """The TLS settings cannot make a context; the message names the setting."""


def server_context(
    cert: str | None, key: str | None, password: str | None, ca: str | None, client_auth: str, protocols: str
) -> ssl.SSLContext:
    if not cert:
        raise TlsError("an SSL or SASL_SSL listener needs --ssl-cert (and --ssl-key unless the certificate file holds the key)")
    if client_auth not in CLIENT_AUTH:
        raise TlsError(f"--ssl-client-auth must be one of {', '.join(CLIENT_AUTH)}")
    versions = [v.strip() for v in protocols.split(",") if v.strip()]
    unknown = [v for v in versions if v not in TLS_VERSIONS]
    if unknown or not versions:
        raise TlsError(f"--ssl-enabled-protocols: {', '.join(unknown) or 'none given'}; kaflet serves {', '.join(TLS_VERSIONS)}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = min(TLS_VERSIONS[v] for v in versions)
    ctx.maximum_version = max(TLS_VERSIONS[v] for v in versions)
    try:
        ctx.load_cert_chain(cert, key or None, password=(lambda: password) if password else None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"cannot load --ssl-cert {cert} / --ssl-key {key}: {getattr(exc, 'strerror', None) or exc}") from None
    if client_auth != "none":
        if not ca:
            raise TlsError(f"--ssl-client-auth {client_auth} needs --ssl-ca (the CAs client certificates are checked against)")
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"cannot load --ssl-ca {ca}: {getattr(exc, 'strerror', None) or exc}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


# Attribute names as Java's X500Principal.getName() (RFC 2253) writes them.
_SHORT = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_dn(peercert: dict[str, Any]) -> str | None:
    """The subject of a verified peer certificate as RFC 2253 (last RDN first), or None."""
    subject = peercert.get("subject") if peercert else None
    if not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


TLS_RECORD = 16 * 1024


def coalesce(chunks: list[Any]) -> list[Any]:
    """uvloop's SSL transport encrypts each chunk of writelines() as TLS records of its own (an
    SSL_write each): an answer's small pieces (size, header, per-partition fields) are joined into
    record-sized runs first; pieces of a record's size or more go as they are."""
    out: list[Any] = []
    run: list[Any] = []
    size = 0
    for c in chunks:
        n = len(c)
        if n >= TLS_RECORD:
            if run:
                out.append(b"".join(run))
                run, size = [], 0
            out.append(c)
            continue
        run.append(c)
        size += n
        if size >= TLS_RECORD:
            out.append(b"".join(run))
            run, size = [], 0
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out
