"""`kafka.*` options in the Java client's names, as Spark jobs written for `format("kafka")` carry them,
turned into librdkafka settings for the kaflet source's clients.

A name both clients share (`security.protocol`, `sasl.mechanism`, `ssl.keystore.location`,
`fetch.min.bytes`, `client.id`, ...) passes as it is. A Java name librdkafka spells differently is
translated (`fetch.max.wait.ms` -> `fetch.wait.max.ms`, `receive.buffer.bytes` ->
`socket.receive.buffer.bytes`, `request.timeout.ms` -> `socket.timeout.ms` for a consumer,
`sasl.jaas.config` of the PLAIN and SCRAM login modules -> `sasl.username` / `sasl.password`, PEM
trust and key stores -> `ssl.ca.*` / `ssl.certificate.*` / `ssl.key.*`). A Java setting librdkafka
cannot take is refused with what to set instead (a JKS or PKCS#12 trust store: export its CA
certificate to PEM; Kerberos and OAUTHBEARER JAAS: librdkafka's own `sasl.kerberos.*` /
`sasl.oauthbearer.*`). Anything else goes to librdkafka unchanged, which refuses an unknown name.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.source.options import OptionError

# Java name -> librdkafka name, where only the name differs.
RENAMED: dict[str, str] = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "max.request.size": "message.max.bytes",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.truststore.certificates": "ssl.ca.pem",
}
# Java settings with no librdkafka counterpart: refused, saying what to do instead.
REFUSED: dict[str, str] = {
    "max.poll.records": "librdkafka has no such limit; the source reads each offset range to its end",
    "max.poll.interval.ms": "the source's consumers never join a group; nothing to set",
    "heartbeat.interval.ms": "the source's consumers never join a group; nothing to set",
    "partition.assignment.strategy": "the source's consumers never join a group; nothing to set",
    "ssl.enabled.protocols": "librdkafka negotiates TLS 1.2 or 1.3 with OpenSSL; nothing to set",
    "ssl.keymanager.algorithm": "librdkafka uses OpenSSL; nothing to set",
    "ssl.trustmanager.algorithm": "librdkafka uses OpenSSL; nothing to set",
    "ssl.secure.random.implementation": "librdkafka uses OpenSSL; nothing to set",
    "ssl.provider": "librdkafka uses OpenSSL (see 'kafka.ssl.engine.location' for an engine)",
    "sasl.login.callback.handler.class": "Java classes cannot be loaded; use librdkafka's sasl.* settings",
    "sasl.client.callback.handler.class": "Java classes cannot be loaded; use librdkafka's sasl.* settings",
    "metric.reporters": "Java classes cannot be loaded",
    "buffer.memory": "use 'kafka.queue.buffering.max.kbytes' (librdkafka's, in KiB)",
}
_JAAS = re.compile(r"^\s*([\w.$]+)\s+(required|optional|requisite|sufficient)\s*(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _jaas(value: str, what: str) -> dict[str, str]:
    m = _JAAS.match(value)
    if not m:
        raise OptionError(f"kaflet {what}: option 'kafka.sasl.jaas.config' is not a JAAS login module line: {value[:80]!r}")
    module, _, rest = m.groups()
    if module not in (PLAIN_MODULE, SCRAM_MODULE):
        raise OptionError(
            f"kaflet {what}: option 'kafka.sasl.jaas.config' names {module}, which librdkafka cannot run: set librdkafka's own "
            "settings instead (GSSAPI: kafka.sasl.kerberos.service.name, kafka.sasl.kerberos.keytab, kafka.sasl.kerberos.principal; "
            "OAUTHBEARER: kafka.sasl.oauthbearer.method=oidc, kafka.sasl.oauthbearer.client.id, ...)"
        )
    opts = {
        o.group(1): o.group(2).replace('\\"', '"').replace("\\\\", "\\") if o.group(2) is not None else o.group(3)
        for o in _JAAS_OPTION.finditer(rest)
    }
    if "username" not in opts or "password" not in opts:
        raise OptionError(f"kaflet {what}: option 'kafka.sasl.jaas.config' must give username and password for {module.rsplit('.', 1)[1]}")
    return {"sasl.username": opts["username"], "sasl.password": opts["password"]}


def _store_kind(path: str) -> str:
    """'jks', 'pkcs12' or 'pem', from the file's first bytes (Java's keytool writes PKCS#12 even
    into a file named .jks, and Java reads it whatever `type` says)."""
    try:
        head = Path(path).read_bytes()[:16]
    except OSError as exc:
        raise OptionError(f"cannot read the store {path}: {exc.strerror}") from None
    if head[:4] == b"\xfe\xed\xfe\xed":
        return "jks"
    if head[:1] == b"\x30":
        return "pkcs12"
    return "pem"


def librdkafka_config(kafka: dict[str, str], what: str, role: str = "consumer") -> dict[str, str]:
    """Translate `kafka` (keys without the `kafka.` prefix, lowercased as Spark hands them) into
    librdkafka settings for a client of `role` ('consumer' or 'producer'); raise OptionError
    naming the option for what cannot be translated."""
    out: dict[str, str] = {}
    trust_type = kafka.get("ssl.truststore.type", "").strip().upper()
    key_type = kafka.get("ssl.keystore.type", "").strip().upper()
    for key, value in kafka.items():
        if key in REFUSED:
            raise OptionError(f"kaflet {what}: Kafka option '{key}' has no librdkafka counterpart: {REFUSED[key]}")
        if key in ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password"):
            continue  # used with the store's location below
        if key == "sasl.jaas.config":
            out.update(_jaas(value, what))
        elif key == "ssl.truststore.location":
            kind = "pem" if trust_type == "PEM" else _store_kind(value)
            if kind != "pem":
                raise OptionError(
                    f"kaflet {what}: option 'kafka.ssl.truststore.location' is a {kind.upper()} store, which librdkafka cannot read: "
                    f"export its CA certificate (keytool -exportcert -rfc -keystore {value} -alias ALIAS -file ca.pem) and set "
                    "'kafka.ssl.ca.location' to the PEM file"
                )
            out["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            kind = "pem" if key_type == "PEM" else _store_kind(value)
            if kind == "jks":
                raise OptionError(
                    f"kaflet {what}: option 'kafka.ssl.keystore.location' is a JKS store, which librdkafka cannot read: convert it "
                    f"(keytool -importkeystore -srckeystore {value} -destkeystore store.p12 -deststoretype PKCS12) and point "
                    "'kafka.ssl.keystore.location' at the PKCS#12 file"
                )
            if kind == "pem":  # a PEM file with the certificate chain and the private key
                out["ssl.certificate.location"] = value
                out["ssl.key.location"] = value
            else:
                out["ssl.keystore.location"] = value
        elif key == "ssl.keystore.password":
            if key_type == "PEM":
                out["ssl.key.password"] = value
            else:
                out["ssl.keystore.password"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value.strip().lower() or "none"  # Java's empty value turns it off
        elif key == "request.timeout.ms" and role == "consumer":
            out["socket.timeout.ms"] = value
        elif key == "delivery.timeout.ms":
            out["message.timeout.ms"] = value
        elif key in ("security.protocol", "sasl.mechanism"):
            out[key] = value.strip()
        elif key in RENAMED:
            out[RENAMED[key]] = value
        else:
            out[key] = value
    if "ssl.truststore.password" in kafka and "ssl.truststore.location" not in kafka:
        raise OptionError(f"kaflet {what}: option 'kafka.ssl.truststore.password' without 'kafka.ssl.truststore.location'")
    return out
