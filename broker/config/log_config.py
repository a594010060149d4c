"""A topic's effective log settings: topic configs over the broker's log defaults.

The one place partition logs get their LogConfig. When the admin work's
`broker.config.topic_configs.effective_configs(topic, config)` lands, this calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.topics.catalog import OFFSETS_TOPIC
from storage.config import LogConfig

if TYPE_CHECKING:
    from broker.config import Config


def broker_defaults(config: Config) -> LogConfig:
    return LogConfig(
        segment_bytes=config.log_segment_bytes,
        segment_ms=config.log_segment_ms,
        retention_ms=config.log_retention_ms,
        retention_bytes=config.log_retention_bytes,
        max_message_bytes=config.message_max_bytes,
    )


def log_config(topic: Any, config: Config) -> LogConfig:
    """The LogConfig of `topic` (anything with .name and .configs)."""
    defaults = broker_defaults(config)
    if topic.name == OFFSETS_TOPIC:
        # Kafka's offsets topic: compacted, offsets.topic.segment.bytes, its own delete retention.
        defaults = LogConfig(
            segment_bytes=config.offsets_topic_segment_bytes,
            segment_ms=config.log_segment_ms,
            retention_ms=config.log_retention_ms,
            retention_bytes=config.log_retention_bytes,
            max_message_bytes=config.message_max_bytes,
            cleanup_policy=frozenset({"compact"}),
            delete_retention_ms=config.offsets_delete_retention_ms,
        )
    return defaults.with_topic_configs(topic.configs or {})
