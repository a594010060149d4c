"""`kaflet acls`: list, add and remove ACLs (Kafka's kafka-acls options, in short), on a running
broker (CreateAcls / DescribeAcls / DeleteAcls, which need --authorizer standard there) or on a
stopped broker's data dir.

    kaflet acls add --allow-principal User:alice --operation READ --operation DESCRIBE --topic orders --data-dir ./data
    kaflet acls add --allow-principal User:alice --operation READ --group app --resource-pattern-type prefixed
    kaflet acls list --topic orders
    kaflet acls remove --principal User:alice --topic orders
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from broker.cli import shared_options
from broker.security.acls import CLUSTER_NAME, Acl, AclFilter, AclOperation, PatternType, PermissionType, ResourceType
from broker.security.cli.target import USAGE, CliError, add_target, admin, locked_data_dir, parse, run


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kaflet acls",
        description="List, add and remove ACLs (Kafka's StandardAuthorizer), of a running broker (--bootstrap-server) "
        "or a stopped one's data dir (--data-dir).",
        epilog="Options go anywhere after the command; the resource, principal and operation options after the action.",
    )
    shared_options(p, add_target, _actions)
    return p


def _actions(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    for name, text in (
        ("list", "list the ACLs that match the filter (all without one)"),
        ("add", "add ACLs: each principal given, for each operation given (ALL without one), on one resource"),
        ("remove", "remove the ACLs that match the filter, and list them"),
    ):
        s = sub.add_parser(name, help=text, description=text)
        common(s)
        what = s.add_mutually_exclusive_group(required=name == "add")
        what.add_argument("--topic", metavar="TOPIC")
        what.add_argument("--group", metavar="GROUP")
        what.add_argument("--transactional-id", metavar="TRANSACTIONAL_ID")
        what.add_argument("--cluster", action="store_true")
        s.add_argument("--resource-pattern-type", choices=("literal", "prefixed", "any", "match"), default=None)
        if name == "add":
            s.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
            s.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
            s.add_argument("--host", default="*")
        else:
            s.add_argument("--principal")
            s.add_argument("--host")
        s.add_argument("--operation", action="append", default=[], type=str.upper, help="READ, WRITE, DESCRIBE, ALL, ... (repeatable)")


def _resource(args: argparse.Namespace) -> tuple[int, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _ops(args: argparse.Namespace, default: AclOperation) -> list[int]:
    try:
        return [AclOperation[o.replace("-", "_")] for o in args.operation] or [default]
    except KeyError as exc:
        raise CliError(f"unknown operation {exc.args[0]} (operations: {', '.join(o.name for o in AclOperation if o > 1)})", USAGE) from None


def _acls(args: argparse.Namespace) -> list[Acl]:
    rtype, name = _resource(args)
    pattern = PatternType[(args.resource_pattern_type or "literal").upper()]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CliError("an ACL's --resource-pattern-type is literal or prefixed", USAGE)
    if not args.allow_principal and not args.deny_principal:
        raise CliError("add needs --allow-principal or --deny-principal", USAGE)
    out = []
    for permission, principals in ((PermissionType.ALLOW, args.allow_principal), (PermissionType.DENY, args.deny_principal)):
        for principal in principals:
            for op in _ops(args, AclOperation.ALL):
                out.append(Acl(rtype, name or "", pattern, principal, args.host, op, permission))
    return out


def _filters(args: argparse.Namespace) -> list[AclFilter]:
    rtype, name = _resource(args)
    pattern = PatternType[(args.resource_pattern_type or ("literal" if name is not None else "any")).upper()]
    return [AclFilter(rtype, name, pattern, args.principal, args.host, op, PermissionType.ANY) for op in _ops(args, AclOperation.ANY)]


def _describe(acl: Acl) -> dict[str, str]:
    return {
        "resource_type": ResourceType(acl.resource_type).name,
        "name": acl.name,
        "pattern_type": PatternType(acl.pattern_type).name,
        "principal": acl.principal,
        "host": acl.host,
        "operation": AclOperation(acl.operation).name,
        "permission": PermissionType(acl.permission).name,
    }


def _print(acls: list[Acl], args: argparse.Namespace) -> int:
    rows = [_describe(a) for a in sorted(acls)]
    if args.output == "json":
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    if not rows:
        sys.stdout.write("no ACLs\n")
    for r in rows:
        sys.stdout.write(
            f"{r['permission']:5} {r['principal']} {r['operation']} from {r['host']} on {r['resource_type']}:{r['pattern_type']}:{r['name']}\n"
        )
    return 0


def _main(args: argparse.Namespace) -> int:
    if args.data_dir:
        from broker.security.acl_store import AclStore
        from broker.security.authorizer import StandardAuthorizer

        with locked_data_dir(args.data_dir) as d:
            store = AclStore(d, StandardAuthorizer())
            store.load()
            if args.action == "list":
                return _print([a for f in _filters(args) for a in store.describe(f)], args)
            if args.action == "add":
                acls = _acls(args)
                errors = [e for e in store.create(acls) if e]
                for e in errors:
                    sys.stderr.write(f"kaflet acls: {e}\n")
                return 1 if errors else 0
            removed = [a for error, acls in store.delete(_filters(args)) if error is None for a in acls]
            return _print(removed, args)
    return _on_broker(args)


def _on_broker(args: argparse.Namespace) -> int:
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourcePatternFilter
    from kafka.admin import ResourceType as KResourceType

    client = admin(args)
    try:
        if args.action == "add":
            acls = [
                ACL(
                    a.principal,
                    a.host,
                    ACLOperation(a.operation),
                    ACLPermissionType(a.permission),
                    ResourcePattern(KResourceType(a.resource_type), a.name, ACLResourcePatternType(a.pattern_type)),
                )
                for a in _acls(args)
            ]
            result = client.create_acls(acls)
            failed = result.get("failed", []) if isinstance(result, dict) else []
            for acl, error in failed:
                sys.stderr.write(f"kaflet acls: {acl}: {error}\n")
            return 1 if failed else 0
        filters = [
            ACLFilter(
                f.principal,
                f.host,
                ACLOperation(f.operation),
                ACLPermissionType(f.permission),
                ResourcePatternFilter(KResourceType(f.resource_type), f.name, ACLResourcePatternType(f.pattern_type)),
            )
            for f in _filters(args)
        ]
        found: list[Acl] = []
        if args.action == "list":
            for flt in filters:
                acls, error = client.describe_acls(flt)
                if error is not None and getattr(error, "errno", 0):
                    raise CliError(f"DescribeAcls: {error}")
                found += [_from_kafka(a) for a in acls]
            return _print(found, args)
        for _flt, matched, error in client.delete_acls(filters):
            if error is not None and getattr(error, "errno", 0):
                raise CliError(f"DeleteAcls: {error}")
            found += [_from_kafka(a) for a, _e in matched]
        return _print(found, args)
    finally:
        client.close()


def _from_kafka(a: object) -> Acl:
    p = a.resource_pattern  # type: ignore[attr-defined]
    return Acl(int(p.resource_type), p.resource_name, int(p.pattern_type), a.principal, a.host, int(a.operation), int(a.permission_type))  # type: ignore[attr-defined]


def main(argv: list[str]) -> int:
    """`kaflet acls ...` (argv[0] is "acls")."""
    return run(_main, parse(parser(), argv[1:]))
