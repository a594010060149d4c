"""Per-log settings: Kafka's topic-level log configs, typed, with their broker defaults applied."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

MIB = 1024 * 1024
LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    """What one partition log obeys. Field names are Kafka's topic configs with '_' for '.'."""

    segment_bytes: int = 1024 * MIB
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: frozenset[str] = frozenset({"delete"})
    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000  # Kafka 4's default (KIP-1030)
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * MIB
    producer_id_expiration_ms: int = 86_400_000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_topic_configs(self, configs: Mapping[str, object]) -> LogConfig:
        """These defaults overridden by a topic's configs: stored strings, or typed values such
        as `broker.topic_configs.effective_configs` returns (unknown keys are ignored)."""
        changes: dict[str, object] = {}
        for key, raw in configs.items():
            name = key.replace(".", "_")
            if name not in _PARSERS or raw is None:
                continue
            text = ",".join(raw) if isinstance(raw, (list, tuple, set, frozenset)) else str(raw)
            try:
                changes[name] = _PARSERS[name](text)
            except ValueError as exc:
                raise ValueError(f"invalid value {raw!r} for topic config {key}") from exc
        return dataclasses.replace(self, **changes) if changes else self


def _policy(text: str) -> frozenset[str]:
    parts = frozenset(p.strip().lower() for p in text.split(",") if p.strip())
    if not parts <= {"delete", "compact"}:
        raise ValueError(text)
    return parts


def _timestamp_type(text: str) -> str:
    if text not in ("CreateTime", "LogAppendTime"):
        raise ValueError(text)
    return text


_PARSERS = {
    "segment_bytes": int,
    "segment_ms": int,
    "retention_ms": int,
    "retention_bytes": int,
    "cleanup_policy": _policy,
    "delete_retention_ms": int,
    "min_cleanable_dirty_ratio": float,
    "min_compaction_lag_ms": int,
    "max_compaction_lag_ms": int,
    "max_message_bytes": int,
    "message_timestamp_type": _timestamp_type,
    "message_timestamp_before_max_ms": int,
    "message_timestamp_after_max_ms": int,
    "index_interval_bytes": int,
    "segment_index_bytes": int,
}
