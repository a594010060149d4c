"""The security configs Kafka lets an admin change at run time, and the guard against a dynamic
value that would lock every client out (finding 1 of the security review).

Names (Kafka's DynamicBrokerConfig / DynamicListenerConfig):
- per broker only (refused at the cluster-default level "" with Kafka's message "Cannot update
  these configs at default cluster level, broker id must be specified"): `ssl.client.auth`,
  `ssl.enabled.protocols`, `sasl.enabled.mechanisms`, `sasl.kerberos.*`, `sasl.login.refresh.*`,
  ... and each of them with a listener prefix `listener.name.NAME.`;
- the SSL key material (`ssl.keystore.location`, `ssl.truststore.location`, ...) only with a
  listener prefix, as Kafka requires ("These security configs can be dynamically updated only
  per-listener using the listener prefix");
- `listener.name.NAME.max.connections`: a listener's own connection limit;
- `max.connections.per.ip.overrides`: `host:count,...`.

What takes effect: `ssl.client.auth`, `ssl.enabled.protocols` and the PEM key material on the TLS
context (new connections), `sasl.enabled.mechanisms` on a listener's next handshakes,
`listener.name.NAME.max.connections` and the per-ip overrides on the next connection. Kerberos
and login-refresh settings are accepted and stored (kaflet has no Kerberos), so admin tools that
set them (librdkafka's admin test sets `sasl.kerberos.min.time.before.relogin`) succeed as on Kafka.
Password-type configs (`ssl.key.password`, keystore and truststore passwords, `sasl.jaas.config`)
are refused: kaflet stores no secret in its data dir.

The lockout guard: a change whose result is `max.connections` 0, `max.connections.per.ip` 0 with
no per-ip override above 0, or `listener.name.NAME.max.connections` 0 on every listener, is refused
with INVALID_CONFIG unless a listener stays exempt: the inter-broker listener
(`--inter-broker-listener-name`), which Kafka too exempts from the broker-wide limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from broker.config.types import ConfigError, ConfigType, invalid

if TYPE_CHECKING:
    from broker.config import Config
    from broker.network.limits import ConnectionLimits
    from broker.security.listeners import Listener
    from broker.security.service import Security


class SecuredNode(Protocol):
    """What dynamic security configs change of a node: its listeners, security and connection limits."""

    config: Config
    listeners: list[Listener]
    security: Security
    limits: ConnectionLimits


LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]*)\.(.*)\Z")
SSL_MATERIAL = frozenset(
    {
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
        "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
    }
)  # fmt: skip
PER_BROKER = frozenset(
    {
        "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol", "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds", "principal.builder.class",
    }
)  # fmt: skip
PASSWORDS = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key", "sasl.jaas.config"})
TYPES: dict[str, ConfigType] = {
    "sasl.kerberos.min.time.before.relogin": ConfigType.LONG,
    "sasl.kerberos.ticket.renew.window.factor": ConfigType.DOUBLE,
    "sasl.kerberos.ticket.renew.jitter": ConfigType.DOUBLE,
    "sasl.login.refresh.window.factor": ConfigType.DOUBLE,
    "sasl.login.refresh.window.jitter": ConfigType.DOUBLE,
    "sasl.login.refresh.min.period.seconds": ConfigType.SHORT,
    "sasl.login.refresh.buffer.seconds": ConfigType.SHORT,
    "sasl.enabled.mechanisms": ConfigType.LIST,
    "sasl.kerberos.principal.to.local.rules": ConfigType.LIST,
    "ssl.enabled.protocols": ConfigType.LIST,
    "ssl.cipher.suites": ConfigType.LIST,
    "max.connections": ConfigType.INT,
    "connections.max.reauth.ms": ConfigType.LONG,
}
LISTENER_ONLY = frozenset({"max.connections", "connections.max.reauth.ms"})


def base_name(name: str) -> tuple[str | None, str]:
    m = LISTENER_PREFIX.match(name)
    return (m.group(1).upper(), m.group(2)) if m else (None, name)


def known(name: str) -> bool:
    listener, base = base_name(name)
    if listener is not None:
        return base in PER_BROKER or base in SSL_MATERIAL or base in LISTENER_ONLY
    return name in PER_BROKER or name in SSL_MATERIAL or name == "max.connections.per.ip.overrides"


def kind(name: str) -> ConfigType:
    base = base_name(name)[1]
    if base in PASSWORDS:
        return ConfigType.PASSWORD
    return TYPES.get(base, ConfigType.STRING)


def check_level(configs: Mapping[str, Any], per_broker: bool) -> None:
    """Kafka's validateConfigs for the security names: prefix rule, per-broker rule, no passwords."""
    unprefixed_ssl = sorted(n for n in configs if n in SSL_MATERIAL)
    if unprefixed_ssl:
        raise ConfigError(
            f"These security configs can be dynamically updated only per-listener using the listener prefix: [{', '.join(unprefixed_ssl)}]"
        )
    passwords = sorted(n for n in configs if known(n) and kind(n) is ConfigType.PASSWORD)
    if passwords:
        raise ConfigError(f"kaflet stores no secret in its data dir; set these at start-up instead: [{', '.join(passwords)}]")
    if not per_broker:
        per = sorted(n for n in configs if known(n) and n != "max.connections.per.ip.overrides" and base_name(n)[1] != "max.connections")
        if per:
            raise ConfigError(f"Cannot update these configs at default cluster level, broker id must be specified: [{', '.join(per)}]")


def validate_value(name: str, value: Any) -> None:
    base = base_name(name)[1]
    if base == "max.connections" and value < 0:
        raise invalid(name, value, "Value must be at least 0")
    if base == "ssl.client.auth" and value not in ("none", "requested", "required"):
        raise invalid(name, value, "String must be one of: required, requested, none")
    if base == "ssl.enabled.protocols" and any(v not in ("TLSv1.2", "TLSv1.3") for v in value):
        raise invalid(name, value, "kaflet serves TLSv1.2 and TLSv1.3")
    if base == "sasl.enabled.mechanisms":
        from broker.security.listeners import MECHANISMS

        if not value or any(v not in MECHANISMS for v in value):
            raise invalid(name, value, f"kaflet has the SASL mechanisms {', '.join(MECHANISMS)}")
    if base in ("ssl.keystore.location", "ssl.truststore.location", "ssl.keystore.certificate.chain"):
        import os

        if not os.path.isfile(value):
            raise invalid(name, value, "no such file")
    if name == "max.connections.per.ip.overrides":
        parse_overrides(value, name)


def parse_overrides(text: str, name: str = "max.connections.per.ip.overrides") -> dict[str, int]:
    out: dict[str, int] = {}
    for entry in [e.strip() for e in (text or "").split(",") if e.strip()]:
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise invalid(name, text, "Each entry must be host:count")
        out[host.strip()] = int(count)
    return out


def guard(broker: SecuredNode, effective: Mapping[str, str]) -> None:
    """Refuse a set of effective dynamic values that would refuse every connection."""
    listeners = broker.listeners
    exempt = {n.upper() for n in [broker.config.inter_broker_listener_name] if n}
    if exempt & {lst.name for lst in listeners}:
        return
    total = effective.get("max.connections")
    if total is not None and int(total) == 0:
        raise ConfigError(
            "Invalid value 0 for configuration max.connections: every connection would be refused; keep a listener exempt "
            "(kaflet serve --inter-broker-listener-name NAME) or use a limit above 0"
        )
    per_ip = effective.get("max.connections.per.ip")
    if per_ip is not None and int(per_ip) == 0:
        overrides = parse_overrides(effective.get("max.connections.per.ip.overrides", ""))
        if not any(v > 0 for v in overrides.values()):
            raise ConfigError(
                "Invalid value 0 for configuration max.connections.per.ip: every connection would be refused; "
                "let some host in with max.connections.per.ip.overrides or use a limit above 0"
            )
    limits = [effective.get(f"listener.name.{lst.name.lower()}.max.connections") for lst in listeners]
    if all(v is not None and int(v) == 0 for v in limits):
        raise ConfigError("every listener's max.connections would be 0: every connection would be refused")


def apply(broker: SecuredNode, effective: Mapping[str, str]) -> None:
    """Make the effective security values take effect (new connections and handshakes)."""
    security = broker.security
    config = broker.config
    from broker.security.listeners import mechanisms_of

    base_mechs = effective.get("sasl.enabled.mechanisms")
    static_mechs = mechanisms_of(config) if config.listeners else {}
    for lst in broker.listeners:
        prefix = f"listener.name.{lst.name.lower()}."
        mechs = effective.get(prefix + "sasl.enabled.mechanisms") or base_mechs
        if lst.sasl:
            if mechs:
                lst.mechanisms = tuple(m.strip().upper() for m in mechs.split(",") if m.strip())
            elif lst.name in static_mechs:
                lst.mechanisms = static_mechs[lst.name]
            else:
                lst.mechanisms = tuple(m.strip().upper() for m in config.sasl_enabled_mechanisms.split(",") if m.strip())
        raw = effective.get(prefix + "max.connections")
        lst.max_connections = int(raw) if raw is not None else None
    security.ensure_mechanisms(broker.listeners)
    overrides = parse_overrides(effective.get("max.connections.per.ip.overrides", ""))
    broker.limits.per_ip_overrides = overrides
    if security._tls is not None or any(lst.tls for lst in broker.listeners):
        tls: dict[str, str] = {}
        for name, value in effective.items():
            _listener, base = base_name(name)
            if base in (
                "ssl.client.auth",
                "ssl.enabled.protocols",
                "ssl.keystore.location",
                "ssl.truststore.location",
                "ssl.keystore.certificate.chain",
            ):
                tls[base] = value
        security.reconfigure_tls(tls)
