"""The hand-written ConsumerGroupHeartbeat codec reads and writes exactly what the schema codec
does (protocol/kip848.py, built from Kafka's JSON schemas), for generated messages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

from protocol import kip848_codec
from protocol.commit_codec import CodecError
from protocol.kip848 import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from tests.support.schema_strategies import message


@pytest.mark.parametrize("version", [0, 1])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_request_decodes_like_the_schema_codec(version: int, data: st.DataObject) -> None:
    original = data.draw(message(ConsumerGroupHeartbeatRequest, version))
    body = bytes(original.encode(version=version))
    if original.group_id is None or original.member_id is None:
        with pytest.raises(CodecError):
            kip848_codec.decode_request(body, version)
        return
    got = kip848_codec.decode_request(body, version)
    for name in ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout_ms", "server_assignor"):
        assert getattr(got, name) == getattr(original, name), name
    assert got.subscribed_topic_names == (None if original.subscribed_topic_names is None else list(original.subscribed_topic_names))
    assert got.subscribed_topic_regex == (original.subscribed_topic_regex if version >= 1 else None)
    if original.topic_partitions is None:
        assert got.topic_partitions is None
    else:
        assert [(t.topic_id, list(t.partitions)) for t in got.topic_partitions] == [
            (t.topic_id, list(t.partitions)) for t in original.topic_partitions
        ]


def test_truncated_requests_are_codec_errors() -> None:
    req = ConsumerGroupHeartbeatRequest(
        version=1,
        group_id="g",
        member_id="m",
        member_epoch=3,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=["a"],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )
    body = bytes(req.encode(version=1))
    for cut in range(len(body)):
        with pytest.raises(CodecError):
            kip848_codec.decode_request(body[:cut], 1)
    with pytest.raises(CodecError):
        kip848_codec.decode_request(body + b"\x00", 1)


@pytest.mark.parametrize("version", [0, 1])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_response_encodes_like_the_schema_codec(version: int, data: st.DataObject) -> None:
    original: Any = data.draw(message(ConsumerGroupHeartbeatResponse, version))
    if original.throttle_time_ms != 0:
        original.throttle_time_ms = 0  # the broker never throttles
    assignment = None
    if original.assignment is not None:
        assignment = [(t.topic_id, list(t.partitions)) for t in original.assignment.topic_partitions]
        if any(tid is None for tid, _ in assignment):
            return  # the broker never writes the all-zero id
    ours = kip848_codec.encode_response(
        original.error_code, original.error_message, original.member_id, original.member_epoch, original.heartbeat_interval_ms, assignment
    )
    assert ours == bytes(original.encode(version=version))
    assert ApiMessage.decode.__func__(ConsumerGroupHeartbeatResponse, ours, version=version) is not None  # type: ignore[attr-defined]
