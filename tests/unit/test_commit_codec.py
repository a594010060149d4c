"""The hand-written OffsetCommit codec produces and reads exactly what the schema codec does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from protocol import commit_codec as cc

texts = st.text(max_size=30)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(st.tuples(i32, i64, i32, i64, st.one_of(st.none(), texts)), max_size=5)
topics = st.lists(st.tuples(texts, partitions), max_size=4)


@pytest.mark.parametrize("version", range(10))
@settings(max_examples=40, deadline=None)
@given(group=texts, generation=i32, member=texts, instance=st.one_of(st.none(), texts), retention=i64, topic_list=topics)
def test_request_decodes_like_the_schema_codec(
    version: int, group: str, generation: int, member: str, instance: str | None, retention: int, topic_list: list
) -> None:
    P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    request = OffsetCommitRequest[version](
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=instance,
        retention_time_ms=retention,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=name,
                partitions=[
                    P(partition_index=p, committed_offset=o, committed_leader_epoch=e, commit_timestamp=t, committed_metadata=m)
                    for p, o, e, t, m in parts
                ],
            )
            for name, parts in topic_list
        ],
    )
    decoded = cc.decode_request(bytes(request.encode()), version)
    theirs = OffsetCommitRequest.decode(bytes(request.encode()), version=version)
    assert decoded.group_id == theirs.group_id
    assert decoded.generation == (theirs.generation_id_or_member_epoch if version >= 1 else -1)
    assert decoded.member_id == (theirs.member_id if version >= 1 else "")
    assert decoded.instance_id == (theirs.group_instance_id if version >= 7 else None)
    assert decoded.retention_ms == (theirs.retention_time_ms if 2 <= version <= 4 else -1)
    expected = [
        (
            t.name,
            [
                (
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1,
                    p.commit_timestamp if version == 1 else -1,
                    p.committed_metadata,
                )
                for p in t.partitions
            ],
        )
        for t in theirs.topics
    ]
    assert [(n, [tuple(p) for p in ps]) for n, ps in decoded.topics] == expected


@pytest.mark.parametrize("version", range(10))
@settings(max_examples=40, deadline=None)
@given(topic_list=st.lists(st.tuples(texts, st.lists(st.tuples(i32, st.integers(-1, 200)), max_size=5)), max_size=4))
def test_response_encodes_like_the_schema_codec(version: int, topic_list: list) -> None:
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    theirs = OffsetCommitResponse(
        version=version,
        throttle_time_ms=0,
        topics=[
            T(name=n, partitions=[T.OffsetCommitResponsePartition(partition_index=p, error_code=e) for p, e in parts])
            for n, parts in topic_list
        ],
    )
    assert cc.encode_response(version, topic_list) == bytes(theirs.encode())


def test_truncated_request_is_a_codec_error() -> None:
    body = bytes(
        OffsetCommitRequest[8](group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[]).encode()
    )
    with pytest.raises(cc.CodecError):
        cc.decode_request(body[:-3], 8)
