"""What a handler knows about the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from broker.network.connection import KafkaConnection
    from broker.server import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    conn: KafkaConnection
    api_key: int
    api_name: str
    api_version: int
    correlation_id: int
    client_id: str | None
    frame: bytes = b""  # the whole request frame (after the size)
    body_offset: int = 0  # where the request body starts in `frame`
    # Error codes (other than NONE) of an answer the handler encoded itself, for the request
    # metrics; response objects are read directly (broker/metrics/errors.py).
    errors: list[int] | None = None

    @property
    def raw_body(self) -> memoryview:
        return memoryview(self.frame)[self.body_offset :]

    @property
    def peer(self) -> str:
        return self.conn.peer_text

    @property
    def client_host(self) -> str:
        """The peer address as Java's `InetAddress.toString()` renders it ("/127.0.0.1")."""
        return "/" + self.conn.peer_host

    @property
    def log(self) -> Any:
        """A logger bound to this request (built lazily: most requests never log)."""
        return structlog.get_logger("kaflet.request").bind(
            peer=self.peer,
            client_id=self.client_id,
            api=self.api_name,
            api_version=self.api_version,
            correlation_id=self.correlation_id,
        )
