"""`python -m pipeline COMMAND` (also `kaflet pipeline COMMAND`): the group analytics.

    lag-history         every commit with the group's lag then (streaming; --once: what is there)
    rebalance-timeline  every generation of every group (streaming; --once: what is there)
    audit               lost and duplicated records of a consume-transform-produce pipeline (batch)
    report              one HTML page with plots and tables from the Parquet outputs
    cluster start|stop|status  a Spark standalone cluster on this machine (pipeline/cluster.py)

Options go anywhere after `pipeline`, before or after the command (broker/cli.py's grammar).
Every analytics command writes under `--out DIR`; `report` reads there. Nothing reads the broker's disk,
only its wire, so `--master` can be any Spark master (local[*] by default), and `--connector`
either data source: the kaflet source or Spark's own Kafka connector.

Exit status: 0 done (one line says what was written), 1 the command failed (one line says why),
2 the pipeline extra or Java is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pipeline import cluster

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
        help="a Kafka client setting for every client, in the Java client's name or librdkafka's (repeatable)",
    )
    p.add_argument(
        "--connector",
        choices=["kaflet", "kafka"],
        default=default("kaflet"),
        help="the data source that reads the topics: kaflet's (default) or Spark's own Kafka connector",
    )


def parser(prog: str = "python -m pipeline") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Consumer-group analytics on Spark, over the Kafka protocol.",
        epilog="Options go anywhere after the command. `report` reads --out only; `cluster` its own options only.",
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
    text = "start, stop or check a Spark standalone cluster on this machine (master + workers via spark-class)"
    c = sub.add_parser("cluster", help=text, description=text)
    _options(c, suppress=True)
    cluster.add_arguments(c)
    return p


def kaflet_parser() -> argparse.ArgumentParser:
    return parser("kaflet pipeline")


def _check(p: argparse.ArgumentParser, args: argparse.Namespace, prog: str) -> None:
    """What argparse cannot check when options may come before the command."""
    if args.command == "cluster":  # its own options only
        return
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


def _missing_extra(modules: tuple[str, ...]) -> str | None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"needs the pipeline extra ({', '.join(missing)} not installed): pip install 'kaflet[pipeline]'"
    return None


def _table_rows(spark: Any, path: str) -> int:
    from pathlib import Path

    from pyspark.errors import AnalysisException

    if not Path(path).exists():
        return 0
    try:
        return spark.read.parquet(path).count()
    except AnalysisException:  # a file sink's directory before its first file: nothing yet
        return 0


def _run(spark: Any, opts: Any, args: argparse.Namespace) -> None:
    if args.command == "lag-history":
        from pipeline.analytics.lag import NAME, run_lag_history

        before = _table_rows(spark, opts.path(NAME))
        run_lag_history(spark, opts)
        after = _table_rows(spark, opts.path(NAME))
        print(f"lag-history: {after - before} commit(s) appended to {opts.path(NAME)} ({after} in all)")
    elif args.command == "rebalance-timeline":
        from pipeline.analytics.timeline import EVENTS, NAME, run_rebalance_timeline

        before = _table_rows(spark, opts.path(EVENTS))
        run_rebalance_timeline(spark, opts)
        events = _table_rows(spark, opts.path(EVENTS)) - before
        rows = spark.read.parquet(opts.path(NAME)).select("group", "generation").collect() if _table_rows(spark, opts.path(NAME)) else []
        groups = len({r.group for r in rows})
        print(f"rebalance-timeline: {len(rows)} generation(s) of {groups} group(s) in {opts.path(NAME)} ({events} new group record(s))")
    elif args.command == "audit":
        from pipeline.analytics.audit import run_audit

        split = lambda s: [t.strip() for t in s.split(",") if t.strip()]  # noqa: E731
        frames = run_audit(spark, opts, split(args.source_topics), split(args.output_topics), args.group)
        totals = frames["audit_by_partition"].groupBy().sum("lost", "duplicated", "extra_copies").collect()[0]
        print(f"audit: {totals[0] or 0} lost, {totals[1] or 0} duplicated ({totals[2] or 0} extra copies); tables audit_* in {args.out}")


def main(argv: list[str] | None = None, spark: Any = None, prog: str = "python -m pipeline") -> int:
    """Run one command; `spark` (an existing session) is used as is and left running."""
    p = parser(prog)
    args = p.parse_args(argv)
    if args.command == "cluster":
        return cluster.run(args, prog=f"{prog} cluster")
    _check(p, args, prog)
    if args.command == "report":
        why = _missing_extra(("pyarrow", "matplotlib"))
        if why:
            print(f"{prog} report: {why}", file=sys.stderr)
            return 2
        from pipeline.analytics.report import write_report

        print(write_report(args.out))
        return 0
    why = _missing_extra(("pyspark", "pyarrow", "confluent_kafka"))
    if why:
        print(f"{prog} {args.command}: {why} (and a Java 17+ runtime)", file=sys.stderr)
        return 2
    from pipeline.analytics.jobs import AnalyticsError, JobOptions, connector_settings

    opts = JobOptions(
        bootstrap=args.bootstrap_server,
        out=args.out,
        once=getattr(args, "once", False),
        interval_s=getattr(args, "interval", 10.0),
        checkpoint=getattr(args, "checkpoint", None),
        client_config=_client_config(args.client_config),
        connector=args.connector,
    )
    own = spark is None
    try:
        if own:
            import pipeline
            from pipeline.spark import SessionError

            conf = {}
            if opts.once or args.command == "audit":
                # A short job on a small machine: the JVM's quick compiler alone and the serial
                # collector start it in about half the time.
                conf["spark.driver.extraJavaOptions"] = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
            try:
                spark = pipeline.session(args.master, app_name=f"kaflet-{args.command}", conf=conf, connector=args.connector)
            except SessionError as exc:
                raise AnalyticsError(str(exc)) from None
            # The analytics' tables are small: a shuffle in as many pieces as there are cores, not
            # Spark's default 200 (each an empty task to schedule, several times per command).
            spark.conf.set("spark.sql.shuffle.partitions", str(max(2, spark.sparkContext.defaultParallelism)))
        with connector_settings(spark, opts):
            _run(spark, opts, args)
    except AnalyticsError as exc:
        print(f"{prog} {args.command}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        from pipeline.spark import explain

        text = explain(exc)
        if text is None:
            raise
        print(f"{prog} {args.command}: {text}", file=sys.stderr)
        return 1
    finally:
        if own and spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
