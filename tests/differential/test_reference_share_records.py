"""Share groups' records in Kafka 4.4's formats, both ways (KIP-932).

kaflet's `__share_group_state` (ShareSnapshot, ShareUpdate) and the share-group records of
`__consumer_offsets` (types 10-15) are read by Kafka's own DumpLogSegments with its share-state
and offsets decoders; and the records Kafka 4.4 writes for the same scenario are read by kaflet's
codecs (storage/share_state_records.py, storage/share_group_records.py) and written back byte for
byte. The scenario: a member joins, fetches three records and accepts, releases and rejects one
each."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker import Broker, Config
from protocol import records as r
from storage import share_group_records as sg
from storage import share_state_records as ss
from tests.support import share as s
from tests.support.coordinator import wait_ready
from tests.support.raw_client import RawClient


async def _scenario(bootstrap: str, topic: str, group: str) -> uuid.UUID:
    client = await RawClient.connect(bootstrap)
    try:
        topic_id = await s.create_topic(client, topic)
        await s.set_group_configs(client, group, {"share.auto.offset.reset": "earliest"})
        await s.produce(client, topic, [b"a", b"b", b"c"])
        m = s.ShareMember(client, group)
        await m.join([topic])
        # parked until records come: Kafka loads a share partition on its first fetch, and a
        # fetch that does not wait may be answered before that
        assert s.acquired(await m.fetch(max_wait_ms=5000)) == {(topic_id, 0): [(0, 2, 1)]}
        resp = await m.ack({(topic_id, 0): [(0, 0, [s.ACCEPT]), (1, 1, [s.RELEASE]), (2, 2, [s.REJECT])]})
        assert resp.responses[0].partitions[0].error_code == 0
        await m.leave()
        return topic_id
    finally:
        await client.close()


def _dump(kafka: Any, decoder: str, files: list[Path]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Kafka's DumpLogSegments over `files`: each record's (key, payload) as it decodes them."""
    out = subprocess.run(
        kafka.java_command("org.apache.kafka.tools.DumpLogSegments", decoder, "--print-data-log", "--files", ",".join(map(str, files))),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    records = []
    for line in out.stdout.splitlines():
        if line.startswith("| offset:"):
            key = line.split(" key: ", 1)[1].split(" payload: ", 1)[0]
            payload = line.split(" payload: ", 1)[1]
            records.append((json.loads(key), None if payload == "<DELETE>" else json.loads(payload)))
    return records


def _logs(data_dir: Path, topic: str) -> list[Path]:
    return sorted(p for p in data_dir.glob(f"{topic}-*/*.log") if p.stat().st_size > 0)


async def test_kafkas_decoders_read_kaflets_share_records(kafka_reference: Any, make_config: Callable[..., Config], tmp_path: Path) -> None:
    config = make_config(**s.SHARE_BOUNDS)
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap)
        await wait_ready(client)
        await client.close()
        await _scenario(broker.bootstrap, "t", "g")
    data_dir = Path(config.data_dir)
    state = _dump(kafka_reference, "--share-group-state-decoder", _logs(data_dir, "__share_group_state"))
    snapshots = [v["data"] for k, v in state if k["type"] == "0" and k["data"]["groupId"] == "g"]
    updates = [v["data"] for k, v in state if k["type"] == "1" and k["data"]["groupId"] == "g"]
    assert snapshots and snapshots[0]["stateBatches"] == [] and snapshots[0]["startOffset"] == -1  # initialized
    batches = [(b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"]) for b in updates[0]["stateBatches"]]
    assert batches == [(0, 0, 2, 1), (1, 1, 0, 1), (2, 2, 4, 1)]  # acknowledged, available again, archived
    assert (updates[0]["startOffset"], updates[0]["deliveryCompleteCount"]) == (0, 2)
    offsets = _dump(kafka_reference, "--offsets-decoder", _logs(data_dir, "__consumer_offsets"))
    kinds = {int(k["type"]) for k, _ in offsets if k["data"].get("groupId") == "g"}
    assert kinds == set(range(10, 16))
    members = [v["data"] for k, v in offsets if k["type"] == "10" and v is not None]
    assert members[0]["subscribedTopicNames"] == ["t"] and members[0]["clientId"] == "raw-client"


async def test_kaflets_codecs_read_and_write_kafkas_share_records(kafka_reference: Any) -> None:
    topic, group = f"rec-{uuid.uuid4().hex[:6]}", f"rec-{uuid.uuid4().hex[:6]}"
    topic_id = await _scenario(kafka_reference.bootstrap, topic, group)
    data_dir = kafka_reference.dir / "data"
    state_records = _records(data_dir, "__share_group_state", lambda key: ss.parse_share_key(key)[1] == group)
    assert state_records
    updates = []
    for key, value in state_records:
        kind, _, tid, partition = ss.parse_share_key(key)
        assert ss.share_key(kind, group, tid, partition) == key and (tid, partition) == (topic_id, 0)
        if kind == ss.SHARE_SNAPSHOT_KEY:
            assert ss.share_snapshot_value(ss.parse_share_snapshot_value(value)) == value
        else:
            update = ss.parse_share_update_value(value)
            assert ss.share_update_value(update) == value
            updates.append(update)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in updates[0].batches] == [
        (0, 0, 2, 1),
        (1, 1, 0, 1),
        (2, 2, 4, 1),
    ]
    group_records = _records(
        data_dir,
        "__consumer_offsets",
        lambda key: sg.key_type(key) in sg.SHARE_GROUP_RECORD_TYPES and sg.parse_share_group_key(key)[1] == group,
    )
    codecs: dict[int, tuple[Callable[[bytes], Any], Callable[[Any], bytes]]] = {
        sg.SHARE_GROUP_MEMBER_METADATA_KEY: (sg.parse_share_member_metadata_value, sg.share_member_metadata_value),
        sg.SHARE_GROUP_METADATA_KEY: (sg.parse_share_group_metadata_value, lambda v: sg.share_group_metadata_value(*v)),
        sg.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: (
            sg.parse_share_target_assignment_metadata_value,
            lambda v: sg.share_target_assignment_metadata_value(*v),
        ),
        sg.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: (sg.parse_share_target_assignment_value, sg.share_target_assignment_value),
        sg.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: (sg.parse_share_current_assignment_value, sg.share_current_assignment_value),
        sg.SHARE_GROUP_STATE_PARTITION_METADATA_KEY: (
            sg.parse_share_state_partition_metadata_value,
            sg.share_state_partition_metadata_value,
        ),
    }
    seen = set()
    for key, value in group_records:
        kind, gid, member = sg.parse_share_group_key(key)
        assert sg.share_group_key(kind, gid, member) == key
        seen.add(kind)
        if value is None:
            continue  # a tombstone: the member left
        parse, write = codecs[kind]
        assert write(parse(value)) == value, kind
    assert seen == set(range(10, 16))


def _records(data_dir: Path, topic: str, mine: Callable[[bytes], bool]) -> list[tuple[bytes, bytes | None]]:
    """(key, value) of every record in the topic's segments whose key `mine` accepts."""
    out = []
    for path in _logs(data_dir, topic):
        data = path.read_bytes()
        for pos, header in r.iter_batches(data):
            if header.attributes & r.CONTROL_BIT:
                continue
            for rec in r.iter_all_records(data, pos, header):
                if rec.key is not None and _safe(mine, rec.key):
                    out.append((rec.key, rec.value))
    return out


def _safe(check: Callable[[bytes], bool], key: bytes) -> bool:
    try:
        return check(key)
    except Exception:
        return False  # a record of another kind (an offset commit, another coordinator's)
