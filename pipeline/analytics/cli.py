"""`python -m pipeline COMMAND` (also `kaflet pipeline COMMAND`): the group analytics.

    lag-history         every commit with the group's lag then (streaming; --once: what is there)
    rebalance-timeline  every generation of every group (streaming; --once: what is there)
    audit               lost and duplicated records of a consume-transform-produce pipeline (batch)
    report              one HTML page with plots and tables from the Parquet outputs

Every command writes under `--out DIR`; `report` reads there. Nothing reads the broker's disk,
only its wire, so `--master` can be any Spark master (local[*] by default).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

COMMANDS = {
    "lag-history": "every offset commit with the lag in records and seconds at that moment (streaming)",
    "rebalance-timeline": "every generation of every group: start, members, assignment, time not stable (streaming)",
    "audit": "source records a consume-transform-produce pipeline lost or duplicated, per partition and generation",
    "report": "one HTML page with PNG plots and the tables behind them, from the Parquet outputs",
}


def _client_config(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--client-config {pair!r}: expected KEY=VALUE")
        out[key] = value
    return out


DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _options(p: argparse.ArgumentParser, suppress: bool) -> None:
    """The options of every command, taken anywhere after `kaflet pipeline` (before or after the
    command): on the top parser with their defaults, on each command's with SUPPRESS, so that a
    value given first is not overwritten by the command's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    p.add_argument("--out", default=default(None), help="directory of the Parquet tables (and the report); required")
    p.add_argument(
        "--bootstrap-server",
        default=default(os.environ.get("KAFLET_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP)),
        metavar="HOST:PORT[,...]",
        help=f"kaflet or Kafka [env KAFLET_BOOTSTRAP_SERVER; default {DEFAULT_BOOTSTRAP}]",
    )
    p.add_argument("--master", default=default("local[*]"), help="Spark master (default local[*])")
    p.add_argument(
        "--client-config",
        action="append",
        default=default([]),
        metavar="KEY=VALUE",
        help="a librdkafka setting for every client (repeatable)",
    )


def parser(prog: str = "python -m pipeline") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Consumer-group analytics on Spark, over the Kafka protocol.",
        epilog="Options go anywhere after the command. `report` reads --out only.",
    )
    _options(p, suppress=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in COMMANDS.items():
        c = sub.add_parser(name, help=text, description=text)
        _options(c, suppress=True)
        if name in ("lag-history", "rebalance-timeline"):
            c.add_argument("--once", action="store_true", help="process what is there and exit (Spark's availableNow trigger)")
            c.add_argument("--interval", type=float, default=10.0, help="seconds between micro-batches when running (default 10)")
            c.add_argument("--checkpoint", help="checkpoint directory (default OUT/_checkpoints)")
        if name == "audit":
            c.add_argument("--source-topics", metavar="TOPICS", help="the pipeline's input topics, comma-separated (required)")
            c.add_argument("--output-topics", metavar="TOPICS", help="the pipeline's output topics, comma-separated (required)")
            c.add_argument("--source", dest="source_option", help=argparse.SUPPRESS)  # the spellings of earlier versions
            c.add_argument("--output", dest="output_option", help=argparse.SUPPRESS)
            c.add_argument(
                "--group", help="the pipeline's consumer group: bounds 'lost' by its commits, attributes duplicates to generations"
            )
    return p


def kaflet_parser() -> argparse.ArgumentParser:
    return parser("kaflet pipeline")


def _check(p: argparse.ArgumentParser, args: argparse.Namespace, prog: str) -> None:
    if args.out is None:
        p.error("the following arguments are required: --out")
    if args.command != "audit":
        return
    for old, new in (("source", "source_topics"), ("output", "output_topics")):
        given = getattr(args, f"{old}_option")
        if given is not None:
            print(f"{prog} audit: --{old} is deprecated; use --{new.replace('_', '-')}", file=sys.stderr)
            if getattr(args, new) is None:
                setattr(args, new, given)
        if getattr(args, new) is None:
            p.error(f"audit: the following arguments are required: --{new.replace('_', '-')}")


def kaflet_main(argv: list[str]) -> int:
    """`kaflet pipeline COMMAND ...` (argv[0] is "pipeline")."""
    return main(argv[1:], prog="kaflet pipeline")


EXTRA_HINT = "needs the pipeline extra: pip install 'kaflet[pipeline]' (and a Java 17+ runtime for Spark)"


def _missing(modules: tuple[str, ...]) -> str | None:
    """The first of `modules` that cannot be imported (the pipeline extra is optional)."""
    import importlib.util

    return next((m for m in modules if importlib.util.find_spec(m) is None), None)


def main(argv: list[str] | None = None, spark: Any = None, prog: str = "python -m pipeline") -> int:
    """Run one command; `spark` (an existing session) is used as is and left running."""
    p = parser(prog)
    args = p.parse_args(argv)
    _check(p, args, prog)
    missing = _missing(("pyarrow", "matplotlib") if args.command == "report" else ("pyspark",) if spark is None else ())
    if missing:
        print(f"{prog} {args.command} {EXTRA_HINT} ({missing} is missing)", file=sys.stderr)
        return 2
    if args.command == "report":
        from pipeline.analytics.report import write_report

        print(write_report(args.out))
        return 0
    from pipeline.analytics.jobs import AnalyticsError, JobOptions

    opts = JobOptions(
        bootstrap=args.bootstrap_server,
        out=args.out,
        once=getattr(args, "once", False),
        interval_s=getattr(args, "interval", 10.0),
        checkpoint=getattr(args, "checkpoint", None),
        client_config=_client_config(args.client_config),
    )
    own = spark is None
    if own:
        import pipeline

        spark = pipeline.session(args.master, app_name=f"kaflet-{args.command}")
    try:
        if args.command == "lag-history":
            from pipeline.analytics.lag import run_lag_history

            run_lag_history(spark, opts)
        elif args.command == "rebalance-timeline":
            from pipeline.analytics.timeline import run_rebalance_timeline

            run_rebalance_timeline(spark, opts)
        elif args.command == "audit":
            from pipeline.analytics.audit import run_audit

            split = lambda s: [t.strip() for t in s.split(",") if t.strip()]  # noqa: E731
            frames = run_audit(spark, opts, split(args.source_topics), split(args.output_topics), args.group)
            for row in frames["audit_by_partition"].collect():
                print(row.asDict())
    except AnalyticsError as exc:
        print(f"{prog} {args.command}: {exc}", file=sys.stderr)
        return 1
    finally:
        if own:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
