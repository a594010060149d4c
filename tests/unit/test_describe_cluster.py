"""DescribeCluster v0-v1 over the wire."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import DescribeClusterRequest

from broker import Broker
from protocol.errors import ErrorCode


@pytest.mark.parametrize("version", range(2))
async def test_this_node_is_the_cluster(raw: Any, broker: Broker, version: int) -> None:
    client = await raw()
    resp = await client.request(DescribeClusterRequest[version](include_cluster_authorized_operations=False))
    assert (resp.error_code, resp.error_message) == (0, None)
    assert (resp.cluster_id, resp.controller_id) == (broker.cluster_id, 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [(1, "127.0.0.1", broker.bound_port, None)]
    assert resp.authorized_operations is None
    if version >= 1:
        assert resp.endpoint_type == 1


async def test_authorized_operations_when_asked(raw: Any) -> None:
    client = await raw()
    resp = await client.request(DescribeClusterRequest[1](include_cluster_authorized_operations=True, endpoint_type=1))
    # Kafka's AclEntry.supportedOperations(CLUSTER): CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
    # DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE (no authorizer: all of them).
    assert resp.authorized_operations == {5, 7, 8, 9, 10, 11, 12}


@pytest.mark.parametrize(
    ("endpoint_type", "code", "message"),
    [
        (
            2,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
        ),
        (7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7"),
        (0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0"),
    ],
)
async def test_endpoint_types(raw: Any, endpoint_type: int, code: ErrorCode, message: str) -> None:
    client = await raw()
    resp = await client.request(DescribeClusterRequest[1](include_cluster_authorized_operations=False, endpoint_type=endpoint_type))
    assert (resp.error_code, resp.error_message, resp.brokers) == (code, message, [])
