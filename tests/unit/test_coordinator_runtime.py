"""The coordinator runtime (broker/runtime/) with a third user of a few lines: a key-value shard
over its own internal topic, on a real broker's topic catalog and logs, so that what the group
and transaction coordinators rely on is pinned apart from either of them: the topic's ownership
(creation, a refused partition count, re-creation), routing and its answers, writes replayed
live and at load alike, timers that write, moves, and transaction markers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from broker import Broker, Config
from broker.runtime.context import CHUNK_RECORDS, CoordinatorContext
from broker.runtime.errors import CoordinatorError
from broker.runtime.result import CoordinatorResult
from broker.runtime.runtime import InternalTopic, RuntimeServices
from broker.runtime.service import CoordinatorService
from broker.runtime.shard import ShardState
from protocol.errors import ErrorCode
from protocol.javahash import java_string_hashcode, kafka_abs
from protocol.records import batch_size
from tests.support.waiting import async_wait_until

TOPIC = "__kv_state"
PARTITIONS = 3


class KvShard:
    """A map of keys to values that changes only by replay()."""

    def __init__(self, context: CoordinatorContext[KvShard]) -> None:
        self.context = context
        self.values: dict[bytes, bytes] = {}
        self.pending: dict[int, dict[bytes, bytes]] = {}  # producer id -> its transaction's values
        self.events: list[str] = []

    def replay(self, key: bytes, value: bytes | None, offset: int, producer_id: int) -> None:
        if producer_id != -1 and value is not None:
            self.pending.setdefault(producer_id, {})[key] = value
        elif value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        values = self.pending.pop(producer_id, {})
        if commit:
            self.values.update(values)

    def on_loaded(self) -> None:
        self.events.append("loaded")

    def on_unloaded(self) -> None:
        self.events.append("unloaded")


def put(shard: KvShard, key: str, value: bytes | None) -> CoordinatorResult[str]:
    """A write operation: its record, and an answer that says what the shard held before."""
    return CoordinatorResult([(key.encode(), value)], f"was {shard.values.get(key.encode())!r}")


class KvCoordinator(CoordinatorService[KvShard]):
    label = "kv coordinator"

    def build_shard(self, context: CoordinatorContext[KvShard]) -> KvShard:
        return KvShard(context)

    def describe_load(self, shards: list[KvShard]) -> dict[str, Any]:
        return {"keys": sum(len(s.values) for s in shards)}


def kv_topic(partitions: int = PARTITIONS) -> InternalTopic:
    return InternalTopic(TOPIC, partitions, {"cleanup.policy": "compact"}, "--kv-partitions", "every key starts empty")


@asynccontextmanager
async def kv(config: Config, partitions: int = PARTITIONS, batch_limit: int = 1 << 20) -> AsyncIterator[tuple[Broker, KvCoordinator]]:
    async with Broker(config) as broker:
        services = RuntimeServices(broker.topics, broker.logs, broker.clock, lambda _topic: batch_limit)
        coordinator = KvCoordinator(kv_topic(partitions), services)
        coordinator.start()
        await asyncio.wait_for(coordinator.loaded.wait(), 30)
        try:
            yield broker, coordinator
        finally:
            await coordinator.stop()


def code_of(call: Callable[[], Any]) -> ErrorCode:
    try:
        call()
    except CoordinatorError as exc:
        return exc.code
    return ErrorCode.NONE


async def test_keys_route_by_java_hash_code_and_writes_survive_a_restart(make_config: Callable[..., Config]) -> None:
    config = make_config()
    keys = [f"key-{i}" for i in range(20)] + ["", "Ü-ñ", "polygenelubricants"]  # the last: Integer.MIN_VALUE's hash
    async with kv(config) as (broker, kv_coordinator):
        topic = broker.topics.get(TOPIC)
        assert topic is not None and topic.internal and topic.partitions == PARTITIONS and topic.configs == {"cleanup.policy": "compact"}
        for key in keys:
            partition = kafka_abs(java_string_hashcode(key)) % PARTITIONS
            assert kv_coordinator.partition_for(key) == partition
            answer, waiter = kv_coordinator.runtime.write(key, put, key, key.encode())
            assert answer == "was None" and waiter is None
            shard = kv_coordinator.shard_for(key)
            assert shard is kv_coordinator.shards[partition] and shard.values[key.encode()] == key.encode()
        assert kv_coordinator.runtime.write("key-1", put, "key-1", b"again")[0] == "was b'key-1'"
    async with kv(config) as (_broker, kv_coordinator):
        for key in keys:
            expected = b"again" if key == "key-1" else key.encode()
            assert kv_coordinator.shard_for(key).values[key.encode()] == expected  # replayed at load
        assert all(s.events == ["loaded"] for s in kv_coordinator.shards)


async def test_a_data_dir_made_with_another_partition_count_is_refused(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with kv(config):
        pass
    with pytest.raises(RuntimeError, match="__kv_state has 3 partitions but --kv-partitions is 4"):
        async with kv(config, partitions=4):
            pass


async def test_answers_while_stopped_loading_unloaded_and_failed(make_config: Callable[..., Config]) -> None:
    """GE-1: COORDINATOR_NOT_AVAILABLE when not running, LOAD_IN_PROGRESS until loaded,
    NOT_COORDINATOR once unloaded or failed; a write to a shard that is not served is refused."""
    async with kv(make_config()) as (_broker, kv_coordinator):
        runtime = kv_coordinator.runtime
        key = "k"
        context = runtime.contexts[kv_coordinator.partition_for(key)]
        shard = kv_coordinator.shard_for(key)
        for state, code in (
            (ShardState.LOADING, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
            (ShardState.FAILED, ErrorCode.NOT_COORDINATOR),
            (ShardState.UNLOADED, ErrorCode.NOT_COORDINATOR),
        ):
            context.state = state
            assert code_of(lambda: kv_coordinator.shard_for(key)) is code
            assert code_of(lambda: context.write([(b"k", b"v")])) is ErrorCode.NOT_COORDINATOR
        context.state = ShardState.ACTIVE
        kv_coordinator.active = False
        assert code_of(lambda: kv_coordinator.shard_for(key)) is ErrorCode.COORDINATOR_NOT_AVAILABLE
        kv_coordinator.active = True
        assert kv_coordinator.shard_for(key) is shard


async def test_a_batch_over_the_topics_limit_is_refused_whole(make_config: Callable[..., Config]) -> None:
    async with kv(make_config(), batch_limit=200) as (broker, kv_coordinator):
        code = code_of(lambda: kv_coordinator.runtime.write("big", put, "big", b"x" * 300))
        assert code is ErrorCode.MESSAGE_TOO_LARGE  # GE-3 maps it to UNKNOWN_SERVER_ERROR
        assert b"big" not in kv_coordinator.shard_for("big").values
        plog = broker.logs.get(TOPIC, kv_coordinator.partition_for("big"))
        assert plog.log_end_offset == 0


async def test_a_non_atomic_result_goes_in_chunks_and_an_atomic_one_in_one_batch(make_config: Callable[..., Config]) -> None:
    async with kv(make_config(), partitions=1, batch_limit=1 << 24) as (broker, kv_coordinator):
        context = kv_coordinator.runtime.contexts[0]
        records = [(f"k{i}".encode(), b"v") for i in range(CHUNK_RECORDS + 1)]
        context.apply(CoordinatorResult(records, atomic=False))
        context.apply(CoordinatorResult(records[:10]))
        batches = [h.record_count for _, _, h in broker.logs.get(TOPIC, 0).iter_batches()]
        assert batches == [CHUNK_RECORDS, 1, 10]
        assert len(context.shard.values) == CHUNK_RECORDS + 1


async def test_a_timer_serialized_with_requests_writes_what_its_operation_returns(make_config: Callable[..., Config]) -> None:
    async with kv(make_config()) as (_broker, kv_coordinator):
        shard = kv_coordinator.shard_for("t")
        fired = asyncio.Event()

        def expire() -> CoordinatorResult[None]:
            fired.set()
            return CoordinatorResult([(b"t", None)])

        kv_coordinator.runtime.write("t", put, "t", b"v")
        shard.context.timer.schedule("expire-t", 10, expire)
        shard.context.timer.schedule("expire-t", 20, expire)  # the same key replaces the pending timer
        assert len(shard.context.timer) == 1
        await asyncio.wait_for(fired.wait(), 10)
        assert b"t" not in shard.values
        shard.context.timer.schedule("never", 10, expire)
        shard.context.unload()  # an unloaded shard's timers are dropped
        assert len(shard.context.timer) == 0 and shard.events == ["loaded", "unloaded"]


async def test_a_move_unloads_the_shard_and_loads_a_new_one_from_the_log(make_config: Callable[..., Config]) -> None:
    """What `--brokers N` does when a coordinator moves: the old shard is unloaded and refuses
    writes from then on, even when something still holds it; the new one replays the log."""
    async with kv(make_config()) as (_broker, kv_coordinator):
        kv_coordinator.runtime.write("m", put, "m", b"1")
        old = kv_coordinator.shard_for("m")
        new = await kv_coordinator.runtime.move(kv_coordinator.partition_for("m"))
        assert new is not old and new.values == old.values and new.events == ["loaded"]
        assert old.events == ["loaded", "unloaded"] and old.context.state is ShardState.UNLOADED
        assert code_of(lambda: old.context.write([(b"m", b"2")])) is ErrorCode.NOT_COORDINATOR
        assert kv_coordinator.shard_for("m") is new
        with pytest.raises(KeyError, match="no partition __kv_state-9"):
            await kv_coordinator.runtime.move(9)


async def test_a_deleted_topic_unloads_every_shard_and_comes_back_empty(make_config: Callable[..., Config]) -> None:
    """CO-7 for any coordinator: deleted, its keys answer NOT_COORDINATOR; re-created, empty."""
    async with kv(make_config()) as (broker, kv_coordinator):
        kv_coordinator.runtime.write("d", put, "d", b"1")
        broker.topics.delete(TOPIC)
        assert kv_coordinator.topic_missing
        assert code_of(lambda: kv_coordinator.shard_for("d")) is ErrorCode.NOT_COORDINATOR
        kv_coordinator.recreate_topic()
        assert not kv_coordinator.topic_missing
        await async_wait_until(lambda: kv_coordinator.all_loaded, message="the re-created topic's shards loaded")
        assert kv_coordinator.shard_for("d").values == {}


async def test_a_transactions_records_count_once_its_commit_marker_is_written(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with kv(config, partitions=1) as (_broker, kv_coordinator):
        runtime = kv_coordinator.runtime
        context = runtime.contexts[0]
        context.write_transactional([(b"a", b"1")], producer_id=7, producer_epoch=0)
        context.write_transactional([(b"b", b"2")], producer_id=8, producer_epoch=0)
        assert context.shard.values == {}
        runtime.complete_transaction(0, 7, 0, commit=True)
        runtime.complete_transaction(0, 8, 0, commit=False)
        assert context.shard.values == {b"a": b"1"}
        assert code_of(lambda: runtime.complete_transaction(1, 7, 0, commit=True)) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    async with kv(config, partitions=1) as (_broker, kv_coordinator):
        assert kv_coordinator.shards[0].values == {b"a": b"1"}  # the markers replayed at load


async def test_enqueued_records_are_appended_by_the_commit_turn_before_anyone_is_answered(make_config: Callable[..., Config]) -> None:
    async with kv(make_config(), partitions=1) as (broker, kv_coordinator):
        context = kv_coordinator.runtime.contexts[0]
        plog = broker.logs.get(TOPIC, 0)
        for i in range(3):
            records = [(f"q{i}".encode(), b"v")]
            context.shard.replay(records[0][0], records[0][1], -1, -1)  # applied at once, as a batched commit is
            context.enqueue(records, batch_size(records))
        assert plog.log_end_offset == 0
        kv_coordinator.flush_appends()
        assert [h.record_count for _, _, h in plog.iter_batches()] == [3]  # one batch for the turn
