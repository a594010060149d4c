"""The topic config table: parsing as Java does, normalized storage, effective typed values."""

from __future__ import annotations

import uuid

import pytest

from broker import Config
from broker.config.topic_configs import TOPIC_CONFIGS, effective_configs, validate_new_configs
from broker.config.types import ConfigError, ConfigType, java_double, parse, render
from broker.topics.catalog import Topic


def test_effective_configs_default_to_the_broker_settings() -> None:
    config = Config(log_segment_bytes=2 * 1024 * 1024, log_retention_ms=1000, log_retention_bytes=99, message_max_bytes=5000)
    topic = Topic("t", uuid.uuid4(), 1, {})
    values = effective_configs(topic, config)
    assert set(values) == set(TOPIC_CONFIGS)
    assert (values["segment.bytes"], values["retention.ms"], values["retention.bytes"], values["max.message.bytes"]) == (
        2097152,
        1000,
        99,
        5000,
    )
    assert (values["segment.ms"], values["cleanup.policy"], values["message.timestamp.type"]) == (604800000, ["delete"], "CreateTime")
    assert (values["min.cleanable.dirty.ratio"], values["preallocate"]) == (0.5, False)


def test_effective_configs_prefer_the_topics_own() -> None:
    stored = validate_new_configs([("cleanup.policy", "compact, delete"), ("retention.ms", "+5"), ("preallocate", "TRUE")], Config())
    assert stored == {"cleanup.policy": "compact,delete", "retention.ms": "5", "preallocate": "true"}
    values = effective_configs(stored, Config())
    assert (values["cleanup.policy"], values["retention.ms"], values["preallocate"]) == (["compact", "delete"], 5, True)


def test_unparsable_stored_value_falls_back_to_default() -> None:
    assert effective_configs({"retention.ms": "garbage", "unknown.key": "1"}, Config())["retention.ms"] == 604800000


def test_last_value_of_a_repeated_name_wins() -> None:
    assert validate_new_configs([("retention.ms", "1"), ("retention.ms", "2")], Config()) == {"retention.ms": "2"}


def test_empty_cleanup_policy_is_an_empty_list() -> None:
    assert effective_configs(validate_new_configs([("cleanup.policy", "")], Config()), Config())["cleanup.policy"] == []


@pytest.mark.parametrize(
    ("raw", "kind", "parsed"),
    [
        (" 42 ", ConfigType.INT, 42),
        ("-2147483648", ConfigType.INT, -(1 << 31)),
        ("9223372036854775807", ConfigType.LONG, (1 << 63) - 1),
        ("0.25", ConfigType.DOUBLE, 0.25),
        ("1e-5", ConfigType.DOUBLE, 1e-5),
        ("2f", ConfigType.DOUBLE, 2.0),
        ("a , b,c", ConfigType.LIST, ["a", "b", "c"]),
        ("  ", ConfigType.LIST, []),
        ("False", ConfigType.BOOLEAN, False),
    ],
)
def test_parse_like_java(raw: str, kind: ConfigType, parsed: object) -> None:
    assert parse("x", raw, kind) == parsed


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("1_000", ConfigType.INT), ("2147483648", ConfigType.INT), ("1.5", ConfigType.LONG), ("x", ConfigType.DOUBLE)],
)
def test_parse_rejects_what_java_rejects(raw: str, kind: ConfigType) -> None:
    with pytest.raises(ConfigError, match=f"Not a number of type {kind.name}"):
        parse("x", raw, kind)


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.5, "0.5"), (1.0, "1.0"), (1e-5, "1.0E-5"), (12345678.0, "1.2345678E7"), (0.001, "0.001"), (-2.5e-7, "-2.5E-7"), (0.0, "0.0")],
)
def test_doubles_render_as_java_does(value: float, text: str) -> None:
    assert java_double(value) == text
    assert render(value, ConfigType.DOUBLE) == text
