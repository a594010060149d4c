"""Hostile ConsumerGroupHeartbeats against a broker process (issue 26, findings 1 and 4): overlong ids and
pathological regular expressions get Kafka's answers (a closed connection for a string over 32,767 bytes,
INVALID_REGULAR_EXPRESSION with a message), the broker's stderr stays structured JSON with nothing at error
level (RE2's own diagnostics never reach it), and everyone else keeps being served."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from broker.coordinator.consumer.regex import MAX_PROGRAM_SIZE
from broker.embed import BrokerProcess
from tests.support.consumer_groups import INVALID_REGULAR_EXPRESSION, NONE, CgMember, describe_one, heartbeat, heartbeat_request
from tests.support.raw_client import RawClient
from tests.support.waiting import async_wait_until

# 32 characters whose RE2 program has 322,804 instructions: matched against long topic names, RE2's DFA runs
# out of memory at every name and, with RE2's default options, says so on stderr in raw (non-JSON) lines.
DFA_BUSTER = "(?:[\\p{L}\\p{N}._-]{1,20}){1,12}x"


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("hostile") / "data", "--offsets-partitions", "3").start()
    yield bp
    bp.stop()
    for line in bp.lines:
        record = json.loads(line)  # every stderr line is a structured record: no raw RE2 or traceback text
        assert record.get("level") not in ("error", "critical"), line
        assert "exception" not in record, line


async def create_topics(client: RawClient, names: list[str], partitions: int = 1) -> None:
    from kafka.protocol.admin import CreateTopicsRequest

    T = CreateTopicsRequest.CreatableTopic
    for i in range(0, len(names), 500):
        req = CreateTopicsRequest[5](
            topics=[T(name=n, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]) for n in names[i : i + 500]],
            timeout_ms=30_000,
            validate_only=False,
        )
        resp = await client.request(req, timeout=60)
        assert {t.error_code for t in resp.topics} == {NONE}, resp


async def test_finding_4_member_id_over_32767_bytes_closes_the_connection(proc: BrokerProcess) -> None:
    """Kafka's reader refuses a compact string over Short.MAX_VALUE: the request is not served, the
    connection closes. It was UNKNOWN_SERVER_ERROR and a traceback (the record key's int16 length)."""
    healthy = await RawClient.connect(proc.bootstrap)
    await create_topics(healthy, ["f4"])
    for fields in ({"member_id": "m" * 32_768}, {"member_id": "m", "instance_id": "i" * 32_768}):
        bad = await RawClient.connect(proc.bootstrap)
        member_id = fields.pop("member_id")
        bad.send(heartbeat_request("g4", member_id, 0, rebalance_timeout_ms=30_000, topics=["f4"], owned={}, **fields), version=1)
        assert await bad.wait_closed_by_peer(), (
            f"the broker answered a heartbeat with a string of 32,768 bytes: {list(fields) or 'member id'}"
        )
    # Up to the limit both are Kafka's legal ids, served and described like any other.
    longest = CgMember(healthy, "g4", ["f4"], member_id="m" * 32_767, instance_id="i" * 32_767)
    assert (await longest.join()).error_code == NONE
    described = await describe_one(healthy, "g4")
    assert [(len(m.member_id), len(m.instance_id)) for m in described.members] == [(32_767, 32_767)]
    assert (await longest.leave(-1)).error_code == NONE


async def test_finding_1_pathological_regex_refused_with_a_message(proc: BrokerProcess) -> None:
    client = await RawClient.connect(proc.bootstrap)
    resp = await heartbeat(client, "g1", "m1", 0, rebalance_timeout_ms=30_000, regex=DFA_BUSTER, owned={})
    assert resp.error_code == INVALID_REGULAR_EXPRESSION
    assert resp.error_message.startswith(f"SubscribedTopicRegex `{DFA_BUSTER}` is not a valid regular expression: its compiled program")
    assert f"more than {MAX_PROGRAM_SIZE}" in resp.error_message or f"exceeds {MAX_PROGRAM_SIZE}" in resp.error_message
    # RE2/J's descriptions, as Kafka quotes them.
    for regex, description in [("(", "missing closing )"), ("a{1001}", "invalid repeat count"), ("[z-a]", "invalid character class range")]:
        resp = await heartbeat(client, "g1", "m1", 0, rebalance_timeout_ms=30_000, regex=regex, owned={})
        assert (resp.error_code, resp.error_message) == (
            INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}.",
        )


async def test_finding_1_topic_creations_stay_linear_beside_heavy_regexes(proc: BrokerProcess) -> None:
    """Large legal expressions (about half the program limit) subscribe while 200 topics with names of 249
    bytes are created: the group's expressions are resolved in the background at most once per 10 s (Kafka's
    refresh rule), not at every creation on the loop as they were, another client's Metadata keeps being
    answered, and stderr stays clean."""
    client = await RawClient.connect(proc.bootstrap)
    heavy = ".*(?:[\\p{L}\\p{N}]{10}){2}.*"  # ~27,000 instructions
    members = [CgMember(client, "g-heavy", regex=f"{heavy}{i}") for i in range(5)]
    for m in members:
        assert (await m.join()).error_code == NONE
    names = [f"heavy-{i:03d}-" + "x" * 239 for i in range(200)]
    assert all(len(n) == 249 for n in names)
    started = time.monotonic()
    for i in range(0, 200, 100):
        await create_topics(client, names[i : i + 100])
        for m in members:
            assert (await m.beat()).error_code == NONE
    elapsed = time.monotonic() - started
    other = await RawClient.connect(proc.bootstrap)
    from kafka.protocol.metadata import MetadataRequest

    meta = await asyncio.wait_for(other.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False)), 10)
    assert len(meta.topics) >= 200
    runs = [r for r in list(proc.records) if r.get("event") == "resolving regular expressions" and r.get("group") == "g-heavy"]
    assert 1 <= len(runs) <= 2 + elapsed / 10, (len(runs), elapsed)

    async def resolved() -> bool:
        d = await describe_one(client, "g-heavy")
        return d.error_code == NONE and d.group_state in ("Stable", "Reconciling", "Assigning")

    await async_wait_until(resolved, timeout=30, message="the group to stay served")
