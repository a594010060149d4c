"""Listeners as Kafka names them: `NAME://host:port`, each with a security protocol.

`--listeners PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093` binds one socket per
listener; `--listener-security-protocol-map INTERNAL:SASL_PLAINTEXT` names custom listeners'
protocols (the default maps each protocol's own name to itself, as Kafka's does);
`--advertised-listeners` says what Metadata tells clients, per listener name (default: the
listener's own address, a wildcard host advertised as 127.0.0.1). A client is always told the
addresses of the listener it came in on, as Kafka's Metadata does.

Without `--listeners` there is one PLAINTEXT listener on --host/--port, as before.

With `--brokers N` node i (0-based) listens on every listener's port + i * (number of
listeners), so `PLAINTEXT://:9092,SASL_SSL://:9093` with 3 brokers gives node 0 9092/9093,
node 1 9094/9095, node 2 9096/9097 (port 0: free ports everywhere).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import structlog

if TYPE_CHECKING:
    import asyncio

    from broker.config import Config
    from broker.security.service import Security

log = structlog.get_logger("kaflet.broker")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_WILDCARDS = ("", "0.0.0.0", "::")
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)$")


class ListeningNode(Protocol):
    """What binding a node's listeners uses of it: the services its connections get (a
    ConnectionOwner), its listeners and security, and where the bound servers and port go."""

    config: Config
    listeners: list[Listener]
    security: Security
    _servers: list[asyncio.base_events.Server]
    bound_port: int
    bound_hosts: list[str]


class ListenerError(ValueError):
    """A listener setting is malformed; the message names the setting."""


@dataclass
class Listener:
    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    mechanisms: tuple[str, ...] = ()
    bound_port: int = 0
    bound_hosts: list[str] = field(default_factory=list)
    # listener.name.NAME.max.connections (dynamic), and the connections open on this listener.
    max_connections: int | None = None
    open: int = 0
    exempt: bool = False  # the inter-broker listener: not bound by the broker-wide max.connections

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def advertised(self) -> tuple[str, int]:
        host = self.advertised_host or ("127.0.0.1" if self.host in _WILDCARDS else self.host)
        return host, self.advertised_port or self.bound_port or self.port

    def describe(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.bound_port or self.port}"


def _split(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def parse_address(entry: str, setting: str) -> tuple[str, str, int]:
    m = _LISTENER.match(entry.strip())
    if m is None:
        raise ListenerError(f"{setting}: {entry!r} is not NAME://host:port")
    name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
    if not 0 <= port <= 65535:
        raise ListenerError(f"{setting}: port {port} of {name} is outside 0..65535")
    return name, host, port


def protocol_map(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in _split(text or DEFAULT_PROTOCOL_MAP):
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ListenerError(f"--listener-security-protocol-map: {entry!r} is not NAME:PROTOCOL (protocols: {', '.join(PROTOCOLS)})")
        if name in out:
            raise ListenerError(f"--listener-security-protocol-map: {name} is mapped twice")
        out[name] = protocol
    return out


def mechanisms_of(config: Config) -> dict[str, tuple[str, ...]]:
    """Per-listener SASL mechanisms (`NAME=MECH,MECH;NAME2=MECH`), default --sasl-enabled-mechanisms."""
    out: dict[str, tuple[str, ...]] = {}
    for part in (config.listener_sasl_enabled_mechanisms or "").split(";"):
        if not part.strip():
            continue
        name, sep, mechs = part.partition("=")
        if not sep:
            raise ListenerError(f"--listener-sasl-enabled-mechanisms: {part!r} is not NAME=MECHANISM,...")
        out[name.strip().upper()] = _mechanisms(mechs, "--listener-sasl-enabled-mechanisms")
    return out


def _mechanisms(text: str, setting: str) -> tuple[str, ...]:
    mechs = tuple(m.upper() for m in _split(text))
    unknown = [m for m in mechs if m not in MECHANISMS]
    if unknown:
        raise ListenerError(f"{setting}: unsupported SASL mechanism(s) {', '.join(unknown)} (kaflet has {', '.join(MECHANISMS)})")
    if not mechs:
        raise ListenerError(f"{setting}: at least one SASL mechanism is needed")
    return mechs


def parse_listeners(config: Config) -> list[Listener]:
    """The listeners of `config`, checked; one PLAINTEXT listener on --host/--port without --listeners."""
    if not config.listeners:
        if config.advertised_listeners:
            raise ListenerError("--advertised-listeners needs --listeners")
        return [Listener("PLAINTEXT", "PLAINTEXT", config.host, config.port, config.advertised_host, config.advertised_port)]
    protocols = protocol_map(config.listener_security_protocol_map)
    per_listener = mechanisms_of(config)
    default_mechs = _mechanisms(config.sasl_enabled_mechanisms, "--sasl-enabled-mechanisms")
    listeners: list[Listener] = []
    for entry in _split(config.listeners):
        name, host, port = parse_address(entry, "--listeners")
        if any(lst.name == name for lst in listeners):
            raise ListenerError(f"--listeners: {name} is listed twice")
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerError(f"--listeners: no security protocol for listener {name} (add it to --listener-security-protocol-map)")
        mechs = per_listener.get(name, default_mechs) if protocol.startswith("SASL") else ()
        listeners.append(Listener(name, protocol, host, port, mechanisms=mechs))
    ports = [lst.port for lst in listeners if lst.port]
    if len(ports) != len(set(ports)):
        raise ListenerError("--listeners: two listeners have the same port")
    unknown = set(per_listener) - {lst.name for lst in listeners}
    if unknown:
        raise ListenerError(f"--listener-sasl-enabled-mechanisms names listeners that --listeners does not: {', '.join(sorted(unknown))}")
    exempt = (config.inter_broker_listener_name or "").upper()
    if exempt and exempt not in {lst.name for lst in listeners}:
        raise ListenerError(f"--inter-broker-listener-name {exempt} is not one of --listeners")
    for lst in listeners:
        lst.exempt = lst.name == exempt
    for entry in _split(config.advertised_listeners):
        name, host, port = parse_address(entry, "--advertised-listeners")
        match = next((lst for lst in listeners if lst.name == name), None)
        if match is None:
            raise ListenerError(f"--advertised-listeners: {name} is not one of --listeners")
        match.advertised_host, match.advertised_port = host or None, port or None
    return listeners


def for_node(config: Config, index: int) -> dict[str, Any]:
    """The listener settings of node `index` of a cluster: every port shifted by index * listeners."""
    if not config.listeners or index == 0:
        return {}
    entries = _split(config.listeners)
    step = len(entries) * index

    def shift(text: str | None, setting: str) -> str | None:
        if not text:
            return text
        out = []
        for entry in _split(text):
            name, host, port = parse_address(entry, setting)
            host = f"[{host}]" if ":" in host else host
            out.append(f"{name}://{host}:{port + step if port else 0}")
        return ",".join(out)

    return {
        "listeners": shift(config.listeners, "--listeners"),
        "advertised_listeners": shift(config.advertised_listeners, "--advertised-listeners"),
    }


def first_plaintext(listeners: list[Listener]) -> Listener:
    return listeners[0]


async def bind(broker: ListeningNode, port: int | None = None) -> None:
    """Bind every listener's sockets (not serving yet). `port` re-binds the first listener's
    bound port after chaos took the broker down (the others keep theirs)."""
    from broker.network.connection import KafkaConnection

    loop = asyncio.get_running_loop()
    listeners = broker.listeners
    security = broker.security
    timeout = max(1.0, broker.config.request_read_timeout_ms / 1000) if broker.config.request_read_timeout_ms else 60.0
    for index, listener in enumerate(listeners):
        context: ssl.SSLContext | None = security.tls_context() if listener.tls and security is not None else None
        wanted = listener.bound_port if (port is not None and listener.bound_port) else listener.port
        hosts = ["127.0.0.1", "::1"] if listener.host == "localhost" else [listener.host]
        listener.bound_hosts = []
        for i, h in enumerate(hosts):
            kwargs: dict[str, Any] = {}
            if context is not None:
                kwargs = {"ssl": context, "ssl_handshake_timeout": timeout}
            try:
                server = await loop.create_server(
                    lambda lst=listener: KafkaConnection(broker, lst),
                    host=h or None,
                    port=wanted,
                    reuse_address=True,
                    backlog=1024,
                    start_serving=False,
                    **kwargs,
                )
            except OSError as exc:
                if i == 0:
                    raise _bind_error(exc, broker.config, listener, h, wanted) from exc
                log.warning("cannot listen on second loopback address", host=h, error=str(exc))
                continue
            if i == 0:
                wanted = server.sockets[0].getsockname()[1]
            broker._servers.append(server)
            listener.bound_hosts.append(h)
        listener.bound_port = wanted
        if index == 0:
            broker.bound_port = wanted
            broker.bound_hosts = list(listener.bound_hosts)


def _bind_error(exc: OSError, config: Config, listener: Listener, host: str, port: int) -> OSError:
    """The user's sentence for a listener that cannot bind: its role, and the flag that moves it."""
    from broker.network.bind import bind_error

    if not config.listeners:  # the one listener of --host/--port
        return bind_error(exc, "the Kafka listener", host, port, "--port")
    return bind_error(
        exc,
        f"the listener {listener.name}",
        host,
        port,
        "--listeners",
        choose=f"give {listener.name} another port in --listeners ({listener.name}://HOST:0 for a free one)",
    )


def with_bound(listeners: list[Listener]) -> list[Listener]:
    return [replace(lst) for lst in listeners]


def advertised_for(node: Any, name: str | None) -> tuple[str, int]:
    """(host, port) a client that came in on listener `name` is told for `node` (Kafka's Metadata
    answers with the addresses of the listener the request arrived on)."""
    listeners = node.listeners
    if name is not None and len(listeners) > 1:
        for lst in listeners:
            if lst.name == name:
                return lst.advertised
    return listeners[0].advertised


def listener_name(ctx: Any) -> str | None:
    lst = ctx.conn.listener
    return None if lst is None else lst.name


def address(broker: Any, name: str) -> str:
    """host:port a client connects to for listener `name` of a started broker (its advertised address)."""
    for lst in broker.listeners:
        if lst.name == name.upper():
            host, port = lst.advertised
            return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    raise KeyError(f"no listener {name} (listeners: {', '.join(lst.name for lst in broker.listeners)})")
