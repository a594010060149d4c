"""One client connection: framing, in-order dispatch, the single place responses are written.

Kafka mutes a channel while a request is in flight; here a connection processes one frame
at a time and queues the rest, so responses leave in request order even when a handler
parks (JoinGroup, SyncGroup, long-polling Fetch).

Back-pressure counts only complete frames waiting to be handled: a frame still arriving is
bounded by --max-request-bytes alone, so a request of any legal size completes (counting
it once made any request over the pause threshold hang its connection for good). The limits
on connections and on request bytes in flight live in broker/network/limits.py.

Chaos (broker/network/faults.py, broker/cluster/chaos.py) acts here too: a black-holed connection is
neither read (its frames wait, unread, in the socket) nor written (its answers are held, as TCP
would hold unacknowledged bytes) until the hole closes; the broker's injected latency delays
every response where it is written, in order.

Fetch record sets leave by `sendfile` from the segment files (the handler marks a response
holding FileRanges, `files_in_response`): the bytes before a range go through the transport,
and once its write buffer is empty the range is sent on the socket itself. When the socket is
full, a page of the range is read and written through the transport (with a high-water mark of
0, the transport calls `resume_writing` once it has written it all) and sendfile carries on
from there; ranges waiting like that pin their segments open. Where the bytes must wait in
memory anyway (a black hole holds them, injected latency delays them) the ranges are read at
once, so a hole holds bytes as before.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.network import faults
from broker.network.context import BrokerServices, RequestContext
from broker.network.registry import REGISTRY, ApiSpec
from broker.node.logging import summarize
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.header import HeaderError, parse_request_header, peek_api, response_header
from storage.errors import StorageError
from storage.segment import FileRange

if TYPE_CHECKING:
    from broker.network.limits import ConnectionLimits
    from broker.security.listeners import Listener
    from broker.security.sasl.authenticator import SaslAuthenticator

log = structlog.get_logger("kaflet.connection")

# Stop reading from a client that has this many bytes of complete frames queued.
_PAUSE_AT = 8 * 1024 * 1024
# A frame at least this big is read straight into a buffer of its own (get_buffer); smaller ones
# pass through the scratch buffer of _SCRATCH bytes, which is at least 4x larger.
_DIRECT_AT = 64 * 1024
_SCRATCH = 256 * 1024
_POOLED_MAX = 4 * 1024 * 1024  # a larger frame's buffer is not kept for the next one
_POOLED = 8  # large-frame buffers kept per thread


class _ReadBuffers(threading.local):
    """What every connection of one thread's event loop reads into: one scratch buffer (the loop
    calls get_buffer and buffer_updated of one connection back to back, and a connection keeps
    only the bytes of a frame still arriving for itself), and the buffers of large frames, each
    reused once nothing holds a view of it. An idle connection holds no buffer: 10,000 of them
    must not cost 256 KiB each."""

    def __init__(self) -> None:
        self.scratch = bytearray(_SCRATCH)
        self.scratch_view = memoryview(self.scratch)
        self.pool: list[bytearray] = []

    def frame_buffer(self, size: int) -> bytearray:
        """A buffer of at least `size` bytes: a kept one nothing holds a view of, else a new one.
        (A new 1 MiB bytearray per Produce cost an mmap, 256 page faults and a munmap each.)"""
        for buf in self.pool:
            if len(buf) >= size:
                try:
                    del buf[-1]  # BufferError while a view of it lives: a handler still holds its frame
                except BufferError:
                    continue
                buf.append(0)  # back to its size, within its allocation
                return buf
        buf = bytearray(-(-size // _DIRECT_AT) * _DIRECT_AT)  # rounded up: frames of similar sizes share it
        if len(buf) <= _POOLED_MAX:
            if len(self.pool) >= _POOLED:
                self.pool.pop(0)
            self.pool.append(buf)
        return buf


_buffers = _ReadBuffers()


class _LargeFrame:
    """A large frame being read into its own buffer: the buffer, a view of the frame's `size`
    bytes in it, and how many have arrived."""

    __slots__ = ("buf", "filled", "view")

    def __init__(self, buf: bytearray, size: int) -> None:
        self.buf = buf
        self.view = memoryview(buf)[:size]
        self.filled = 0


# _dispatch's answer for a frame that a black hole swallowed: it waits, unhandled, for the hole to close.
_HELD = object()
_RUN = object()  # _finish_pending_work's default: run the pending work here

# sendfile: when the socket is full, this much of the range goes through the transport, whose
# resume_writing then says when the socket takes more. A page: the rest stays in the file.
_PIECE = 4096
# sendfile errors that mean "not for this file or socket": the rest is read and written instead.
_NO_SENDFILE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EOVERFLOW})


class CloseConnection(Exception):
    """Raised by the dispatcher: the connection is closed with this reason."""


class ConnectionOwner(BrokerServices, Protocol):
    """What a connection uses of the node that accepted it: the services its handlers get, and
    the node's connections, limits, faults and response observers (request metrics, debug log)."""

    connections: set[KafkaConnection]
    limits: ConnectionLimits
    faults: faults.FaultInjector
    debug_requests: bool
    observe_response: Callable[[RequestContext, Any, float], None] | None
    observe_known: Callable[[int, int, float], None] | None


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: ConnectionOwner, listener: Listener | None = None) -> None:
        self.broker = broker
        self.max_request = broker.config.max_request_bytes
        # Security (broker/security/): the listener this connection came in on, who it is, and
        # while SASL authentication is pending (or a session can expire) its authenticator.
        self.listener = listener
        self.principal: KafkaPrincipal = ANONYMOUS
        self.authenticator: SaslAuthenticator | None = None
        # Answers may come from the broker-wide caches (Metadata): the first listener, no authorizer.
        self.cacheable = broker.authorizer is None and (listener is None or listener is broker.listeners[0])
        self.transport: asyncio.Transport | None = None
        self.peer_host = "?"
        self.peer_port = 0
        self.peer_text = "?"
        # Reading (get_buffer): the bytes of a small frame still arriving (they go back to the
        # front of the shared scratch buffer for the next read), or a large frame in its buffer
        # (one attribute: an idle connection's size is what 10,000 of them cost).
        self._reading: bytes | _LargeFrame = b""
        self._frames: deque[bytes | memoryview] = deque()
        self._queued_bytes = 0
        self._busy = False
        self._paused = False  # back-pressure: too many complete frames queued
        self._pool_paused = False  # the broker's request-bytes pool is overdrawn
        self.reading_paused = False  # what the transport was last told
        limits = broker.limits
        self._limits = limits
        self._pool = limits if limits.pool_limit else None
        self._reserved = 0  # bytes this connection holds in the pool
        self._handling = 0  # size of the frame a parked handler holds
        self.refused = False
        # monotonic() when the first byte of the frame still arriving came (0: none is arriving).
        self.frame_started = 0.0
        # Why the connection must close once the frames queued before the bad one are answered.
        self._close_after_queue: str | None = None
        self.closing = False
        self.last_active = time.monotonic()
        self.client_software: tuple[str, str] | None = None
        self.in_flight: asyncio.Task[Any] | None = None
        self.started = 0.0  # perf_counter() when the frame being handled was taken up (metrics)
        # Responses produced while draining a burst of pipelined requests leave in one writev.
        self._out: list[Any] = []
        self._draining = False
        # Work that must finish before this burst's responses leave (e.g. the appends of
        # offset commits batched during the burst); it raises to withhold them.
        self._before_flush: list[Any] = []
        self.client_id: str | None = None  # of the last request (black holes by client id)
        self.hole: faults.Hole | None = None  # the black hole this connection is in
        self._held: list[Any] = []  # responses written while in a hole
        self._delayed: deque[tuple[float, list[Any]]] = deque()  # (due loop time, chunks): injected latency
        self._delay_timer: asyncio.TimerHandle | None = None
        # When that work fails: the error answer of each request that registered one (by
        # correlation id), where its answer sits in _out, and whether some work had none.
        self._fallbacks: dict[int, Any] = {}
        self._spans: dict[int, tuple[int, int, bool]] = {}
        self._unanswerable = False
        self._current_corr = 0
        self._awaiting_turn = False  # this burst's answers wait for a turn's work (join_turn)
        # sendfile of Fetch record sets (see the module docstring).
        self.can_send_files = False  # the transport is a plain socket: Fetch may answer with FileRanges
        self._coalesce: Any = None  # TLS: small chunks joined before they are written
        self._sock_fd = -1
        self._files = False  # the responses in _out hold FileRanges
        self._sendq: deque[Any] = deque()  # chunks behind a range the socket has not taken yet (ranges pinned)
        self._sendfile_ok = True  # cleared when the kernel refuses sendfile for this socket
        # Called once when the connection is gone (a share session ends with its connection, KIP-932).
        self.on_lost: list[Callable[[], Any]] = []

    # -- asyncio.BufferedProtocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            if transport.get_extra_info("sslcontext") is not None:
                from broker.security.tls import coalesce

                self._coalesce = coalesce
            elif sock.family in (socket.AF_INET, socket.AF_INET6):
                self._sock_fd = sock.fileno()
                self.can_send_files = self._sock_fd >= 0 and hasattr(os, "sendfile")
                if self.can_send_files:
                    # pause_writing as soon as anything is buffered, resume_writing once it is all written.
                    transport.set_write_buffer_limits(high=0)  # type: ignore[attr-defined]
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer_host, self.peer_port = str(peer[0]), int(peer[1])
        self.peer_text = f"{self.peer_host}:{self.peer_port}"
        refused = self._limits.admit(self.peer_host, self.listener)
        if refused is not None:
            self.refused = True
            self.closing = True
            limit = self._limits.max_connections_per_ip if refused == "max_connections_per_ip" else self._limits.max_connections
            if refused == "listener_max_connections":
                limit = self.listener.max_connections  # type: ignore[union-attr]
            log.info("connection refused", peer=self.peer_text, reason=f"{refused.replace('_', '.')} {limit} reached")
            transport.close()
            return
        self.broker.connections.add(self)
        listener = self.listener
        if listener is not None and listener.protocol != "PLAINTEXT" and not self.broker.security.accept(self, transport, listener):
            self.close()
            return
        if self._pool is not None and self._pool.pool_exhausted:
            self._pool.mute(self)
        if self.broker.faults.down == "hang":  # down, but accepting: never answered
            self.enter_hole(faults.DOWN)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refused:
            return
        self._limits.release(self.peer_host, self.listener)
        if self._pool is not None:
            self._pool.forget(self)
            reserved, self._reserved = self._reserved, 0
            if reserved:
                self._pool.give(reserved)
        closed_by_peer = not self.closing
        self.closing = True
        self.broker.connections.discard(self)
        if self.authenticator is not None:
            self.authenticator.cancel()
        for listener in self.on_lost:
            try:
                listener()
            except Exception:
                log.error("a connection-lost listener failed", peer=self.peer_text, exc_info=True)
        self.on_lost = []
        if closed_by_peer and self._close_after_queue is not None and self.broker.accepting:
            log.warning("closing connection", peer=self.peer_text, reason=self._close_after_queue)
        elif closed_by_peer and self.partial_bytes and self.broker.accepting:
            # When the broker closed the connection it already logged why; this is the peer's doing.
            partial = self.partial_bytes
            log.warning(
                "connection closed mid-frame",
                peer=self.peer_text,
                reason=f"peer closed the connection with {partial} bytes of an incomplete request",
                buffered_bytes=partial,
            )
        self._frames.clear()
        self._reading = b""
        self._held = []
        self._drop_sendq()
        if self._delay_timer is not None:
            self._delay_timer.cancel()
            self._delay_timer = None
        if self.in_flight is not None and not self.in_flight.done():
            # The handler may be parked in the coordinator; its answer has nowhere to go.
            self.in_flight.cancel()

    # -- reading: frames straight into their buffers ------------------------------------------
    #
    # The loop reads into what get_buffer returns (asyncio.BufferedProtocol). Small frames
    # arrive in a fixed scratch buffer and are copied out, one copy each, as before. A frame of
    # _DIRECT_AT bytes or more gets a buffer of its own once its size is known, and the socket
    # is read straight into it: a 1 MiB Produce is read in a few large reads with no copy in
    # Python (with data_received, uvloop read it in 256 KB pieces, each copied into a bytes,
    # then into the connection's buffer, then once more into the frame).

    def get_buffer(self, sizehint: int) -> memoryview:
        reading = self._reading
        if type(reading) is _LargeFrame:
            return reading.view[reading.filled :]
        view = _buffers.scratch_view
        left = len(reading)
        if left:
            view[:left] = reading  # type: ignore[index]
        return view[left:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.closing or self._close_after_queue is not None:
            self._reading = b""
            return
        self.last_active = time.monotonic()
        reading = self._reading
        if type(reading) is _LargeFrame:
            reading.filled += nbytes
            if reading.filled < len(reading.view):
                return
            self._reading = b""
            self._large_done(reading)
            self.frame_started = 0.0
        else:
            self._reading = b""
            self._split_scratch(len(reading) + nbytes)
        if not self._busy:
            self._drain()
        if self._queued_bytes > _PAUSE_AT and not self._paused:
            self._paused = True
            self._update_reading()

    def data_received(self, data: bytes) -> None:
        """Bytes handed over rather than read into get_buffer (in-process benchmarks, tests)."""
        view = memoryview(data)
        while view:
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)

    def _split_scratch(self, end: int) -> None:
        """Queue the whole frames among the first `end` bytes of the scratch buffer; keep the
        bytes of a partial one, or give it a buffer of its own when it is large."""
        view = _buffers.scratch_view
        pos = 0
        max_request = self.max_request
        while end - pos >= 4:
            size = int.from_bytes(view[pos : pos + 4], "big", signed=True)
            if size < 0 or size > max_request:
                # Checked before anything is allocated for the frame. Requests queued before it
                # are still answered, in order, as Kafka does (it reads the next size only after
                # the previous response is sent).
                self._close_after_queue = f"request size {size} outside 0..{max_request}"
                return
            if size >= _DIRECT_AT:
                # Its own buffer; what arrived of it so far is copied once (at most a read's worth).
                have = min(end - pos - 4, size)
                large = _LargeFrame(_buffers.frame_buffer(size), size)
                large.view[:have] = view[pos + 4 : pos + 4 + have]
                large.filled = have
                pos += 4 + have
                if have < size:
                    self._reading = large
                    break
                self._large_done(large)
                continue
            if end - pos - 4 < size:
                break
            self._queue_frame(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        left = end - pos
        if left:
            self._reading = bytes(view[pos:end])  # a partial small frame: under _DIRECT_AT + 4 bytes
        if left or type(self._reading) is _LargeFrame:
            if pos or not self.frame_started:
                self.frame_started = self.last_active  # a frame still arriving started now
        else:
            self.frame_started = 0.0

    def _large_done(self, large: _LargeFrame) -> None:
        """A large frame is complete. A Produce frame is handed over as a view of its buffer
        (nothing writes it again); any other is copied once into bytes, as small frames are."""
        frame, view = large.buf, large.view
        if frame[0] == 0 and frame[1] == ApiKey.PRODUCE:
            self._queue_frame(view)
        else:
            data = bytes(view)
            view.release()
            self._queue_frame(data)

    def _queue_frame(self, frame: bytes | memoryview) -> None:
        size = len(frame)
        self._frames.append(frame)
        self._queued_bytes += size
        if self._pool is not None:
            self._reserved += size
            self._pool.take(size, self.broker.connections)

    @property
    def partial_bytes(self) -> int:
        """Bytes of a request frame that has not fully arrived (size prefix included)."""
        reading = self._reading
        if type(reading) is _LargeFrame:
            return 4 + reading.filled
        return len(reading)

    def eof_received(self) -> bool | None:
        return None

    # -- dispatch -----------------------------------------------------------------------

    def _drain(self) -> None:
        frames = self._frames
        self._draining = True
        try:
            while frames and not self._busy and not self.closing and self.hole is None:
                frame = frames.popleft()
                self._queued_bytes -= len(frame)
                try:
                    pending = self._dispatch(frame)
                except CloseConnection as exc:
                    self._give(len(frame))
                    self.close_with_warning(str(exc))
                    return
                if pending is _HELD:  # swallowed by a black hole: handled once it closes
                    frames.appendleft(frame)
                    self._queued_bytes += len(frame)
                    break
                if pending is None:
                    if self._pool is not None:
                        self._give(len(frame))
                else:
                    self._handling = len(frame)
                    self._busy = True
                    task = asyncio.ensure_future(pending)
                    self.in_flight = task
                    task.add_done_callback(self._on_async_done)
        finally:
            self._draining = False
            if self._before_flush and not self._join_turn():
                self._run_before_flush()
            self._flush()
        if self._close_after_queue is not None and not frames and not self._busy:
            self.close_with_warning(self._close_after_queue)
            return
        if self._paused and self._queued_bytes < _PAUSE_AT // 2:
            self._paused = False
            self._update_reading()

    # -- reading and pausing ----------------------------------------------------------------

    def _give(self, size: int) -> None:
        """The handler is done with a frame of `size` bytes: its bytes go back to the pool."""
        if self._pool is not None and self._reserved:
            size = min(size, self._reserved)
            self._reserved -= size
            self._pool.give(size)

    def pool_pause(self) -> None:
        self._pool_paused = True
        self._update_reading()

    def pool_resume(self) -> None:
        self._pool_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        paused = self._paused or self._pool_paused or self.hole is not None
        if paused == self.reading_paused or self.transport is None or self.closing:
            return
        self.reading_paused = paused
        if paused:
            self.transport.pause_reading()
        else:
            if self.frame_started:
                # The time reading was paused is ours, not the client's.
                self.frame_started = time.monotonic()
            self.transport.resume_reading()

    def _on_async_done(self, task: asyncio.Task[Any]) -> None:
        self.in_flight = None
        self._busy = False
        if self._handling:
            handled, self._handling = self._handling, 0
            self._give(handled)
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, CloseConnection):
            self.close_with_warning(str(exc))
            return
        if exc is not None:
            log.error("handler failed after parking", peer=self.peer_text, exc_info=exc)
            self.close_with_warning("internal error")
            return
        if not self.closing:
            self._drain()

    def _dispatch(self, frame: bytes | memoryview) -> Any:
        """Handle one frame. Returns None when done, or a coroutine to run for a parked handler."""
        self.started = time.perf_counter()
        if self.authenticator is not None and self.authenticator.intercept(frame):
            return None  # SASL authentication (or re-authentication) took it
        try:
            api_key, api_version, corr = peek_api(frame)
        except HeaderError as exc:
            raise CloseConnection(f"bad request header: {exc}") from None
        self._current_corr = corr
        spec = REGISTRY.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if not spec.min_version <= api_version <= spec.max_version:
            if spec.unsupported_version is not None:
                # Kafka answers a too-new ApiVersions with a v0 body listing what is served.
                self.write_response(corr, False, spec.unsupported_version(self.broker))
                return None
            raise CloseConnection(f"unsupported version {api_version} of {spec.name} (serves {spec.min_version}-{spec.max_version})")
        flexible = spec.flexible(api_version)
        try:
            header = parse_request_header(frame, flexible)
        except HeaderError as exc:
            raise CloseConnection(f"bad request header: {exc}") from None
        broker = self.broker
        self.client_id = header.client_id
        if broker.faults.holes:
            hole = broker.faults.hole_for(self.peer_text, header.client_id)
            if hole is not None:
                self.enter_hole(hole)
                return _HELD
        if spec.fast_path is not None and self.cacheable and not broker.faults.active and not broker.debug_requests:
            # A repeat of a request whose answer is known (e.g. Metadata): no decode, no handler.
            known = spec.fast_path(broker, api_version, frame, header.body_offset)
            if known is not None:
                self.write_response(corr, flexible and api_key != ApiKey.API_VERSIONS, known)
                if broker.observe_known is not None:  # request metrics (broker/metrics/requests.py)
                    broker.observe_known(api_key, api_version, self.started)
                return None
        try:
            request = spec.decode(memoryview(frame)[header.body_offset :], api_version)
        except Exception as exc:  # the codec raises many kinds on malformed input
            raise CloseConnection(f"{spec.name} v{api_version} body does not decode: {type(exc).__name__}: {exc}") from None
        ctx = RequestContext(broker, self, api_key, spec.name, api_version, corr, header.client_id, frame, header.body_offset)
        # ApiVersions responses always use header v0 (clients cannot know the flexible version yet).
        resp_flexible = flexible and api_key != ApiKey.API_VERSIONS
        if self.broker.debug_requests:
            ctx.log.debug("request", body=summarize(request))
        injected = faults.match(self.broker.faults, ctx, request)
        if injected is not None:
            return self._run_fault(ctx, spec, request, injected, resp_flexible)
        try:
            result = spec.handler(ctx, request)
        except CloseConnection:
            raise
        except Exception:
            ctx.log.error("handler failed", exc_info=True)
            result = self._error_answer(ctx, spec, request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if result.__class__ is not bytes and asyncio.iscoroutine(result):  # an encoded answer needs no ABC check
            return self._finish_async(ctx, spec, request, result, resp_flexible)
        self._respond(ctx, spec, result, resp_flexible)
        return None

    async def _finish_async(self, ctx: RequestContext, spec: ApiSpec, request: Any, coro: Any, resp_flexible: bool) -> None:
        try:
            result = await coro
        except (CloseConnection, asyncio.CancelledError):
            raise
        except Exception:
            ctx.log.error("handler failed", exc_info=True)
            result = self._error_answer(ctx, spec, request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if not self.closing:
            self._respond(ctx, spec, result, resp_flexible)

    async def _run_fault(self, ctx: RequestContext, spec: ApiSpec, request: Any, fault: faults.Fault, resp_flexible: bool) -> None:
        if fault.delay_ms:
            await asyncio.sleep(fault.delay_ms / 1000)
        if fault.close:
            raise CloseConnection(f"fault injected on {spec.name}: close connection")
        if fault.error is None:
            result = spec.handler(ctx, request)
            if asyncio.iscoroutine(result):
                result = await result
        else:
            result = self._error_answer(ctx, spec, request, fault.error)
        if not self.closing:
            self._respond(ctx, spec, result, resp_flexible)

    def _error_answer(self, ctx: RequestContext, spec: ApiSpec, request: Any, code: ErrorCode) -> Any:
        if spec.error_response is None:
            raise CloseConnection(f"{spec.name} failed and has no error response")
        ctx.errors = [code]  # counted once when the answer is an encoded body (metrics)
        try:
            answer = spec.error_response(request, code)
            if not isinstance(answer, (bytes, bytearray, memoryview, list)):
                # Encoded here so that an answer that cannot be written closes the connection
                # with one warning instead of escaping into the event loop.
                answer = answer.encode(version=ctx.api_version)
        except Exception as exc:
            raise CloseConnection(f"{spec.name} v{ctx.api_version} cannot be answered: {type(exc).__name__}: {exc}") from None
        return answer

    def _respond(self, ctx: RequestContext, spec: ApiSpec, result: Any, resp_flexible: bool) -> None:
        if result is None:
            if self.broker.observe_response is not None:
                self.broker.observe_response(ctx, None, self.started)
            return
        if isinstance(result, (bytes, bytearray, memoryview)):
            body: Any = result
        elif isinstance(result, list):
            body = result
        else:
            try:
                body = result.encode(version=ctx.api_version)
            except Exception:
                # A handler bug, not the client's: say so once, with the traceback, and hang up
                # rather than let the exception escape into the event loop.
                ctx.log.error("response does not encode; closing connection", exc_info=True)
                self.close()
                return
        self.write_response(ctx.correlation_id, resp_flexible, body)
        observe = self.broker.observe_response
        if observe is not None:  # request metrics and the debug response line (broker/metrics/requests.py)
            observe(ctx, result, self.started)

    def write_response(self, correlation_id: int, flexible: bool, body: Any) -> None:
        """The one place a response leaves the broker: size, header, body."""
        if self.transport is None or self.closing:
            return
        out = self._out
        start = len(out)
        if isinstance(body, list):
            out.append(response_header(sum(len(b) for b in body), correlation_id, flexible))
            out.extend(body)
        else:
            out.append(response_header(len(body), correlation_id, flexible))
            out.append(body)
        if self._fallbacks and correlation_id in self._fallbacks:
            self._spans[correlation_id] = (start, len(out), flexible)
        if not self._draining:
            self._flush()

    def write_raw_frame(self, token: bytes) -> None:
        """A SASL token after SaslHandshake v0: size-prefixed, no Kafka header."""
        self._out.append(len(token).to_bytes(4, "big") + token)
        if not self._draining:
            self._flush()

    def answer_normally(self, frame: bytes | memoryview) -> None:
        """Dispatch a frame the authenticator lets through (ApiVersions before the handshake)."""
        authenticator, self.authenticator = self.authenticator, None
        try:
            pending = self._dispatch(frame)
        finally:
            self.authenticator = authenticator
        if pending is not None and asyncio.iscoroutine(pending):
            pending.close()

    def security_counters(self, outcome: str) -> None:
        self.broker.security.counters[outcome] += 1

    def before_flush(self, work: Any, on_failure: Any = None) -> None:
        """Run `work()` once before the responses produced so far are written. Outside a burst
        (a parked handler finishing) it runs at once.

        If `work` fails, `on_failure(exc)` gives the answer of the request being handled now
        in place of the one it wrote (None: that answer stands), and the other answers leave
        as written. Work registered without `on_failure` withholds every answer of the burst
        and closes the connection instead."""
        if not self._draining:
            work()
            return
        if work not in self._before_flush:
            self._before_flush.append(work)
        if on_failure is None:
            self._unanswerable = True
        else:
            self._fallbacks[self._current_corr] = on_failure

    def _run_before_flush(self) -> None:
        failure = self._finish_pending_work()
        if failure is not None:
            self.close_with_warning(f"withholding responses: {failure}")

    def _join_turn(self) -> bool:
        """When all the work behind this burst's answers is a loop turn's (it has `join`, e.g.
        the commit appends of broker/runtime/turn.py), the answers wait for the turn to end,
        so that the work of every connection read in this turn is done once."""
        works = self._before_flush
        if not all(hasattr(work, "join") for work in works):
            return False
        if not self._awaiting_turn:
            self._awaiting_turn = True
            for work in works:
                work.join(self)
        return True

    def turn_ended(self, error: Exception | None) -> None:
        """The turn's work is done (`error`: how it failed): the waiting answers leave."""
        if not self._awaiting_turn:
            return
        self._awaiting_turn = False
        if self.closing:
            self._finish_pending_work(error)
            return
        failure = self._finish_pending_work(error)
        if failure is not None:
            self.close_with_warning(f"withholding responses: {failure}")
            return
        self._flush()

    def _finish_pending_work(self, outcome: Any = _RUN) -> Exception | None:
        """Run the pending work (or take `outcome`, the exception or None of work already
        run) and settle the answers that wait for it."""
        works, self._before_flush = self._before_flush, []
        fallbacks, self._fallbacks = self._fallbacks, {}
        spans, self._spans = self._spans, {}
        unanswerable, self._unanswerable = self._unanswerable, False
        try:
            if outcome is _RUN:
                for work in works:
                    work()
            elif outcome is not None:
                raise outcome
        except Exception as exc:
            if unanswerable or not fallbacks:
                # The responses claim work that did not happen: none of them may leave.
                self._out = []
                return exc
            # Each request whose work failed is answered with its error instead (bug 6 of
            # issue 11: a full disk used to turn offset commits into closed connections).
            out = self._out
            for corr, make in fallbacks.items():
                span = spans.get(corr)
                body = make(exc) if span is not None else None
                if body is None:
                    continue
                start, end, flexible = span  # type: ignore[misc]
                parts = body if isinstance(body, list) else [body]
                out[start] = response_header(sum(len(b) for b in parts), corr, flexible)
                out[start + 1 : end] = [b"".join(parts)] + [b""] * (end - start - 2)
            log.warning("work behind these responses failed; answered with its error", peer=self.peer_text, error=str(exc))
        return None

    def _flush(self) -> None:
        if self._awaiting_turn:
            return  # turn_ended() writes them, with everything written meanwhile behind them
        if self._out and self.transport is not None:
            out, self._out = self._out, []
            files, self._files = self._files, False
            self.last_active = time.monotonic()
            if self.hole is not None:
                if files:  # a hole holds bytes, not ranges of files that may go meanwhile
                    out = self._read_ranges(out)
                    if out is None:
                        return
                self._held.extend(out)
                return
            self._send(out, files)

    def _send(self, chunks: list[Any], files: bool = False) -> None:
        latency = self.broker.faults.latency_ms
        if not latency and not self._delayed:
            if files or self._sendq:
                self._send_files(chunks)
            elif self._coalesce is not None:  # TLS: one record per chunk otherwise (broker/security/tls.py)
                self.transport.writelines(self._coalesce(chunks))  # type: ignore[union-attr]
            else:
                self.transport.writelines(chunks)  # type: ignore[union-attr]
            return
        if files:
            chunks = self._read_ranges(chunks)  # type: ignore[assignment]
            if chunks is None:
                return
        # Injected latency: due times never go backwards, so answers keep their order.
        loop = asyncio.get_running_loop()
        due = loop.time() + latency / 1000
        if self._delayed:
            due = max(due, self._delayed[-1][0])
        self._delayed.append((due, chunks))
        if self._delay_timer is None:
            self._delay_timer = loop.call_at(self._delayed[0][0], self._write_delayed)

    def _write_delayed(self, everything: bool = False) -> None:
        self._delay_timer = None
        delayed = self._delayed
        now = asyncio.get_running_loop().time()
        transport = self.transport
        while delayed and (everything or delayed[0][0] <= now):
            _, chunks = delayed.popleft()
            if transport is not None and not transport.is_closing():
                if self._sendq:
                    self._send_files(chunks)
                else:
                    transport.writelines(chunks)
        if delayed:
            self._delay_timer = asyncio.get_running_loop().call_at(delayed[0][0], self._write_delayed)

    # -- sendfile ---------------------------------------------------------------------------

    def files_in_response(self) -> None:
        """Called by a handler whose response (written next) holds FileRanges."""
        self._files = True

    def pause_writing(self) -> None:
        pass  # the high-water mark is 0: nothing to do but wait for resume_writing

    def resume_writing(self) -> None:
        if self._sendq and not self.closing:
            self._pump()

    def _send_files(self, chunks: list[Any]) -> None:
        """Write `chunks` in order after whatever waits in the send queue; ranges are pinned
        (their segment's descriptor stays open) until sent."""
        for c in chunks:
            if type(c) is FileRange:
                if not c.usable:
                    # The segment went (its topic deleted, retention) between the read and now.
                    self._abort_send(f"{c!r} was closed before it was sent")
                    return
                c.pin()
        self._sendq.extend(chunks)
        self._pump()

    def _pump(self) -> None:
        """Send the queue: bytes through the transport, ranges with sendfile once the transport's
        buffer is empty. Returns early when the socket is full (resume_writing calls again)."""
        transport = self.transport
        if transport is None:
            return
        q = self._sendq
        plain: list[Any] = []
        while q:
            c = q[0]
            if type(c) is not FileRange:
                plain.append(q.popleft())
                continue
            if plain:
                transport.writelines(plain)
                plain = []
            if transport.get_write_buffer_size():
                return  # resume_writing (high-water mark 0) calls back when it is all written
            sent = 0
            if self._sendfile_ok:
                try:
                    sent = os.sendfile(self._sock_fd, c.fd, c.position, c.length)
                except BlockingIOError:
                    pass  # the socket is full
                except OSError as exc:
                    if exc.errno not in _NO_SENDFILE:  # the peer is gone (EPIPE, ECONNRESET)
                        self._drop_sendq()
                        transport.abort()
                        return
                    self._sendfile_ok = False
                    log.info("sendfile refused; reading fetched data into memory instead", peer=self.peer_text, error=str(exc))
                else:
                    if sent == 0:  # end of file inside the range: the segment was cut short
                        self._abort_send(f"{c!r} is past the end of its file")
                        return
                    c.advance(sent)
            if c.length:
                # The socket is full (or sendfile is refused): a page (or the rest) goes through
                # the transport, which calls resume_writing when the socket has taken it.
                try:
                    piece = c.read(_PIECE if self._sendfile_ok else None)
                except StorageError as exc:
                    self._abort_send(str(exc))
                    return
                c.advance(len(piece))
                if c.length:
                    transport.write(piece)
                    continue
                plain.append(piece)
            q.popleft()
            c.release()
        if plain:
            transport.writelines(plain)

    def _read_ranges(self, chunks: list[Any], close: bool = True) -> list[Any] | None:
        """`chunks` with every FileRange read into bytes; None (and the connection closed, with
        `close`) when one can no longer be read."""
        out: list[Any] = []
        for c in chunks:
            if type(c) is FileRange:
                try:
                    c = c.read()
                except StorageError as exc:
                    if close:
                        self._abort_send(str(exc))
                    return None
            out.append(c)
        return out

    def _abort_send(self, reason: str) -> None:
        """A response cannot be completed: nothing more is written, the connection closes."""
        self._drop_sendq()
        self._out = []
        self._delayed.clear()
        self.close_with_warning(f"fetched data could not be sent: {reason}")

    def _drop_sendq(self) -> None:
        q, self._sendq = self._sendq, deque()
        for c in q:
            if type(c) is FileRange:
                c.release()

    # -- black holes ----------------------------------------------------------------------

    def enter_hole(self, hole: faults.Hole) -> None:
        """Stop reading and writing (without closing) until `leave_hole`."""
        if self.closing:
            return
        self.hole = hole
        self._update_reading()

    def leave_hole(self) -> None:
        """The hole closes: held answers leave, reading resumes, waiting frames are handled."""
        if self.hole is None:
            return
        self.hole = None
        if self.closing:
            return
        held, self._held = self._held, []
        if held and self.transport is not None:
            self._send(held)  # read into bytes when held: no ranges
        self._update_reading()
        if not self._busy and self._frames:
            self._drain()

    # -- closing ------------------------------------------------------------------------

    def close_with_warning(self, reason: str) -> None:
        if self.closing:
            return
        log.warning("closing connection", peer=self.peer_text, reason=reason)
        self.close()

    def close(self) -> None:
        # Waiting for a turn: ending it now (the work runs for every connection in it) settles
        # these answers here, below.
        self._awaiting_turn = False
        if self._before_flush:
            self._finish_pending_work()
        self._flush()  # answers already produced still leave, in order, before the close
        if self._delayed:  # ... latency or not
            if self._delay_timer is not None:
                self._delay_timer.cancel()
            self._write_delayed(everything=True)
        if self._sendq:  # ... and so do ranges the socket had not taken yet, read into memory
            rest = self._read_ranges(list(self._sendq), close=False)
            self._drop_sendq()
            if rest is not None and self.transport is not None:
                self.transport.writelines(rest)
        self.closing = True
        self._frames.clear()
        if self.transport is not None:
            self.transport.close()

    @property
    def busy(self) -> bool:
        return self._busy

    def stop_reading(self) -> None:
        """At shutdown: take no new requests; the one in flight still gets its answer."""
        self._frames.clear()
        if self.transport is not None and not self.closing:
            try:
                self.transport.pause_reading()
            except RuntimeError:
                pass
