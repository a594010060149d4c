"""The order of a ListGroups answer, as Kafka 4.4 gives it.

GroupCoordinatorService.listGroups asks every coordinator partition in the order of
CoordinatorRuntime.scheduleReadAllOperation, which streams `coordinators.keySet()` (a
`ConcurrentHashMap<TopicPartition, CoordinatorContext>` holding the partitions the broker loaded),
and concatenates their lists in that order (FutureUtils.combineFutures); a partition that is not
active adds nothing. Each partition's GroupMetadataManager.listGroups streams
`groups.values(committedOffset)`: one `TimelineHashMap<String, Group>` holding the groups of every
type, so classic, consumer, streams and share groups come interleaved, in that table's order.

`GroupTable` follows that table (org.apache.kafka.timeline.BaseHashTable, under
SnapshottableHashTable and TimelineHashMap): an array of `2^k` slots (2 at first), a key's slot
being the top `k` bits of `hashCode() * 0x9E3779B97F4A7C15` (64 bits); keys sharing a slot are kept
in the order they came in, and iteration goes slot by slot, each slot's keys last-in first. A
`put` doubles the array first when `(size + 1) * 0.75 > slots` (a replacement too), then replaces
the key in place or appends it to its slot; a `remove` takes the key out of its slot and never
shrinks the array. The order therefore depends on the ids, on when each (re)entered the table, and
on the most groups it ever held: a reload, which replays the same records, builds the same table.

What is not modelled: the snapshot tiers of a read at the committed offset while writes are in
flight (an uncommitted new group is left out and a group removed or replaced by an uncommitted
write comes first in its slot; a broker answers only committed writes, so a quiet shard shows
none), and the reordering of a write Kafka's runtime reverts (it re-adds what the write replaced).

`coordinator_partitions` follows the ConcurrentHashMap (JDK 17): a table of 16 bins at first,
doubled when the count reaches three quarters of it; a key's bin is `(h ^ h >>> 16) & (n - 1)`
of `TopicPartition.hashCode()`, appended to its bin's list; a resize splits each bin's list in
two, keeping the run of nodes at its end that go the same way as it was and putting the nodes
before that run in reverse; a ninth node in one bin of a table under 64 resizes it
(`tryPresize`), at 64 or more turns the bin into a tree bin, whose list takes new nodes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Generic, TypeVar

from broker.coordinator.streams.javaorder import table_size_for, topic_partition_hash
from protocol.javahash import java_string_hashcode

K = TypeVar("K")
V = TypeVar("V")

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # BaseHashTable.findSlot's multiplier (-7046029254386353131L)
_MIN_CAPACITY = 2  # BaseHashTable.expectedSizeToCapacity(0), as `new TimelineHashMap<>(registry, 0)`
_MAX_CAPACITY = 1 << 30
_SEQ_BITS = 48  # room for the order of 2**48 puts
_SEQ_MASK = (1 << _SEQ_BITS) - 1
_HASHED = 1 << (_SEQ_BITS + 64)


def _slot_hash(key: str) -> int:
    """The 64-bit product whose top bits are a key's slot (Java's long multiply, sign-extended int)."""
    return (java_string_hashcode(key) * _GOLDEN) & _MASK64


def slot_of(key: str, capacity: int) -> int:
    """BaseHashTable.findSlot: `key`'s slot in a table of `capacity` (a power of two) slots."""
    return _slot_hash(key) >> (65 - capacity.bit_length())


class GroupTable:
    """One shard's group ids in the order Kafka's `groups` TimelineHashMap iterates them (see the
    module's docstring). `put` and `remove` are the map's own; the shard's group dicts call them
    (GroupDict) when they gain or lose an id, so the table holds exactly the ids the shard has."""

    __slots__ = ("_capacity", "_dicts", "_entries", "_next", "_order", "_shift")

    def __init__(self) -> None:
        self._capacity = _MIN_CAPACITY
        self._shift = 63  # 64 - log2(capacity)
        # id -> when it entered its slot (a replacement keeps it), and once the order was asked
        # for, its slot hash above that: _HASHED | hash << _SEQ_BITS | seq (one int per id)
        self._entries: dict[str, int] = {}
        self._next = 0
        self._order: list[str] | None = None
        self._dicts: list[GroupDict[object]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def capacity(self) -> int:
        return self._capacity

    def put(self, key: str) -> None:
        """BaseHashTable.baseAddOrReplace: grow first if full, then replace in place or append."""
        if (len(self._entries) + 1) * 0.75 > self._capacity and self._capacity < _MAX_CAPACITY:
            self._capacity <<= 1
            self._shift -= 1
            self._order = None
        if key not in self._entries:
            self._entries[key] = self._next
            self._next += 1
            self._order = None

    def remove(self, key: str) -> None:
        """BaseHashTable.baseRemove, once none of the shard's group dicts holds `key`."""
        if key in self._entries and not any(key in d for d in self._dicts):
            del self._entries[key]
            self._order = None

    def order(self) -> list[str]:
        """The ids as `groups.values()` iterates them: slot by slot, each slot's newest first."""
        if self._order is None:
            entries = self._entries
            for key, entry in entries.items():
                if entry < _HASHED:
                    entries[key] = _HASHED | _slot_hash(key) << _SEQ_BITS | entry
            shift = _SEQ_BITS + self._shift
            # slot ascending (the _HASHED bit is in every key alike), then the newest first
            self._order = sorted(entries, key=lambda k: ((entries[k] >> shift) << _SEQ_BITS) - (entries[k] & _SEQ_MASK))
        return self._order

    def __iter__(self) -> Iterator[str]:
        return iter(self.order())

    def new_dict(self) -> GroupDict[V]:
        """A new dict of groups whose ids this table follows."""
        d: GroupDict[V] = GroupDict(self)
        self._dicts.append(d)  # type: ignore[arg-type]
        return d


class GroupDict(dict[str, V], Generic[V]):
    """One type's groups of a shard (a `dict`, read as one), whose every change is also made to the
    shard's GroupTable: an id set is `put` (Kafka's `groups.put`: a new id is appended to its slot,
    one already in the table, even in another of the shard's dicts, replaced in place); an id
    deleted is removed from the table once no other dict of the shard holds it. So a group that
    changes type keeps its place when the new dict gets it before the old one loses it (Kafka puts
    the new group over the old one), and moves to the end of its slot when the old one loses it
    first (Kafka replays the old group's tombstone, then the new group's records). `swap` changes
    the object behind an id without a put, for a live object Kafka's map never sees."""

    __slots__ = ("_table",)

    def __init__(self, table: GroupTable) -> None:
        super().__init__()
        self._table = table

    def __setitem__(self, key: str, value: V) -> None:
        super().__setitem__(key, value)
        self._table.put(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._table.remove(key)

    def pop(self, key: str, *default: V | None) -> V | None:  # type: ignore[override]
        if key in self:
            value = super().pop(key)
            self._table.remove(key)
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def swap(self, key: str, value: V) -> None:
        """Put `value` behind `key`, already here, leaving the table as it is."""
        if key not in self:
            raise KeyError(key)
        super().__setitem__(key, value)

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a shard's group dict changes only by [key] = value, del, pop and swap")

    setdefault = update = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]


def concurrent_hashmap_order_by(keys: Iterable[K], hash_code: Callable[[K], int]) -> list[K]:
    """The distinct `keys` in the order a `new ConcurrentHashMap<>()` filled with them in that order
    (put or computeIfAbsent) iterates them (JDK 17; see the module's docstring)."""
    table: list[list[tuple[int, K]]] = [[] for _ in range(16)]
    trees: set[int] = set()  # bins that are tree bins
    size_ctl = 12
    count = 0
    seen: set[K] = set()

    def transfer() -> None:
        nonlocal table, trees, size_ctl
        n = len(table)
        new: list[list[tuple[int, K]]] = [[] for _ in range(2 * n)]
        new_trees: set[int] = set()
        for i, nodes in enumerate(table):
            if not nodes:
                continue
            if i in trees:  # TreeBin: both halves keep the list's order; a half of 7 or more stays a tree
                lo = [e for e in nodes if not e[0] & n]
                hi = [e for e in nodes if e[0] & n]
                new[i], new[i + n] = lo, hi
                new_trees.update(j for j, half in ((i, lo), (i + n, hi)) if len(half) > 6)
                continue
            run_bit = nodes[0][0] & n
            last_run = 0
            for j in range(1, len(nodes)):
                b = nodes[j][0] & n
                if b != run_bit:
                    run_bit, last_run = b, j
            lo = [e for e in reversed(nodes[:last_run]) if not e[0] & n]
            hi = [e for e in reversed(nodes[:last_run]) if e[0] & n]
            (lo if run_bit == 0 else hi).extend(nodes[last_run:])
            new[i], new[i + n] = lo, hi
        table, trees = new, new_trees
        size_ctl = 2 * n - (n >> 1)

    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        h = java_spread(hash_code(key))
        i = h & (len(table) - 1)
        nodes = table[i]
        bin_count = len(nodes)
        if i in trees:
            nodes.insert(0, (h, key))  # TreeBin.putTreeVal: the new node first in the bin's list
        else:
            nodes.append((h, key))
            if bin_count >= 8:  # treeifyBin
                n = len(table)
                if n < 64:
                    target = table_size_for(2 * n + n + 1)  # tryPresize(n << 1)
                    while target > size_ctl:
                        transfer()
                else:
                    trees.add(i)
        count += 1
        while count >= size_ctl:  # addCount
            transfer()
    return [k for nodes in table for _h, k in nodes]


def java_spread(h: int) -> int:
    """ConcurrentHashMap.spread."""
    h &= 0xFFFFFFFF
    return (h ^ (h >> 16)) & 0x7FFFFFFF


@cache
def coordinator_partitions(topic: str, partitions: int) -> tuple[int, ...]:
    """The partitions `0..partitions-1` of `topic` as a broker leading all of them iterates its
    coordinators map (loaded in partition order; for `__consumer_offsets` of up to 300 partitions
    no two share a bin, so the loading order does not change this)."""
    return tuple(concurrent_hashmap_order_by(range(partitions), lambda p: topic_partition_hash(topic, p)))
