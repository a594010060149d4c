"""A minimal HTTP/1.1 server on the broker's event loop: GET and HEAD, one request per connection.

With a control handler (`kaflet serve --control`, broker/cluster/control.py) it also takes
POST and DELETE under /control/, with a JSON body of at most MAX_BODY bytes (Content-Length).

Why not prometheus_client's `start_http_server`: it serves from a thread, and its collectors
would then iterate the coordinator's and the log manager's dicts while the event loop changes
them ("dictionary changed size during iteration", or torn values such as a lag computed from a
high watermark and an offset of different moments). Here a scrape runs on the loop, between
two requests, and sees one consistent state; the price is that the loop pauses while a scrape
is rendered (milliseconds; see bench `metrics`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger("kaflet.metrics")

Response = tuple[int, str, bytes]
Handler = Callable[[str], Response]
# (method, path, body) -> a coroutine giving the response (the chaos control API).
ControlHandler = Callable[[str, str, bytes], Awaitable[Response]]
CONTROL_PREFIX = "/control"
CONTROL_OFF = (
    b'{"error": "the control API is off on this broker: start it with `kaflet serve --control` (or KAFLET_CONTROL=true)", "control": false}'
)
MAX_BODY = 64 * 1024

MAX_HEAD = 16 * 1024
IDLE_TIMEOUT_S = 10.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Guard:
    """What keeps the endpoint from being driven or starved from outside (findings 2 and 3 of the
    security review, broker/security/control_guard.py has the request checks): at most
    `max_connections` open at once (more are closed at once, so sockets held on this port can never
    exhaust the process's descriptors and starve the Kafka listener), and the control checks."""

    def __init__(
        self, max_connections: int = 64, control_check: Callable[[str, str, dict[str, list[str]]], Response | None] | None = None
    ) -> None:
        self.max_connections = max_connections
        self.open = 0
        self.refused = 0
        self.control_check = control_check


class HttpConnection(asyncio.Protocol):
    def __init__(self, handler: Handler, control: ControlHandler | None = None, guard: Guard | None = None) -> None:
        self.handler = handler
        self.control = control
        self.guard = guard or Guard()
        self.counted = False
        self.task: asyncio.Task[None] | None = None
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.done = False
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        guard = self.guard
        if guard.open >= guard.max_connections:
            guard.refused += 1
            self.done = True
            transport.abort()  # at once, holding nothing
            return
        guard.open += 1
        self.counted = True
        self.timer = asyncio.get_running_loop().call_later(IDLE_TIMEOUT_S, transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted:
            self.counted = False
            self.guard.open -= 1
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None

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
        path = target.split("?", 1)[0]
        if (path == CONTROL_PREFIX or path.startswith(CONTROL_PREFIX + "/")) and method != "HEAD":
            if self.control is None:  # say so, rather than a bare 404: `kaflet chaos` prints it
                self._send(404, "application/json", CONTROL_OFF, head_only=False)
            else:
                self._control(method, path, end)
            return
        if method not in ("GET", "HEAD"):
            self._send(405, "text/plain; charset=utf-8", b"only GET and HEAD\n", head_only=False, extra="Allow: GET, HEAD\r\n")
            return
        try:
            status, content_type, body = self.handler(path)
        except Exception:
            log.error("metrics endpoint failed", path=target, exc_info=True)
            status, content_type, body = 500, "text/plain; charset=utf-8", b"internal error\n"
        self._send(status, content_type, body, head_only=method == "HEAD")

    def _control(self, method: str, path: str, head_end: int) -> None:
        headers: dict[str, list[str]] = {}
        for line in bytes(self.buf[:head_end]).decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), []).append(value.strip())
        lengths = headers.get("content-length", ["0"])
        if len(lengths) > 1:  # a repeated Content-Length is refused, never "the last one wins"
            self._send(400, "text/plain; charset=utf-8", b"more than one Content-Length\n", head_only=False)
            return
        try:
            length = int(lengths[0]) if lengths[0].isdigit() else -1
        except ValueError:
            length = -1
        if length < 0 or "transfer-encoding" in headers:
            self._send(400, "text/plain; charset=utf-8", b"bad Content-Length\n", head_only=False)
            return
        if self.guard.control_check is not None:
            refused = self.guard.control_check(method, path, headers)
            if refused is not None:
                self._send(*refused, head_only=False)
                return
        if length > MAX_BODY:
            self._send(413, "text/plain; charset=utf-8", b"body too large\n", head_only=False)
            return
        body_start = head_end + 4
        if len(self.buf) - body_start < length:
            return  # the rest of the body is still coming
        self.done = True
        body = bytes(self.buf[body_start : body_start + length])
        assert self.control is not None
        self.task = asyncio.get_running_loop().create_task(self._answer(self.control(method, path, body)))

    async def _answer(self, pending: Awaitable[Response]) -> None:
        try:
            status, content_type, body = await pending
        except Exception:
            log.error("control endpoint failed", exc_info=True)
            status, content_type, body = 500, "text/plain; charset=utf-8", b"internal error\n"
        self.done = False
        self._send(status, content_type, body, head_only=False)

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


async def serve(host: str, port: int, handler: Handler, control: ControlHandler | None = None, guard: Guard | None = None) -> Any:
    """Listen on host:port (0: a free port); returns the asyncio server."""
    loop = asyncio.get_running_loop()
    guard = guard or Guard()
    return await loop.create_server(
        lambda: HttpConnection(handler, control, guard), host=host or None, port=port, reuse_address=True, backlog=128
    )
