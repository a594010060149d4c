"""A protocol fuzzer: mutations of valid requests for every served (api, version), thrown at a
broker process over real sockets.

Why hypothesis and not atheris: the property is about a running broker (its log lines, its
other connections, its memory) reached over TCP, while atheris drives one in-process function
under libFuzzer's coverage loop, which would need the decoder and handlers called outside the
broker's event loop and a native wheel per Python version. Hypothesis is already the suite's
generator of valid requests (tests/support/schema_strategies.py): it builds the seed corpus,
deterministically from the seed, and a seeded mutator turns each seed into frames fast enough
for tens of thousands in the suite and millions in `make fuzz`.

Mutations: bit flips, truncation, negative and huge lengths and counts (int16/int32 windows),
overlong and overflowing varints, a null in a field the schema does not let be null (schema
driven), unknown tagged fields (body and header), wrong or other APIs' versions in the header,
and trailing bytes. Every frame's size prefix is kept true to what is sent.

Run `python -m tests.support.fuzz --seed N --frames N --seconds N` (what `make fuzz` does).
CreateTopics and CreatePartitions frames that decode as a real (not validate-only) change are
not sent: a mutated partition count would fill the disk with directories, which says nothing
about input handling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

import broker.apis  # noqa: F401  (registers every API)
from broker.network.registry import REGISTRY
from protocol.apis import ApiKey
from tests.support.schema_strategies import message

_SENTINEL_CORR = 0x7FFF_FFF0
_API_VERSIONS_V0 = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, _SENTINEL_CORR, 5) + b"fuzz!"
SENTINEL = struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0
_SKIP_REAL_CHANGES = {int(ApiKey.CREATE_TOPICS), int(ApiKey.CREATE_PARTITIONS)}


@dataclass
class Seed:
    api_key: int
    version: int
    flexible: bool
    body: bytes
    null_bodies: list[bytes] = field(default_factory=list)


def _nullable_capable(f: Any) -> bool:
    return f.is_array() or f.is_struct() or f.type_str in ("string", "bytes", "records")


def _null_variants(cls: Any, version: int, request: Any) -> list[bytes]:
    """Encodings of `request` with one field the schema forbids to be null set to None, at the
    top level and in the first element of each array of structs."""
    out: list[bytes] = []

    def visit(fields: Any, obj: Any) -> None:
        for f in fields or ():
            if not f.for_version_q(version) or f.tagged_field_q(version):
                continue
            value = getattr(obj, f.name, None)
            if _nullable_capable(f) and not f.nullable_for_version_q(version) and value is not None:
                setattr(obj, f.name, None)
                try:
                    out.append(bytes(request.encode(version=version)))
                except Exception:
                    pass
                setattr(obj, f.name, value)
            if f.is_struct_array() and value:
                visit(f.array_of._fields, value[0])
            elif f.is_struct() and not f.is_array() and value is not None:
                visit(f._fields, value)

    visit(cls._struct._fields, request)
    return out


def seed_corpus(rng_seed: int, per_version: int = 3) -> list[Seed]:
    """Valid requests of every served (api, version), drawn by hypothesis from `rng_seed`."""
    corpus: list[Seed] = []
    for spec in sorted(REGISTRY.values(), key=lambda s: s.key):
        for version in range(spec.min_version, spec.max_version + 1):
            _collect(corpus, spec, version, rng_seed, per_version)
    return corpus


def _collect(corpus: list[Seed], spec: Any, version: int, rng_seed: int, count: int) -> None:
    cls = spec.request_cls

    @seed(rng_seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(message(cls, version))
    def collect(request: Any) -> None:
        body = bytes(request.encode(version=version))
        corpus.append(Seed(spec.key, version, spec.flexible(version), body, _null_variants(cls, version, request)))

    collect()


def _header(api_key: int, version: int, corr: int, flexible: bool, client_id: bytes = b"fuzz") -> bytes:
    head = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    return head + (b"\x00" if flexible else b"")


_HUGE32 = [-1, -2, -(1 << 31), (1 << 31) - 1, 1 << 30, 0x00FF_FFFF]
_HUGE16 = [-1, -2, -(1 << 15), (1 << 15) - 1]
_VARINTS = [b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f", b"\xff" * 10 + b"\x01", b"\x80" * 6 + b"\x00", b"\xfe\xff\xff\xff\x07"]


class Mutator:
    """Seeded frames: each a mutation of a corpus entry (or a valid one, one time in sixteen)."""

    def __init__(self, corpus: list[Seed], rng_seed: int) -> None:
        self.corpus = corpus
        self.rng = random.Random(rng_seed)
        self.served = [(s.key, s.min_version, s.max_version) for s in REGISTRY.values()]

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """(api key, frame with size prefix), endlessly."""
        rng = self.rng
        corpus = self.corpus
        corr = 0
        while True:
            s = corpus[rng.randrange(len(corpus))]
            corr = (corr + 1) & 0x3FFF_FFFF
            head = _header(s.api_key, s.version, corr, s.flexible)
            body = s.body
            kind = rng.randrange(12)
            if kind == 0 and rng.randrange(16) == 0:
                pass  # a valid request now and then keeps handlers busy too
            elif kind <= 1:
                body = self._flip(body)
            elif kind == 2:
                body = body[: rng.randrange(len(body) + 1)]
            elif kind == 3:
                body = self._window(body, 4, _HUGE32, ">i")
            elif kind == 4:
                body = self._window(body, 2, _HUGE16, ">h")
            elif kind == 5:
                at = rng.randrange(len(body) + 1)
                body = body[:at] + rng.choice(_VARINTS) + body[at + rng.randrange(3) :]
            elif kind == 6 and s.null_bodies:
                body = rng.choice(s.null_bodies)
            elif kind == 7 and s.flexible:
                tag = rng.choice([b"\x01", b"\xff\xff\xff\xff\x0f", b"\x7f"])
                extra = b"\x01" + tag + bytes([4]) + b"junk"
                if rng.randrange(2):
                    body = body[:-1] + extra  # the body's top-level tagged fields
                else:
                    head = head[:-1] + extra  # the request header's
            elif kind == 8:
                key, lo, hi = rng.choice(self.served)
                version = rng.choice([-1, lo - 1, hi + 1, hi + 100, rng.randrange(lo, hi + 1)])
                head = _header(key if rng.randrange(2) else s.api_key, version, corr, s.flexible)
            elif kind == 9:
                body = body + rng.randbytes(rng.randrange(1, 64))
            elif kind == 10:
                body = self._flip(self._window(body, 4, _HUGE32, ">i"))
            else:
                body = rng.randbytes(rng.randrange(0, 40)) if rng.randrange(4) == 0 else self._flip(body)
            payload = head + body
            yield s.api_key, struct.pack(">i", len(payload)) + payload

    def _flip(self, body: bytes) -> bytes:
        if not body:
            return body
        out = bytearray(body)
        for _ in range(self.rng.randrange(1, 9)):
            out[self.rng.randrange(len(out))] ^= 1 << self.rng.randrange(8)
        return bytes(out)

    def _window(self, body: bytes, width: int, values: list[int], fmt: str) -> bytes:
        if len(body) < width:
            return body
        out = bytearray(body)
        struct.pack_into(fmt, out, self.rng.randrange(len(body) - width + 1), self.rng.choice(values))
        return bytes(out)


def makes_real_change(api_key: int, frame: bytes) -> bool:
    """A CreateTopics/CreatePartitions frame that would really create something."""
    if api_key not in _SKIP_REAL_CHANGES or len(frame) < 14:
        return False
    _, key, version = struct.unpack_from(">ihh", frame)
    spec = REGISTRY.get(key)
    if spec is None or key not in _SKIP_REAL_CHANGES or not spec.min_version <= version <= spec.max_version:
        return False
    try:
        (clen,) = struct.unpack_from(">h", frame, 12)
        pos = 14 + max(clen, 0) + (1 if spec.flexible(version) else 0)
        request = spec.decode(memoryview(frame)[pos:], version)
    except Exception:
        return False
    return not getattr(request, "validate_only", False)


@dataclass
class Stats:
    sent: int = 0
    skipped: int = 0
    closed: int = 0
    answered: int = 0
    parked: int = 0
    seconds: float = 0.0
    rss_kb: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0


async def _send_one(state: dict[str, Any], frame: bytes, host: str, port: int, wait: float) -> str:
    """Send a frame, then the sentinel; 'answered' once the sentinel's answer comes back (the
    connection is reused), 'closed' when the broker hung up, 'parked' when neither in time."""
    conn = state.get("conn")
    if conn is None:
        conn = state["conn"] = await asyncio.open_connection(host, port)
    reader, writer = conn
    writer.write(frame + SENTINEL)
    try:
        async with asyncio.timeout(wait):
            while True:
                size_raw = await reader.readexactly(4)
                (size,) = struct.unpack(">i", size_raw)
                data = await reader.readexactly(size)
                if struct.unpack_from(">i", data)[0] == _SENTINEL_CORR:
                    return "answered"
    except (asyncio.IncompleteReadError, ConnectionError):
        outcome = "closed"
    except TimeoutError:
        outcome = "parked"
    state["conn"] = None
    writer.close()
    try:
        await writer.wait_closed()
    except (ConnectionError, OSError):
        pass
    return outcome


async def _healthy(host: str, port: int) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(SENTINEL)
        async with asyncio.timeout(10):
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            data = await reader.readexactly(size)
        assert struct.unpack_from(">ih", data)[1] == 0, "ApiVersions on a healthy connection failed"
    finally:
        writer.close()


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def fuzz(
    host: str,
    port: int,
    pid: int,
    *,
    rng_seed: int,
    frames: int,
    seconds: float,
    batch: int = 2000,
    concurrency: int = 24,
    wait: float = 0.5,
    corpus: list[Seed] | None = None,
) -> Stats:
    """Send up to `frames` mutated frames (or until `seconds` pass) in batches; after every
    batch a fresh connection must get an ApiVersions answer, and the broker's RSS is sampled."""
    stats = Stats()
    mutator = Mutator(corpus if corpus is not None else seed_corpus(rng_seed), rng_seed)
    source = mutator.frames()
    started = time.monotonic()
    deadline = started + seconds
    stats.rss_kb.append(rss_kb(pid))
    while stats.sent < frames and time.monotonic() < deadline:
        todo = min(batch, frames - stats.sent)
        queue: list[bytes] = []
        while len(queue) < todo:
            key, frame = next(source)
            if makes_real_change(key, frame):
                stats.skipped += 1
                continue
            queue.append(frame)

        async def worker(mine: list[bytes]) -> None:
            state: dict[str, Any] = {}
            for f in mine:
                outcome = await _send_one(state, f, host, port, wait)
                if outcome == "answered":
                    stats.answered += 1
                elif outcome == "closed":
                    stats.closed += 1
                else:
                    stats.parked += 1
            conn = state.get("conn")
            if conn is not None:
                conn[1].close()

        await asyncio.gather(*(worker(queue[i::concurrency]) for i in range(concurrency)))
        stats.sent += len(queue)
        await _healthy(host, port)
        stats.rss_kb.append(rss_kb(pid))
    stats.seconds = time.monotonic() - started
    return stats


def bad_lines(lines: list[str]) -> list[str]:
    """Broker stderr lines that break the fuzzer's rules: not a JSON record (a raw traceback),
    an ERROR or worse, 'handler failed', or an exception attached."""
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if record.get("level") in ("error", "critical") or "handler failed" in str(record.get("event")) or "exception" in record:
            out.append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    from broker.embed import BrokerProcess

    parser = argparse.ArgumentParser(description="fuzz a kaflet broker process with mutated requests")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "1")))
    parser.add_argument("--frames", type=int, default=int(os.environ.get("FUZZ_FRAMES", "2000000")))
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("FUZZ_SECONDS", "600")))
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(args.data_dir or tmp) / "data"
        bp = BrokerProcess(data_dir, "--offsets-partitions", "3", "--no-auto-create-topics").start()
        try:
            assert bp.proc is not None
            stats = asyncio.run(fuzz("127.0.0.1", bp.port, bp.proc.pid, rng_seed=args.seed, frames=args.frames, seconds=args.seconds))
        finally:
            bp.stop()
        bad = bad_lines(bp.lines)
    print(
        f"seed {args.seed}: {stats.sent} frames in {stats.seconds:.1f} s ({stats.rate:.0f}/s): {stats.answered} answered, "
        f"{stats.closed} closed, {stats.parked} parked, {stats.skipped} real topic changes skipped; "
        f"RSS {stats.rss_kb[0] // 1024} -> max {max(stats.rss_kb) // 1024} -> {stats.rss_kb[-1] // 1024} MiB"
    )
    for line in bad[:20]:
        print("BAD:", describe(line), file=sys.stderr)
    return 1 if bad else 0


def describe(line: str) -> str:
    """One bad line, short: its event, API and the innermost frames of its exception."""
    try:
        record = json.loads(line)
    except ValueError:
        return line[:500]
    text = f"{record.get('event')} {record.get('api', '')} v{record.get('api_version', '')}"
    for exc in record.get("exception") or []:
        frames = " <- ".join(f"{f['filename'].rsplit('/', 2)[-1]}:{f['lineno']} {f['name']}" for f in reversed(exc.get("frames", [])[-3:]))
        text += f": {exc.get('exc_type')}: {exc.get('exc_value')} at {frames}"
    return text


if __name__ == "__main__":
    sys.exit(main())
