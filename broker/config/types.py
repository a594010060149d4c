"""Typed config values as Kafka's ConfigDef handles them: parsing, validators, rendering.

Topic configs (broker/config/topic_configs.py) and broker configs (broker/config/broker_configs.py) are
described with these types. Parsing follows `ConfigDef.parseType` (trimmed strings, Java
integer ranges, comma lists), rendering follows `ConfigDef.convertToString` (what
DescribeConfigs shows), and error texts are ConfigException's ("Invalid value X for
configuration Y: reason"), because clients show them to users verbatim.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import IntEnum
from typing import Any

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
SHORT_MIN, SHORT_MAX = -(1 << 15), (1 << 15) - 1

_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)\Z")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


class ConfigType(IntEnum):
    """DescribeConfigsResponse.ConfigType ids (the wire's config_type, v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigsResponse.ConfigSource ids (the wire's config_source, v1+)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigError(ValueError):
    """A config value is unknown or invalid; `str(exc)` is the message Kafka would send."""


def invalid(name: str, value: Any, reason: str | None) -> ConfigError:
    """ConfigException(name, value, message)."""
    return ConfigError(f"Invalid value {java_str(value)} for configuration {name}" + (f": {reason}" if reason else ""))


# -- parsing and rendering ------------------------------------------------------------


def parse(name: str, raw: str, kind: ConfigType) -> Any:
    """A string as ConfigDef.parseType reads it for `kind`, or ConfigError."""
    text = raw.strip()
    if kind is ConfigType.BOOLEAN:
        if text.lower() == "true":
            return True
        if text.lower() == "false":
            return False
        raise invalid(name, raw, "Expected value to be either true or false")
    if kind in (ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS):
        return text
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        lo, hi = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX), ConfigType.SHORT: (SHORT_MIN, SHORT_MAX)}[kind]
        if _INTEGER.match(text):
            number = int(text)
            if lo <= number <= hi:
                return number
        raise invalid(name, raw, f"Not a number of type {kind.name}")
    if kind is ConfigType.DOUBLE:
        if _DOUBLE.match(text):
            return float(text.rstrip("fFdD") if not text.endswith("Infinity") else text.replace("Infinity", "inf"))
        raise invalid(name, raw, f"Not a number of type {kind.name}")
    if kind is ConfigType.LIST:
        return [] if text == "" else _LIST_SEPARATOR.split(text)
    raise ValueError(f"cannot parse type {kind.name}")


def render(value: Any, kind: ConfigType) -> str | None:
    """A parsed value as ConfigDef.convertToString writes it (None stays None)."""
    if value is None:
        return None
    if kind is ConfigType.LIST:
        return ",".join(str(v) for v in value)
    return java_str(value)


def java_str(value: Any) -> str:
    """Java's toString of a config value: booleans lower case, doubles as Double.toString, lists as [a, b]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def java_double(x: float) -> str:
    """Double.toString: plain notation in [1e-3, 1e7), else d.dddE±n, always with a fraction digit."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    mag = abs(x)
    if 1e-3 <= mag < 1e7:
        text = repr(mag)
        return sign + (text if "." in text else text + ".0")
    digits_tuple = Decimal(repr(mag)).as_tuple()
    digits = "".join(str(d) for d in digits_tuple.digits).rstrip("0") or "0"
    exponent = int(digits_tuple.exponent) + len(digits_tuple.digits) - 1
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# -- validators -----------------------------------------------------------------------

Validator = Callable[[str, Any], None]


@dataclass(frozen=True)
class AtLeast:
    minimum: int

    def __call__(self, name: str, value: Any) -> None:
        if value < self.minimum:
            raise invalid(name, value, f"Value must be at least {self.minimum}")


@dataclass(frozen=True)
class Between:
    minimum: int
    maximum: int

    def __call__(self, name: str, value: Any) -> None:
        if value < self.minimum:
            raise invalid(name, value, f"Value must be at least {self.minimum}")
        if value > self.maximum:
            raise invalid(name, value, f"Value must be no more than {self.maximum}")


@dataclass(frozen=True)
class OneOf:
    """ValidString.in: case-sensitive."""

    choices: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.choices:
            raise invalid(name, value, "String must be one of: " + ", ".join(self.choices))


@dataclass(frozen=True)
class EachOneOf:
    """ValidList.in: every element of the list is one of `choices`."""

    choices: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        for item in value:
            OneOf(self.choices)(name, item)


@dataclass(frozen=True)
class GzipLevel:
    """CompressionType.GZIP.levelValidator: 1..9, or -1 for zlib's default."""

    def __call__(self, name: str, value: Any) -> None:
        if value > 9 or (value < 1 and value != -1):
            raise invalid(name, value, "Value must be between 1 and 9 or equal to -1")


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?\Z")


@dataclass(frozen=True)
class ThrottledReplicas:
    """ThrottledReplicaListValidator: the literal '*' or partition:broker pairs."""

    def __call__(self, name: str, value: Any) -> None:
        items = [str(v).strip() for v in value]
        if not (all(_REPLICA.match(s) for s in items) or "".join(items) == "*"):
            raise invalid(
                name,
                value,
                f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
            )


# -- what DescribeConfigs reports -------------------------------------------------------


@dataclass(slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(slots=True)
class ConfigEntry:
    """One described config, independent of the response version that carries it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str
    read_only: bool = False
    sensitive: bool = False
    synonyms: list[Synonym] = field(default_factory=list)


def sorted_entries(entries: Sequence[ConfigEntry]) -> list[ConfigEntry]:
    return sorted(entries, key=lambda e: e.name)
