"""What the group and the transaction coordinators share: their internal topic and its shards.

Each owns one compacted internal topic (`__consumer_offsets`, `__transaction_state`) whose
partition count is fixed per data dir (CO-5), and loads one shard per partition in the
background after the broker starts listening (RL-1).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Protocol

from broker.topics.catalog import Topic


class Loadable(Protocol):
    async def load(self) -> None: ...


def ensure_internal_topic(topics: Any, name: str, partitions: int, configs: dict[str, str], flag: str) -> Topic:
    """The internal topic `name`, created with `configs` if missing; a data dir made with another
    partition count refuses to start (the count may never change: it maps keys to shards)."""
    topic = topics.get(name)
    if topic is None:
        return topics.create(name, partitions, configs, internal=True)
    if topic.partitions != partitions:
        raise RuntimeError(f"{name} has {topic.partitions} partitions but {flag} is {partitions}")
    return topic


async def load_in_turn(shards: Sequence[Loadable]) -> float:
    """Load every shard, one after the other, yielding to requests in between; a shard whose
    load fails is left FAILED (its keys answer NOT_COORDINATOR) while the others serve.
    Returns the time it took in milliseconds."""
    started = time.monotonic()
    for shard in shards:
        await asyncio.sleep(0)
        try:
            await shard.load()
        except Exception:
            continue
    return (time.monotonic() - started) * 1000
