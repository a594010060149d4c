"""The wire: ApiVersions (pinned here as data), downgrade answers, Metadata, framing limits."""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

import broker.apis  # noqa: F401  (registers every API)
from broker import Broker
from broker.network.registry import REGISTRY
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

# What kaflet advertises, pinned: API -> (lowest version, highest version, first flexible version
# or None). Serving another range means changing this table on purpose;
# tests/differential/test_reference_api_versions.py checks it against Kafka 4.4's.
API_VERSIONS: dict[ApiKey, tuple[int, int, int | None]] = {
    ApiKey.PRODUCE: (3, 11, 9),
    ApiKey.FETCH: (4, 16, 12),
    ApiKey.LIST_OFFSETS: (1, 8, 6),
    ApiKey.METADATA: (0, 12, 9),
    ApiKey.OFFSET_COMMIT: (2, 9, 8),
    ApiKey.OFFSET_FETCH: (1, 9, 6),
    ApiKey.FIND_COORDINATOR: (0, 6, 3),
    ApiKey.JOIN_GROUP: (0, 9, 6),
    ApiKey.HEARTBEAT: (0, 4, 4),
    ApiKey.LEAVE_GROUP: (0, 5, 4),
    ApiKey.SYNC_GROUP: (0, 5, 4),
    ApiKey.DESCRIBE_GROUPS: (0, 6, 5),
    ApiKey.LIST_GROUPS: (0, 5, 3),
    ApiKey.SASL_HANDSHAKE: (0, 1, None),
    ApiKey.API_VERSIONS: (0, 4, 3),
    ApiKey.CREATE_TOPICS: (2, 7, 5),
    ApiKey.DELETE_TOPICS: (1, 6, 4),
    ApiKey.DELETE_RECORDS: (0, 2, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5, 2),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4, 3),
    ApiKey.END_TXN: (0, 4, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5, 3),
    ApiKey.DESCRIBE_ACLS: (1, 3, 2),
    ApiKey.CREATE_ACLS: (1, 3, 2),
    ApiKey.DELETE_ACLS: (1, 3, 2),
    ApiKey.DESCRIBE_CONFIGS: (1, 4, 4),
    ApiKey.ALTER_CONFIGS: (0, 2, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3, 2),
    ApiKey.DELETE_GROUPS: (0, 2, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1, 1),
    ApiKey.OFFSET_DELETE: (0, 0, None),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1, 0),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1, 0),
    ApiKey.STREAMS_GROUP_HEARTBEAT: (0, 1, 0),
    ApiKey.STREAMS_GROUP_DESCRIBE: (0, 1, 0),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1, 0),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1, 0),
    ApiKey.SHARE_FETCH: (1, 2, 0),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2, 0),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1, 0),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0, 0),
}
ADVERTISED = {int(key): (lo, hi) for key, (lo, hi, _flex) in API_VERSIONS.items()}


def advertised(resp: Any) -> dict[int, tuple[int, int]]:
    listed = [k.api_key for k in resp.api_keys]
    assert len(listed) == len(set(listed)), listed  # each API once
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


async def test_api_versions_answers_the_pinned_table(raw: Any) -> None:
    client = await raw()
    for version in range(5):
        req = ApiVersionsRequest[version](client_software_name="kaflet-tests", client_software_version="1.0")
        resp = await client.request(req)
        assert resp.error_code == 0
        assert advertised(resp) == ADVERTISED


def test_each_api_is_flexible_from_its_pinned_version() -> None:
    """The codec reads and writes the flexible encoding (compact fields, tagged fields, header v2)
    exactly from the pinned version on, for every API."""
    encodings = {key: [REGISTRY[key].flexible(v) for v in range(low, high + 1)] for key, (low, high, _flex) in API_VERSIONS.items()}
    assert encodings == {
        key: [first is not None and v >= first for v in range(low, high + 1)] for key, (low, high, first) in API_VERSIONS.items()
    }


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
    assert advertised(resp) == ADVERTISED


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
