"""A coordinator on the runtime, as the rest of the broker sees it (Kafka's GroupCoordinatorService
and ShareCoordinatorService each wrap a CoordinatorRuntime the same way).

A user subclasses `CoordinatorService`, names its internal topic (`InternalTopic`), builds its
shard over a partition (`build_shard`) and adds its own operations; handlers, metrics and the
cluster's node views then find the same entries on every coordinator: `shard_for` (routing and
the LOAD_IN_PROGRESS / NOT_COORDINATOR answers), `active`, `loaded`, `shards`, `recreate_topic`.
Those of the request paths are the runtime's own bound methods, so reaching them through the
service costs nothing per request.
"""

from __future__ import annotations

import asyncio
from typing import Any, Generic, TypeVar

from broker.runtime.context import CoordinatorContext
from broker.runtime.runtime import CoordinatorRuntime, InternalTopic, RuntimeServices

S = TypeVar("S")


class CoordinatorService(Generic[S]):
    label = "coordinator"  # names it in the log: "<label> loaded"

    def __init__(self, topic: InternalTopic, services: RuntimeServices) -> None:
        runtime = self.runtime = CoordinatorRuntime(
            topic, services, build=self.build_shard, label=self.label, describe_load=self.describe_load
        )
        self.topic_name = topic.name
        self.num_partitions = topic.partitions
        self.shard_for = runtime.shard_for
        self.partition_for = runtime.partition_for
        self.active_shards = runtime.active_shards
        self.any_loading = runtime.any_loading
        self.recreate_topic = runtime.recreate_topic
        self.flush_appends = runtime.flush_appends
        self.commit_turn = runtime.commit_turn

    def build_shard(self, context: CoordinatorContext[S]) -> S:
        """The user's shard over one partition (CoordinatorShard)."""
        raise NotImplementedError

    def describe_load(self, shards: list[S]) -> dict[str, Any]:
        """Figures for the "<label> loaded" line, once every shard is loaded."""
        return {}

    def start(self) -> None:
        """Create the internal topic if needed and begin loading every shard."""
        self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    @property
    def active(self) -> bool:
        return self.runtime.active

    @active.setter
    def active(self, value: bool) -> None:
        self.runtime.active = value

    @property
    def shards(self) -> list[S]:
        return self.runtime.shards

    @property
    def loaded(self) -> asyncio.Event:
        return self.runtime.loaded

    @property
    def load_ms(self) -> float:
        return self.runtime.load_ms

    @property
    def all_loaded(self) -> bool:
        return self.runtime.all_loaded

    @property
    def topic_missing(self) -> bool:
        return self.runtime.topic_missing

    @property
    def max_batch_bytes(self) -> int:
        return self.runtime.max_batch_bytes
