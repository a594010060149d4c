"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), v0-v1: KIP-848's APIs, which
kafka-python does not define. The classes are built by kafka-python's own schema machinery
from Kafka's JSON schemas (`protocol/schemas/`), so they encode, decode and version exactly as
every other message does."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "protocol.schemas"


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):
    pass


__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]
