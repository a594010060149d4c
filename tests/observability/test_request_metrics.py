"""Requests and errors by API, version and error code, as Kafka's RequestsPerSec / ErrorsPerSec count them:
every error code in a response counts once, whether the handler answered with a response object
(read by the compiled walkers) or with a body it encoded itself (its `ctx.errors`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer import HeartbeatRequest
from kafka.protocol.metadata import MetadataRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.support import data as d
from tests.support import groups as g
from tests.support.coordinator import create_topic, serving
from tests.support.metrics import Scrape, ascrape


def config(make_config: Callable[..., Any], **overrides: Any) -> Any:
    return make_config(metrics=True, metrics_port=0, auto_create_topics=False, **overrides)


def errors(s: Scrape, api: str) -> dict[tuple[str, str], float]:
    return {(dict(k)["version"], dict(k)["error"]): v for k, v in s.series("kaflet_request_errors_total", api=api).items()}


def metadata(*topics: str) -> Any:
    return MetadataRequest[12](
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=t) for t in topics],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def test_metadata_errors_count_from_fresh_and_cached_answers(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        client = await served.ready()
        address = served.broker.metrics.address
        for _ in range(3):  # the first answer is built, the next two come from the cache
            resp = await client.request(metadata("nope", "nada"))
            assert [t.error_code for t in resp.topics] == [3, 3]
        s = await ascrape(address)
        assert errors(s, "Metadata") == {("12", "UNKNOWN_TOPIC_OR_PARTITION"): 6}
        assert s.value("kaflet_requests_total", api="Metadata", version="12") == 3


async def test_fast_path_answers_are_counted(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "known", 2)
        client = await served.ready()
        for _ in range(4):  # the first is built by the handler, the others come from the connection's fast path
            resp = await client.request(metadata("known"))
            assert resp.topics[0].error_code == 0
        s = await ascrape(served.broker.metrics.address)
        assert s.value("kaflet_requests_total", api="Metadata", version="12") == 4
        assert s.value("kaflet_request_duration_seconds_count", api="Metadata") == 4
        assert errors(s, "Metadata") == {}


async def test_errors_of_encoded_and_object_answers_count_per_occurrence(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "t", 1)
        client = await served.ready()
        address = served.broker.metrics.address
        # Produce (encoded body): one unknown partition.
        resp = await client.request(d.produce("t", 5, d.batch(1)))
        assert d.produce_result(resp).error_code == 3
        # Fetch (encoded body): two unknown partitions and a good one.
        resp = await client.request(d.fetch([("t", 0, 0), ("t", 7, 0), ("t", 8, 0)]))
        assert [p.error_code for p in resp.responses[0].partitions] == [0, 3, 3]
        # OffsetCommit (response object): two unknown partitions, one good.
        codes = await g.commit(client, "grp", {("t", 0): 1, ("t", 3): 1, ("t", 4): 1})
        assert sorted(codes.values()) == [0, 3, 3]
        # Heartbeat (response object, top-level error).
        resp = await client.request(HeartbeatRequest[4](group_id="grp", generation_id=1, member_id="m", group_instance_id=None))
        assert resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        s = await ascrape(address)
        assert errors(s, "Produce") == {("9", "UNKNOWN_TOPIC_OR_PARTITION"): 1}
        assert errors(s, "Fetch") == {("11", "UNKNOWN_TOPIC_OR_PARTITION"): 2}
        assert errors(s, "OffsetCommit") == {("8", "UNKNOWN_TOPIC_OR_PARTITION"): 2}
        assert errors(s, "Heartbeat") == {("4", "UNKNOWN_MEMBER_ID"): 1}
        for api, version in (("Produce", "9"), ("Fetch", "11"), ("OffsetCommit", "8"), ("Heartbeat", "4")):
            assert s.value("kaflet_requests_total", api=api, version=version) == 1
            assert s.value("kaflet_request_duration_seconds_count", api=api) == 1


async def test_injected_faults_and_acks_zero_are_counted(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "t", 1)
        client = await served.ready()
        served.broker.faults.add(api_key=ApiKey.PRODUCE, error=ErrorCode.NOT_LEADER_OR_FOLLOWER, count=1)
        resp = await client.request(d.produce("t", 0, d.batch(1)))
        assert d.produce_result(resp).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        quiet = await served.connect()
        unanswered = d.produce("t", 0, d.batch(1), acks=0)  # no answer: written by hand, not awaited
        unanswered.with_header(correlation_id=1000, client_id="quiet")
        quiet.writer.write(bytes(unanswered.encode(header=True, framed=True)))
        resp = await quiet.request(d.produce("t", 0, d.batch(1)))  # answered after the acks=0 one
        assert d.produce_result(resp).error_code == 0
        s = await ascrape(served.broker.metrics.address)
        assert errors(s, "Produce") == {("9", "NOT_LEADER_OR_FOLLOWER"): 1}
        assert s.value("kaflet_requests_total", api="Produce", version="9") == 3
        buckets = s.series("kaflet_request_duration_seconds_bucket", api="Produce")
        assert buckets[(("api", "Produce"), ("le", "+Inf"))] == 3
