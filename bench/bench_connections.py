"""Memory per idle connection: the broker's RSS before and after 10,000 clients connected and
sent one ApiVersions each, then sat idle (1,000 with --quick). The file-descriptor limit of
this process (inherited by the brokers it starts) is raised to its hard limit first; the count
is cut to what that limit allows."""

from __future__ import annotations

import resource
import socket
import time

from bench import wire
from bench.context import Context, Row

ABOUT = "memory per idle connection (broker RSS growth / connections) at 10,000 connections"

KB = 1000


def _raise_fd_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def _api_versions_frame() -> bytes:
    from kafka.protocol.metadata import ApiVersionsRequest

    return wire.encode(ApiVersionsRequest[0](), 1)


def _open_idle(bootstrap: str, n: int, budget_s: float) -> list[socket.socket]:
    host, port = bootstrap.rsplit(":", 1)
    frame = _api_versions_frame()
    socks: list[socket.socket] = []
    deadline = time.monotonic() + budget_s
    for _ in range(n):
        if time.monotonic() > deadline:
            for s in socks:
                s.close()
            raise TimeoutError(f"only {len(socks)} connections within {budget_s:.0f} s")
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(frame)
        socks.append(s)
    for s in socks:  # every connection answered once: set up on both sides, then idle
        size = int.from_bytes(_read(s, 4), "big")
        _read(s, size)
    return socks


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return out


def _per_connection(target: object, n: int, settle: float, budget_s: float) -> tuple[float, float]:
    before = target.rss()  # type: ignore[attr-defined]
    socks = _open_idle(target.bootstrap, n, budget_s)  # type: ignore[attr-defined]
    try:
        time.sleep(settle)
        after = target.rss()  # type: ignore[attr-defined]
    finally:
        for s in socks:
            s.close()
    return (after - before) / n, after


def run(ctx: Context) -> list[Row]:
    wanted = ctx.size(10_000, 1_000)
    limit = _raise_fd_limit(2 * wanted + 200)
    n = min(wanted, (limit - 200) // 2)  # this process's sockets and the broker's
    settle = 0.3 if ctx.quick else 1.0
    with ctx.kaflet() as k:
        wire.api_versions(k.bootstrap)
        kaflet_each, kaflet_total = _per_connection(k, n, settle, budget_s=600)
    with ctx.mock() as m:
        wire.api_versions(m.bootstrap)
        try:
            mock_each, _ = _per_connection(m, n, settle, budget_s=ctx.size(60, 20))
        except OSError as exc:  # socket.timeout included: the mock stops answering
            ctx.note(f"the mock did not answer {n} idle connections ({type(exc).__name__}: {exc}): no baseline")
            mock_each = None
    ctx.note(f"{n} connections (fd limit {limit}); kaflet's RSS with them open: {kaflet_total / 1e6:.0f} MB")
    return [
        Row("memory per idle connection", "KB", kaflet_each / KB, None if mock_each is None else mock_each / KB, higher_is_better=False),
    ]
