"""The embedded consumer protocol, parsed only where the coordinator must know topics (RF-6)."""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription, read with the v0 layout every version starts with.

    Returns None when the bytes do not parse (the coordinator then does not know the topics).
    """
    try:
        pos = 2  # int16 version; v0 is a prefix of every later version
        (count,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        if count < 0:
            return None
        topics = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(metadata[pos : pos + length].decode("utf-8"))
            pos += length
        (user_data_len,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        if user_data_len > 0 and pos + user_data_len > len(metadata):
            return None
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
