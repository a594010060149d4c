"""A share group's settings as its share partitions read them (Kafka's ShareGroupConfigProvider):
the group's own config (IncrementalAlterConfigs on the GROUP resource) or the broker's default.
A group's own value is held within the broker's current bounds (GroupConfig.evaluate's
clampToRange: bounds narrowed after the value was set win)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.share.offset_reset import OffsetReset, parse_offset_reset

if TYPE_CHECKING:
    from broker.config import Config
    from broker.config.group_configs import GroupConfigs


def clamp(value: int, config: Config, bounds: str) -> int:
    """`value` within the broker's group_share_min_<bounds> .. group_share_max_<bounds>."""
    return min(max(value, getattr(config, f"group_share_min_{bounds}")), getattr(config, f"group_share_max_{bounds}"))


class ShareGroupSettingsProvider:
    def __init__(self, config: Config, group_configs: GroupConfigs | None) -> None:
        self.config = config
        self.group_configs = group_configs

    def _own(self, group: str, name: str) -> Any:
        return self.group_configs.get(group, name) if self.group_configs is not None else None

    def record_lock_duration_ms(self, group: str) -> int:
        own = self._own(group, "share.record.lock.duration.ms")
        return (
            clamp(int(own), self.config, "record_lock_duration_ms") if own is not None else self.config.group_share_record_lock_duration_ms
        )

    def delivery_count_limit(self, group: str) -> int:
        own = self._own(group, "share.delivery.count.limit")
        return clamp(int(own), self.config, "delivery_count_limit") if own is not None else self.config.group_share_delivery_count_limit

    def partition_max_record_locks(self, group: str) -> int:
        own = self._own(group, "share.partition.max.record.locks")
        return (
            clamp(int(own), self.config, "partition_max_record_locks")
            if own is not None
            else self.config.group_share_partition_max_record_locks
        )

    def auto_offset_reset(self, group: str) -> OffsetReset:
        own = self._own(group, "share.auto.offset.reset")
        return parse_offset_reset(own) if own is not None else OffsetReset("latest")

    def renew_enabled(self, group: str) -> bool:
        own = self._own(group, "share.renew.acknowledge.enable")
        return bool(own) if own is not None else True

    def read_committed(self, group: str) -> bool:
        return self._own(group, "share.isolation.level") == "read_committed"

    def session_timeout_ms(self, group: str) -> int:
        own = self._own(group, "share.session.timeout.ms")
        return clamp(int(own), self.config, "session_timeout_ms") if own is not None else self.config.group_share_session_timeout_ms

    def heartbeat_interval_ms(self, group: str) -> int:
        own = self._own(group, "share.heartbeat.interval.ms")
        return clamp(int(own), self.config, "heartbeat_interval_ms") if own is not None else self.config.group_share_heartbeat_interval_ms
