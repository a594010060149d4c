"""A cheap pipelined request load for request-rate benchmarks.

Each connection cycles through a ring of pre-encoded request frames and keeps `depth`
requests in flight: every response that completes is replaced by the next frame at once.
Responses are counted by their 4-byte size prefix only, never decoded (the benchmark checks
one decoded response beforehand), and their latency is the time since the request was sent
(in order, as Kafka answers a connection in order). One epoll loop per worker process, no
asyncio, so that a client costs a few microseconds per request.

The machine has 2 cores: one worker process (the default) leaves the other core to the
broker under test, whose single event-loop thread cannot use more than one. Both CPU figures
are measured over the window so a reader can tell which side was the bottleneck.
"""

from __future__ import annotations

import resource
import select
import socket
import struct
import time
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any

from bench.procs import Worker, cpu_seconds

_SIZE = struct.Struct(">i")


@dataclass
class LoadResult:
    requests: int  # responses received in the measured window
    seconds: float
    p50_ms: float
    p99_ms: float
    client_cpu: float  # cores used by the load generator (1.0 = one core busy)
    server_cpu: float | None  # cores used by the broker process, when its pid was given

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def percentile(sorted_values: Any, q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (0 when empty)."""
    if not len(sorted_values):
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, int(q * len(sorted_values) + 0.999999) - 1))
    return float(sorted_values[rank])


class _Conn:
    def __init__(self, bootstrap: str, ring: list[bytes]) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.ring = ring
        self.next = 0
        self.to_send = len(ring)  # used when each frame is sent once
        self.inbuf = bytearray()
        self.outbuf = b""
        self.sent_at: deque[float] = deque()
        self.want_out = False

    def queue(self, n: int, now: float, once: bool) -> None:
        if once:
            n = min(n, self.to_send)
            self.to_send -= n
        if n <= 0:
            return
        ring, i = self.ring, self.next
        if i + n <= len(ring):
            frames = ring[i : i + n]
        else:
            frames = [ring[(i + k) % len(ring)] for k in range(n)]
        self.next = (i + n) % len(ring)
        self.outbuf += b"".join(frames)
        self.sent_at.extend([now] * n)

    def flush(self) -> bool:
        """Write what the socket takes; True when something is left over."""
        if self.outbuf:
            try:
                sent = self.sock.send(self.outbuf)
            except BlockingIOError:
                sent = 0
            self.outbuf = self.outbuf[sent:]
        return bool(self.outbuf)

    def complete(self) -> int:
        """Read what arrived; the number of whole responses."""
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the broker closed the connection")
        buf = self.inbuf
        buf += data
        pos, end, n = 0, len(buf), 0
        while end - pos >= 4:
            stop = pos + 4 + _SIZE.unpack_from(buf, pos)[0]
            if stop > end:
                break
            pos = stop
            n += 1
        if pos:
            del buf[:pos]
        return n


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _worker(conn: Any, bootstrap: str, rings: list[list[bytes]], depth: int, once: bool, pace: float = 0.0) -> dict[str, Any]:
    conns = [_Conn(bootstrap, ring) for ring in rings]
    by_fd = {c.sock.fileno(): c for c in conns}
    ep = select.epoll()
    for fd in by_fd:
        ep.register(fd, select.EPOLLIN)
    conn.send(("ready",))
    _, t_start, t_end = conn.recv()
    if once:  # timed runs start at once: the warm-up ends at t_start
        time.sleep(max(0.0, t_start - time.monotonic()))
    latencies = array("d")
    count = 0
    measuring = once
    cpu0 = _cpu_self() if once else 0.0
    now = time.monotonic()
    for c in conns:
        c.queue(depth, now, once)
        if c.flush():
            c.want_out = True
            ep.modify(c.sock.fileno(), select.EPOLLIN | select.EPOLLOUT)
    outstanding = sum(len(ring) for ring in rings) if once else 0
    while True:
        now = time.monotonic()
        if not measuring and now >= t_start:
            measuring, cpu0, count = True, _cpu_self(), 0
            del latencies[:]
        if now >= t_end or (once and outstanding == 0):
            break
        for fd, ev in ep.poll(min(0.05, t_end - now)):
            c = by_fd[fd]
            now = time.monotonic()
            if ev & select.EPOLLIN:
                n = c.complete()
                if n:
                    popleft = c.sent_at.popleft
                    if measuring:
                        for _ in range(n):
                            latencies.append(now - popleft())
                        count += n
                    else:
                        for _ in range(n):
                            popleft()
                    outstanding -= n
                    c.queue(n, now, once)
            left = c.flush()
            if left != c.want_out:
                c.want_out = left
                ep.modify(fd, select.EPOLLIN | (select.EPOLLOUT if left else 0))
        if pace:
            time.sleep(pace)
    seconds = time.monotonic() - t_start
    cpu = _cpu_self() - cpu0
    for c in conns:
        c.sock.close()
    return {"count": count, "seconds": seconds, "cpu": cpu, "latencies": latencies.tobytes()}


def run_load(
    bootstrap: str,
    rings: list[list[bytes]],
    *,
    depth: int = 8,
    warmup: float = 1.0,
    duration: float = 3.0,
    processes: int = 1,
    server_pid: int | None = None,
    once: bool = False,
    pace: float = 0.0,
    timeout: float = 600.0,
) -> LoadResult:
    """Run the load: one ring of frames per connection, spread over `processes` workers.

    Timed mode cycles the rings for `warmup` then `duration` seconds and counts the latter.
    `once` sends every frame exactly once (to fill a broker with state) and measures it all.
    """
    processes = max(1, min(processes, len(rings)))
    workers = [Worker(_worker, bootstrap, rings[i::processes], depth, once, pace) for i in range(processes)]
    try:
        for w in workers:
            w.recv(60)
        t_start = time.monotonic() + (0.05 if once else 0.05 + warmup)
        t_end = t_start + (timeout if once else duration)
        for w in workers:
            w.send(("go", t_start, t_end))
        server0 = None
        if server_pid is not None:
            time.sleep(max(0.0, t_start - time.monotonic()))
            server0 = cpu_seconds(server_pid)
        results = [w.result(timeout + warmup + 60) for w in workers]
        server_cpu = None
        seconds = max(r["seconds"] for r in results)
        if server_pid is not None and server0 is not None:
            server_cpu = (cpu_seconds(server_pid) - server0) / seconds
    finally:
        for w in workers:
            w.kill()
    latencies = array("d")
    for r in results:
        latencies.frombytes(r["latencies"])
    ordered = sorted(latencies)
    return LoadResult(
        requests=sum(r["count"] for r in results),
        seconds=seconds,
        p50_ms=percentile(ordered, 0.50) * 1000,
        p99_ms=percentile(ordered, 0.99) * 1000,
        client_cpu=sum(r["cpu"] for r in results) / seconds,
        server_cpu=server_cpu,
    )
