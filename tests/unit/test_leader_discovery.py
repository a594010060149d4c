"""KIP-951's fields as the hand-written Produce and Fetch encoders write them: byte for byte what
the schema codec (kafka-python's, from Kafka's JSON message schemas) writes for the same answer."""

from __future__ import annotations

import uuid

from broker.apis import fetch, produce
from protocol.apis import ApiKey, response_class

ProduceResponse = response_class(ApiKey.PRODUCE)
FetchResponse = response_class(ApiKey.FETCH)
ENDPOINT = (2, "127.0.0.1", 9093, "rack-b")


def test_produce_v11_current_leader_and_node_endpoints() -> None:
    ours = produce.encode_response(
        11, [("t", [produce.PartitionResult(0, 6, current_leader=(2, 5)), produce.PartitionResult(1)])], [ENDPOINT]
    )
    _T = ProduceResponse.TopicProduceResponse
    _P = _T.PartitionProduceResponse
    theirs = ProduceResponse(
        version=11,
        responses=[
            _T(
                name="t",
                partition_responses=[
                    _P(index=0, error_code=6, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1, record_errors=[], error_message=None,
                       current_leader=_P.LeaderIdAndEpoch(leader_id=2, leader_epoch=5)),
                    _P(index=1, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1, record_errors=[], error_message=None),
                ],
            )
        ],
        throttle_time_ms=0,
        node_endpoints=[ProduceResponse.NodeEndpoint(node_id=2, host="127.0.0.1", port=9093, rack="rack-b")],
    )  # fmt: skip
    assert ours == bytes(theirs.encode())
    older = produce.encode_response(9, [("t", [produce.PartitionResult(0, 6, current_leader=(2, 5))])], [ENDPOINT])
    decoded = ProduceResponse.decode(older, version=9)
    assert decoded.responses[0].partition_responses[0].error_code == 6  # before v10 the fields are not written


def test_fetch_v16_current_leader_and_node_endpoints() -> None:
    topic_id = uuid.uuid4()
    part = fetch._Partition(0, 0, 0, -1, None, 6)
    part.current_leader = (3, 7)
    ours = b"".join(bytes(b) for b in fetch.encode_response(16, 0, [fetch._Topic("t", topic_id, [part])], False, [(3, "h", 1, None)]))
    _T = FetchResponse.FetchableTopicResponse
    _P = _T.PartitionData
    theirs = FetchResponse(
        version=16,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            _T(
                topic_id=topic_id,
                partitions=[
                    _P(partition_index=0, error_code=6, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                       preferred_read_replica=-1, records=b"", current_leader=_P.LeaderIdAndEpoch(leader_id=3, leader_epoch=7))
                ],
            )
        ],
        node_endpoints=[FetchResponse.NodeEndpoint(node_id=3, host="h", port=1, rack=None)],
    )  # fmt: skip
    assert ours == bytes(theirs.encode())
