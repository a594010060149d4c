"""`kaflet topics list|describe|create|delete|alter-config` (what kafka-topics.sh and, for
alter-config, kafka-configs.sh --alter --entity-type topics do)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from broker.admin_cli import FAILED, OK
from broker.admin_cli.output import CommandError, Result, table


def add_actions(actions: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """The actions of `kaflet topics`; `common(p)` adds the options every action takes."""
    p = actions.add_parser("list", help="topic names, partitions and replication")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__consumer_offsets, ...)")
    p.set_defaults(run=list_topics)
    common(p)
    p = actions.add_parser("describe", help="partitions, leaders, replicas and ISR of topics, and the configs set on them")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to describe (default: all)")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics when describing all")
    p.set_defaults(run=describe_topics)
    common(p)
    p = actions.add_parser("create", help="create a topic")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--partitions", type=int, default=-1, help="partition count (default: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=int, default=-1, help="replication factor (default: the broker's)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")
    p.set_defaults(run=create_topic)
    common(p)
    p = actions.add_parser("alter-config", help="change a topic's configs (IncrementalAlterConfigs)")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set a config (repeatable)")
    p.add_argument("--delete", action="append", default=[], metavar="KEY", help="back to the default (repeatable)")
    p.add_argument("--append", action="append", default=[], metavar="KEY=VALUE", help="add to a list config, e.g. cleanup.policy=compact")
    p.add_argument("--subtract", action="append", default=[], metavar="KEY=VALUE", help="remove from a list config")
    p.add_argument("--validate-only", action="store_true", help="check the change without making it")
    p.set_defaults(run=alter_topic_config)
    common(p)
    p = actions.add_parser("delete", help="delete topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true", help="succeed for topics that do not exist")
    p.set_defaults(run=delete_topics)
    common(p)


def _error_name(code: int) -> str:
    from kafka.errors import for_code

    return str(for_code(code).message)


def _summaries(admin: Any, names: list[str] | None) -> list[dict[str, Any]]:
    described = admin.describe_topics(names)
    out = []
    for t in sorted(described, key=lambda t: t["name"] or ""):
        partitions = sorted(t["partitions"], key=lambda p: p["partition_index"])
        out.append(
            {
                "name": t["name"],
                "topic_id": t.get("topic_id"),
                "internal": bool(t.get("is_internal")),
                "error": _error_name(t["error_code"]) if t["error_code"] else None,
                "partitions": [
                    {
                        "partition": p["partition_index"],
                        "leader": p["leader_id"],
                        "replicas": list(p["replica_nodes"]),
                        "isr": list(p["isr_nodes"]),
                    }
                    for p in partitions
                ],
            }
        )
    return out


def list_topics(args: argparse.Namespace, admin: Any) -> Result:
    topics = [t for t in _summaries(admin, None) if not (args.exclude_internal and t["internal"])]
    rows = [
        {
            "name": t["name"],
            "partitions": len(t["partitions"]),
            "replication_factor": len(t["partitions"][0]["replicas"]) if t["partitions"] else 0,
            "internal": t["internal"],
        }
        for t in topics
    ]
    text = table(["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"], [list(r.values()) for r in rows])
    return Result({"topics": rows}, text)


def _topic_configs(admin: Any, names: list[str]) -> dict[str, dict[str, str]]:
    """topic -> the configs set on it (DescribeConfigs; source DYNAMIC_TOPIC_CONFIG), as kafka-topics.sh
    --describe shows them: not the broker's defaults."""
    from kafka.admin import ConfigResource, ConfigResourceType

    if not names:
        return {}
    answer = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in names])
    out: dict[str, dict[str, str]] = {}
    for name, configs in (answer.get("topic") or {}).items():
        out[name] = {
            key: entry["value"]
            for key, entry in sorted(configs.items())
            if isinstance(entry, dict) and entry.get("config_source") == "DYNAMIC_TOPIC_CONFIG" and entry.get("value") is not None
        }
    return out


def describe_topics(args: argparse.Namespace, admin: Any) -> Result:
    topics = _summaries(admin, args.topics or None)
    if not args.topics and args.exclude_internal:
        topics = [t for t in topics if not t["internal"]]
    errors = [f"Topic '{t['name']}': {t['error']}" for t in topics if t["error"]]
    configs = _topic_configs(admin, [t["name"] for t in topics if not t["error"]])
    blocks = []
    for t in topics:
        if t["error"]:
            continue
        t["configs"] = configs.get(t["name"], {})
        rf = len(t["partitions"][0]["replicas"]) if t["partitions"] else 0
        shown = ",".join(f"{k}={v}" for k, v in t["configs"].items())
        head = (
            f"Topic: {t['name']}\tTopicId: {t['topic_id']}\tPartitionCount: {len(t['partitions'])}\tReplicationFactor: {rf}"
            f"\tConfigs: {shown}"
        )
        rows = [[t["name"], p["partition"], p["leader"], p["replicas"], p["isr"]] for p in t["partitions"]]
        blocks.append(head + "\n" + table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"], rows))
    return Result({"topics": topics}, "\n\n".join(blocks), FAILED if errors else OK, errors)


def create_topic(args: argparse.Namespace, admin: Any) -> Result:
    configs: dict[str, str] = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"--config takes KEY=VALUE, got {item!r}", 2)
        configs[key] = value
    spec = {args.topic: {"num_partitions": args.partitions, "replication_factor": args.replication_factor, "configs": configs}}
    response = admin.create_topics(spec, raise_errors=False)
    [t] = response["topics"]
    code = t["error_code"]
    if code == 36 and args.if_not_exists:  # TOPIC_ALREADY_EXISTS
        return Result({"topic": args.topic, "created": False, "error": None}, f"Topic {args.topic} already exists.")
    if code:
        message = t.get("error_message") or _error_name(code)
        return Result({"topic": args.topic, "created": False, "error": _error_name(code), "message": message}, "", FAILED, [message])
    data = {
        "topic": t["name"],
        "created": True,
        "error": None,
        "topic_id": t.get("topic_id"),
        "partitions": t.get("num_partitions"),
        "replication_factor": t.get("replication_factor"),
    }
    return Result(data, f"Created topic {t['name']}.")


def delete_topics(args: argparse.Namespace, admin: Any) -> Result:
    response = admin.delete_topics(args.topics, raise_errors=False)
    results = []
    errors = []
    for t in response["topics"]:
        code = t["error_code"]
        missing = code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        error = None if not code or (missing and args.if_exists) else _error_name(code)
        results.append({"topic": t["name"], "deleted": not code, "error": error})
        if error:
            errors.append(f"Topic '{t['name']}': {t.get('error_message') or error}")
    rows = [[r["topic"], "deleted" if r["deleted"] else (r["error"] or "does not exist")] for r in results]
    return Result({"topics": results}, table(["TOPIC", "RESULT"], rows), FAILED if errors else OK, errors)


def _key_value(item: str, flag: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise CommandError(f"{flag} takes KEY=VALUE, got {item!r}", 2)
    return key, value


def alter_topic_config(args: argparse.Namespace, admin: Any) -> Result:
    from kafka.admin import ConfigResource, ConfigResourceType

    ops: dict[str, tuple[str, str | None]] = {}
    for flag, op in (("--set", "SET"), ("--append", "APPEND"), ("--subtract", "SUBTRACT")):
        for item in getattr(args, flag[2:]):
            key, value = _key_value(item, flag)
            ops[key] = (op, value)
    for key in args.delete:
        ops[key] = ("DELETE", None)
    if not ops:
        raise CommandError("give at least one of --set, --delete, --append, --subtract", 2)
    resource = ConfigResource(ConfigResourceType.TOPIC, args.topic, configs=ops)
    response = admin.alter_configs([resource], validate_only=args.validate_only, raise_on_unknown=False, incremental=True)
    outcome = next(iter(next(iter(response.values())).values()))
    # kafka-python reports a failed resource as "[Error 40] InvalidConfigurationError: <message>".
    failed = re.match(r"\[Error (-?\d+)\] \w+: ?(.*)", str(outcome), re.S) if outcome else None
    changes = {k: {"operation": op, "value": v} for k, (op, v) in ops.items()}
    if failed:
        code, message = int(failed.group(1)), failed.group(2) or _error_name(int(failed.group(1)))
        return Result({"topic": args.topic, "altered": False, "error": _error_name(code), "message": message}, "", FAILED, [message])
    verb = "Validated" if args.validate_only else "Altered"
    return Result(
        {"topic": args.topic, "altered": not args.validate_only, "error": None, "changes": changes},
        f"{verb} configs of topic {args.topic}.",
    )
