"""KIP-932's APIs (share groups), which kafka-python does not define: ShareGroupHeartbeat (76),
ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79), the share coordinator's
Initialize/Read/Write/Delete/ReadSummary ShareGroupState (83-87) and Describe/Alter/Delete
ShareGroupOffsets (90-92). The classes are built by kafka-python's own schema machinery from
Kafka 4.4's JSON schemas (`protocol/schemas/`), so they encode, decode and version exactly as
every other message does."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "protocol.schemas"


class ShareGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class ShareFetchRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ShareFetchResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class InitializeShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class InitializeShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class ReadShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class DeleteShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class DeleteShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):
    pass
