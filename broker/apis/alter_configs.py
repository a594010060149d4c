"""AlterConfigs v0-2 and IncrementalAlterConfigs v0-1, for topics, this broker and groups.

As Kafka's ConfigAdminManager and ConfigurationControlManager:
- AlterConfigs replaces a resource's whole set of configs (a config not given goes back to
  its default); IncrementalAlterConfigs applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3)
  to the current set. APPEND/SUBTRACT work on LIST configs only (INVALID_CONFIG otherwise);
  APPEND adds the values not present yet, starting from the current value or the default.
- Each resource is answered alone: ErrorCode and ErrorMessage per resource. A resource given
  twice gets INVALID_REQUEST ("Duplicate resource"), a config name twice in one resource
  INVALID_REQUEST ("Error due to duplicate config keys"), an unknown resource type fails the
  whole request with INVALID_REQUEST (as DescribeConfigs).
- TOPIC: an illegal name INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION;
  the new set is validated as at creation (broker/config/topic_configs.py: names, types, validators,
  the compaction-lag conflict), INVALID_CONFIG with Kafka's message otherwise. Internal
  topics take config changes too, as in Kafka.
- BROKER: "" is the cluster-wide default, this node's id the per-broker level; only dynamic
  configs (broker/config/dynamic_configs.py), INVALID_CONFIG for others.
- GROUP (IncrementalAlterConfigs only; AlterConfigs answers INVALID_REQUEST "Unsupported
  resource type"): the group configs of broker/config/group_configs.py, and kaflet's action
  configs (GROUP_ACTIONS: SET `kaflet.rebalance` bumps a consumer group's epoch, issue 13), which
  are run, never stored, and need the consumer group to exist (GROUP_ID_NOT_FOUND otherwise).
- validate_only checks everything and changes nothing. Changes are persisted in the data dir
  and take effect at once (partition logs get their new LogConfig, a retention pass runs).
  A disk that cannot take the change answers KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from broker.apis.describe_configs import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC, _authorized, _broker_id, _ResourceError
from broker.config import dynamic_configs as dynamic
from broker.config import topic_configs
from broker.config.group_configs import GROUP_ACTIONS
from broker.config.group_configs import definitions as group_definitions
from broker.config.types import ConfigError, ConfigType, parse, render
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.runtime.errors import CoordinatorError, map_append_error
from broker.security import authorize as authz
from broker.security import dynamic as security_dynamic
from broker.topics.catalog import name_error
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

AlterConfigsResponse = lazy_response(ApiKey.ALTER_CONFIGS)
IncrementalAlterConfigsResponse = lazy_response(ApiKey.INCREMENTAL_ALTER_CONFIGS)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TYPES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER", CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}


def _response(cls: Any, version: int, request: Any, results: list[tuple[Any, ErrorCode, str | None]]) -> Any:
    item = cls.AlterConfigsResourceResponse
    return cls(
        version=version,
        throttle_time_ms=0,
        responses=[
            item(error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
            for r, code, message in results
        ],
    )


def _error_for(cls: Any) -> Callable[[Any, ErrorCode], Any]:
    def error(request: Any, code: ErrorCode) -> Any:
        return _response(cls, request.version, request, [(r, code, code.message) for r in request.resources or []])

    return error


# -- the current state of each resource, and how a new one is checked and applied ------------


def _kind_of(resource_type: int, name: str) -> tuple[ConfigType, bool]:
    """(type, known) of config `name` for this resource type."""
    if resource_type == TOPIC:
        d = topic_configs.TOPIC_CONFIGS.get(name)
        return (d.type, True) if d else (ConfigType.STRING, False)
    if resource_type == BROKER:
        entry = dynamic.DYNAMIC.get(name)
        if entry is None and security_dynamic.known(name):
            return security_dynamic.kind(name), True
        return (entry[1], True) if entry else (ConfigType.STRING, False)
    d = group_definitions().get(name)
    return (d.type, True) if d else (ConfigType.STRING, False)


class _Target:
    """One resource: its current configs, the check of a complete new set, and the change."""

    def __init__(self, ctx: RequestContext, resource: Any, incremental: bool) -> None:
        broker = ctx.broker
        self.ctx = ctx
        self.type = resource.resource_type
        self.name = resource.resource_name
        if self.type == TOPIC:
            reason = name_error(self.name)
            if reason is not None:
                raise _ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
            topic = broker.topics.get(self.name)
            if topic is None:
                raise _ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{self.name}' does not exist.")
            self.current = dict(topic.configs)
        elif self.type == BROKER:
            if self.name and _broker_id(self.name) != broker.config.node_id:
                raise _ResourceError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {broker.config.node_id} or empty string, but received {self.name}",
                )
            self.level = broker.dynamic_configs.level_of(self.name)
            self.current = broker.dynamic_configs.current(self.level)
        elif self.type == GROUP and incremental:
            if not self.name:
                raise _ResourceError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
            self.current = broker.coordinator.group_configs.stored(self.name)
        else:
            raise _ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {_TYPES[self.type]}")

    def default_of(self, name: str) -> Any:
        """The value a config has when the resource does not set it (for APPEND/SUBTRACT)."""
        config = self.ctx.broker.config
        if self.type == TOPIC:
            return topic_configs.TOPIC_CONFIGS[name].default(config)
        if self.type == BROKER:
            if name not in dynamic.DYNAMIC:  # a security config: its static value, or none
                return config.sasl_enabled_mechanisms.split(",") if security_dynamic.base_name(name)[1] == "sasl.enabled.mechanisms" else []
            return getattr(config, dynamic.DYNAMIC[name][0])
        return getattr(config, group_definitions()[name].broker_default)

    def validate(self, configs: dict[str, str | None]) -> dict[str, str]:
        broker = self.ctx.broker
        if self.type == TOPIC:
            return topic_configs.validate_new_configs(configs.items(), broker.config)
        if self.type == BROKER:
            normalized = dynamic.validate(configs, per_broker=self.level == dynamic.NODE)
            broker.dynamic_configs.check_lockout(self.level, normalized)  # finding 1: no lock-out by config
            return normalized
        nulls = [n for n, v in configs.items() if v is None]
        if nulls:
            raise ConfigError("Null value not supported for group configs: " + ",".join(nulls))
        return broker.coordinator.group_configs.validate(self.name, configs)  # type: ignore[arg-type]

    def apply(self, configs: dict[str, str]) -> None:
        broker = self.ctx.broker
        if self.type == TOPIC:
            broker.topics.set_configs(self.name, configs)
            broker.logs.run_retention()  # a shorter retention (or delete policy) applies now
        elif self.type == BROKER:
            broker.dynamic_configs.replace(self.level, configs)
            broker.logs.run_retention()
        else:
            broker.coordinator.group_configs.set(self.name, configs)
        self.ctx.log.info("configs altered", resource_type=_TYPES[self.type], resource=self.name, configs=configs)


def _incremental(target: _Target, ops: list[Any]) -> dict[str, str | None]:
    """The resource's complete new set after IncrementalAlterConfigs' operations."""
    configs: dict[str, str | None] = dict(target.current)
    for op in ops:
        name, operation, value = op.name, op.config_operation, op.value
        if operation == SET:
            configs[name] = value
        elif operation == DELETE:
            configs.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            kind, known = _kind_of(target.type, name)
            if not known:
                # An unknown name is refused by the validation of the whole set below.
                configs[name] = value
                continue
            if kind is not ConfigType.LIST:
                verb = "append" if operation == APPEND else "subtract"
                raise ConfigError(f"Config value {verb} is not allowed for config key: {name}")
            raw = configs.get(name)
            current = parse(name, raw, kind) if raw is not None else list(target.default_of(name))
            given = parse(name, value or "", kind)
            if operation == APPEND:
                merged = current + [v for v in given if v not in current]
            else:
                merged = [v for v in current if v not in given]
            configs[name] = render(merged, kind) or ""
        else:
            raise _ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {operation}")
    return configs


def _check_actions(ctx: RequestContext, group_id: str) -> None:
    """An action needs a consumer group on this coordinator (else GROUP_ID_NOT_FOUND, or the routing error)."""
    coordinator = ctx.broker.coordinator
    if group_id not in coordinator.shard_for(group_id).consumer_groups:
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")


def _alter(
    ctx: RequestContext, request: Any, incremental: bool, waiters: list[Any] | None = None
) -> list[tuple[Any, ErrorCode, str | None]]:
    waiters = [] if waiters is None else waiters
    resources = list(request.resources or [])
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    validate_only = bool(request.validate_only)
    results: list[tuple[Any, ErrorCode, str | None]] = []
    for resource in resources:
        if counts[(resource.resource_type, resource.resource_name)] > 1:
            results.append((resource, ErrorCode.INVALID_REQUEST, "Duplicate resource"))
            continue
        # ALTER_CONFIGS on the cluster for BROKER resources (finding 1 of the security review:
        # without it any client could refuse every connection), the topic or the group.
        denied = _authorized(ctx, resource, authz.Op.ALTER_CONFIGS)
        if denied:
            results.append((resource, denied, None))  # Kafka sends no message with it
            continue
        try:
            target = _Target(ctx, resource, incremental)
            entries = list(resource.configs or [])
            names = Counter(c.name for c in entries)
            if any(n > 1 for n in names.values()):
                raise _ResourceError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            nulls = [c.name for c in entries if c.value is None and (not incremental or c.config_operation != DELETE)]
            if incremental and nulls:
                # Kafka's ConfigAdminManager, before any config is looked at.
                raise _ResourceError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
            actions = []
            if target.type == GROUP:
                # kaflet's action configs (group_configs.GROUP_ACTIONS, issue 13): run, never stored.
                actions = [c for c in entries if c.name in GROUP_ACTIONS]
                entries = [c for c in entries if c.name not in GROUP_ACTIONS]
                if any(c.config_operation != SET for c in actions):
                    raise _ResourceError(ErrorCode.INVALID_REQUEST, f"{actions[0].name} can only be SET")
            if incremental:
                new = _incremental(target, entries)
            else:
                new = {c.name: c.value for c in entries}
            normalized = target.validate(new)
            if actions:
                _check_actions(ctx, target.name)
            if not validate_only:
                if entries or not actions:
                    target.apply(normalized)
                for c in actions:
                    waiter = getattr(ctx.broker.coordinator, GROUP_ACTIONS[c.name])(target.name)
                    if waiter is not None:
                        waiters.append(waiter)
        except CoordinatorError as exc:
            code = map_append_error(exc.code)  # a failed epoch-bump append answers as a failed heartbeat would
            message = exc.args[0] if exc.args and exc.args[0] != exc.code.name and code is exc.code else code.message
            results.append((resource, code, message))
            continue
        except _ResourceError as exc:
            results.append((resource, exc.code, exc.message))
            continue
        except ConfigError as exc:
            results.append((resource, ErrorCode.INVALID_CONFIG, str(exc)))
            continue
        except OSError as exc:  # the data dir cannot take the change (a full disk)
            results.append((resource, ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot persist the configs: {exc.strerror or exc}"))
            continue
        results.append((resource, ErrorCode.NONE, None))
    return results


def _unknown_type(request: Any) -> bool:
    return any(r.resource_type not in _TYPES for r in request.resources or [])


@api(ApiKey.ALTER_CONFIGS, 0, 2, error_response=_error_for(AlterConfigsResponse))
def handle_alter_configs(ctx: RequestContext, request: Any) -> Any:
    if _unknown_type(request):
        return _error_for(AlterConfigsResponse)(request, ErrorCode.INVALID_REQUEST)
    return _response(AlterConfigsResponse, ctx.api_version, request, _alter(ctx, request, incremental=False))


@api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, error_response=_error_for(IncrementalAlterConfigsResponse))
def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    if _unknown_type(request):
        return _error_for(IncrementalAlterConfigsResponse)(request, ErrorCode.INVALID_REQUEST)
    waiters: list[Any] = []
    response = _response(IncrementalAlterConfigsResponse, ctx.api_version, request, _alter(ctx, request, True, waiters))
    if not waiters:
        return response

    async def durable() -> Any:
        # An action's records (the group epoch bump) are durable before the answer, as a heartbeat's are.
        for waiter in waiters:
            try:
                await waiter
            except Exception:
                return _error_for(IncrementalAlterConfigsResponse)(request, ErrorCode.NOT_COORDINATOR)
        return response

    return durable()
