"""The embedded consumer protocol of classic members (RF-6), as migration needs it (KM-2, KM-3):
ConsumerProtocolSubscription v0-v3 read, ConsumerProtocolAssignment written at a given version.
Both are classic (non-flexible) encodings prefixed by an int16 version."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


class EmbeddedProtocolError(ValueError):
    """The bytes are not a ConsumerProtocolSubscription / Assignment."""


@dataclass
class Subscription:
    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned: list[tuple[str, list[int]]] = field(default_factory=list)
    generation: int = -1
    rack_id: str | None = None


class _R:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise EmbeddedProtocolError("truncated consumer protocol")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def string(self, nullable: bool = False) -> str | None:
        n = self.int16()
        if n < 0:
            if nullable:
                return None
            raise EmbeddedProtocolError("null string")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EmbeddedProtocolError("string is not UTF-8") from exc

    def array(self) -> int:
        n = self.int32()
        if n < 0:
            raise EmbeddedProtocolError("null array")
        return n


def parse_subscription(data: bytes) -> Subscription:
    """Any version (a newer one than 3 is read as 3: later versions only append fields)."""
    r = _R(data)
    version = r.int16()
    if version < 0:
        raise EmbeddedProtocolError(f"bad subscription version {version}")
    topics = [r.string() or "" for _ in range(r.array())]
    n = r.int32()
    user_data = r.take(n) if n >= 0 else None
    sub = Subscription(version, topics, user_data)
    if version >= 1:
        for _ in range(r.array()):
            topic = r.string() or ""
            sub.owned.append((topic, [r.int32() for _ in range(r.array())]))
    if version >= 2:
        sub.generation = r.int32()
    if version >= 3:
        sub.rack_id = r.string(nullable=True)
    return sub


def subscription_version(data: bytes) -> int:
    if len(data) < 2:
        raise EmbeddedProtocolError("no version")
    return int(struct.unpack_from(">h", data, 0)[0])


def serialize_assignment(partitions: dict[str, list[int]], version: int) -> bytes:
    """ConsumerProtocolAssignment (no user data) at `version` (0-3 share one layout)."""
    out = [struct.pack(">hi", max(0, min(version, 3)), len(partitions))]
    for topic, ps in sorted(partitions.items()):
        raw = topic.encode("utf-8")
        out.append(struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in sorted(ps)))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    r = _R(data)
    r.int16()
    out: dict[str, list[int]] = {}
    for _ in range(r.array()):
        topic = r.string() or ""
        out.setdefault(topic, []).extend(r.int32() for _ in range(r.array()))
    return out
