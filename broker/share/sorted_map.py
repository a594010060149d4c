"""The ordered map a share partition keeps its in-flight batches in (Kafka's NavigableMap):
first offset -> batch, with floor / sub-map lookups. Keys are mostly appended at the end and
removed from the front, which a sorted list with bisect serves well."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Generic, TypeVar

V = TypeVar("V")


class SortedMap(Generic[V]):
    __slots__ = ("_keys", "_values")

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._values: dict[int, V] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __contains__(self, key: int) -> bool:
        return key in self._values

    def get(self, key: int) -> V | None:
        return self._values.get(key)

    def put(self, key: int, value: V) -> None:
        if key not in self._values:
            keys = self._keys
            if not keys or key > keys[-1]:
                keys.append(key)
            else:
                keys.insert(bisect_left(keys, key), key)
        self._values[key] = value

    def remove(self, key: int) -> V | None:
        value = self._values.pop(key, None)
        if value is not None:
            del self._keys[bisect_left(self._keys, key)]
        return value

    def clear(self) -> None:
        self._keys.clear()
        self._values.clear()

    def first_key(self) -> int:
        return self._keys[0]

    def last_key(self) -> int:
        return self._keys[-1]

    def last_value(self) -> V:
        return self._values[self._keys[-1]]

    def floor_key(self, key: int) -> int | None:
        i = bisect_right(self._keys, key)
        return self._keys[i - 1] if i else None

    def higher_key(self, key: int) -> int | None:
        i = bisect_right(self._keys, key)
        return self._keys[i] if i < len(self._keys) else None

    def lower_key(self, key: int) -> int | None:
        i = bisect_left(self._keys, key)
        return self._keys[i - 1] if i else None

    def items(self) -> Iterator[tuple[int, V]]:
        values = self._values
        for k in list(self._keys):
            v = values.get(k)
            if v is not None:
                yield k, v

    def values(self) -> Iterator[V]:
        for _, v in self.items():
            yield v

    def sub_items(self, low: int, high: int) -> list[tuple[int, V]]:
        """Entries with low <= key <= high, in order (a snapshot: the map may change meanwhile)."""
        keys = self._keys
        i = bisect_left(keys, low)
        j = bisect_right(keys, high)
        values = self._values
        return [(k, values[k]) for k in keys[i:j]]

    def head_items(self, below: int) -> list[tuple[int, V]]:
        """Entries with key < below."""
        keys = self._keys
        j = bisect_left(keys, below)
        values = self._values
        return [(k, values[k]) for k in keys[:j]]

    def remove_range(self, low: int, high: int) -> None:
        """Remove every key with low <= key <= high."""
        keys = self._keys
        i = bisect_left(keys, low)
        j = bisect_right(keys, high)
        for k in keys[i:j]:
            del self._values[k]
        del keys[i:j]
