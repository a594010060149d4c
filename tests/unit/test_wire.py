"""The wire: ApiVersions from the registry, downgrade answers, Metadata, framing limits."""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from broker import Broker
from broker.network.registry import served
from protocol.apis import ApiKey
from protocol.errors import ErrorCode


async def test_api_versions_lists_every_registered_api(raw: Any) -> None:
    client = await raw()
    for version in range(5):
        req = ApiVersionsRequest[version](client_software_name="kaflet-tests", client_software_version="1.0")
        resp = await client.request(req)
        assert resp.error_code == 0
        assert sorted((k.api_key, k.min_version, k.max_version) for k in resp.api_keys) == served()


async def test_api_versions_records_client_software(raw: Any, broker: Broker) -> None:
    client = await raw()
    await client.request(ApiVersionsRequest[3](client_software_name="my-lib", client_software_version="2.5.1"))
    conns = [c for c in broker.connections if c.client_software]
    assert [c.client_software for c in conns] == [("my-lib", "2.5.1")]


async def test_api_versions_invalid_software_name_is_invalid_request(raw: Any) -> None:
    client = await raw()
    req = ApiVersionsRequest[3](client_software_name="-bad name", client_software_version="1")
    req.with_header(correlation_id=5, client_id="t")
    await client.send_raw(bytes(req.encode(header=True, framed=True)))
    frame = await client.read_frame()
    # Kafka answers at the request's version; kafka-python's decoder would assume v0 on any error.
    resp = ApiMessage.decode.__func__(ApiVersionsResponse, frame[4:], version=3)
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    assert resp.api_keys == []


async def test_too_new_api_versions_gets_v0_downgrade_answer(raw: Any) -> None:
    client = await raw()
    # ApiVersions v9 does not exist: header v2, empty body; the broker must answer with a v0 body.
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 77, 3) + b"raw" + b"\x00"
    await client.send_raw(struct.pack(">i", len(header)) + header)
    frame = await client.read_frame()
    assert struct.unpack_from(">i", frame)[0] == 77
    resp = ApiVersionsResponse.decode(frame[4:], version=0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert sorted((k.api_key, k.min_version, k.max_version) for k in resp.api_keys) == served()


async def test_metadata_describes_this_node(raw: Any, broker: Broker) -> None:
    client = await raw()
    for version in range(13):
        topics = [] if version == 0 else None
        resp = await client.request(MetadataRequest[version](topics=topics, allow_auto_topic_creation=False))
        assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.1", broker.bound_port)]
        if version >= 1:
            assert resp.controller_id == 1
        if version >= 2:
            assert resp.cluster_id == broker.cluster_id


async def test_metadata_auto_creates_topics_when_allowed(raw: Any, broker: Broker) -> None:
    client = await raw()
    resp = await client.request(
        MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="fresh", topic_id=None)], allow_auto_topic_creation=True)
    )
    (topic,) = resp.topics
    assert topic.error_code == 0 and topic.name == "fresh" and topic.topic_id is not None
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [(0, 1, [1], [1])]
    resp = await client.request(
        MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="other", topic_id=None)], allow_auto_topic_creation=False)
    )
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_metadata_invalid_topic_name(raw: Any) -> None:
    client = await raw()
    resp = await client.request(
        MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name="bad/name")], allow_auto_topic_creation=True)
    )
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
