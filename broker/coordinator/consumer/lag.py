"""Lag as the lag-aware assignor (issue 13), `kaflet groups describe` and the metrics see it.

The lag of a partition for a group is its log end offset minus the group's committed offset (0 when the
commit is ahead of the log, after a truncation). A partition the group never committed counts per
`lag.aware.uncommitted`: `earliest` (the default) counts the whole log, end minus log start, as a consumer with
`auto.offset.reset=earliest` would read it; `latest` counts 0. The group config of that name (set through
IncrementalAlterConfigs on the GROUP resource) wins over the broker default `--lag-aware-uncommitted`.

The end offset is the partition's next offset: on one broker every appended record is replicated, so it is the
high watermark Kafka's lag tools use.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, Protocol

EARLIEST = "earliest"
LATEST = "latest"
MODES = (EARLIEST, LATEST)
GROUP_CONFIG = "lag.aware.uncommitted"
# Both are group configs (broker/config/group_configs.py): lag.aware.uncommitted a setting, kaflet.rebalance
# an action (GROUP_ACTIONS) that bumps the group epoch.
REBALANCE_CONFIG = "kaflet.rebalance"

Lag = Callable[[str, int], int]
_OFFSET = struct.Struct(">q")  # OffsetCommitValue: int16 version, then int64 offset


class _Logs(Protocol):
    def get(self, topic: str, partition: int) -> Any: ...


def lag_function(logs: _Logs, group_offsets: Mapping[str, Mapping[int, bytes]] | None, uncommitted: str) -> Lag:
    """The closure handed to assignors: lag of (topic, partition) for one group, read when called.

    `group_offsets` is the shard's topic -> partition -> raw OffsetCommitValue map of the group (None: no commit).
    Called once per partition of every subscribed topic at each target computation, so it stays lean: the log is
    looked up in the LogManager's own dict, and the offset read straight from the record bytes (every
    OffsetCommitValue version puts it right after the version).

    The closure also carries `topic_lags(topic, n)`: the lags of partitions 0..n-1 in one call, which an assignor
    that wants every partition's lag (lag-aware) may use instead of n calls.
    """
    offsets = group_offsets or {}
    earliest = uncommitted != LATEST
    table = getattr(logs, "logs", None)
    find: Callable[[tuple[str, int]], Any] = table.get if isinstance(table, dict) else (lambda key: logs.get(*key))
    unpack = _OFFSET.unpack_from
    no_commits: Mapping[int, bytes] = {}

    def lag(topic: str, partition: int) -> int:
        plog = find((topic, partition))
        if plog is None:
            return 0
        raw = offsets.get(topic, no_commits).get(partition)
        if raw is not None:
            committed = unpack(raw, 2)[0]
            if committed >= 0:
                end: int = plog.next_offset
                return end - committed if end > committed else 0
        if not earliest:
            return 0
        span: int = plog.next_offset - plog.log_start_offset
        return span if span > 0 else 0

    def topic_lags(topic: str, n: int) -> list[int]:
        by_partition = offsets.get(topic, no_commits)
        out = [0] * n
        for partition in range(n):
            plog = find((topic, partition))
            if plog is None:
                continue
            raw = by_partition.get(partition)
            if raw is not None:
                committed = unpack(raw, 2)[0]
                if committed >= 0:
                    end = plog.next_offset - committed
                    out[partition] = end if end > 0 else 0
                    continue
            if earliest:
                span = plog.next_offset - plog.log_start_offset
                out[partition] = span if span > 0 else 0
        return out

    lag.topic_lags = topic_lags  # type: ignore[attr-defined]
    return lag


def assigned_lag(partitions: Mapping[str, frozenset[int] | list[int]], lag: Lag) -> int:
    """Total lag of a member's partitions (topic name -> partitions)."""
    return sum(lag(t, p) for t, ps in partitions.items() for p in ps)
