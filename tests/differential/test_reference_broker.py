"""The reference broker itself: Apache Kafka 4.4 starts, serves every group protocol kaflet
serves, and runs its own tools against a broker (tests/support/kafka_reference.py)."""

from __future__ import annotations

import subprocess
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest

from protocol.apis import ApiKey
from tests.support.raw_client import RawClient


async def test_kafka_reference_serves_the_group_apis(kafka_reference: Any) -> None:
    assert kafka_reference.start_seconds < 60, f"Kafka took {kafka_reference.start_seconds:.1f} s to start"
    client = await RawClient.connect(kafka_reference.bootstrap)
    try:
        resp = await client.request(ApiVersionsRequest[3](client_software_name="kaflet-tests", client_software_version="1"))
    finally:
        await client.close()
    assert resp.error_code == 0
    served = {k.api_key for k in resp.api_keys}
    for key in (ApiKey.JOIN_GROUP, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.INIT_PRODUCER_ID, ApiKey.END_TXN):
        assert key in served, f"Kafka does not advertise {key.name}"
    assert 76 in served and 88 in served, "share groups (ShareGroupHeartbeat 76) and streams groups (StreamsGroupHeartbeat 88) are enabled"


def test_kafka_tools_run_against_the_reference(kafka_reference: Any) -> None:
    out = subprocess.run(
        kafka_reference.java_command(
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", kafka_reference.bootstrap, "--list"
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
