"""RF-2/RF-5: the consumer-group records (types 3-8) in Kafka's byte formats, round trips, and
the codecs of ConsumerGroupHeartbeat/ConsumerGroupDescribe against hand-encoded bytes."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.kip848 import ConsumerGroupHeartbeatRequest
from storage import offsets_records as orec

T1 = uuid.UUID("00000000-0000-0000-0000-000000000001")

names = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF), max_size=8)
maybe = st.one_of(st.none(), names)
parts = st.lists(st.tuples(st.uuids(), st.lists(st.integers(0, 2**31 - 1), max_size=4)), max_size=3)


def test_rf_2_keys_are_type_prefixed_and_non_flexible() -> None:
    assert orec.consumer_group_key(3, "g") == b"\x00\x03\x00\x01g"
    assert orec.consumer_group_key(8, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"
    assert orec.parse_consumer_group_key(b"\x00\x05\x00\x01g\x00\x02mm") == (5, "g", "mm")


def test_rf_2_values_exact_bytes() -> None:
    # version 0, Epoch 7, no tagged fields
    assert orec.consumer_group_epoch_value(7) == b"\x00\x00\x00\x00\x00\x07\x00"
    target = orec.consumer_target_assignment_value([(T1, [0, 2])])
    assert target == b"\x00\x00" + b"\x02" + T1.bytes + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x02" + b"\x00" + b"\x00"
    current = orec.consumer_current_assignment_value(orec.CurrentAssignmentValue(3, 2, 1, [(T1, [1])], []))
    assert (
        current
        == b"\x00\x00" + b"\x00\x00\x00\x03\x00\x00\x00\x02\x01" + b"\x02" + T1.bytes + b"\x02\x00\x00\x00\x01\x00" + b"\x01" + b"\x00"
    )
    meta = orec.consumer_member_metadata_value(orec.ConsumerMemberMetadataValue(None, "r", "c", "/h", ["a"], None, 5000, "range"))
    assert (
        meta
        == b"\x00\x00" + b"\x00" + b"\x02r" + b"\x02c" + b"\x03/h" + b"\x02\x02a" + b"\x00" + b"\x00\x00\x13\x88" + b"\x06range" + b"\x00"
    )


@settings(max_examples=50, deadline=None)
@given(maybe, maybe, names, names, st.lists(names, max_size=3), maybe, st.integers(-1, 2**31 - 1), maybe, st.booleans())
def test_rf_2_member_metadata_round_trip(instance, rack, client, host, topics, regex, timeout, assignor, classic) -> None:  # type: ignore[no-untyped-def]
    value = orec.ConsumerMemberMetadataValue(
        instance,
        rack,
        client,
        host,
        topics,
        regex,
        timeout,
        assignor,
        orec.ClassicMemberMetadata(45000, [("range", b"\x00\x01")]) if classic else None,
    )
    assert orec.parse_consumer_member_metadata_value(orec.consumer_member_metadata_value(value)) == value


@settings(max_examples=50, deadline=None)
@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(-128, 127), parts, parts)
def test_rf_2_current_assignment_round_trip(epoch, previous, state, assigned, pending) -> None:  # type: ignore[no-untyped-def]
    value = orec.CurrentAssignmentValue(epoch, previous, state, assigned, pending)
    assert orec.parse_consumer_current_assignment_value(orec.consumer_current_assignment_value(value)) == value
    assert orec.parse_consumer_target_assignment_value(orec.consumer_target_assignment_value(assigned)) == assigned


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.uuids(), names, st.integers(0, 10_000)), max_size=4))
def test_rf_2_partition_metadata_round_trip(topics) -> None:  # type: ignore[no-untyped-def]
    value = [orec.TopicMetadata(*t) for t in topics]
    assert orec.parse_consumer_group_partition_metadata_value(orec.consumer_group_partition_metadata_value(value)) == value


def test_rf_2_truncated_values_are_format_errors() -> None:
    raw = orec.consumer_current_assignment_value(orec.CurrentAssignmentValue(1, 0, 0, [(T1, [1])], []))
    for cut in range(len(raw)):
        try:
            orec.parse_consumer_current_assignment_value(raw[:cut])
        except orec.RecordFormatError:
            continue
        raise AssertionError(f"a value cut at {cut} bytes parsed")


def test_heartbeat_request_v1_bytes() -> None:
    """ConsumerGroupHeartbeatRequest v1 body, encoded by hand from Kafka's schema."""
    req = ConsumerGroupHeartbeatRequest(
        version=1,
        group_id="g",
        member_id="m",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=["a"],
        subscribed_topic_regex="a.*",
        server_assignor=None,
        topic_partitions=[],
    )
    body = (
        b"\x02g"
        + b"\x02m"
        + b"\x00\x00\x00\x00"
        + b"\x00"
        + b"\x00"
        + b"\x00\x00\x13\x88"
        + b"\x02\x02a"
        + b"\x04a.*"
        + b"\x00"
        + b"\x01"
        + b"\x00"
    )
    assert bytes(req.encode(version=1)) == body
    assert ConsumerGroupHeartbeatRequest.decode(body, version=1) == req
