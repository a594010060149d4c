"""Topics: names, ids, partition counts and configs, persisted in the data dir.

The partition logs themselves belong to storage; components that care about topic
changes (the log manager, the group coordinator, caches) subscribe to the events here.

Deleting a topic is one durable step: topics.json is rewritten (atomically, fsynced) without
the topic and with its id under "deleting"; then the listeners remove its data. If one of
them fails, or the process dies before they finish, the id stays doomed: the next start-up
removes what is left of its directories before anything opens them (LogManager.load), and
only then is the id forgotten. So no restart or failure brings back half a deleted topic.

Each topic also stores its replica assignment (the broker ids of each partition's replicas,
preferred leader first), placed at creation by `placement` (broker/topics/placement.py) and
written in the same atomic step as the topic. Who leads and who is in sync is not stored here:
that is the cluster's (broker/cluster/). `racks_of(topic, partition)` reads the racks of a
partition's replicas, as Kafka's coordinators read them from their metadata image.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from broker.node.datadir import read_json, write_json
from broker.topics.placement import Placement, PlacementError
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import Config

log = structlog.get_logger("kaflet.topics")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC})
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+\Z")  # \Z, not $: "$" would accept a trailing newline


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    # Each partition's replicas (broker ids, preferred leader first); None for a topic stored
    # before assignments were (its replicas are then the owner's fallback, see replicas_of).
    replicas: list[list[int]] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": str(self.topic_id), "partitions": self.partitions, "configs": self.configs, "internal": self.internal}
        if self.replicas is not None:
            out["replicas"] = self.replicas
        return out


def _stored_replicas(entry: dict[str, Any], partitions: int) -> list[list[int]] | None:
    """A stored assignment if it is whole (one non-empty list of ints per partition), else None."""
    replicas = entry.get("replicas")
    if not isinstance(replicas, list) or len(replicas) != partitions:
        return None
    for ids in replicas:
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return None
    return [list(ids) for ids in replicas]


def name_error(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None (Kafka's `Topic.validate`, with its messages)."""
    if name is None or name == "":
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is invalid: the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _collision_key(name: str) -> str:
    # Kafka rejects names that differ only by '.' versus '_' (they collide in metric names).
    return name.replace(".", "_")


TopicListener = Callable[[Topic], Any]


class TopicManager:
    def __init__(self, path: Path, config: Config) -> None:
        self.path = path / "topics.json"
        self.config = config
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.generation = 0
        self.on_created: list[TopicListener] = []
        self.on_deleted: list[TopicListener] = []
        self.on_partitions_added: list[Callable[[Topic, int], Any]] = []
        self.on_configs_changed: list[TopicListener] = []
        # A reassignment: the racks of the partitions' replicas may differ (KIP-848 metadata hashes).
        self.on_replicas_changed: list[TopicListener] = []
        # Where new partitions' replicas go (a lone broker: this node; a cluster sets its own).
        self.placement = Placement.single(config.node_id, config.broker_rack, config.default_replication_factor)
        # The replicas a partition has, and the rack of a broker: the owner of the cluster's
        # metadata sets them (broker/cluster/cluster.py); a lone broker is every replica.
        self.replicas_of: Callable[[Topic, int], list[int]] = lambda _topic, _partition: [config.node_id]
        self.rack_of: Callable[[int], str | None] = lambda node: config.broker_rack if node == config.node_id else None
        # A creation (or partitions added) failed on a full or broken disk: (topic, first new
        # partition) -- whatever was made for those partitions is removed again.
        self.on_create_undone: list[Callable[[Topic, int], Any]] = []
        # Deleted topics whose data may not all be gone yet: id -> name.
        self.deleting: dict[uuid.UUID, str] = {}
        if self.path.exists():
            stored = read_json(self.path)
            self.deleting = {uuid.UUID(i): n for i, n in stored.get("deleting", {}).items()}
            for name, entry in stored.get("topics", {}).items():
                topic = Topic(
                    name,
                    uuid.UUID(entry["id"]),
                    int(entry["partitions"]),
                    dict(entry.get("configs", {})),
                    bool(entry.get("internal", False)),
                    _stored_replicas(entry, int(entry["partitions"])),
                )
                self.topics[name] = topic
                self.by_id[topic.topic_id] = topic
        # Collision key -> name: a new name is checked in O(1), not against every topic.
        self._collisions: dict[str, str] = {_collision_key(n): n for n in self.topics}

    def _save(self) -> None:
        self.generation += 1
        stored: dict[str, Any] = {"version": 1, "topics": {n: t.to_json() for n, t in sorted(self.topics.items())}}
        if self.deleting:
            stored["deleting"] = {str(i): n for i, n in self.deleting.items()}
        write_json(self.path, stored)

    def get(self, name: str | None) -> Topic | None:
        return self.topics.get(name) if name is not None else None

    def get_by_id(self, topic_id: uuid.UUID | None) -> Topic | None:
        return self.by_id.get(topic_id) if topic_id is not None else None

    def names(self) -> list[str]:
        return list(self.topics)

    def check_new(self, name: str, partitions: int) -> None:
        """Raise TopicError if a topic `name` with `partitions` could not be created now."""
        reason = name_error(name)
        if reason is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if name in self.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        other = self._collisions.get(_collision_key(name))
        if other is not None and other in self.topics:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}")
        if partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")

    def racks_of(self, topic: str, partition: int) -> frozenset[str]:
        """The racks of a partition's replicas (brokers without a rack add none): what rack-aware
        assignors match a member's rack against (Kafka's CoordinatorMetadataImage.partitionRacks).
        Empty for an unknown topic or partition."""
        found = self.topics.get(topic)
        if found is None or not 0 <= partition < found.partitions:
            return frozenset()
        return frozenset(rack for node in self.replicas_of(found, partition) if (rack := self.rack_of(node)) is not None)

    def replication_factor(self, internal: bool) -> int:
        placement = self.placement
        return placement.internal_replication_factor if internal else placement.default_replication_factor

    def create(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
        replicas: list[list[int]] | None = None,
    ) -> Topic:
        """Create a topic; without `replicas` its partitions are placed with the default
        replication factor (internal topics: theirs). PlacementError if they cannot be."""
        created = self.create_many([(name, partitions, configs, internal, replicas)])[0]
        if isinstance(created, TopicError):
            raise created
        return created

    def create_many(self, specs: list[tuple[str, int, dict[str, str] | None, bool, list[list[int]] | None]]) -> list[Topic | TopicError]:
        """Create topics (name, partitions, configs, internal, replicas or None to place them) with
        one durable write of topics.json for all of them (a request creating thousands costs one
        write, not one each); a topic that cannot be created gets its TopicError in its place."""
        out: list[Topic | TopicError] = []
        new: list[Topic] = []
        for name, partitions, configs, internal, replicas in specs:
            try:
                self.check_new(name, partitions)
            except TopicError as exc:
                out.append(exc)
                continue
            if replicas is None:
                replicas = self.placement.place(partitions, self.replication_factor(internal or name in INTERNAL_TOPICS))
            topic = Topic(name, uuid.uuid4(), partitions, dict(configs or {}), internal, replicas)
            self.topics[name] = topic
            self.by_id[topic.topic_id] = topic
            self._collisions[_collision_key(name)] = name
            new.append(topic)
            out.append(topic)
        if not new:
            return out
        try:
            self._save()
        except OSError as exc:
            failed = self._forget(new, exc)
            return [failed.get(id(t), t) if isinstance(t, Topic) else t for t in out]
        for i, topic in enumerate(out):
            if not isinstance(topic, Topic):
                continue
            try:
                for listener in self.on_created:
                    listener(topic)
            except OSError as exc:
                # A full disk: no trace of the topic stays, and the client hears why (Kafka answers a
                # KafkaStorageException as KAFKA_STORAGE_ERROR).
                self._undo_partitions(topic, 0)
                out[i] = self._forget([topic], exc)[id(topic)]
                self._save_back(topic.name)
        return out

    def _forget(self, topics: list[Topic], exc: OSError) -> dict[int, TopicError]:
        """Take back topics whose creation failed; the error each is answered with, by id()."""
        errors = {}
        for topic in topics:
            self.topics.pop(topic.name, None)
            self.by_id.pop(topic.topic_id, None)
            if self._collisions.get(_collision_key(topic.name)) == topic.name:
                del self._collisions[_collision_key(topic.name)]
            errors[id(topic)] = TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot create topic {topic.name}: {exc.strerror or exc}")
        return errors

    def _undo_partitions(self, topic: Topic, first_partition: int) -> None:
        """Remove what was made for partitions `first_partition`.. of `topic` (a failed change)."""
        for listener in self.on_create_undone:
            try:
                listener(topic, first_partition)
            except OSError as exc:
                log.error("cannot remove what a failed topic change made", topic=topic.name, error=str(exc))

    def _save_back(self, name: str) -> None:
        """topics.json held the failed change: write the state without it (best effort on a full disk)."""
        try:
            self._save()
        except OSError as exc:
            log.error("cannot write topics.json back after a failed topic change", topic=name, error=str(exc))

    def maybe_auto_create(self, name: str) -> Topic | None:
        """Auto-create `name` if the broker allows it and the name is legal and not internal."""
        if not self.config.auto_create_topics or name in INTERNAL_TOPICS or name_error(name) is not None:
            return None
        try:
            return self.create(name, self.config.default_partitions)
        except (TopicError, PlacementError):
            return None

    def delete(self, name: str) -> Topic:
        """Delete a topic durably; its data goes now or, after a failure, at the next start."""
        topic = self.topics.pop(name)
        self.by_id.pop(topic.topic_id, None)
        if self._collisions.get(_collision_key(name)) == name:
            del self._collisions[_collision_key(name)]
        self.deleting[topic.topic_id] = topic.name
        self._save()
        for listener in self.on_deleted:
            try:
                listener(topic)
            except Exception as exc:
                # The topic is gone (as in Kafka, whose log deletion is asynchronous); what is left
                # of its data is doomed by id and removed at the next start-up.
                log.error("topic deleted, but removing its data failed; the next start finishes it", topic=name, error=str(exc))
        return topic

    def deletions_finished(self) -> None:
        """Called once start-up removed the data of every topic in `deleting`."""
        if self.deleting:
            self.deleting.clear()
            self._save()

    def add_partitions(self, name: str, total: int, replicas: list[list[int]] | None = None) -> Topic:
        """Grow a topic to `total` partitions; without `replicas` the new ones are placed with
        the replication factor of its first partition, as Kafka's controller does."""
        topic = self.topics[name]
        old = topic.partitions
        old_replicas = topic.replicas
        existing = old_replicas if old_replicas is not None else [self.replicas_of(topic, p) for p in range(old)]
        if replicas is None:
            replicas = self.placement.place(total - old, len(existing[0]) if existing else 1)
        topic.replicas = [list(r) for r in existing] + [list(r) for r in replicas]
        topic.partitions = total
        saved = False
        try:
            self._save()
            saved = True
            for listener in self.on_partitions_added:
                listener(topic, old)
        except OSError as exc:
            self._undo_partitions(topic, old)
            topic.partitions = old
            topic.replicas = old_replicas
            if saved:
                self._save_back(name)
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot add partitions to {name}: {exc.strerror or exc}") from exc
        return topic

    def set_replicas(self, name: str, replicas: list[list[int]]) -> None:
        """A topic's partitions have other replicas now (a reassignment); kept durably."""
        topic = self.topics[name]
        before = topic.replicas
        topic.replicas = [list(r) for r in replicas]
        try:
            self._save()
        except OSError:
            topic.replicas = before
            raise
        if topic.replicas != before:
            for listener in self.on_replicas_changed:
                listener(topic)

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        before = topic.configs
        topic.configs = dict(configs)
        try:
            self._save()
        except OSError:
            topic.configs = before  # a full disk: the change did not happen
            raise
        for listener in self.on_configs_changed:
            listener(topic)
