"""The effective LogConfig of a topic: topic configs over the broker's log defaults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker import Broker, Config
from broker.config.log_config import log_config
from broker.topics.catalog import Topic


def test_topic_configs_override_broker_defaults(make_config: Callable[..., Config]) -> None:
    config = make_config(log_segment_bytes=5000, log_retention_ms=1234, message_max_bytes=999)
    import uuid

    plain = log_config(Topic("t", uuid.uuid4(), 1, {}), config)
    assert (plain.segment_bytes, plain.retention_ms, plain.max_message_bytes, plain.cleanup_policy) == (5000, 1234, 999, {"delete"})
    tuned = log_config(Topic("t", uuid.uuid4(), 1, {"segment.bytes": "2048", "cleanup.policy": "compact,delete"}), config)
    assert tuned.segment_bytes == 2048 and tuned.compact and tuned.delete
    offsets = log_config(Topic("__consumer_offsets", uuid.uuid4(), 1, {}, internal=True), config)
    assert offsets.compact and not offsets.delete
    assert offsets.segment_bytes == config.offsets_topic_segment_bytes
    assert offsets.delete_retention_ms == config.offsets_delete_retention_ms


async def test_internal_topic_created_with_configs_gets_a_compacted_log(make_config: Callable[..., Config]) -> None:
    async with Broker(make_config(offsets_topic_segment_bytes=1048576)) as b:
        # The coordinator creates __consumer_offsets at start-up with these configs (RC-1).
        logs = [b.logs.get("__consumer_offsets", p) for p in range(5)]
        assert all(log is not None and log.config.compact and log.config.segment_bytes == 1048576 for log in logs)
        b.topics.set_configs("__consumer_offsets", {"cleanup.policy": "compact", "segment.bytes": "2097152"})
        assert all(log is not None and log.config.segment_bytes == 2097152 for log in logs)


async def test_stopping_answers_parked_fetches(make_config: Callable[..., Config]) -> None:
    from tests.support import data as d
    from tests.support.raw_client import RawClient

    b = Broker(make_config())
    await b.start()
    b.topics.create("idle", 1)
    client = await RawClient.connect(b.bootstrap)
    from broker.apis.fetch import _PARKED
    from tests.support.waiting import async_wait_until

    pending: Any = client.send(d.fetch([("idle", 0, 0)], max_wait_ms=30_000))
    await async_wait_until(lambda: _PARKED.get(b), message="the fetch to park")
    await b.stop()
    resp = await pending
    assert resp.responses[0].partitions[0].error_code == 0
    await client.close()
