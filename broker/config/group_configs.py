"""Per-group configs (Kafka's GROUP config resource, KIP-848): what IncrementalAlterConfigs sets
on a group and DescribeConfigs shows, persisted in the data dir (`group-configs.json`).

The narrow interface: `GroupConfigs.get(group_id)` -> the group's own settings {name: typed
value} (a group without any has {}), and `get(group_id, name)` -> one of them or None, in which
case the broker's default applies. A config is one entry of `GROUP_CONFIG_DEFS` (name, type,
the broker default it falls back to, and its check against the broker's bounds), so adding one,
such as `lag.aware.uncommitted`, is one more entry.

Validation follows Kafka's GroupConfig: each value parses as its type, then the bounds checks
against the broker's group.consumer.* settings, in Kafka's words:
`consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms`,
and the heartbeat interval must stay below the session timeout. Kafka keeps group configs of
groups that do not exist (a config may be set before the group's first member joins); so
does kaflet, and keeps them when the group is deleted, until a DELETE operation removes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.config.types import ConfigEntry, ConfigError, ConfigSource, ConfigType, Synonym, parse, render
from broker.node.datadir import write_json

if TYPE_CHECKING:
    from broker.config import Config

# DescribeConfigsResponse.ConfigSource GROUP_CONFIG (KIP-848), beyond config_types.ConfigSource.
GROUP_CONFIG_SOURCE = 8
FILE_NAME = "group-configs.json"

# check(name, value, all effective values of the group, broker config) raises ConfigError.
Check = Callable[[str, Any, Mapping[str, Any], "Config"], None]


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    broker_default: str  # the Config field whose value applies when the group has none
    broker_config: str  # Kafka's name of that broker config (the DescribeConfigs synonym)
    doc: str
    check: Check | None = None


def _between(low_field: str, low_name: str, high_field: str, high_name: str) -> Check:
    def check(name: str, value: Any, _values: Mapping[str, Any], config: Config) -> None:
        if value < getattr(config, low_field):
            raise ConfigError(f"{name} must be greater than or equal to {low_name}")
        if value > getattr(config, high_field):
            raise ConfigError(f"{name} must be less than or equal to {high_name}")

    return check


def _heartbeat(name: str, value: Any, values: Mapping[str, Any], config: Config) -> None:
    _between(
        "group_consumer_min_heartbeat_interval_ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group_consumer_max_heartbeat_interval_ms",
        "group.consumer.max.heartbeat.interval.ms",
    )(name, value, values, config)
    if value >= values["consumer.session.timeout.ms"]:
        raise ConfigError(f"{name} must be less than consumer.session.timeout.ms")


GROUP_CONFIG_DEFS: list[GroupConfigDef] = [
    GroupConfigDef(
        "consumer.session.timeout.ms",
        ConfigType.INT,
        "group_consumer_session_timeout_ms",
        "group.consumer.session.timeout.ms",
        "The timeout to detect client failures when using the consumer group protocol.",
        _between(
            "group_consumer_min_session_timeout_ms",
            "group.consumer.min.session.timeout.ms",
            "group_consumer_max_session_timeout_ms",
            "group.consumer.max.session.timeout.ms",
        ),
    ),
    GroupConfigDef(
        "consumer.heartbeat.interval.ms",
        ConfigType.INT,
        "group_consumer_heartbeat_interval_ms",
        "group.consumer.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a consumer group.",
        _heartbeat,
    ),
    GroupConfigDef(
        "consumer.assignment.interval.ms",
        ConfigType.INT,
        "group_consumer_assignment_interval_ms",
        "group.consumer.assignment.interval.ms",
        "The interval between assignment updates for a consumer group.",
        _between(
            "group_consumer_min_assignment_interval_ms",
            "group.consumer.min.assignment.interval.ms",
            "group_consumer_max_assignment_interval_ms",
            "group.consumer.max.assignment.interval.ms",
        ),
    ),
]


def _one_of(*allowed: str) -> Check:
    """Kafka's ConfigDef.ValidString."""

    def check(name: str, value: Any, _values: Mapping[str, Any], _config: Config) -> None:
        if value not in allowed:
            raise ConfigError(f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(allowed)}")

    return check


# Issue 13 (kaflet only): the lag the lag-aware assignor counts for a partition the group never committed.
GROUP_CONFIG_DEFS.append(
    GroupConfigDef(
        "lag.aware.uncommitted",
        ConfigType.STRING,
        "lag_aware_uncommitted",
        "lag.aware.uncommitted",
        "kaflet only: the lag the lag-aware assignor counts for a partition the group never committed: earliest (log end "
        "minus log start) or latest (0).",
        _one_of("earliest", "latest"),
    )
)

# Group "configs" that are actions, not settings (kaflet only): a SET through IncrementalAlterConfigs runs the
# GroupCoordinator method named here on the group and stores nothing; DescribeConfigs does not list them.
# `kaflet.rebalance` (issue 13): Kafka has no API to rebalance a consumer group on demand; a group config write
# is the one admin request every client library can already send for a group, so SET kaflet.rebalance (any
# value) bumps the group epoch and the assignor runs again at the members' next heartbeats.
GROUP_ACTIONS: dict[str, str] = {"kaflet.rebalance": "request_rebalance"}


def definitions() -> dict[str, GroupConfigDef]:
    return {d.name: d for d in GROUP_CONFIG_DEFS}


class GroupConfigs:
    """Every group's own configs, kept as Kafka stores them: strings, validated when set."""

    def __init__(self, data_dir: Path, config: Config) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.config = config
        self._groups: dict[str, dict[str, str]] = {}
        if self.path.exists():
            stored = json.loads(self.path.read_text())
            self._groups = {g: dict(v) for g, v in stored.get("groups", {}).items()}

    def get(self, group_id: str, name: str | None = None) -> Any:
        """The group's own settings, typed ({} if none); with `name`, one of them or None."""
        own = self._groups.get(group_id, {})
        defs = definitions()
        if name is not None:
            raw = own.get(name)
            return None if raw is None or name not in defs else parse(name, raw, defs[name].type)
        return {n: parse(n, v, defs[n].type) for n, v in own.items() if n in defs}

    def stored(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def validate(self, group_id: str, configs: Mapping[str, str]) -> dict[str, str]:
        """Check a group's complete new set of configs; returns it normalized. ConfigError with
        Kafka's message: unknown names, types, then the bounds, in definition order."""
        defs = definitions()
        for name in configs:
            if name not in defs:
                raise ConfigError(f"Unknown group config name: {name}")
        values: dict[str, Any] = {}
        for d in GROUP_CONFIG_DEFS:
            raw = configs.get(d.name)
            values[d.name] = parse(d.name, raw, d.type) if raw is not None else getattr(self.config, d.broker_default)
        for d in GROUP_CONFIG_DEFS:
            if d.name in configs and d.check is not None:
                d.check(d.name, values[d.name], values, self.config)
        return {d.name: render(values[d.name], d.type) or "" for d in GROUP_CONFIG_DEFS if d.name in configs}

    def set(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the group's configs (already validated) and persist them."""
        before = self._groups.get(group_id)
        if configs:
            self._groups[group_id] = dict(configs)
        else:
            self._groups.pop(group_id, None)
        try:
            self._save()
        except OSError:
            if before is None:
                self._groups.pop(group_id, None)
            else:
                self._groups[group_id] = before
            raise

    def _save(self) -> None:
        write_json(self.path, {"version": 1, "groups": self._groups})

    def describe(self, group_id: str) -> list[ConfigEntry]:
        own = self._groups.get(group_id, {})
        entries = []
        for d in sorted(GROUP_CONFIG_DEFS, key=lambda d: d.name):
            broker_value = render(getattr(self.config, d.broker_default), d.type)
            synonyms = []
            if d.name in own:
                synonyms.append(Synonym(d.name, own[d.name], GROUP_CONFIG_SOURCE))  # type: ignore[arg-type]
            synonyms.append(Synonym(d.broker_config, broker_value, ConfigSource.DEFAULT_CONFIG))
            entries.append(
                ConfigEntry(
                    name=d.name,
                    value=own.get(d.name, broker_value),
                    source=GROUP_CONFIG_SOURCE if d.name in own else ConfigSource.DEFAULT_CONFIG,  # type: ignore[arg-type]
                    type=d.type,
                    doc=d.doc,
                    synonyms=synonyms,
                )
            )
        return entries
