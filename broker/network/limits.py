"""Limits on what clients may hold: connections, request bytes in flight, time to send a frame.

Kafka's names and semantics (SocketServer's ConnectionQuotas and MemoryPool):
- `max.connections.per.ip`: a connection from an address that already holds that many is
  closed at once (Kafka's TooManyConnectionsException, logged "Rejected connection").
- `max.connections`: the broker-wide limit. Kafka's acceptor stops accepting until a slot frees
  (the connection waits in the listen backlog); asyncio accepts on its own, so kaflet accepts
  and closes at once, which a client sees the same way once its connection attempt times out:
  it retries later. Both refusals are counted (`kaflet_connections_refused_total{reason}`).
- `queued.max.request.bytes`: a pool of request bytes. A complete request frame takes its size
  from the pool until its handler has finished with it; while the pool is overdrawn no
  connection is read from (Kafka mutes every channel while its MemoryPool is out of memory;
  like Kafka's SimpleMemoryPool, the allocation that overdraws it is allowed). -1: unbounded.

Where Kafka is silent: `request.read.timeout.ms` (kaflet's own) bounds the time a started
request frame may take to arrive; a connection that trickles a frame slower is closed. Kafka
only has `connections.max.idle.ms`, which any byte resets, so a slow-loris connection holds a
socket and its buffer forever there. The default, 30 s, is the clients' own `request.timeout.ms`:
by then the client has given up on the request anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol


class Readable(Protocol):
    def pool_pause(self) -> None: ...
    def pool_resume(self) -> None: ...


REFUSED_PER_IP = "max_connections_per_ip"
REFUSED_TOTAL = "max_connections"
REFUSED_LISTENER = "listener_max_connections"


class ConnectionLimits:
    def __init__(self, max_connections: int, max_connections_per_ip: int, queued_max_request_bytes: int) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.pool_limit = queued_max_request_bytes if queued_max_request_bytes > 0 else 0
        self.open = 0
        self.per_ip: dict[str, int] = {}
        self.refused: dict[str, int] = {REFUSED_TOTAL: 0, REFUSED_PER_IP: 0}
        self.per_ip_overrides: dict[str, int] = {}  # max.connections.per.ip.overrides
        # Request bytes taken from the pool (complete frames queued or being handled).
        self.pool_used = 0
        self.pool_exhausted = False
        self._muted: set[Readable] = set()
        self.on_refused: Callable[[str, str], None] | None = None

    # -- connections ----------------------------------------------------------------------

    def admit(self, host: str, listener: Any = None) -> str | None:
        """Count a new connection from `host` (on `listener`, broker/security/listeners.py), or
        return why it is refused (and count that). `max.connections.per.ip.overrides` set a host's
        own limit; a listener's own `max.connections` applies too, and the exempt (inter-broker)
        listener is not bound by the broker-wide limit, as in Kafka."""
        reason = None
        per_ip = self.per_ip_overrides.get(host, self.max_connections_per_ip) if self.per_ip_overrides else self.max_connections_per_ip
        if self.per_ip.get(host, 0) >= per_ip:
            reason = REFUSED_PER_IP
        elif self.open >= self.max_connections and not (listener is not None and listener.exempt):
            reason = REFUSED_TOTAL
        elif listener is not None and listener.max_connections is not None and listener.open >= listener.max_connections:
            reason = REFUSED_LISTENER
        if listener is not None and reason is None:
            listener.open += 1
        if reason is not None:
            self.refused[reason] = self.refused.get(reason, 0) + 1
            return reason
        self.open += 1
        self.per_ip[host] = self.per_ip.get(host, 0) + 1
        return None

    def release(self, host: str, listener: Any = None) -> None:
        if listener is not None:
            listener.open -= 1
        self.open -= 1
        left = self.per_ip.get(host, 1) - 1
        if left > 0:
            self.per_ip[host] = left
        else:
            self.per_ip.pop(host, None)

    # -- the request-bytes pool -----------------------------------------------------------

    def take(self, size: int, connections: Iterable[Readable]) -> None:
        """A complete frame of `size` bytes now waits to be handled; when that overdraws the
        pool, every connection stops being read from."""
        self.pool_used += size
        if self.pool_used > self.pool_limit and not self.pool_exhausted:
            self.pool_exhausted = True
            for conn in connections:
                self.mute(conn)

    def give(self, size: int) -> None:
        """A frame's handler is done with it: reading resumes once the pool is no longer overdrawn."""
        self.pool_used -= size
        if self.pool_exhausted and self.pool_used <= self.pool_limit:
            self.pool_exhausted = False
            muted, self._muted = self._muted, set()
            for conn in muted:
                conn.pool_resume()

    def mute(self, conn: Readable) -> None:
        if conn not in self._muted:
            self._muted.add(conn)
            conn.pool_pause()

    def forget(self, conn: Readable) -> None:
        self._muted.discard(conn)
