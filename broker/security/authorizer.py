"""Kafka's StandardAuthorizer: ACLs, `super.users` and `allow.everyone.if.no.acl.found`.

For an action (principal, client host, operation, resource type and literal name):
1. a super user is allowed everything;
2. the ACLs of the resource are those whose pattern matches the name: LITERAL equal to it, the
   LITERAL wildcard `*`, or PREFIXED with a prefix of it; an ACL applies to the action when its
   principal is the action's or `User:*`, its host is `*`, the client's address or a CIDR range
   holding it, and its operation is the action's or ALL -- or, for ALLOW ACLs only, one that
   implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS);
3. a DENY that applies wins; else an ALLOW that applies allows; else, when the resource has any
   ACL at all (for anyone), the action is denied; when it has none, `allow.everyone.if.no.acl.found`
   decides (false by default: denied).

The ACLs are indexed by resource type, then literal name, the wildcard, and prefixes by length,
so that a check costs a few dictionary lookups whatever the number of ACLs (bench `acls`).

`allowed_operations(principal, host, resource_type, name)` is "which operations are allowed for
this principal on this resource": the authorized-operations bits of Metadata, DescribeCluster,
DescribeGroups and ConsumerGroupDescribe are computed from it over AclEntry.supportedOperations.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.security.acls import SUPPORTED_OPERATIONS, WILDCARD, Acl, AclOperation, PatternType, PermissionType, ResourceType, host_matches
from broker.security.principal import KafkaPrincipal, parse_principal

_DESCRIBE_IMPLIED_BY = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER})
_DESCRIBE_CONFIGS_IMPLIED_BY = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


class _TypeIndex:
    __slots__ = ("literal", "prefix_lengths", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, list[Acl]] = {}
        self.prefixed: dict[str, list[Acl]] = {}
        self.prefix_lengths: dict[int, int] = {}  # length -> how many prefixed names have it


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by ';', each checked to be TYPE:NAME."""
    out = set()
    for value in (text or "").split(";"):
        value = value.strip()
        if value:
            parse_principal(value)
            out.add(value)
    return frozenset(out)


class StandardAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._index: dict[int, _TypeIndex] = {}
        self.count = 0

    # -- the ACLs -----------------------------------------------------------------------------

    def add(self, acl: Acl) -> None:
        idx = self._index.setdefault(acl.resource_type, _TypeIndex())
        if acl.pattern_type == PatternType.PREFIXED:
            idx.prefixed.setdefault(acl.name, []).append(acl)
            if len(idx.prefixed[acl.name]) == 1:
                n = len(acl.name)
                idx.prefix_lengths[n] = idx.prefix_lengths.get(n, 0) + 1
        else:
            idx.literal.setdefault(acl.name, []).append(acl)
        self.count += 1

    def remove(self, acl: Acl) -> None:
        idx = self._index.get(acl.resource_type)
        if idx is None:
            return
        table = idx.prefixed if acl.pattern_type == PatternType.PREFIXED else idx.literal
        entries = table.get(acl.name)
        if not entries or acl not in entries:
            return
        entries.remove(acl)
        self.count -= 1
        if not entries:
            del table[acl.name]
            if acl.pattern_type == PatternType.PREFIXED:
                n = len(acl.name)
                left = idx.prefix_lengths[n] - 1
                if left:
                    idx.prefix_lengths[n] = left
                else:
                    del idx.prefix_lengths[n]

    def _matching(self, resource_type: int, name: str) -> list[list[Acl]]:
        idx = self._index.get(resource_type)
        if idx is None:
            return []
        out = []
        literal = idx.literal
        found = literal.get(name)
        if found:
            out.append(found)
        if name != WILDCARD:
            found = literal.get(WILDCARD)
            if found:
                out.append(found)
        if idx.prefix_lengths:
            prefixed = idx.prefixed
            size = len(name)
            for n in idx.prefix_lengths:
                if n <= size:
                    found = prefixed.get(name[:n])
                    if found:
                        out.append(found)
        return out

    # -- decisions ----------------------------------------------------------------------------

    def authorize(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str) -> bool:
        if self.super_users and f"{principal.type}:{principal.name}" in self.super_users:
            return True
        groups = self._matching(resource_type, name)
        if not groups:
            return self.allow_if_no_acl
        mine = f"{principal.type}:{principal.name}"
        allowed = False
        for acls in groups:
            for acl in acls:
                if acl.principal != mine and acl.principal != "User:*":
                    continue
                if not host_matches(acl.host, host):
                    continue
                op = acl.operation
                if acl.permission == PermissionType.DENY:
                    if op == operation or op == AclOperation.ALL:
                        return False
                    continue
                if allowed:
                    continue
                if op == operation or op == AclOperation.ALL:
                    allowed = True
                elif operation == AclOperation.DESCRIBE:
                    allowed = op in _DESCRIBE_IMPLIED_BY
                elif operation == AclOperation.DESCRIBE_CONFIGS:
                    allowed = op in _DESCRIBE_CONFIGS_IMPLIED_BY
        return allowed

    def allowed_operations(self, principal: KafkaPrincipal, host: str, resource_type: int, name: str) -> frozenset[int]:
        """Which of the resource type's supported operations this principal may do on this resource."""
        return frozenset(
            int(op) for op in SUPPORTED_OPERATIONS[ResourceType(resource_type)] if self.authorize(principal, host, op, resource_type, name)
        )

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int) -> bool:
        """Authorizer.authorizeByResourceType: may the principal do `operation` on some resource
        of this type (InitProducerId's idempotent-write fallback to WRITE on any topic)?"""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        mine = f"{principal.type}:{principal.name}"
        deny: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for acl in self.acls(resource_type):
            if not host_matches(acl.host, host):
                continue
            if acl.principal != mine and acl.principal != "User:*":
                continue
            if acl.operation != operation and acl.operation != AclOperation.ALL:
                continue
            if acl.permission == PermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.name)
            elif acl.permission == PermissionType.ALLOW:
                if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                    wildcard_allow = True
                else:
                    allow[acl.pattern_type].add(acl.name)
        if wildcard_allow:
            return True
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    continue
                return True
        return False

    def acls(self, resource_type: int | None = None) -> list[Acl]:
        out: list[Acl] = []
        for rt, idx in self._index.items():
            if resource_type is not None and rt != resource_type:
                continue
            for table in (idx.literal, idx.prefixed):
                for entries in table.values():
                    out.extend(entries)
        return out
