"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89), v0-v1: KIP-1071's APIs, which
kafka-python does not define. As protocol/kip848.py does for KIP-848, the classes are built by
kafka-python's schema machinery from Kafka's JSON schemas (`protocol/schemas/`), written to match
Kafka 4.4's generated message classes field for field (tests/differential/streams/test_schemas.py checks
them against the schemas of the kafka-clients jar the reference broker runs)."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "protocol.schemas"


class StreamsGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class StreamsGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):
    pass


__all__ = [
    "StreamsGroupDescribeRequest",
    "StreamsGroupDescribeResponse",
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupHeartbeatResponse",
]
