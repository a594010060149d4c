"""A minimal HTTP/1.1 server on the broker's event loop: GET and HEAD, one request per connection.

Why not prometheus_client's `start_http_server`: it serves from a thread, and its collectors
would then iterate the coordinator's and the log manager's dicts while the event loop changes
them ("dictionary changed size during iteration", or torn values such as a lag computed from a
high watermark and an offset of different moments). Here a scrape runs on the loop, between
two requests, and sees one consistent state; the price is that the loop pauses while a scrape
is rendered (milliseconds; see bench `metrics`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("kaflet.metrics")

Response = tuple[int, str, bytes]
Handler = Callable[[str], Response]

MAX_HEAD = 16 * 1024
IDLE_TIMEOUT_S = 10.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class HttpConnection(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.done = False
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.timer = asyncio.get_running_loop().call_later(IDLE_TIMEOUT_S, transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        if self.done:
            return
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD:
                self._send(431, "text/plain; charset=utf-8", b"request head too large\n", head_only=False)
            return
        line = bytes(self.buf[: self.buf.find(b"\r\n")]).decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self._send(400, "text/plain; charset=utf-8", b"bad request line\n", head_only=False)
            return
        method, target, _version = parts
        if method not in ("GET", "HEAD"):
            self._send(405, "text/plain; charset=utf-8", b"only GET and HEAD\n", head_only=False, extra="Allow: GET, HEAD\r\n")
            return
        try:
            status, content_type, body = self.handler(target.split("?", 1)[0])
        except Exception:
            log.error("metrics endpoint failed", path=target, exc_info=True)
            status, content_type, body = 500, "text/plain; charset=utf-8", b"internal error\n"
        self._send(status, content_type, body, head_only=method == "HEAD")

    def _send(self, status: int, content_type: str, body: bytes, head_only: bool, extra: str = "") -> None:
        self.done = True
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n"
        ).encode("latin-1")
        transport.writelines((head, b"" if head_only else body))
        transport.close()


async def serve(host: str, port: int, handler: Handler) -> Any:
    """Listen on host:port (0: a free port); returns the asyncio server."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: HttpConnection(handler), host=host or None, port=port, reuse_address=True)
