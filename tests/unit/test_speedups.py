"""The compiled fast path (protocol/_speedups.c) gives exactly what its pure-Python twins give,
or refuses exactly where they refuse, on the same inputs. Skipped where it is not built or
KAFLET_PURE_PYTHON=1 forces the pure path (make test reruns the codec tests that way)."""

from __future__ import annotations

import crc32c as crc32c_package
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest

from protocol import commit_codec as cc
from protocol import records as rec
from protocol.compiled import speedups

pytestmark = pytest.mark.skipif(speedups is None, reason="the compiled path is not in use (not built, or KAFLET_PURE_PYTHON=1)")

texts = st.text(max_size=30)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(st.tuples(i32, i64, i32, st.one_of(st.none(), texts)), max_size=5)
topics = st.lists(st.tuples(texts, partitions), max_size=4)


def _pure_decode(body: bytes, version: int) -> cc.CommitRequest:
    try:
        return cc._decode_flexible(body, version)
    except (IndexError, ValueError, UnicodeDecodeError, __import__("struct").error) as exc:
        raise cc.CodecError(str(exc)) from None


def _both(body: bytes, version: int) -> tuple[object, object]:
    out = []
    for decode in (lambda: speedups.decode_commit_flexible(body, version), lambda: _pure_decode(body, version)):
        try:
            out.append(decode())
        except cc.CodecError:
            out.append(cc.CodecError)
    return out[0], out[1]


def _request(version: int, group: str, generation: int, member: str, instance: str | None, topic_list: list) -> bytes:
    P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    return bytes(
        OffsetCommitRequest[version](
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member,
            group_instance_id=instance,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=name,
                    partitions=[
                        P(partition_index=p, committed_offset=o, committed_leader_epoch=e, committed_metadata=m) for p, o, e, m in parts
                    ],
                )
                for name, parts in topic_list
            ],
        ).encode()
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from([8, 9]),
    group=texts,
    generation=i32,
    member=texts,
    instance=st.one_of(st.none(), texts),
    topic_list=topics,
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3),
)
def test_requests_decode_alike_whole_cut_or_corrupted(
    version: int, group: str, generation: int, member: str, instance: str | None, topic_list: list, cut: int, flips: list
) -> None:
    body = _request(version, group, generation, member, instance, topic_list)
    fast, pure = _both(body, version)
    assert fast == pure and type(fast) is type(pure)
    assert all(type(p) is cc.CommitPartition for _, ps in fast.topics for p in ps)  # type: ignore[attr-defined]
    fast, pure = _both(body[: cut % (len(body) + 1)], version)  # truncated anywhere
    assert fast == pure
    corrupted = bytearray(body)
    for at, byte in flips:
        corrupted[at % len(corrupted)] = byte
    fast, pure = _both(bytes(corrupted), version)
    assert fast == pure


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=120), version=st.sampled_from([8, 9]))
def test_random_bytes_decode_alike(body: bytes, version: int) -> None:
    fast, pure = _both(body, version)
    assert fast == pure


@pytest.mark.parametrize("version", range(10))
@settings(max_examples=40, deadline=None)
@given(topic_list=st.lists(st.tuples(texts, st.lists(st.tuples(i32, st.integers(-(2**15), 2**15 - 1)), max_size=5)), max_size=4))
def test_responses_encode_alike(version: int, topic_list: list) -> None:
    assert speedups.encode_commit_response(version, topic_list) == cc.encode_response_py(version, topic_list)


fields = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=150, deadline=None)
@given(records=st.lists(st.tuples(fields, fields), min_size=1, max_size=70), ts=i64)
def test_batches_build_alike(records: list, ts: int) -> None:
    built = speedups.build_batch(records, ts)
    assert built == rec.build_batch_py(records, ts)
    assert speedups.batch_size(records) == rec.batch_size_py(records) == len(built)
    assert rec.read_header(built, 0).record_count == len(records)


def _max_alike(body: bytes, count: int, base: int) -> tuple[object, object]:
    out: list[object] = []
    for walk in (speedups.records_max_timestamp, rec.records_max_timestamp_py):
        try:
            out.append(walk(body, 0, len(body), count, base))
        except ValueError as exc:
            out.append(("ValueError", str(exc)))
    return out[0], out[1]


records_with_headers = st.lists(
    st.tuples(i64, fields, fields, st.lists(st.tuples(st.text(max_size=8), fields), max_size=3)), min_size=1, max_size=20
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_with_headers,
    base=i64,
    count_delta=st.integers(-2, 2),
    cut=st.integers(0, 2000),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3),
)
def test_record_walks_agree_whole_cut_or_corrupted(records: list, base: int, count_delta: int, cut: int, flips: list) -> None:
    """The largest record timestamp, or the same refusal, for well-formed records, a wrong count,
    records cut anywhere and corrupted bytes (timestamps wrap as Java's long does)."""
    body = bytearray()
    for i, (delta, key, value, headers) in enumerate(records):
        rec.encode_record(body, i, delta, key, value, [(k, v) for k, v in headers])
    whole = bytes(body)
    count = len(records)
    fast, pure = _max_alike(whole, count, base)
    assert fast == pure
    expected = max([-1] + [(base + d + 2**63) % 2**64 - 2**63 for d, *_ in records])
    assert fast == expected
    assert _max_alike(whole, max(0, count + count_delta), base)[0] == _max_alike(whole, max(0, count + count_delta), base)[1]
    cut_body = whole[: cut % (len(whole) + 1)]
    assert _max_alike(cut_body, count, base)[0] == _max_alike(cut_body, count, base)[1]
    corrupted = bytearray(whole)
    for at, byte in flips:
        corrupted[at % len(corrupted)] = byte
    fast, pure = _max_alike(bytes(corrupted), count, base)
    assert fast == pure


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=200), count=st.integers(0, 40), base=i64)
def test_record_walks_agree_on_random_bytes(body: bytes, count: int, base: int) -> None:
    fast, pure = _max_alike(body, count, base)
    assert fast == pure


@given(data=st.binary(max_size=3000))
def test_crc32c_is_castagnoli(data: bytes) -> None:
    assert speedups.crc32c(data) == crc32c_package.crc32c(data)


def test_what_the_compiled_path_refuses_the_wrappers_build_in_python() -> None:
    with pytest.raises(TypeError):
        speedups.build_batch([("key", b"v")], 0)
    assert rec.build_batch([(bytearray(b"k"), b"v")], timestamp_ms=5) == rec.build_batch_py([(b"k", b"v")], 5)
    with pytest.raises(ValueError):
        rec.build_batch([], timestamp_ms=0)


@settings(max_examples=300, deadline=None)
@given(
    head=st.binary(min_size=8, max_size=8),
    client_id=st.one_of(st.none(), st.text(max_size=20)),
    tags=st.lists(st.tuples(st.integers(0, 2**20), st.binary(max_size=20)), max_size=3),
    flexible=st.booleans(),
    cut=st.integers(0, 100),
    noise=st.binary(max_size=12),
)
def test_request_headers_parse_alike(head: bytes, client_id: str | None, tags: list, flexible: bool, cut: int, noise: bytes) -> None:
    from protocol import header as h

    raw_id = b"\xff\xff" if client_id is None else len(client_id.encode()).to_bytes(2, "big") + client_id.encode()
    tagged = cc._uvarint(len(tags)) + b"".join(cc._uvarint(t) + cc._uvarint(len(v)) + v for t, v in tags)
    frame = head + raw_id + (tagged if flexible else b"") + b"body"
    for buf in (frame, frame[: cut % (len(frame) + 1)], head + noise, memoryview(frame)):
        results = []
        for parse in (speedups.parse_request_header, h.parse_request_header_py):
            try:
                results.append(parse(buf, flexible))
            except h.HeaderError:
                results.append(h.HeaderError)
        assert results[0] == results[1]
        assert type(results[0]) is type(results[1])


@pytest.mark.parametrize("version", [2, 7, 8, 9])
@settings(max_examples=60, deadline=None)
@given(
    topic_list=st.lists(st.tuples(texts, st.lists(st.tuples(i32, i64, i32, st.just(-1), st.none()), max_size=5)), max_size=4),
    limit=st.integers(0, 8),
    single=st.one_of(st.none(), st.integers(0, 100)),
)
def test_answers_encode_alike(version: int, topic_list: list, limit: int, single: int | None) -> None:
    topics = [(name, [cc.CommitPartition(*p) for p in parts]) for name, parts in topic_list]
    limits = [limit + i for i in range(len(topics))]
    known = sum(1 for (_, parts), lim in zip(topics, limits, strict=True) for p in parts if 0 <= p[0] < lim)
    codes: list[int] | int = single if single is not None else [(i * 7) % 90 for i in range(known)]
    assert speedups.encode_commit_answer(version, topics, limits, codes, 3) == cc.encode_answer_py(version, topics, limits, codes, 3)
    if isinstance(codes, list):  # a code too many or too few is refused by both
        for wrong in ([*codes, 0], codes[:-1] if codes else None):
            if wrong is None:
                continue
            for encode in (speedups.encode_commit_answer, cc.encode_answer_py):
                with pytest.raises((ValueError, StopIteration)):
                    encode(version, topics, limits, wrong, 3)


@settings(max_examples=200, deadline=None)
@given(
    group=st.text(max_size=20),
    commits=st.lists(
        st.tuples(
            st.text(max_size=10),
            st.tuples(i32, i64, i32, st.one_of(st.just(-1), i64), st.one_of(st.none(), st.text(max_size=12))),
        ),
        max_size=5,
    ),
    now=i64,
    expire=st.one_of(st.just(-1), i64),
    max_meta=st.integers(0, 30),
)
def test_commit_records_build_alike(group: str, commits: list, now: int, expire: int, max_meta: int) -> None:
    """The records of accepted commits match the pure loop's; where metadata nears the limit
    (OC-6 counts UTF-16 units) the compiled twin leaves the decision to the pure loop."""
    from broker.coordinator.shard import GroupShard

    commits = [(t, cc.CommitPartition(*c)) for t, c in commits]
    built = speedups.commit_records(group, commits, now, expire, max_meta // 2)
    records, applied, results = GroupShard._commit_records_py(group, commits, now, expire, max_meta)
    if built is None:
        assert any(c[4] is not None and len(c[4]) > max_meta // 2 for _, c in commits)
    else:
        assert built == (records, applied) and not any(results)
