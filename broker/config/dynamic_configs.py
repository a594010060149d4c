"""Dynamic broker configs: the ones Kafka lets AlterConfigs / IncrementalAlterConfigs change on a
running broker, for those kaflet has, persisted in the data dir (`dynamic-broker-configs.json`).

Two levels, as in Kafka: the resource name "" is the cluster-wide default
(DYNAMIC_DEFAULT_BROKER_CONFIG) and this node's id the per-broker value (DYNAMIC_BROKER_CONFIG);
a per-broker value wins over the default, which wins over the static setting (flag or KAFLET_*
variable). A change takes effect at once: the log defaults are reapplied to every partition log
whose topic does not set the config itself, and the connection limits apply to the next
connection.

Which configs: those of Kafka's DynamicBrokerConfig that kaflet serves -- the log defaults
(log.segment.bytes, log.roll.ms, log.retention.ms, log.retention.bytes, message.max.bytes) and
max.connections, max.connections.per.ip. Any other name gets Kafka's refusal,
"Cannot update these configs dynamically: Set(name)" (INVALID_CONFIG), also for the few Kafka
itself would update dynamically but kaflet does not (its thread pools, SSL, quotas...). Values
are checked by the topic config's validator (Kafka validates the broker's log defaults as
LogConfig values too).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.config.topic_configs import TOPIC_CONFIGS
from broker.config.types import AtLeast, ConfigError, ConfigSource, ConfigType, Validator, parse, render
from broker.node.datadir import write_json

log = structlog.get_logger("kaflet.broker")

if TYPE_CHECKING:
    from broker.config import Config

FILE_NAME = "dynamic-broker-configs.json"
DEFAULT, NODE = "default", "node"


def _topic(name: str) -> tuple[ConfigType, Validator | None]:
    d = TOPIC_CONFIGS[name]
    return d.type, d.validator


# Kafka name -> (Config field, type, validator)
DYNAMIC: dict[str, tuple[str, ConfigType, Validator | None]] = {
    "log.segment.bytes": ("log_segment_bytes", *_topic("segment.bytes")),
    "log.roll.ms": ("log_segment_ms", *_topic("segment.ms")),
    "log.retention.ms": ("log_retention_ms", *_topic("retention.ms")),
    "log.retention.bytes": ("log_retention_bytes", *_topic("retention.bytes")),
    "message.max.bytes": ("message_max_bytes", *_topic("max.message.bytes")),
    "max.connections": ("max_connections", ConfigType.INT, AtLeast(0)),
    "max.connections.per.ip": ("max_connections_per_ip", ConfigType.INT, AtLeast(0)),
}
FIELDS = {f: name for name, (f, _t, _v) in DYNAMIC.items()}
FIELDS_BY_NAME = {name: f for f, name in FIELDS.items()}


def validate(configs: Mapping[str, str | None], per_broker: bool = True) -> dict[str, str]:
    """Check a level's complete new set; returns it normalized, or raises ConfigError. The
    security configs Kafka changes at run time are broker/security/dynamic.py's."""
    from broker.security import dynamic as security

    refused = [n for n in configs if n not in DYNAMIC and not security.known(n)]
    if refused:
        raise ConfigError(f"Cannot update these configs dynamically: Set({', '.join(refused)})")
    security.check_level(configs, per_broker)
    out: dict[str, str] = {}
    for name, raw in configs.items():
        if raw is None:
            raise ConfigError(f"Null value not supported for broker config {name}")
        if name not in DYNAMIC:
            kind = security.kind(name)
            value = parse(name, raw, kind)
            security.validate_value(name, value)
            out[name] = render(value, kind) or ""
            continue
        _field, kind, validator = DYNAMIC[name]
        value = parse(name, raw, kind)
        if validator is not None:
            validator(name, value)
        out[name] = render(value, kind) or ""
    return out


class ConnectionLimits(Protocol):
    max_connections: int
    max_connections_per_ip: int


class DynamicBrokerConfigs:
    def __init__(self, config: Config, limits: ConnectionLimits) -> None:
        """`config` is changed in place (dynamic values over static ones); `limits` take the
        connection limits at once; `on_log_defaults_changed`, set once the partition logs exist,
        reapplies the log defaults to them."""
        self.config = config
        self.limits = limits
        self.on_log_defaults_changed: Callable[[], None] | None = None
        # Set by the server where security is served (broker/security/dynamic.py): the security
        # values take effect through `on_security_changed`; `lockout_guard` refuses a set of
        # values that would refuse every connection.
        self.on_security_changed: Callable[[Mapping[str, str]], None] | None = None
        self.lockout_guard: Callable[[Mapping[str, str]], None] | None = None
        self.path = Path(config.data_dir) / FILE_NAME
        self.levels: dict[str, dict[str, str]] = {DEFAULT: {}, NODE: {}}
        # The static value of each Config field a dynamic value overrides.
        self.static = {f: getattr(config, f) for f in FIELDS}

    def load(self, data_dir: Path) -> None:
        """Read the persisted values and apply them (before the logs open)."""
        from broker.security import dynamic as security

        self.path = Path(data_dir) / FILE_NAME
        if self.path.exists():
            stored = json.loads(self.path.read_text())
            for level in (DEFAULT, NODE):
                self.levels[level] = {n: v for n, v in stored.get(level, {}).items() if n in DYNAMIC or security.known(n)}
        overridden = self.overridden()
        if overridden:
            log.warning(
                "flags given explicitly win over stored dynamic broker configs (--flags-override-dynamic)",
                ignored=sorted(overridden),
                file=str(self.path),
            )
        self._apply_fields()
        self._take_effect()

    def overridden(self) -> list[str]:
        """Stored dynamic configs a flag given explicitly wins over (--flags-override-dynamic)."""
        config = self.config
        if not config.flags_override_dynamic:
            return []
        return [name for f, name in FIELDS.items() if f in config.explicit and self.effective(name) is not None]

    def effective_all(self, levels: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
        levels = self.levels if levels is None else levels
        return {**levels[DEFAULT], **levels[NODE]}

    def check_lockout(self, level: str, configs: dict[str, str]) -> None:
        """Refuse a new set of dynamic values that would refuse every connection (the guard of
        broker/security/dynamic.py); values a flag overrides (--flags-override-dynamic) do not count."""
        effective = self.effective_all({**self.levels, level: configs})
        for name in self.overridden():
            effective.pop(name, None)
        if self.lockout_guard is not None:
            self.lockout_guard(effective)

    def level_of(self, resource_name: str) -> str:
        return DEFAULT if resource_name == "" else NODE

    def current(self, level: str) -> dict[str, str]:
        return dict(self.levels[level])

    def effective(self, name: str) -> str | None:
        return self.levels[NODE].get(name, self.levels[DEFAULT].get(name))

    def source(self, field_name: str) -> ConfigSource | None:
        """Where the value of a Config field comes from, if dynamic."""
        name = FIELDS.get(field_name)
        if name is None:
            return None
        if name in self.levels[NODE]:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.levels[DEFAULT]:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        return None

    def replace(self, level: str, configs: dict[str, str]) -> None:
        """Make `configs` the whole set of `level` (validated), persist it, and apply it now."""
        before = self.levels[level]
        self.levels[level] = dict(configs)
        try:
            write_json(self.path, {"version": 1, **self.levels})
        except OSError:
            self.levels[level] = before
            raise
        self._apply_fields()
        self._take_effect()

    def _apply_fields(self) -> None:
        config = self.config
        keep = set(self.overridden())
        for field_name, name in FIELDS.items():
            raw = None if name in keep else self.effective(name)
            _f, kind, _v = DYNAMIC[name]
            setattr(config, field_name, parse(name, raw, kind) if raw is not None else self.static[field_name])

    def _take_effect(self) -> None:
        config = self.config
        self.limits.max_connections = config.max_connections
        self.limits.max_connections_per_ip = config.max_connections_per_ip
        if self.on_security_changed is not None:
            self.on_security_changed(self.effective_all())
        if self.on_log_defaults_changed is not None:
            self.on_log_defaults_changed()

    def describe_static(self, field_name: str) -> Any:
        return self.static[field_name]
