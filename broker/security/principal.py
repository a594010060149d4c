"""KafkaPrincipal, and the mapping of a certificate's subject to a principal name
(`ssl.principal.mapping.rules`, as Kafka's SslPrincipalMapper)."""

from __future__ import annotations

import re
from typing import NamedTuple


class KafkaPrincipal(NamedTuple):
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
WILDCARD = KafkaPrincipal("User", "*")


def parse_principal(text: str) -> KafkaPrincipal:
    """'User:alice' -> KafkaPrincipal; ValueError without a colon (SecurityUtils.parseKafkaPrincipal)."""
    if text is None or ":" not in text:
        raise ValueError(
            f"Could not parse principal from `{text}` (no colon is present separating the principal type from the principal name)"
        )
    kind, _, name = text.partition(":")
    return KafkaPrincipal(kind, name)


_RULE_SPLITTER = re.compile(r"\s*((DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?))\s*(,\s*|$)")
_RULE_PARSER = re.compile(r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)")
_BACKREF = re.compile(r"\$(\d+)")


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", lower: bool = False, upper: bool = False) -> None:
        self.default = pattern is None
        self.pattern = re.compile(pattern) if pattern is not None else None
        # Java's replacement syntax ($1) as Python's (\g<1>).
        self.replacement = _BACKREF.sub(lambda m: "\\g<" + m.group(1) + ">", replacement.replace("\\", "\\\\"))
        self.lower, self.upper = lower, upper

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        assert self.pattern is not None
        if not self.pattern.fullmatch(dn):
            return None
        result = self.pattern.sub(self.replacement, dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


class SslPrincipalMapper:
    """`RULE:pattern/replacement/[LU]` rules and DEFAULT, tried in order; no match is an error."""

    def __init__(self, rules: str | None) -> None:
        text = "DEFAULT" if rules is None else rules.strip()
        self.rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text):
            rule = m.group(1)
            if not rule and m.start() == len(text):
                break
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ValueError(f"Invalid rule: `{rule}`")
            if parsed.group(1):
                self.rules.append(_Rule())
            elif parsed.group(2) is not None:
                self.rules.append(_Rule(parsed.group(2), parsed.group(4), parsed.group(6) == "L", parsed.group(6) == "U"))
            elif rule:
                raise ValueError(f"Invalid rule: `{rule}`")
            if m.end() >= len(text):
                break

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise ValueError(f"No rules apply to {dn}")
