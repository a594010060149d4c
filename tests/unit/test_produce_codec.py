"""protocol/produce_codec.py against kafka-python's schema codec: the same request on every
served version (records as views, not copies), and None (the schema codec decides) for
anything else: whenever the fast codec answers, the schema codec gives the same request."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import produce_codec
from protocol.apis import ApiKey, request_class
from tests.support import data as d

VERSIONS = range(3, 12)
ProduceRequest = request_class(ApiKey.PRODUCE)


def schema_decode(body: bytes, version: int) -> Any:
    return ProduceRequest.decode(body, version=version)


def as_plain(req: Any) -> tuple[Any, ...]:
    """What handlers read, from either codec's request."""
    return (
        req.transactional_id,
        req.acks,
        req.timeout_ms,
        [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data]) for t in req.topic_data],
    )


def body_of(req: Any, version: int) -> bytes:
    req.API_VERSION = version
    return bytes(req.encode(version=version))


def request(version: int, txn: str | None, topics: list[tuple[str, list[tuple[int, bytes | None]]]], acks: int = -1) -> Any:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    return ProduceRequest(
        version=version,
        transactional_id=txn,
        acks=acks,
        timeout_ms=30000,
        topic_data=[T(name=n, partition_data=[P(index=i, records=r) for i, r in parts]) for n, parts in topics],
    )


SHAPES = [
    (None, [("t", [(0, d.batch(3))])]),
    ("txn-1", [("t", [(0, d.batch(1)), (1, None), (2, b"")]), ("tópico-ü", [(7, d.batch(2))])]),
    (None, []),
    ("", [("x" * 249, [(2_147_483_647, bytes(300))])]),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_same_request_as_the_schema_codec(version: int, shape: int) -> None:
    txn, topics = SHAPES[shape]
    body = body_of(request(version, txn, topics), version)
    fast = produce_codec.decode_request(memoryview(body), version)
    assert fast is not None
    assert as_plain(fast) == as_plain(schema_decode(body, version))
    assert fast.API_VERSION == version
    for t in fast.topic_data:
        for p in t.partition_data:
            assert p.records is None or isinstance(p.records, memoryview)  # a view of the frame: no copy


@pytest.mark.parametrize("version", VERSIONS)
def test_odd_bodies_are_left_to_the_schema_codec(version: int) -> None:
    body = body_of(request(version, "txn", [("t", [(0, d.batch(2))])]), version)
    assert produce_codec.decode_request(memoryview(body[:-3]), version) is None  # ends early
    assert produce_codec.decode_request(memoryview(body + b"\x00"), version) is None  # bytes left over
    flexible = version >= produce_codec.FIRST_FLEXIBLE
    # TopicData serialized as null (-1 / compact 0): not nullable, so the schema codec's checks decide.
    head = body[: body.index(b"txn") + 3 + 6]  # transactional id, acks, timeout
    null_topics = head + (b"\x00\x00" if flexible else b"\xff\xff\xff\xff")
    assert produce_codec.decode_request(memoryview(null_topics), version) is None
    if flexible:
        tagged = body[:-1] + b"\x01\x00\x00"  # one (empty) tagged field on the request
        assert produce_codec.decode_request(memoryview(tagged), version) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(VERSIONS)), st.data())
def test_whenever_the_fast_codec_answers_the_schema_codec_agrees(version: int, data: st.DataObject) -> None:
    # Valid bodies mutated at random: the fast codec either steps aside or matches the schema codec.
    txn, topics = SHAPES[data.draw(st.integers(0, len(SHAPES) - 1))]
    body = bytearray(body_of(request(version, txn, topics), version))
    for _ in range(data.draw(st.integers(0, 3))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    raw = bytes(body[:cut]) if data.draw(st.booleans()) else bytes(body)
    fast = produce_codec.decode_request(memoryview(raw), version)
    if fast is None:
        return
    assert as_plain(fast) == as_plain(schema_decode(raw, version))
