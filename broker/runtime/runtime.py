"""The coordinator runtime: one coordinator's shards over the partitions of its internal topic
(Kafka's CoordinatorRuntime). The group coordinator (`__consumer_offsets`) and the transaction
coordinator (`__transaction_state`) are its users; each brings a shard builder and the record
types its shards replay, and the runtime does the rest:

- owns the internal topic: creates it at start with its configs (RC-1), refuses a data dir made
  with another partition count (CO-5: the count maps keys to shards), and creates it again, empty,
  when a FindCoordinator finds it deleted (CO-7);
- routes a key to its shard: p = Utils.abs(key.hashCode()) % partitions (CO-1..CO-4);
- loads every shard in the background after the broker starts listening, one after the other,
  yielding to requests between them (RL-1); until a shard is loaded its keys answer
  COORDINATOR_LOAD_IN_PROGRESS, a shard whose load failed (or that was unloaded: its topic
  deleted, moved to another node of `--brokers N`, stopped) NOT_COORDINATOR (GE-1);
- writes: an operation's records are appended to the partition's log and replayed into the
  shard before its answer leaves, after an fsync with `--fsync always` (broker/runtime/context.py);
  batched commits are appended once per partition per loop turn (broker/runtime/turn.py);
- gives each partition its keyed timers, which fire on the loop between requests (timer.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import structlog

from broker.runtime.context import CoordinatorContext
from broker.runtime.errors import CoordinatorError
from broker.runtime.loader import CoordinatorLoader
from broker.runtime.result import CoordinatorResult
from broker.runtime.shard import ShardState
from broker.runtime.turn import CommitTurn
from protocol.errors import ErrorCode
from protocol.javahash import partition_for

if TYPE_CHECKING:
    from broker.node.clock import Clock
    from broker.runtime.metadata import TopicCatalog
    from broker.runtime.writer import PartitionWriter
    from broker.topics.catalog import Topic

log = structlog.get_logger("kaflet.coordinator")

S = TypeVar("S")
_ROUTES_CACHED = 100_000  # keys whose partition is remembered (hashing a long key costs more than a lookup)


@dataclass(frozen=True)
class InternalTopic:
    """A coordinator's internal topic: its partition count (fixed per data dir), its configs, the
    setting that fixes the count (named when a data dir disagrees) and what its re-creation loses."""

    name: str
    partitions: int
    configs: Mapping[str, str]
    flag: str
    recreated: str  # "every group starts empty"


@dataclass(frozen=True)
class RuntimeServices:
    """What a coordinator runtime needs of the broker, composed once by the server and shared by
    every coordinator: the topic catalog, the log store (PartitionWriter), the clock, the largest
    batch a topic takes (its max.message.bytes) and the check run before a timer fires (the fault
    injector's, broker/network/faults.py)."""

    catalog: TopicCatalog
    writer: PartitionWriter
    clock: Clock
    batch_limit: Callable[[Topic], int]
    before_timer: Callable[[str | None, str], None] | None = None


class CoordinatorRuntime(Generic[S]):
    def __init__(
        self,
        topic: InternalTopic,
        services: RuntimeServices,
        *,
        build: Callable[[CoordinatorContext[S]], S],
        label: str,
        describe_load: Callable[[list[S]], dict[str, Any]] | None = None,
        loader: CoordinatorLoader | None = None,
    ) -> None:
        """`build(context)` makes a shard over a partition; `label` names the coordinator in the
        log ("coordinator loaded"); `describe_load(shards)` adds figures to that line."""
        self.topic = topic
        self.build = build
        self.catalog = services.catalog
        self.writer = services.writer
        self.clock = services.clock
        self.batch_limit = services.batch_limit
        self.before_timer = services.before_timer
        self.label = label
        self.describe_load = describe_load
        self.loader = loader or CoordinatorLoader()
        self.num_partitions = topic.partitions
        self.contexts: list[CoordinatorContext[S]] = []
        self.active = False
        self.loaded = asyncio.Event()
        self.load_ms = 0.0
        self.max_batch_bytes = 0
        self._load_task: asyncio.Task[None] | None = None
        self._partitions: dict[str, int] = {}
        self._dirty: dict[CoordinatorContext[S], None] = {}  # partitions with enqueued records, in order
        # Shards whose flush of enqueued records failed since the last commit turn (turn.py).
        self._failed: dict[Any, CoordinatorError] = {}
        self.commit_turn = CommitTurn(self)

    # -- the internal topic and the shards' lives -----------------------------------------

    def start(self) -> None:
        """Create the internal topic if needed (RC-1) and begin loading every shard."""
        self.catalog.on_deleted.append(self._on_topic_deleted)
        self.active = True
        self._create_shards()

    def _create_shards(self) -> None:
        spec = self.topic
        topic = self.catalog.get(spec.name)
        if topic is None:
            topic = self.catalog.create(spec.name, spec.partitions, dict(spec.configs), internal=True)
        elif topic.partitions != spec.partitions:
            raise RuntimeError(f"{spec.name} has {topic.partitions} partitions but {spec.flag} is {spec.partitions}")
        self.max_batch_bytes = self.batch_limit(topic)
        self.contexts = [CoordinatorContext(self, p) for p in range(spec.partitions)]
        self.loaded.clear()
        self._load_task = asyncio.get_running_loop().create_task(self._load_all(self.contexts))

    @property
    def topic_missing(self) -> bool:
        return self.catalog.get(self.topic.name) is None

    def recreate_topic(self) -> None:
        """CO-7: a FindCoordinator that finds the internal topic deleted creates it again (empty)."""
        if self.active and self.topic_missing:
            log.warning(f"re-creating deleted {self.topic.name}; {self.topic.recreated}")
            self._create_shards()

    async def _load_all(self, contexts: list[CoordinatorContext[S]]) -> None:
        """Load every shard, one after the other, yielding to requests in between; a shard whose
        load fails is left FAILED (its keys answer NOT_COORDINATOR) while the others serve."""
        started = time.monotonic()
        for context in contexts:
            await asyncio.sleep(0)
            try:
                await context.load()
            except Exception:
                continue
        self.load_ms = (time.monotonic() - started) * 1000
        self.loaded.set()
        shards = [c.shard for c in contexts]
        log.info(
            f"{self.label} loaded",
            shards=len(contexts),
            failed=[c.partition for c in contexts if c.state is ShardState.FAILED],
            **(self.describe_load(shards) if self.describe_load is not None else {}),
            load_ms=round(self.load_ms, 1),
        )

    async def stop(self) -> None:
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
            try:
                await self._load_task
            except (asyncio.CancelledError, Exception):
                pass
        self.active = False
        for context in self.contexts:
            context.unload()

    def _on_topic_deleted(self, topic: Topic) -> None:
        if topic.name == self.topic.name:
            # As when Kafka's coordinator resigns its partitions: parked requests get NOT_COORDINATOR.
            if self._load_task is not None:
                self._load_task.cancel()
            for context in self.contexts:
                context.unload()

    async def move(self, partition: int) -> S:
        """The partition's coordinator moves to another node (`--brokers N`): what the commit turn
        holds is appended, the shard unloads (parked requests get NOT_COORDINATOR) and a new one
        loads from the log. Returns the new shard."""
        if not 0 <= partition < len(self.contexts):
            raise KeyError(f"no partition {self.topic.name}-{partition}")
        self.flush_appends()
        self.contexts[partition].unload()
        await self.restart(partition)
        return self.contexts[partition].shard

    def restart(self, partition: int) -> asyncio.Task[None]:
        """A new shard for `partition` (its old one unloaded), loading from the log in the background."""
        context = self.contexts[partition] = CoordinatorContext(self, partition)
        return asyncio.get_running_loop().create_task(context.load())

    # -- routing --------------------------------------------------------------------------

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def shard_for(self, key: str) -> S:
        """GE-1: the active shard of `key`, or CoordinatorError with why not."""
        if not self.active:
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        partition = self._partitions.get(key)
        if partition is None:
            partition = partition_for(key, self.num_partitions)
            if len(self._partitions) >= _ROUTES_CACHED:
                self._partitions.clear()
            self._partitions[key] = partition
        context = self.contexts[partition]
        state = context.state
        if state is ShardState.ACTIVE:
            return context.shard
        if state is ShardState.LOADING:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        raise CoordinatorError(ErrorCode.NOT_COORDINATOR)

    def write(self, key: str, op: Callable[..., CoordinatorResult[Any]], *args: Any) -> tuple[Any, Awaitable[Any] | None]:
        """A write operation on `key`'s shard: `op(shard, *args)` returns a CoordinatorResult,
        whose records are appended (and replayed) before its response is returned with the
        durability wait the answer awaits. Raises CoordinatorError (routing, a failed append)."""
        shard = self.shard_for(key)
        return self.contexts[self.partition_for(key)].apply(op(shard, *args))

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> Awaitable[Any] | None:
        """A transaction's COMMIT or ABORT marker in `partition` (Kafka's scheduleTransactionCompletion):
        appended after what the commit turn holds for it, and replayed by its shard (RL-2)."""
        if not 0 <= partition < len(self.contexts):
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self.contexts[partition].write_marker(producer_id, producer_epoch, commit)

    # -- the commit turn (broker/runtime/turn.py) -------------------------------------------

    def mark_dirty(self, context: CoordinatorContext[S]) -> None:
        self._dirty[context] = None

    def take_dirty(self) -> dict[CoordinatorContext[S], None]:
        dirty, self._dirty = self._dirty, {}
        return dirty

    def note_failed(self, shard: Any, exc: CoordinatorError) -> None:
        self._failed[shard] = exc

    def take_failed(self) -> dict[Any, CoordinatorError]:
        failed, self._failed = self._failed, {}
        return failed

    def flush_appends(self) -> None:
        """Append the records enqueued by batched operations now, ending the commit turn early;
        raises AppendsFailed for the shards that failed."""
        self.commit_turn()

    # -- what the shards are doing ----------------------------------------------------------

    @property
    def shards(self) -> list[S]:
        return [c.shard for c in self.contexts]

    @property
    def all_loaded(self) -> bool:
        return bool(self.contexts) and all(c.state is ShardState.ACTIVE for c in self.contexts)

    def active_shards(self) -> list[S]:
        return [c.shard for c in self.contexts if c.state is ShardState.ACTIVE]

    def any_loading(self) -> bool:
        return any(c.state is ShardState.LOADING for c in self.contexts)

    def states(self) -> dict[str, int]:
        """How many partitions are in each state ("active": 50), for /readyz."""
        counts: dict[str, int] = {}
        for context in self.contexts:
            counts[context.state.value] = counts.get(context.state.value, 0) + 1
        return counts
