"""The shard's inlined load path (cached key prefixes, compiled record reader) builds exactly the
state that applying replay() record by record builds, whatever mix of records the log holds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker import Broker, Config
from broker.coordinator.shard import GroupShard
from storage import offsets_records as o

GROUPS = ["g0", "g1", "g2"]
TOPICS = ["a", "b"]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.sampled_from(GROUPS), st.sampled_from(TOPICS), st.integers(0, 3), st.integers(0, 10**6)),
        st.tuples(st.just("tombstone"), st.sampled_from(GROUPS), st.sampled_from(TOPICS), st.integers(0, 3), st.just(0)),
        st.tuples(st.just("group"), st.sampled_from(GROUPS), st.just(""), st.integers(0, 5), st.just(0)),
        st.tuples(st.just("delete-group"), st.sampled_from(GROUPS), st.just(""), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=60,
)


def _record(op: tuple[str, str, str, int, int]) -> tuple[bytes, bytes | None]:
    kind, group, topic, partition, offset = op
    if kind == "commit":
        return o.offset_commit_key(group, topic, partition), o.offset_commit_value(offset, -1, "", 1_700_000_000_000)
    if kind == "tombstone":
        return o.offset_commit_key(group, topic, partition), None
    if kind == "group":
        return o.group_metadata_key(group), o.group_metadata_value(o.GroupMetadataValue("consumer", partition, None, None, -1, []))
    return o.group_metadata_key(group), None


def _state(shard: GroupShard) -> tuple[Any, Any]:
    offsets = {(g, t, p): v for g, topics in shard.offsets.by_group.items() for t, ps in topics.items() for p, v in ps.items()}
    groups = {g: (grp.state.value, grp.generation_id, grp.protocol_type) for g, grp in shard.groups.items()}
    return offsets, groups


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=ops, batch=st.integers(1, 7))
def test_loaded_state_equals_record_by_record_replay(tmp_path: Path, sequence: list[Any], batch: int) -> None:
    async def run() -> None:
        data = tmp_path / f"d{abs(hash((tuple(sequence), batch)))}"
        config = Config(port=0, data_dir=str(data), metrics=False, offsets_partitions=1)
        records = [_record(op) for op in sequence]
        async with Broker(config) as b:
            await b.coordinator.loaded.wait()
            shard = b.coordinator.shards[0]
            for i in range(0, len(records), batch):
                shard.write(records[i : i + batch], replay=False)
            reference = GroupShard(b.coordinator, shard.context)  # built over the same partition, never registered
            for key, value in records:
                reference.replay(key, value)
            expected = _state(reference)
        async with Broker(config) as b:
            await b.coordinator.loaded.wait()
            assert _state(b.coordinator.shards[0]) == expected
            assert b.coordinator.shards[0].offsets.count == len(expected[0])

    asyncio.run(run())
