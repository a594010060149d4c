"""ACL bindings and filters as Kafka's clients and StandardAcl model them."""

from __future__ import annotations

import ipaddress
from enum import IntEnum
from typing import NamedTuple


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"

# AclEntry.supportedOperations: what authorized-operations bits are computed over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}  # fmt: skip


def all_operations(rtype: ResourceType) -> frozenset[int]:
    """What Kafka reports as authorized operations with no authorizer: every operation the resource type supports."""
    return frozenset(int(op) for op in SUPPORTED_OPERATIONS[rtype])


class Acl(NamedTuple):
    """A StandardAcl: one binding of a resource pattern to an access control entry."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def describe(self) -> str:
        return (
            f"{PermissionType(self.permission).name} {self.principal} {AclOperation(self.operation).name} from {self.host} on "
            f"{ResourceType(self.resource_type).name}:{PatternType(self.pattern_type).name}:{self.name}"
        )


class AclFilter(NamedTuple):
    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: Acl) -> bool:
        """AclBindingFilter.matches (ResourcePatternFilter and AccessControlEntryFilter)."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        if self.name is not None:
            if pt == PatternType.ANY or pt == acl.pattern_type:
                if self.name != acl.name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:
                if not (self.name == acl.name or acl.name == WILDCARD):
                    return False
            elif acl.pattern_type == PatternType.PREFIXED:
                if not self.name.startswith(acl.name):
                    return False
            else:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == PermissionType.ANY or self.permission == acl.permission

    def unknown(self) -> str | None:
        """Why this filter is unusable (Kafka: 'Unknown patternFilter.' / 'Unknown entryFilter.'), or None."""
        if (
            self.resource_type == ResourceType.UNKNOWN
            or self.pattern_type == PatternType.UNKNOWN
            or self.resource_type not in ResourceType._value2member_map_
            or self.pattern_type not in PatternType._value2member_map_
        ):
            return "Unknown patternFilter."
        if (
            self.operation == AclOperation.UNKNOWN
            or self.permission == PermissionType.UNKNOWN
            or self.operation not in AclOperation._value2member_map_
            or self.permission not in PermissionType._value2member_map_
        ):
            return "Unknown entryFilter."
        return None


def validate_new(acl: Acl) -> str | None:
    """AclApis' and AclControlManager.validateNewAcl's checks: the INVALID_REQUEST message, or None."""
    if acl.resource_type not in ResourceType._value2member_map_ or acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {_name(ResourceType, acl.resource_type)}"
    if acl.resource_type == ResourceType.CLUSTER and acl.name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if not acl.name:
        return "Invalid empty resource name"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_name(PatternType, acl.pattern_type)}"
    if acl.operation not in AclOperation._value2member_map_ or acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {_name(AclOperation, acl.operation)}"
    if acl.permission not in (PermissionType.DENY, PermissionType.ALLOW):
        return f"Invalid permissionType {_name(PermissionType, acl.permission)}"
    if ":" not in (acl.principal or ""):
        return (
            f"Could not parse principal from `{acl.principal}` (no colon is present separating the principal type from the principal name)"
        )
    if not acl.host:
        return "Host pattern cannot be null or empty"
    if acl.host != WILDCARD and "/" in acl.host:
        try:
            ipaddress.ip_network(acl.host, strict=False)
        except ValueError as exc:
            return f"Invalid CIDR notation '{acl.host}': {exc}"
    return None


def _name(enum: type[IntEnum], value: int) -> str:
    return enum(value).name if value in enum._value2member_map_ else "UNKNOWN"


def java_host(host: str) -> str:
    """An address as Java's InetAddress.getHostAddress() writes it (IPv6 uncompressed, no zero padding)."""
    if ":" not in host:
        return host
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return ":".join(format(int(g, 16), "x") for g in addr.exploded.split(":"))
    return str(addr)


def host_matches(acl_host: str, host: str) -> bool:
    if acl_host == WILDCARD or acl_host == host:
        return True
    if "/" not in acl_host:
        return False
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(acl_host, strict=False)
    except ValueError:
        return False
