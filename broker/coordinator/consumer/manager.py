"""KIP-848 consumer groups on one coordinator shard: ConsumerGroupHeartbeat (KH-2..KH-16), target
assignment (KA-1, KH-9), reconciliation (KR-1..KR-3), timers (KT-1..KT-3), topic events and regular
expression subscriptions, replay of records 3-8 and 16 (RL-5) and the admin views, after Kafka 4.4's
GroupMetadataManager.

Every state change is a record: an operation computes its records from the current state, as
Kafka's GroupMetadataManager does, and `shard.write` appends them and replays them through
`replay()`, the function that rebuilds the groups at load. Timers, the metadata-refresh flag and the
background regex resolutions are soft state, as in Kafka.

No heartbeat walks the group: the group keeps counts of what its members subscribe to
(broker/coordinator/consumer/group.py), the subscription is summed up by a hash of the subscribed
topics' metadata (Kafka 4.1+'s ConsumerGroupMetadataValue.MetadataHash, which replaced the
ConsumerGroupPartitionMetadata record: one replayed from an older log is tombstoned at the next
update, as Kafka does), and the target assignment, which is the one computation over every member,
runs at most once per assignment interval.

Regular expressions (Kafka 4.x): a heartbeat never resolves one. A member's new expression is
checked (INVALID_REGULAR_EXPRESSION) and, when the group has no resolution of it, the group's
expressions are resolved in the background (broker/coordinator/consumer/regex.py) against every topic
name, internal ones included (Kafka's topicNames()); the result is written as
ConsumerGroupRegularExpression records, and the group epoch bumps when a resolution changed, so the
member gets its topics named by the list at once and those of its expression at a later heartbeat.
Kafka's refresh rules: at most one resolution in flight per group, none within 10 s of the last, and
one is needed when the set of expressions changed, a topic was created since the last, or the
refresh interval (10 min) passed. A resolution is filtered by what the member whose heartbeat
started it may DESCRIBE, when an authorizer is on.

Where kaflet decides (Kafka is silent, or kaflet is a development broker):
* KH-2 is checked before the request is routed to its shard (Kafka 4.0's order). v0 follows the
  pinned rules (an empty MemberId at epoch 0 gets a server-generated id; SubscribedTopicNames
  must be non-empty); v1 follows KIP-1082 and Kafka 4.0 (MemberId required at every epoch;
  SubscribedTopicNames or SubscribedTopicRegex non-null when joining).
* KA-1 ties between assignors named by equally many members go to the one named first.
* `group.consumer.assignment.interval.ms` is 0 by default (Kafka 4.4: 1000), so a small group's
  target follows every change at once; but a group whose last target computation took 5 ms or
  more is not recomputed sooner than ASSIGNMENT_COST_FACTOR (20) times that, so a group of
  thousands spends at most a twentieth of the event loop in its assignor however fast members join.
* The metadata hash is kaflet's own 64-bit hash (BLAKE2b) of the same fields Kafka's XXH3 covers
  (topic id, name, partitions, each partition's racks); only its equality matters.
* The metadata version a resolution records is a millisecond clock bumped by every topic event
  (Kafka: the metadata log's offset), so it orders resolutions and creations across restarts too.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator.consumer import regex as regexes
from broker.coordinator.consumer import target as targets
from broker.coordinator.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    NO_RESOLVED_REGEX,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    Partitions,
    from_partitions,
    new_member_id,
    regex_of,
)
from broker.coordinator.consumer.lag import GROUP_CONFIG as LAG_CONFIG
from broker.coordinator.consumer.lag import MODES as LAG_MODES
from broker.coordinator.consumer.lag import lag_function
from broker.coordinator.consumer.migration import Migration
from broker.coordinator.consumer.reconcile import next_assignment
from broker.coordinator.consumer.regex import RegexStatus
from broker.runtime.errors import CoordinatorError
from broker.runtime.executor import CoordinatorExecutor
from broker.runtime.shard import ShardState
from protocol.errors import ErrorCode
from storage import offsets_records as orec

if TYPE_CHECKING:
    from broker.coordinator.shard import GroupShard

log = structlog.get_logger("kaflet.coordinator")

Record = tuple[bytes, bytes | None]
Owned = list[tuple[uuid.UUID, list[int]]] | None

REGEX_REFRESH_MIN_MS = 10_000  # Kafka: no group's expressions are resolved twice within 10 s (a constant)
REGEX_REFRESH_INTERVAL_MS = 600_000  # Kafka's internal group.consumer.regex.refresh.interval.ms
ASSIGNMENT_COST_FACTOR = 20  # kaflet: a group's target is recomputed at most once per 20x the last one's time,
ASSIGNMENT_FREE_MS = 5.0  # unless that took less than this: small groups follow every change at once
OFFLOAD_MS = 5.0  # a group whose last target computation took this long computes the next in the background,
OFFLOAD_SIZE = 200  # as does one with this many members, or subscribed topics, whatever the last one cost
_MASK64 = (1 << 64) - 1


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: Owned
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0
    # With an authorizer: the topics of a set the member may DESCRIBE (a regex resolution keeps only those).
    describable: Callable[[set[str]], set[str]] | None = None


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


def _session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session-{group_id}-{member_id}"


def _rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-{group_id}-{member_id}"


def _regex_key(group_id: str) -> str:
    return f"{group_id}-regex"  # Kafka's executor key


def key_of(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    return orec.consumer_group_key(kind, group_id, member_id)


def invalid_regex_message(regex: str, description: str) -> str:
    return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."


class ConsumerGroupManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard
        self.timers = shard.timers
        self.config = shard.config
        self.stats = shard.service.stats
        self.migration = Migration(self)
        self._session_deadlines: dict[tuple[str, str], float] = {}  # KH-12: (group, member) -> loop time
        self.executor = CoordinatorExecutor(lambda: shard.state is ShardState.ACTIVE, shard.context.apply)
        self._topic_hashes: dict[str, int] = {}  # Kafka's topicHashCache
        self._hash_generation = 0
        # group -> the CPU its last two target computations took (a lone slow one, a GC pass, throttles nothing)
        self._assignment_costs: dict[str, tuple[float, float]] = {}

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        return self.shard.consumer_groups

    @property
    def topics(self) -> Any:
        return self.shard.service.topics

    def now_ms(self) -> int:
        return self.shard.now_ms()

    # -- configuration --------------------------------------------------------------------

    def _group_config(self, group_id: str, name: str) -> int | None:
        """Per-group dynamic configs (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`,
        `consumer.assignment.interval.ms`, set by IncrementalAlterConfigs on the GROUP resource:
        broker/config/group_configs.py); None when the group has none, and the broker default applies."""
        configs = getattr(self.shard.service, "group_configs", None)
        if configs is None:
            return None
        value = configs.get(group_id, name)
        return int(value) if value is not None else None

    def session_timeout_ms(self, group_id: str) -> int:
        value = self._group_config(group_id, "consumer.session.timeout.ms")
        return value if value is not None else self.config.group_consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        value = self._group_config(group_id, "consumer.heartbeat.interval.ms")
        return value if value is not None else self.config.group_consumer_heartbeat_interval_ms

    def assignment_interval_ms(self, group_id: str) -> int:
        value = self._group_config(group_id, "consumer.assignment.interval.ms")
        return value if value is not None else getattr(self.config, "group_consumer_assignment_interval_ms", 0)

    @property
    def default_assignor(self) -> str:
        return self.config.group_consumer_assignors.split(",")[0].strip()

    # -- replay (RL-5) ----------------------------------------------------------------------

    def _group_for_replay(self, group_id: str, create: bool) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = ConsumerGroup(group_id)
            if group_id in self.shard.groups:
                # RL-5: a simple (offsets-only) or empty classic group is replaced, in its place (LI-4).
                del self.shard.groups[group_id]
        return group

    def replay(self, kind: int, key: bytes, value: bytes | None) -> None:
        _, group_id, member_id = orec.parse_consumer_group_key(key)
        group = self._group_for_replay(group_id, value is not None)
        if group is None:
            return  # a tombstone for an unknown group is ignored (RC-2)
        if kind == orec.CONSUMER_GROUP_METADATA_KEY:
            if value is None:
                if not group.members:
                    del self.groups[group_id]
                return
            group.group_epoch, group.metadata_hash = orec.parse_epoch_and_tag0(value)
        elif kind == orec.CONSUMER_GROUP_PARTITION_METADATA_KEY:
            if value is not None:
                orec.parse_consumer_group_partition_metadata_value(value)  # still checked: a bad record fails the load
            group.has_subscription_metadata_record = value is not None
        elif kind == orec.CONSUMER_GROUP_MEMBER_METADATA_KEY:
            assert member_id is not None
            group.apply_member_metadata(member_id, orec.parse_consumer_member_metadata_value(value) if value is not None else None)
        elif kind == orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY:
            group.apply_target_metadata(*(orec.parse_epoch_and_tag0(value) if value is not None else (-1, 0)))
        elif kind == orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
            assert member_id is not None
            group.apply_target(member_id, orec.parse_consumer_target_assignment_value(value) if value is not None else None)
        elif kind == orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY:
            assert member_id is not None
            group.apply_current_assignment(member_id, orec.parse_consumer_current_assignment_value(value) if value is not None else None)
        elif kind == orec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY:
            assert member_id is not None  # the key's second string: the expression
            group.apply_resolved_regex(member_id, orec.parse_consumer_group_regex_value(value) if value is not None else None)

    def on_loaded(self) -> None:
        """KT-3: session timers for every member, rebalance timers for those revoking."""
        self._session_deadlines.clear()
        for group in self.groups.values():
            group.metadata_refresh = True
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id, member.classic.session_timeout_ms if member.classic else None)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(group.group_id, member.member_id, member.member_epoch, member.rebalance_timeout_ms)
            if group.members:
                log.info("loaded consumer group", group=group.group_id, members=len(group.members), group_epoch=group.group_epoch)

    def on_unloaded(self) -> None:
        self.executor.cancel_all()

    # -- records ------------------------------------------------------------------------------

    @staticmethod
    def _metadata_record(group_id: str, member: ConsumerMember) -> Record:
        return key_of(orec.CONSUMER_GROUP_MEMBER_METADATA_KEY, group_id, member.member_id), orec.consumer_member_metadata_value(
            member.metadata_value()
        )

    @staticmethod
    def _current_record(group_id: str, member: ConsumerMember) -> Record:
        return key_of(
            orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member.member_id
        ), orec.consumer_current_assignment_value(member.assignment_value())

    @staticmethod
    def _target_record(group_id: str, member_id: str, parts: Partitions) -> Record:
        return key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), orec.consumer_target_assignment_value(
            from_partitions(parts)
        )

    @staticmethod
    def _epoch_record(group_id: str, epoch: int, metadata_hash: int = 0) -> Record:
        return key_of(orec.CONSUMER_GROUP_METADATA_KEY, group_id), orec.consumer_group_metadata_value(epoch, metadata_hash)

    @staticmethod
    def _target_metadata_record(group_id: str, epoch: int, timestamp_ms: int) -> Record:
        return key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, group_id), orec.target_assignment_metadata_value(
            epoch, timestamp_ms
        )

    @staticmethod
    def _regex_record(group_id: str, regex: str, resolved: orec.ResolvedRegex | None) -> Record:
        key = key_of(orec.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY, group_id, regex)
        return key, orec.consumer_group_regex_value(resolved) if resolved is not None else None

    @staticmethod
    def _remove_member_records(group_id: str, member_id: str) -> list[Record]:
        """RF-5: current assignment, target assignment, metadata tombstones, in that order."""
        return [
            (key_of(orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id), None),
            (key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), None),
            (key_of(orec.CONSUMER_GROUP_MEMBER_METADATA_KEY, group_id, member_id), None),
        ]

    def group_tombstones(self, group: ConsumerGroup, replaced: str | None = None, joining: str | None = None) -> list[Record]:
        """RF-5: the whole group, in Kafka's order (`replaced`'s records under the `joining` member's id:
        Kafka's createGroupTombstoneRecordsWithReplacedMember)."""
        gid = group.group_id

        def ids(source: Any) -> list[str]:
            return [joining if m == replaced and joining is not None else m for m in source]

        out: list[Record] = []
        out += [(key_of(orec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, gid, m), None) for m in ids(group.members)]
        out += [(key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, gid, m), None) for m in ids(group.members)]
        out.append((key_of(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, gid), None))
        out += [(key_of(orec.CONSUMER_GROUP_MEMBER_METADATA_KEY, gid, m), None) for m in ids(group.members)]
        out += [self._regex_record(gid, regex, None) for regex in group.resolved_regexes]
        out.append((key_of(orec.CONSUMER_GROUP_PARTITION_METADATA_KEY, gid), None))
        out.append((key_of(orec.CONSUMER_GROUP_METADATA_KEY, gid), None))
        return out

    # -- subscriptions and the metadata hash ------------------------------------------------------

    def _topic_hash(self, name: str) -> int:
        """Kafka's computeTopicHash (its fields, kaflet's hash): 0 for a topic that does not exist."""
        cached = self._topic_hashes.get(name)
        if cached is not None:
            return cached
        value = self._compute_topic_hash(name)
        if value:
            self._topic_hashes[name] = value
        return value

    def _compute_topic_hash(self, name: str) -> int:
        topic = self.topics.get(name)
        if topic is None:
            return 0
        h = hashlib.blake2b(digest_size=8)
        h.update(topic.topic_id.bytes)
        h.update(name.encode())
        h.update(topic.partitions.to_bytes(4, "big"))
        racks_of = getattr(self.topics, "racks_of", None)
        if racks_of is not None:
            for p in range(topic.partitions):
                racks = racks_of(name, p)
                if racks:
                    h.update(p.to_bytes(4, "big"))
                    for rack in sorted(racks):
                        raw = rack.encode()
                        h.update(len(raw).to_bytes(4, "big") + raw)
        return int.from_bytes(h.digest(), "big")

    def metadata_hash(self, names: Any) -> int:
        """Kafka's computeMetadataHash over the subscribed topics that exist; 0 for none. Order-free (a sum),
        which keeps it one pass over the names."""
        topics = self.topics
        total = 0
        for name in names:
            if topics.get(name) is not None:
                total += self._topic_hash(name)
        total &= _MASK64
        return total - (1 << 64) if total >> 63 else total  # an int64, as the record holds it

    @staticmethod
    def _names_after(group: ConsumerGroup, old: ConsumerMember | None, new: ConsumerMember | None) -> Any:
        """Kafka's computeSubscribedTopicNames(old, new): the group's subscribed topics once `old` is
        replaced by `new` (either may be None)."""
        old_names = old.subscribed_topic_names if old is not None else ()
        new_names = new.subscribed_topic_names if new is not None else ()
        old_regex, new_regex = regex_of(old), regex_of(new)
        regex_gone = old_regex is not None and old_regex != new_regex and group.num_subscribed_members(old_regex) == 1
        if old_names == new_names and not regex_gone:
            return group.subscribed_topics()
        by_name = dict(group.names_by_name)
        for name in old_names:
            n = by_name.get(name, 0) - 1
            if n > 0:
                by_name[name] = n
            else:
                by_name.pop(name, None)
        for name in new_names:
            by_name[name] = by_name.get(name, 0) + 1
        by_regex: Any = group.names_by_regex
        if regex_gone and old_regex in group.resolved_regexes:
            by_regex = dict(by_regex)
            for name in group.resolved_regexes[old_regex].topics:
                n = by_regex.get(name, 0) - 1
                if n > 0:
                    by_regex[name] = n
                else:
                    by_regex.pop(name, None)
        return by_name.keys() | by_regex.keys()

    def _update_subscription_metadata(
        self, group: ConsumerGroup, bump: bool, member: ConsumerMember, updated: ConsumerMember, records: list[Record]
    ) -> int:
        """Kafka's updateSubscriptionMetadata: the new metadata hash, and the group epoch, bumped when asked to
        or when the hash changed; returns the group epoch."""
        metadata_hash = self.metadata_hash(self._names_after(group, member, updated))
        epoch = group.group_epoch
        if metadata_hash != group.metadata_hash:
            bump = True
        if bump:
            epoch += 1
            records.append(self._epoch_record(group.group_id, epoch, metadata_hash))
            self.stats.consumer_epoch_bumps += 1
        if group.has_subscription_metadata_record:
            records.append((key_of(orec.CONSUMER_GROUP_PARTITION_METADATA_KEY, group.group_id), None))
        return epoch

    def on_topic_event(self, name: str, created_or_deleted: bool) -> None:
        """A topic was created, deleted or grew: its hash is stale, and groups subscribed to it refresh their
        metadata at their next heartbeat (Kafka's onMetadataUpdate: requestMetadataRefresh)."""
        self._topic_hashes.pop(name, None)
        self._hash_generation += 1  # a hash made in the background before this event is not kept
        for group in self.groups.values():
            if group.is_subscribed_to(name):
                group.metadata_refresh = True

    # -- regular expressions ------------------------------------------------------------------------

    def _check_regex(self, regex: str) -> None:
        """Kafka's throwIfRegularExpressionIsInvalid. The API layer compiles a new expression in the
        background before the request reaches the shard, so this is a cache lookup."""
        try:
            regexes.compile_regex(regex)
        except regexes.InvalidRegex as exc:
            raise CoordinatorError(ErrorCode.INVALID_REGULAR_EXPRESSION, invalid_regex_message(regex, exc.description)) from None

    def _regex_refresh_may_be_due(self, group: ConsumerGroup) -> bool:
        """Whether a heartbeat that changes nothing may start a refresh (the early returns of
        _maybe_update_regexes): none is in flight and the last is 10 s old."""
        if self.executor.is_scheduled(_regex_key(group.group_id)):
            return False
        last = group.last_regex_refresh_ms()
        return last is None or self.now_ms() > last + REGEX_REFRESH_MIN_MS

    def _maybe_update_regexes(
        self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember, records: list[Record], req: HeartbeatRequest | None
    ) -> RegexStatus:
        """Kafka's maybeUpdateRegularExpressions."""
        now = self.now_ms()
        gid = group.group_id
        old_raw, new_raw = member.subscribed_topic_regex, updated.subscribed_topic_regex
        old, new = regex_of(member), regex_of(updated)
        status = RegexStatus.NO_CHANGE
        require_refresh = False
        if old_raw != new_raw:
            status = RegexStatus.UPDATED
            if old is not None and group.num_subscribed_members(old) == 1:
                records.append(self._regex_record(gid, old, None))
            if new is not None:
                if group.num_subscribed_members(new) == 0:
                    self._check_regex(new)
                    require_refresh = True
                elif new in group.resolved_regexes:
                    status = RegexStatus.UPDATED_AND_RESOLVED
            elif old is not None:
                status = RegexStatus.UPDATED_AND_RESOLVED
        if not require_refresh and not group.subscribed_regexes:
            return status
        if self.executor.is_scheduled(_regex_key(gid)):
            return status
        last = group.last_regex_refresh_ms()
        if last is not None and now <= last + REGEX_REFRESH_MIN_MS:
            return status
        counts = group.subscribed_regexes
        if old != new:  # the group's counts once this member's change applies (a copy only then)
            counts = dict(counts)
            if old is not None:
                n = counts.get(old, 0) - 1
                if n > 0:
                    counts[old] = n
                else:
                    counts.pop(old, None)
            if new is not None:
                counts[new] = counts.get(new, 0) + 1
        require_refresh |= len(counts) != len(group.resolved_regexes)
        require_refresh |= group.last_regex_version() < self.shard.service.new_topics_version
        require_refresh |= last is None or now > last + getattr(
            self.config, "group_consumer_regex_refresh_interval_ms", REGEX_REFRESH_INTERVAL_MS
        )
        if require_refresh and counts:
            self._resolve_in_background(gid, updated.member_id, sorted(counts), req.describable if req is not None else None)
        return status

    def _resolve_in_background(
        self, gid: str, member_id: str, wanted: list[str], describable: Callable[[set[str]], set[str]] | None
    ) -> None:
        names = list(self.topics.topics)  # every topic, internal ones included, as Kafka's topicNames()
        version = self.shard.service.metadata_version
        started = self.now_ms()
        generation = self._hash_generation
        log.info("resolving regular expressions", group=gid, regexes=len(wanted), topics=len(names))

        def work() -> tuple[dict[str, frozenset[str]], dict[str, int]]:
            resolved = regexes.resolve(wanted, names)
            # The matched topics' hashes, made here rather than on the loop when the result is applied.
            matched = set().union(*resolved.values()) if resolved else set()
            return resolved, {name: self._compute_topic_hash(name) for name in matched if name not in self._topic_hashes}

        self.executor.schedule(
            _regex_key(gid),
            work,
            lambda result, error: self._regexes_resolved(gid, result, error, version, started, describable, generation),
        )

    def _regexes_resolved(
        self,
        gid: str,
        result: tuple[dict[str, frozenset[str]], dict[str, int]] | None,
        error: BaseException | None,
        version: int,
        started: int,
        describable: Callable[[set[str]], set[str]] | None,
        generation: int,
    ) -> None:
        """Kafka's handleRegularExpressionsResult: a shard operation on the loop. Its records (one per
        expression, thousands in a large group) are written and their effect applied without decoding them
        again, as offset commits are."""
        if error is not None or result is None:
            log.error("could not resolve regular expressions", group=gid, error=repr(error))
            return
        group = self.groups.get(gid)
        if group is None:
            return
        resolved, hashes = result
        if generation == self._hash_generation:
            for name, value in hashes.items():
                self._topic_hashes.setdefault(name, value)
        if describable is not None:
            allowed = describable(set().union(*resolved.values())) if resolved else set()
            resolved = {regex: topics & allowed for regex, topics in resolved.items()}
        records: list[Record] = []
        applied: list[tuple[str, orec.ResolvedRegex]] = []
        by_regex: dict[str, int] | None = None
        bump = False
        for regex, topics in resolved.items():
            if group.num_subscribed_members(regex) == 0:
                continue
            old = group.resolved_regexes.get(regex, NO_RESOLVED_REGEX)
            if old.topics != topics:
                bump = True
                if by_regex is None:
                    by_regex = dict(group.names_by_regex)
                for name in old.topics:
                    n = by_regex.get(name, 0) - 1
                    if n > 0:
                        by_regex[name] = n
                    else:
                        by_regex.pop(name, None)
                for name in topics:
                    by_regex[name] = by_regex.get(name, 0) + 1
            entry = orec.ResolvedRegex(topics, version, started)
            records.append(self._regex_record(gid, regex, entry))
            applied.append((regex, entry))
        names = group.names_by_name.keys() | (by_regex if by_regex is not None else group.names_by_regex).keys()
        metadata_hash = self.metadata_hash(names)
        if metadata_hash != group.metadata_hash:
            bump = True
        log.info("regular expressions resolved", group=gid, regexes=len(resolved), ms=self.now_ms() - started, changed=bump)
        epoch = group.group_epoch + 1
        if bump:
            records.append(self._epoch_record(gid, epoch, metadata_hash))
        if not records:
            return
        self.shard.write(records, replay=False)
        for regex, entry in applied:
            group.apply_resolved_regex(regex, entry)
        if bump:
            group.group_epoch, group.metadata_hash = epoch, metadata_hash
            log.info("group epoch bumped", group=gid, group_epoch=epoch, reason="regular expressions resolved")
            self.stats.consumer_epoch_bumps += 1
            group.metadata_refresh = False

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, Awaitable[Any] | None]:
        """KH-3..KH-16. Raises CoordinatorError with the error (and message) to answer."""
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        steady = self._steady(req)
        if steady is not None:
            return steady, None
        records: list[Record] = []
        joining = req.member_epoch == 0
        group = self._get_or_create_group(req.group_id, joining, records)
        max_size = self.config.group_consumer_max_size
        if len(group.members) >= max_size and (not req.member_id or req.member_id not in group.members):
            raise CoordinatorError(
                ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {max_size} members."
            )
        member_id = req.member_id or new_member_id()
        replaced: str | None = None
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req, joining)
        else:
            member, replaced = self._static_member(group, member_id, req, joining, records)
        if joining and member_id not in group.members and replaced is None:
            log.info("member joined", group=group.group_id, member=member_id, instance_id=req.instance_id, protocol="consumer")

        updated = member.copy()
        if req.instance_id is not None:
            updated.instance_id = req.instance_id
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            updated.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            # "" is no regex (Kafka's member default): it drops a regex, and is no change otherwise.
            updated.subscribed_topic_regex = req.subscribed_topic_regex or None
        updated.client_id = req.client_id
        updated.client_host = req.client_host
        updated.classic = None

        names_changed = self._member_subscription_changed(group, member, updated, replaced is not None, records)
        regex_status = self._maybe_update_regexes(group, member, updated, records, req)
        assignor_changed = self._preferred_assignor_changed(group, member, updated)
        bump = names_changed or regex_status is RegexStatus.UPDATED_AND_RESOLVED or assignor_changed
        assigned_before = member.assigned  # replay gives the live member a new dict
        reconciled, waiter, group = self._update_member(
            group,
            member,
            updated,
            replaced,
            bump,
            names_changed or regex_status is not RegexStatus.NO_CHANGE,
            req.topic_partitions,
            records,
        )
        full = joining or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        result = HeartbeatResult(reconciled.member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group.group_id))
        if full or reconciled.assigned != assigned_before:
            result.assignment = reconciled.assigned
        return result, waiter

    def steady(self, group_id: str, member_id: str, epoch: int, client_id: str, client_host: str) -> HeartbeatResult | None:
        """`_steady` for a request the API layer has already seen to carry no optional field."""
        group = self.groups.get(group_id)
        if group is None or group.metadata_refresh or group.group_epoch != group.assignment_epoch:
            return None
        if group.subscribed_regexes and self._regex_refresh_may_be_due(group):
            return None
        member = group.members.get(member_id)
        if (
            member is None
            or member.member_epoch != epoch
            or epoch != group.assignment_epoch
            or member.classic is not None
            or member.state is not MemberState.STABLE
            or member.client_id != client_id
            or member.client_host != client_host
        ):
            return None
        self._schedule_session(group_id, member_id)
        return HeartbeatResult(member_id, epoch, self.heartbeat_interval_ms(group_id))

    def _steady(self, req: HeartbeatRequest) -> HeartbeatResult | None:
        """The heartbeat of a reconciled member that changes nothing, answered without building
        anything: what the full path would do (no record, no epoch bump, nothing to reconcile, no
        assignment in the answer since the request is not full), minus the copies. A group whose
        regular expressions may be due for a refresh takes the full path, which may start one."""
        if (
            req.member_epoch <= 0
            or req.instance_id is not None
            or req.rack_id is not None
            or req.rebalance_timeout_ms != -1
            or req.subscribed_topic_names is not None
            or req.subscribed_topic_regex is not None
            or req.server_assignor is not None
        ):
            return None
        return self.steady(req.group_id, req.member_id, req.member_epoch, req.client_id, req.client_host)

    def _member_subscription_changed(
        self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember, replaced: bool, records: list[Record]
    ) -> bool:
        """Kafka's hasMemberSubscriptionChanged: the member record when anything of it changed; True when
        its topic names did."""
        is_new = updated.member_id not in group.members and not replaced
        if is_new or not updated.same_metadata(member):
            records.append(self._metadata_record(group.group_id, updated))
            return set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)
        return False

    def _preferred_assignor_changed(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember) -> bool:
        """Kafka's hasPreferredServerAssignorChanged: the group's preferred assignor before and after."""
        if member.server_assignor == updated.server_assignor:
            return False
        default = self.default_assignor
        before = group.preferred_assignor(default)
        counts = dict(group.server_assignors)
        if member.member_id in group.members and member.server_assignor is not None:
            n = counts.get(member.server_assignor, 0) - 1
            if n > 0:
                counts[member.server_assignor] = n
            else:
                counts.pop(member.server_assignor, None)
        if updated.server_assignor is not None:
            counts[updated.server_assignor] = counts.get(updated.server_assignor, 0) + 1
        after = max(counts, key=lambda n: counts[n]) if counts else default
        return before != after

    def _update_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        replaced: str | None,
        bump: bool,
        subscription_changed: bool,
        owned: Owned,
        records: list[Record],
    ) -> tuple[ConsumerMember, Awaitable[Any] | None, ConsumerGroup]:
        """The rest of a heartbeat (or, KM-3, a classic JoinGroup) once the member's metadata and regex are
        decided: the subscription metadata and group epoch (KH-8), the target assignment (KH-9), the
        reconciliation (KH-10); the records are written and the member's timers armed."""
        group_epoch = group.group_epoch
        refreshed = False
        if bump or group.metadata_refresh:
            group_epoch = self._update_subscription_metadata(group, bump, member, updated, records)
            refreshed = True
            if group_epoch != group.group_epoch:
                log.info(
                    "group epoch bumped",
                    group=group.group_id,
                    group_epoch=group_epoch,
                    member=updated.member_id,
                    reason="member subscription changed" if bump else "subscribed topics changed",
                )
        target_epoch, target = self._maybe_update_target(group, group_epoch, updated, replaced, records)
        reconciled = self._maybe_reconcile(group, updated, target_epoch, target, subscription_changed, owned, records)

        was_stable = group.state == ConsumerGroupState.STABLE
        before = member.copy() if member.member_id in group.members else member  # replay updates the live member in place
        waiter = self.shard.write(records) if records else None
        # A new group exists once its records are replayed: from here on, the registered object.
        group = self.groups.get(group.group_id, group)
        if refreshed:
            group.metadata_refresh = False
        self._after_write(group, before, reconciled, was_stable)
        self._schedule_session(group.group_id, reconciled.member_id, reconciled.classic.session_timeout_ms if reconciled.classic else None)
        return reconciled, waiter, group

    def _subscribed_topic_ids(self, group: ConsumerGroup, member: ConsumerMember) -> set[uuid.UUID]:
        topics = self.topics
        out = set()
        for name in group.subscribed_names(member):
            topic = topics.get(name)
            if topic is not None:
                out.add(topic.topic_id)
        return out

    def _maybe_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        target_epoch: int,
        target: Partitions,
        subscription_changed: bool,
        owned: Owned,
        records: list[Record],
    ) -> ConsumerMember:
        """Kafka's maybeReconcile (KH-10, KR-1..KR-3)."""
        if not subscription_changed and member.is_reconciled_to(target_epoch):
            return member
        reconciled = next_assignment(
            member,
            target_epoch,
            target,
            group.current_partition_epoch,
            owned,
            lambda: self._subscribed_topic_ids(group, member),
            subscription_changed,
        )
        if reconciled is not member and not reconciled.same_assignment(member):
            records.append(self._current_record(group.group_id, reconciled))
        return reconciled

    def _after_write(self, group: ConsumerGroup, before: ConsumerMember, after: ConsumerMember, was_stable: bool) -> None:
        gid = group.group_id
        if after.classic is None and not after.same_assignment(before):
            if after.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance(gid, after.member_id, after.member_epoch, after.rebalance_timeout_ms)
            else:
                self.timers.cancel(_rebalance_key(gid, after.member_id))
        state = group.state
        if state == ConsumerGroupState.STABLE and not was_stable:
            duration = None if group.last_stable_ms is None else round((time.monotonic() * 1000) - group.last_stable_ms, 1)
            log.info(
                "reconciliation finished",
                group=gid,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                members=len(group.members),
                duration_ms=duration,
            )
            self.stats.consumer_reconciliations += 1
        elif was_stable and state != ConsumerGroupState.STABLE:
            group.last_stable_ms = time.monotonic() * 1000

    def _get_or_create_group(self, group_id: str, create: bool, records: list[Record]) -> ConsumerGroup:
        """KH-3."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.streams_groups:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        classic = self.shard.groups.get(group_id)
        if classic is None:
            if group_id in self.shard.share_groups:  # KIP-932: ids are unique across group types
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if not create:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id)
        if create and classic.is_empty:
            # An empty classic group is tombstoned and replaced (its offsets stay).
            log.info("empty classic group replaced by a consumer group", group=group_id)
            records.append((orec.group_metadata_key(group_id), None))
            return ConsumerGroup(group_id)
        if create and self.migration.can_upgrade(classic):
            return self.migration.upgrade(classic, records)  # KM-2
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: Owned) -> None:
        """KH-7."""
        if epoch > member.member_epoch:
            raise CoordinatorError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            subset = owned is not None and all(p in member.assigned.get(topic_id, frozenset()) for topic_id, ps in owned for p in ps)
            if epoch != member.previous_member_epoch or not subset:
                raise CoordinatorError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group coordinator "
                    f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
                )

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest, create: bool) -> ConsumerMember:
        """KH-6, KH-7."""
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
            member = ConsumerMember(member_id)
        self._check_epoch(member, req.member_epoch, req.topic_partitions)
        return member

    def replace_static_member(
        self, group: ConsumerGroup, existing: ConsumerMember, member_id: str, records: list[Record], protocol: str
    ) -> ConsumerMember:
        """Kafka's replaceMember: `existing`'s records removed, a new member with its metadata, target and
        assignment at epoch 0 written under `member_id`."""
        replacement = existing.copy(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += self._remove_member_records(group.group_id, existing.member_id)
        records.append(self._metadata_record(group.group_id, replacement))
        records.append(self._target_record(group.group_id, member_id, group.target.get(existing.member_id, {})))
        records.append(self._current_record(group.group_id, replacement))
        self._cancel_timers(group.group_id, existing.member_id)
        log.info(
            "static member replaced",
            group=group.group_id,
            instance_id=existing.instance_id,
            old_member=existing.member_id,
            new_member=member_id,
            protocol=protocol,
        )
        return replacement

    def _static_member(
        self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest, create: bool, records: list[Record]
    ) -> tuple[ConsumerMember, str | None]:
        """KH-16: (the member, the id of the static member it replaces or None)."""
        existing = group.static_member(req.instance_id)
        if create:
            if existing is None:
                member = group.members.get(member_id)
                if member is None:
                    member = ConsumerMember(member_id)
                self._check_epoch(member, req.member_epoch, req.topic_partitions)
                return member, None
            if existing.member_id == member_id:
                self._check_epoch(existing, req.member_epoch, req.topic_partitions)
                return existing, None
            if not existing.uses_classic_protocol and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise CoordinatorError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {existing.member_id} with instance id {req.instance_id} cannot be replaced because it has not "
                    "left the group.",
                )
            return self.replace_static_member(group, existing, member_id, records, "consumer"), existing.member_id
        if existing is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise CoordinatorError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by member {existing.member_id}.",
            )
        self._check_epoch(existing, req.member_epoch, req.topic_partitions)
        return existing, None

    # -- target assignment (KH-9, KA-1, KA-2) ------------------------------------------------------------

    def _last_target(self, group: ConsumerGroup, member: ConsumerMember, replaced: str | None) -> Partitions:
        target = group.target.get(member.member_id)
        if target is None and replaced is not None:
            target = group.target.get(replaced)
        return target or {}

    def _assignment_cost(self, group_id: str) -> float:
        """The CPU (ms) a target computation of the group costs: the smaller of its last two."""
        return min(self._assignment_costs.get(group_id, (0.0, 0.0)))

    def _can_compute_target(self, group: ConsumerGroup) -> bool:
        """Kafka 4.4's canComputeNextTargetAssignment, with kaflet's cost floor (module docstring)."""
        last = group.assignment_timestamp
        if last == 0:
            return True
        cost = self._assignment_cost(group.group_id)
        interval = max(self.assignment_interval_ms(group.group_id), ASSIGNMENT_COST_FACTOR * cost if cost >= ASSIGNMENT_FREE_MS else 0)
        return interval <= 0 or self.now_ms() >= last + interval

    def _maybe_update_target(
        self, group: ConsumerGroup, group_epoch: int, updated: ConsumerMember, replaced: str | None, records: list[Record]
    ) -> tuple[int, Partitions]:
        """Kafka's maybeUpdateTargetAssignment: (the target epoch, the member's target). A group whose last
        computation took OFFLOAD_MS or more computes in the background thread: this heartbeat, like those
        that follow until the result is written, goes on with the last target (the group stays Assigning)."""
        if group.assignment_epoch >= group_epoch or not self._can_compute_target(group):
            return group.assignment_epoch, self._last_target(group, updated, replaced)
        inp = self._target_input(group, group_epoch, updated, replaced)
        if (
            self._assignment_cost(group.group_id) >= OFFLOAD_MS
            or len(inp.members) >= OFFLOAD_SIZE
            or len(group.names_by_name) + len(group.names_by_regex) >= OFFLOAD_SIZE
        ):
            self._compute_in_background(group, inp)
            return group.assignment_epoch, self._last_target(group, updated, replaced)
        try:
            out = targets.compute(inp)
        except Exception as exc:
            log.error("target assignment failed", group=group.group_id, assignor=inp.assignor, group_epoch=group_epoch, error=str(exc))
            raise CoordinatorError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}"
            ) from exc
        records += [record for _, record in out.records]
        records.append(self._target_metadata_record(group.group_id, group_epoch, self.now_ms()))
        self._computed(group, inp, out, offloaded=False)
        return group_epoch, out.targets.get(updated.member_id, {})

    def _target_input(
        self, group: ConsumerGroup, group_epoch: int, updated: ConsumerMember | None, replaced: str | None
    ) -> targets.TargetInput:
        """What a computation reads, as the group will be once this operation's records apply (shallow copies)."""
        members = dict(group.members)
        current = dict(group.target)
        if replaced is not None:
            members.pop(replaced, None)
            if updated is not None and updated.member_id not in current and replaced in current:
                current[updated.member_id] = current[replaced]
        if updated is not None:
            members[updated.member_id] = updated
        name = self._preferred_assignor(members) if updated is None else self._preferred_with(group, updated, replaced)
        resolved = {regex: r.topics for regex, r in group.resolved_regexes.items()}
        lag = self._lag_function(group.group_id) if name == "lag-aware" else None
        racks = getattr(self.topics, "racks_of", None)
        return targets.TargetInput(group.group_id, group_epoch, name, members, current, resolved, self.topics, lag, racks)

    def _compute_in_background(self, group: ConsumerGroup, inp: targets.TargetInput) -> None:
        gid = group.group_id

        def done(out: targets.TargetOutput | None, error: BaseException | None) -> list[Record] | None:
            live = self.groups.get(gid)
            if live is not group:
                return None  # deleted (or converted) meanwhile
            if error is not None or out is None:
                log.error("target assignment failed", group=gid, assignor=inp.assignor, group_epoch=inp.group_epoch, error=repr(error))
                return None
            if group.assignment_epoch >= inp.group_epoch:
                return None  # a newer target was written meanwhile
            # Members that left meanwhile get no target back; those that joined have none until the next one.
            kept = [(mid, record) for mid, record in out.records if mid in group.members]
            now = self.now_ms()
            self.shard.write([r for _, r in kept] + [self._target_metadata_record(gid, inp.group_epoch, now)], replay=False)
            for mid, _ in kept:
                group.set_target(mid, out.targets[mid])
            group.apply_target_metadata(inp.group_epoch, now)
            self._computed(group, inp, out, offloaded=True)
            return None

        self.executor.schedule(f"{gid}-assignment", lambda: targets.compute(inp), done)

    def _computed(self, group: ConsumerGroup, inp: targets.TargetInput, out: targets.TargetOutput, offloaded: bool) -> None:
        self._assignment_costs[group.group_id] = (self._assignment_costs.get(group.group_id, (0.0, 0.0))[1], out.cpu_ms)
        group.last_assignment = {"moves": out.moves, "lag_spread": out.lag_spread}
        log.info(
            "target assignment computed",
            group=group.group_id,
            group_epoch=inp.group_epoch,
            assignor=inp.assignor,
            members=len(inp.members),
            ms=round(out.assignor_ms, 2),
            total_ms=round(out.total_ms, 2),
            cpu_ms=round(out.cpu_ms, 2),
            offloaded=offloaded,
            moves=out.moves,
            lag_spread=out.lag_spread,
            lag_max=out.lag_max,
            lag_total=out.lag_total,
        )

    def _preferred_with(self, group: ConsumerGroup, updated: ConsumerMember, replaced: str | None) -> str:
        """The preferred assignor once `updated` replaces its old self (or `replaced`), from the group's counts."""
        counts = dict(group.server_assignors)
        old = group.members.get(replaced if replaced is not None else updated.member_id)
        if old is not None and old.server_assignor is not None:
            n = counts.get(old.server_assignor, 0) - 1
            if n > 0:
                counts[old.server_assignor] = n
            else:
                counts.pop(old.server_assignor, None)
        if updated.server_assignor is not None:
            counts[updated.server_assignor] = counts.get(updated.server_assignor, 0) + 1
        return max(counts, key=lambda n: counts[n]) if counts else self.default_assignor

    def _preferred_assignor(self, members: dict[str, ConsumerMember]) -> str:
        counts: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self.default_assignor
        return max(counts, key=lambda n: counts[n])

    def _lag_function(self, group_id: str) -> Any:
        """Lag of (topic, partition) for this group (issue 13, broker/coordinator/consumer/lag.py)."""
        return lag_function(self.shard.service.logs, self.shard.offsets.of_group(group_id), self.lag_aware_uncommitted(group_id))

    def lag_aware_uncommitted(self, group_id: str) -> str:
        """`lag.aware.uncommitted` of the group (a group config), else the broker's `--lag-aware-uncommitted`."""
        configs = getattr(self.shard.service, "group_configs", None)
        value = configs.get(group_id, LAG_CONFIG) if configs is not None else None
        return str(value) if value in LAG_MODES else getattr(self.config, "lag_aware_uncommitted", "earliest")

    def assigned_lags(self, group: ConsumerGroup) -> dict[str, int]:
        """Member id -> total lag of the partitions it is assigned now (describe, metrics)."""
        lag = self._lag_function(group.group_id)
        topics = self.topics
        out: dict[str, int] = {}
        for mid, member in group.members.items():
            total = 0
            for topic_id, ps in member.assigned.items():
                topic = topics.get_by_id(topic_id)
                if topic is not None:
                    total += sum(lag(topic.name, p) for p in ps)
            out[mid] = total
        return out

    def request_rebalance(self, group_id: str, reason: str) -> Awaitable[Any] | None:
        """Bump the group epoch with no membership change (issue 13's `kaflet groups rebalance`): the next
        heartbeat computes a new target assignment, as after a subscription change (KH-8, KH-9)."""
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        epoch = group.group_epoch + 1
        waiter = self.shard.write([self._epoch_record(group_id, epoch, group.metadata_hash)])
        # A requested rebalance is computed at the next heartbeat, whatever the assignment interval.
        group.assignment_timestamp = 0
        log.info("group epoch bumped", group=group_id, group_epoch=epoch, reason=reason)
        return waiter

    # -- offsets (KO-1, OF-8) ------------------------------------------------------------------

    @staticmethod
    def validate_offset_commit(
        group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int, transactional: bool, instance_id: str | None = None
    ) -> ErrorCode:
        return validate_offset_commit(group, member_id, member_epoch, api_version, transactional, instance_id)

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
        return validate_offset_fetch(group, member_id, member_epoch)

    # -- leaving and fencing ----------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, Awaitable[Any] | None]:
        """KH-14, KH-15."""
        group = self.groups.get(req.group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.")
            log.info("member left", group=group.group_id, member=member.member_id, protocol="consumer")
            return HeartbeatResult(req.member_id, req.member_epoch), self.fence(group, member, "left the group")
        member = group.static_member(req.instance_id)
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise CoordinatorError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            leaving = member.copy(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            log.info("static member left temporarily", group=group.group_id, member=member.member_id, instance_id=req.instance_id)
            waiter = self.shard.write([self._current_record(group.group_id, leaving)])
            return HeartbeatResult(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH), waiter
        log.info("static member left", group=group.group_id, member=member.member_id, instance_id=req.instance_id)
        return HeartbeatResult(req.member_id, req.member_epoch), self.fence(group, member, "left the group")

    def fence(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> Awaitable[Any] | None:
        """Kafka's consumerGroupFenceMembers for one member: its records tombstoned, the expressions only
        it subscribed to deleted, the group epoch bumped with the new metadata hash (and, for the last
        member, the target's epoch with it), its timers cancelled; or, when only classic members would
        remain, the downgrade to a classic group (KM-4)."""
        fenced = 1 if reason != "left the group" else 0
        if self.migration.should_downgrade(group, member.member_id):
            self.stats.consumer_members_fenced += fenced
            return self.migration.downgrade(group, member.member_id)
        gid = group.group_id
        records = self._remove_member_records(gid, member.member_id)
        regex = regex_of(member)
        deleted = regex is not None and group.num_subscribed_members(regex) == 1
        if deleted:
            assert regex is not None
            records.append(self._regex_record(gid, regex, None))
        names = self._names_after(group, member, None)
        metadata_hash = self.metadata_hash(names)
        epoch = group.group_epoch + 1
        records.append(self._epoch_record(gid, epoch, metadata_hash))
        if len(group.members) == 1:
            records.append(self._target_metadata_record(gid, epoch, 0))
        waiter = self.shard.write(records)
        self._cancel_timers(gid, member.member_id)
        self.stats.consumer_members_fenced += fenced
        self.stats.consumer_epoch_bumps += 1
        log.info("group epoch bumped", group=gid, group_epoch=epoch, reason=f"member {member.member_id} {reason}")
        return waiter

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(_session_key(group_id, member_id))
        self._session_deadlines.pop((group_id, member_id), None)
        self.timers.cancel(_rebalance_key(group_id, member_id))
        self.timers.cancel(f"consumer-join-{group_id}-{member_id}")  # KM-3's join and sync timers
        self.timers.cancel(f"consumer-sync-{group_id}-{member_id}")

    # -- timers (KT-1..KT-3) ------------------------------------------------------------------------

    def _schedule_session(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """KH-12 (KM-3: a classic member's own session timeout)."""
        timeout = self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms
        # Every heartbeat moves the deadline; the timer is only re-armed when it fires early (or
        # must fire sooner), so a steady heartbeat costs a dict store, not a timer cancel + create.
        key = (group_id, member_id)
        deadline = asyncio.get_running_loop().time() + timeout / 1000
        self._session_deadlines[key] = deadline
        timer = _session_key(group_id, member_id)
        armed = self.timers.deadline(timer)
        if armed is None or armed > deadline:
            self.timers.schedule(timer, timeout, lambda: self._session_check(group_id, member_id))

    def _session_check(self, group_id: str, member_id: str) -> None:
        deadline = self._session_deadlines.get((group_id, member_id))
        if deadline is None:
            return
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining > 0:
            self.timers.schedule(_session_key(group_id, member_id), remaining * 1000, lambda: self._session_check(group_id, member_id))
            return
        del self._session_deadlines[(group_id, member_id)]
        self._session_expired(group_id, member_id)

    def _session_expired(self, group_id: str, member_id: str) -> None:
        """KT-1."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        log.info("member fenced", group=group_id, member=member_id, instance_id=member.instance_id, reason="session timeout")
        self.fence(group, member, "session timed out")

    def _schedule_rebalance(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        self.timers.schedule(
            _rebalance_key(group_id, member_id), max(timeout_ms, 0), lambda: self._rebalance_expired(group_id, member_id, epoch)
        )

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        """KT-2."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.member_epoch != epoch:
            return
        log.info("member fenced", group=group_id, member=member_id, reason="did not revoke within its rebalance timeout", epoch=epoch)
        self.fence(group, member, "did not revoke its partitions within the rebalance timeout")


def _member_epoch_error(received: int, member: ConsumerMember) -> ErrorCode:
    if received != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def validate_offset_commit(
    group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int, transactional: bool, instance_id: str | None = None
) -> ErrorCode:
    """KO-1: admin commits (epoch < 0) only into an empty group; members commit at their epoch,
    with OffsetCommit v9+ when they use the consumer protocol. A transactional commit (TX-2) may
    come without member (generation -1, no member or instance id) into any group, as in Kafka
    4.4; its stale epoch is ILLEGAL_GENERATION, TxnOffsetCommit up to v5 knowing no other."""
    if member_epoch < 0 and not group.members:
        return ErrorCode.NONE
    if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and not member.uses_classic_protocol and api_version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    error = _member_epoch_error(member_epoch, member)
    return ErrorCode.ILLEGAL_GENERATION if transactional and error is ErrorCode.STALE_MEMBER_EPOCH else error


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
    """OF-8."""
    if member_id is None and member_epoch < 0:
        return ErrorCode.NONE
    member = group.members.get(member_id) if member_id is not None else None
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return _member_epoch_error(member_epoch, member)
