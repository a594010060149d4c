"""The metrics' building blocks: error walkers, histograms, label escaping."""

from __future__ import annotations

from kafka.protocol.consumer import FetchResponse, JoinGroupResponse, OffsetCommitResponse
from kafka.protocol.metadata import MetadataResponse
from kafka.protocol.producer import ProduceRequest

from broker.metrics.errors import compile_walker, error_codes
from broker.metrics.exporter import label_value
from broker.metrics.stats import Histogram
from broker.node.logging import summarize
from tests.support.metrics import parse

_OCT = OffsetCommitResponse.OffsetCommitResponseTopic
_OCP = _OCT.OffsetCommitResponsePartition
_FT = FetchResponse.FetchableTopicResponse
_FP = _FT.PartitionData


def test_walker_reads_nested_error_codes_and_skips_zeros() -> None:
    r = OffsetCommitResponse(
        version=8,
        throttle_time_ms=0,
        topics=[
            _OCT(name="a", partitions=[_OCP(partition_index=0, error_code=0), _OCP(partition_index=1, error_code=3)]),
            _OCT(name="b", partitions=[_OCP(partition_index=0, error_code=25)]),
        ],
    )
    assert error_codes(r, 8) == [3, 25]
    assert error_codes(OffsetCommitResponse(version=8, throttle_time_ms=0, topics=[]), 8) is None


def test_walker_counts_only_fields_the_version_encodes() -> None:
    partition = _FP(partition_index=0, error_code=1, high_watermark=0, last_stable_offset=0, log_start_offset=0, records=None)
    r = FetchResponse(throttle_time_ms=0, error_code=70, session_id=0, responses=[_FT(topic="t", partitions=[partition])])
    assert error_codes(r, 4) == [1]  # v4 has no top-level error code: 70 is never sent
    assert error_codes(r, 7) == [70, 1]


def test_walker_of_top_level_and_whole_schemas() -> None:
    j = JoinGroupResponse(
        version=9,
        throttle_time_ms=0,
        error_code=79,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None,
        leader="",
        skip_assignment=False,
        member_id="m",
        members=[],
    )
    assert error_codes(j, 9) == [79]
    # Metadata: topic-level and partition-level codes, nothing from brokers.
    walker = compile_walker(MetadataResponse, 12)
    topic = MetadataResponse.MetadataResponseTopic
    part = topic.MetadataResponsePartition
    m = MetadataResponse(
        version=12,
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=1,
        topics=[
            topic(error_code=3, name="x", topic_id=None, is_internal=False, partitions=[], authorized_operations=None),
            topic(
                error_code=0,
                name="y",
                topic_id=None,
                is_internal=False,
                partitions=[
                    part(
                        error_code=5,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=[1],
                        isr_nodes=[1],
                        offline_replicas=[],
                    )
                ],
                authorized_operations=None,
            ),
        ],
    )
    assert walker(m) == [3, 5]


def test_histogram_buckets_are_cumulative_with_inclusive_bounds() -> None:
    h = Histogram((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 1.0, 7.0):
        h.observe(v)
    assert h.cumulative() == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]
    assert h.count == 5 and abs(h.sum - 8.65) < 1e-9
    merged = Histogram.merged((0.1, 1.0), [h, h])
    assert merged.cumulative()[-1] == ("+Inf", 10)


def test_histogram_folds_pending_values_in_batches_and_on_read() -> None:
    bounds = (0.001, 0.01, 0.1)
    h = Histogram(bounds)
    values = [((i * 7919) % 1000) / 5000 for i in range(2 * Histogram.FOLD_AT + 17)]  # 0 .. 0.2
    for v in values:
        h.observe(v)
    assert len(h.pending) == 17  # two batches folded on the way
    expected = [sum(1 for v in values if v <= b) for b in bounds] + [len(values)]
    assert [n for _, n in h.cumulative()] == expected
    assert len(h.pending) == 0 and abs(h.sum - sum(values)) < 1e-9
    h.pending.append(0.05)  # what the request path and the log append do
    assert h.count == len(values) + 1


def test_label_values_round_trip_through_the_parser() -> None:
    odd = 'a"b\\c\nd'
    text = f'# TYPE x gauge\nx{{g="{label_value(odd)}",h="{label_value("plain")}"}} 1\n'
    assert parse(text).value("x", g=odd, h="plain") == 1


def test_debug_summaries_show_bytes_by_size_and_only_the_versions_fields() -> None:
    topic = ProduceRequest.TopicProduceData
    part = topic.PartitionProduceData
    r = ProduceRequest(
        version=9,
        transactional_id=None,
        acks=-1,
        timeout_ms=30,
        topic_data=[topic(name="t", partition_data=[part(index=i, records=b"x" * 1000) for i in range(25)])],
    )
    text = summarize(r)
    assert text.startswith("ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30, topic_data=[TopicProduceData(name='t', ")
    assert "topic_id" not in text  # a v13 field
    assert "records=<1000 bytes>" in text and "... 25 items]" in text
    assert len(summarize(r, limit=100)) == 100
