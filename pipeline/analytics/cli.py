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


def parser(prog: str = "python -m pipeline") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Consumer-group analytics on Spark, over the Kafka protocol.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in COMMANDS.items():
        c = sub.add_parser(name, help=text, description=text)
        c.add_argument("--out", required=True, help="directory of the Parquet tables (and the report)")
        if name == "report":
            continue
        c.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of kaflet or Kafka")
        c.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
        c.add_argument(
            "--client-config", action="append", default=[], metavar="KEY=VALUE", help="a librdkafka setting for every client (repeatable)"
        )
        if name in ("lag-history", "rebalance-timeline"):
            c.add_argument("--once", action="store_true", help="process what is there and exit (Spark's availableNow trigger)")
            c.add_argument("--interval", type=float, default=10.0, help="seconds between micro-batches when running (default 10)")
            c.add_argument("--checkpoint", help="checkpoint directory (default OUT/_checkpoints)")
        if name == "audit":
            c.add_argument("--source", required=True, help="the pipeline's input topics, comma-separated")
            c.add_argument("--output", required=True, help="the pipeline's output topics, comma-separated")
            c.add_argument(
                "--group", help="the pipeline's consumer group: bounds 'lost' by its commits, attributes duplicates to generations"
            )
    return p


def kaflet_main(argv: list[str]) -> int:
    """`kaflet pipeline COMMAND ...` (argv[0] is "pipeline")."""
    return main(argv[1:], prog="kaflet pipeline")


def main(argv: list[str] | None = None, spark: Any = None, prog: str = "python -m pipeline") -> int:
    """Run one command; `spark` (an existing session) is used as is and left running."""
    args = parser(prog).parse_args(argv)
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
        try:
            import pyspark  # noqa: F401
        except ImportError:
            print("kaflet pipeline needs the pipeline extra: pip install 'kaflet[pipeline]' (and a Java 17+ runtime)", file=sys.stderr)
            return 2
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
            frames = run_audit(spark, opts, split(args.source), split(args.output), args.group)
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
