"""The KIP-1071 schemas kaflet builds its messages from (protocol/schemas/StreamsGroup*.json) are
Kafka 4.4's own, as the kafka-clients jar the reference broker runs ships them, and so are the
streams-group record schemas storage/streams_records.py follows (kafka-group-coordinator jar)."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from tests.support.jvm import classpath

SCHEMAS = Path(__file__).resolve().parents[3] / "protocol" / "schemas"
MESSAGES = ["StreamsGroupHeartbeatRequest", "StreamsGroupHeartbeatResponse", "StreamsGroupDescribeRequest", "StreamsGroupDescribeResponse"]


def _jar(name: str) -> Path:
    for entry in classpath("kafka-broker").split(":"):
        if Path(entry).name == f"{name}-4.4.0.jar":
            return Path(entry)
    raise AssertionError(f"{name}-4.4.0.jar is not on the kafka-broker classpath")


def _json(text: str) -> object:
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


@pytest.mark.parametrize("name", MESSAGES)
def test_message_schema_is_kafkas(name: str) -> None:
    with zipfile.ZipFile(_jar("kafka-clients")) as jar:
        theirs = _json(jar.read(f"common/message/{name}.json").decode())
    assert _json((SCHEMAS / f"{name}.json").read_text()) == theirs


def test_record_schemas_are_the_ones_the_records_follow() -> None:
    """The record types and versions storage/streams_records.py writes are those of Kafka's schemas."""
    from storage import streams_records as srec

    with zipfile.ZipFile(_jar("kafka-group-coordinator")) as jar:
        keys = {}
        for entry in jar.namelist():
            m = re.fullmatch(r"common/message/(StreamsGroup\w+)Key\.json", entry)
            if m:
                keys[m.group(1)] = _json(jar.read(entry).decode())
    by_type = {int(schema["apiKey"]): name for name, schema in keys.items()}
    assert sorted(by_type) == sorted(srec.STREAMS_GROUP_RECORD_TYPES)
