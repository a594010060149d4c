"""DescribeConfigs v1-v4 (v0 is not served, as in Kafka 4) for topics (2), this broker (4) and its loggers (8), as Kafka's ConfigHelper.

- TOPIC: an illegal name gets INVALID_TOPIC_EXCEPTION with Topic.validate's message, an
  unknown topic UNKNOWN_TOPIC_OR_PARTITION (no message); otherwise every topic config with
  its source (TOPIC_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG), see broker/config/topic_configs.py.
- BROKER: "" is the cluster-wide dynamic default, which kaflet never has (empty list); a
  name that is not an integer or not this node's id gets INVALID_REQUEST with Kafka's text.
- BROKER_LOGGER: the root logger's level.
- GROUP: the group's own configs (source GROUP_CONFIG, 8) and the broker defaults for the
  rest (broker/config/group_configs.py); a group need not exist, as in Kafka.
- CLIENT_METRICS is a valid type kaflet has no configs for: INVALID_REQUEST
  "Unsupported resource type" per resource. Any other type fails the whole request with
  INVALID_REQUEST, as Kafka's authorization step does.

Synonyms are sent only when asked for, documentation only when asked for (v3+).
"""

from __future__ import annotations

import re
from typing import Any

from broker.config import broker_configs, topic_configs
from broker.config.types import ConfigEntry, ConfigSource, ConfigType
from broker.network.context import RequestContext
from broker.network.registry import api
from broker.security import authorize as authz
from broker.topics.catalog import name_error
from protocol.apis import ApiKey, lazy_response
from protocol.errors import ErrorCode

DescribeConfigsResponse = lazy_response(ApiKey.DESCRIBE_CONFIGS)

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_TYPE_NAMES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER", CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


class _ResourceError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _result(resource: Any, code: ErrorCode, message: str | None, configs: list[Any]) -> Any:
    return _Result(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


def _error(request: Any, code: ErrorCode) -> Any:
    """Kafka's DescribeConfigsRequest.getErrorResponse: every resource gets the error and its default message."""
    results = [_result(r, code, code.message, []) for r in request.resources or []]
    return DescribeConfigsResponse(version=request.version, throttle_time_ms=0, results=results)


def _broker_id(name: str) -> int:
    """resourceNameToBrokerId: Integer.parseInt or INVALID_REQUEST."""
    if not _INTEGER.match(name) or not -(1 << 31) <= int(name) < (1 << 31):
        raise _ResourceError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
    return int(name)


def _entries(ctx: RequestContext, resource: Any) -> list[ConfigEntry]:
    broker = ctx.broker
    node = broker.config.node_id
    kind, name = resource.resource_type, resource.resource_name
    if kind == TOPIC:
        reason = name_error(name)
        if reason is not None:
            raise _ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        topic = broker.topics.get(name)
        if topic is None:
            raise _ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        return topic_configs.describe(topic.configs, broker.config, broker.dynamic_configs)
    if kind == BROKER:
        if not name:
            return broker_configs.describe_dynamic_defaults(broker)  # the cluster-wide dynamic defaults set
        if _broker_id(name) != node:
            raise _ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node} or empty string, but received {name}")
        return broker_configs.describe(broker)
    if kind == BROKER_LOGGER:
        if not name:
            raise _ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _broker_id(name) != node:
            raise _ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node} but received {name}")
        level = broker.config.log_level.upper()
        return [ConfigEntry("root", level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, ConfigType.UNKNOWN, "", read_only=True)]
    if kind == GROUP:
        if not name:
            raise _ResourceError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return broker.coordinator.group_configs.describe(name)
    raise _ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {_TYPE_NAMES[kind]}")


def _wire(entry: ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    return _Entry(
        name=entry.name,
        value=None if entry.sensitive else entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_default=entry.source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=entry.sensitive,
        synonyms=[_Synonym(name=s.name, value=s.value, source=s.source) for s in entry.synonyms] if synonyms else [],
        config_type=entry.type,
        documentation=entry.doc if documentation and entry.doc else None,
    )


@api(ApiKey.DESCRIBE_CONFIGS, 1, 4, error_response=_error)
def handle_describe_configs(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    resources = list(request.resources or [])
    if any(r.resource_type not in _TYPE_NAMES for r in resources):
        # Kafka's authorization step throws for an unknown type, failing the whole request.
        return _error(request, ErrorCode.INVALID_REQUEST)
    synonyms = bool(request.include_synonyms) if version >= 1 else False
    documentation = bool(request.include_documentation) if version >= 3 else False
    results: list[Any] = []
    denied: list[Any] = []  # answered after the others, as ConfigHelper does
    for resource in resources:
        code = _authorized(ctx, resource, authz.Op.DESCRIBE_CONFIGS)
        if code:
            denied.append(_result(resource, code, code.message, []))
            continue
        try:
            entries = _entries(ctx, resource)
        except _ResourceError as exc:
            results.append(_result(resource, exc.code, exc.message, []))
            continue
        keys = resource.configuration_keys
        if keys:
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        # A described resource's ErrorMessage is "", not null, in Kafka's answers.
        results.append(_result(resource, ErrorCode.NONE, "", [_wire(e, synonyms, documentation) for e in entries]))
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results + denied)


def _authorized(ctx: RequestContext, resource: Any, op: int) -> ErrorCode:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster (BROKER, BROKER_LOGGER, CLIENT_METRICS), the
    topic or the group; the resource type's authorization error otherwise."""
    if ctx.broker.authorizer is None:
        return ErrorCode.NONE
    kind, name = resource.resource_type, resource.resource_name
    if kind == TOPIC:
        return ErrorCode.NONE if authz.allowed(ctx, op, authz.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if kind == GROUP:
        return ErrorCode.NONE if authz.allowed(ctx, op, authz.GROUP, name) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.NONE if authz.cluster_allowed(ctx, op) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
