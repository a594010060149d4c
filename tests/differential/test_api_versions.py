"""The ApiVersions scenario: every (API, version) kaflet advertises is one Apache Kafka 4.4
serves, with the same flexible (compact, tagged) encoding; and what Kafka 4.4 serves of the
group APIs and kaflet does not is listed here, exactly, so that the list cannot drift.

Kafka's answer comes from the reference broker itself; which versions are flexible from Kafka's
own protocol classes (tests/jvm/kafka-api-facts, `ApiKeys.requestHeaderVersion`)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from protocol.apis import first_flexible_version
from tests.differential.conftest import record_result
from tests.differential.harness import build_request
from tests.support.jvm import JvmUnavailable, classpath, java_binary
from tests.support.raw_client import RawClient

# The group APIs: the coordinators' (groups of every kind, offsets, transactions) by Kafka's names.
GROUP_APIS = {
    "FindCoordinator",
    "OffsetCommit",
    "OffsetFetch",
    "OffsetDelete",
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "WriteTxnMarkers",
    "TxnOffsetCommit",
    "DescribeTransactions",
    "ListTransactions",
    "ShareFetch",
    "ShareAcknowledge",
}

# The group APIs the issue names: every version both brokers serve has a scenario
# (test_every_group_api_version_has_a_scenario).
COVERED_APIS = {
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
    "OffsetDelete",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "TxnOffsetCommit",
    "DescribeTransactions",
    "ListTransactions",
    "IncrementalAlterConfigs",
    "DescribeConfigs",
}

# Group APIs Kafka 4.4 serves and kaflet does not (docs/decisions.md, "Group APIs kaflet does
# not serve"): share groups (KIP-932) and streams groups (KIP-1071) are not served by kaflet;
# WriteTxnMarkers is what a transaction coordinator sends partition leaders on other brokers.
NOT_SERVED_BY_KAFLET = {
    "WriteTxnMarkers",
    "StreamsGroupTopologyDescriptionUpdate",
}

# Newer versions of group APIs kaflet serves: OffsetCommit/OffsetFetch v10 (topic ids instead of
# names), DeleteGroups v3, EndTxn v5 and TxnOffsetCommit v6 (Transactions V2, KIP-890). Clients negotiate the versions below them.
VERSIONS_NOT_SERVED_BY_KAFLET = {
    "OffsetCommit": [10],
    "OffsetFetch": [10],
    "DeleteGroups": [3],
    "EndTxn": [5],
    "TxnOffsetCommit": [6],
}


@pytest.fixture(scope="session")
def kafka_api_facts() -> dict[int, dict[str, Any]]:
    """{api key: {"name", "oldest", "latest", "flexible": [...]}} from Kafka 4.4's ApiKeys."""
    try:
        cmd = [java_binary(), "-cp", classpath("kafka-api-facts"), "dev.kaflet.tests.ApiFacts"]
    except JvmUnavailable as exc:
        pytest.fail(f"Kafka 4.4's protocol classes cannot run: {exc}", pytrace=False)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    return {d["key"]: d for d in map(json.loads, out.splitlines())}


async def _api_versions(bootstrap: str) -> Any:
    client = await RawClient.connect(bootstrap, "api-versions")
    try:
        return await client.request(build_request(18, 3, {"client_software_name": "kaflet-tests", "client_software_version": "1"}))
    finally:
        await client.close()


def _group_api(name: str) -> bool:
    return name in GROUP_APIS or "Group" in name


def test_api_versions(differential: Any, kafka_api_facts: dict[int, dict[str, Any]], request: pytest.FixtureRequest) -> None:
    record_result(request.config, "api_versions", "different")
    ours, theirs = (asyncio.run(_api_versions(b.bootstrap)) for b in (differential.kaflet, differential.kafka))
    assert (ours.error_code, theirs.error_code) == (0, 0)
    served = {k.api_key: (k.min_version, k.max_version) for k in theirs.api_keys}
    advertised = {k.api_key: (k.min_version, k.max_version) for k in ours.api_keys}
    name = {key: facts["name"] for key, facts in kafka_api_facts.items()}

    # Every (API, version) kaflet advertises is one Kafka serves, with the same flexible encoding.
    wrong = []
    for key, (lo, hi) in sorted(advertised.items()):
        for v in range(lo, hi + 1):
            if key not in served or not served[key][0] <= v <= served[key][1]:
                wrong.append(f"{name.get(key, key)} v{v}: not served by Kafka 4.4")
            elif (v >= first_flexible_version(key)) != (v in kafka_api_facts[key]["flexible"]):
                wrong.append(f"{name[key]} v{v}: flexible {v >= first_flexible_version(key)} in kaflet, not in Kafka")
    assert wrong == []

    # What Kafka serves of the group APIs and kaflet does not: exactly the lists above.
    missing_apis = {name[k] for k in served if k not in advertised and _group_api(name[k])}
    assert missing_apis == NOT_SERVED_BY_KAFLET
    missing_versions = {
        name[k]: [v for v in range(served[k][0], served[k][1] + 1) if not advertised[k][0] <= v <= advertised[k][1]]
        for k in served
        if k in advertised and _group_api(name[k])
    }
    assert {n: vs for n, vs in missing_versions.items() if vs} == VERSIONS_NOT_SERVED_BY_KAFLET
    # ...and every one of them is a group API Kafka knows by that name.
    assert set(NOT_SERVED_BY_KAFLET) | set(VERSIONS_NOT_SERVED_BY_KAFLET) <= set(name.values())
    record_result(request.config, "api_versions", "documented")


def test_every_group_api_version_has_a_scenario(differential: Any, kafka_api_facts: dict[int, dict[str, Any]]) -> None:
    """Each version both brokers serve of each group API is sent by at least one scenario."""
    ours, theirs = (asyncio.run(_api_versions(b.bootstrap)) for b in (differential.kaflet, differential.kafka))
    served = {k.api_key: (k.min_version, k.max_version) for k in theirs.api_keys}
    advertised = {k.api_key: (k.min_version, k.max_version) for k in ours.api_keys}
    name = {key: facts["name"] for key, facts in kafka_api_facts.items()}
    both = {
        (name[k], v)
        for k in served.keys() & advertised.keys()
        if name[k] in COVERED_APIS
        for v in range(max(served[k][0], advertised[k][0]), min(served[k][1], advertised[k][1]) + 1)
    }
    assert {n for n, _v in both} == COVERED_APIS
    sent = {(name[k], v) for kaflet, kafka in differential.every_outcome().values() for k, v in kaflet.side.calls | kafka.side.calls}
    assert sorted(both - sent) == []
