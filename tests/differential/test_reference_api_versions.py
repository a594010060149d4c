"""kaflet's ApiVersions table (pinned in tests/unit/test_wire.py) against Apache Kafka 4.4's: the
ranges from the reference broker's own ApiVersions answer, the flexible versions from the message
schemas of the kafka-clients jar it runs (common/message/*.json: `flexibleVersions`).

Every (API, version) kaflet advertises is served by Kafka 4.4 with the same encoding (flexible or
not, request and response alike); the versions Kafka 4.0 removed (KIP-896) kaflet does not serve
either (docs/decisions.md).
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest

from protocol.apis import ApiKey
from tests.support.jvm import classpath
from tests.support.kafka_reference import ARTIFACT
from tests.support.raw_client import RawClient
from tests.unit.test_wire import API_VERSIONS


def _schemas() -> dict[tuple[int, str], dict[str, Any]]:
    """(api key, "request" | "response") -> the message schema, from the kafka-clients jar Kafka runs."""
    [jar] = [Path(p) for p in classpath(ARTIFACT).split(":") if re.search(r"/kafka-clients-[\d.]+\.jar$", p)]
    out = {}
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.startswith("common/message/") and name.endswith(("Request.json", "Response.json")):
                text = re.sub(r"^\s*//.*$", "", z.read(name).decode(), flags=re.M)
                schema = json.loads(text)
                if schema.get("type") in ("request", "response") and "apiKey" in schema:
                    out[(schema["apiKey"], schema["type"])] = schema
    return out


def _first_flexible(spec: str) -> int | None:
    return None if spec == "none" else int(spec.rstrip("+"))


async def test_every_advertised_version_is_kafkas_with_the_same_encoding(kafka_reference: Any) -> None:
    client = await RawClient.connect(kafka_reference.bootstrap)
    try:
        resp = await client.request(ApiVersionsRequest[3](client_software_name="kaflet-tests", client_software_version="1"))
    finally:
        await client.close()
    kafka = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    schemas = _schemas()
    older: dict[ApiKey, list[int]] = {}
    encodings = {}
    for key, (low, high, first_flexible) in API_VERSIONS.items():
        kafka_low, kafka_high = kafka[key]
        assert high <= kafka_high, f"{key.name} v{high} is newer than Kafka 4.4's v{kafka_high}"
        if low < kafka_low:
            older[key] = list(range(low, kafka_low))
        for kind in ("request", "response"):
            theirs = _first_flexible(schemas[(int(key), kind)]["flexibleVersions"])
            encodings[(key.name, kind)] = (first_flexible, theirs)
    assert older == {}, f"versions Kafka 4.4 no longer serves: {older}"
    assert {k: ours for k, (ours, _) in encodings.items()} == {k: theirs for k, (_, theirs) in encodings.items()}
