"""`kaflet configs`: the dynamic broker configs stored in a stopped broker's data dir
(`dynamic-broker-configs.json`), read and deleted without editing JSON by hand: the operator's way
back from a dynamic value that locks clients out.

    kaflet configs list --data-dir ./data
    kaflet configs delete max.connections --data-dir ./data       # from both levels
    kaflet configs delete --all --data-dir ./data

Settings given as flags can also win over stored values without deleting them:
`kaflet serve --flags-override-dynamic --max-connections 1000`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from broker.cli import shared_options
from broker.security.cli.target import USAGE, CliError, add_output, locked_data_dir, parse, run


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kaflet configs",
        description="Read and delete a stopped broker's stored dynamic broker configs.",
        epilog="Options go anywhere after the command.",
    )
    shared_options(p, _options, _actions)
    return p


def _options(p: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    p.add_argument("--data-dir", default=default(None), metavar="DATA_DIR", help="the stopped broker's data dir (required)")
    add_output(p, default)


def _actions(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    ls = sub.add_parser("list", help="list the stored values, the cluster-wide defaults and this broker's")
    common(ls)
    rm = sub.add_parser("delete", help="delete stored values by name, or all of them")
    common(rm)
    rm.add_argument("names", nargs="*", metavar="NAME", help="config names (e.g. max.connections)")
    rm.add_argument("--all", action="store_true", help="delete every stored dynamic broker config")
    rm.add_argument("--level", choices=("default", "node", "both"), default="both", help="cluster-wide default, this node's, or both")


def _main(args: argparse.Namespace) -> int:
    from broker.config.dynamic_configs import DEFAULT, FILE_NAME, NODE
    from broker.node.datadir import write_json

    with locked_data_dir(args.data_dir) as d:
        path = d / FILE_NAME
        stored = json.loads(path.read_text()) if path.exists() else {"version": 1, DEFAULT: {}, NODE: {}}
        levels = {level: dict(stored.get(level, {})) for level in (DEFAULT, NODE)}
        if args.action == "list":
            if args.output == "json":
                sys.stdout.write(json.dumps(levels, sort_keys=True) + "\n")
                return 0
            if not any(levels.values()):
                sys.stdout.write("no dynamic broker configs stored\n")
            for level, label in ((DEFAULT, "cluster default"), (NODE, "this broker")):
                for name, value in sorted(levels[level].items()):
                    sys.stdout.write(f"{label:15}  {name}={value}\n")
            return 0
        if not args.all and not args.names:
            raise CliError("delete needs config names or --all", USAGE)
        wanted = [DEFAULT, NODE] if args.level == "both" else [DEFAULT if args.level == "default" else NODE]
        removed = []
        for level in wanted:
            for name in list(levels[level]):
                if args.all or name in args.names:
                    removed.append((level, name, levels[level].pop(name)))
        missing = [n for n in args.names if not any(n == r[1] for r in removed)]
        if removed:
            write_json(path, {"version": 1, **levels})
        for level, name, value in removed:
            sys.stdout.write(f"deleted {name}={value} ({'cluster default' if level == DEFAULT else 'this broker'})\n")
        for name in missing:
            sys.stderr.write(f"kaflet configs: {name} is not stored\n")
        return 1 if missing else 0


def main(argv: list[str]) -> int:
    """`kaflet configs ...` (argv[0] is "configs")."""
    p = parser()
    args = parse(p, argv[1:])
    if args.data_dir is None:
        p.error("the following arguments are required: --data-dir")
    return run(_main, args)
