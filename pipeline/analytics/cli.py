"""`python -m pipeline COMMAND` (also `kaflet pipeline COMMAND`): the group analytics.

    lag-history         every commit with the group's lag then (streaming; --once: what is there)
    rebalance-timeline  every generation of every group (streaming; --once: what is there)
    audit               lost and duplicated records of a consume-transform-produce pipeline (batch)
    report              one HTML page with plots and tables from the Parquet outputs
    cluster start|stop  a Spark standalone cluster on this machine (pipeline/cluster.py)

Every command writes under `--out DIR`; `report` reads there. Nothing reads the broker's disk,
only its wire, so `--master` can be any Spark master (local[*] by default), and `--connector`
either data source: the kaflet source or Spark's own Kafka connector.

Exit status: 0 done (one line says what was written), 1 the command failed (one line says why),
2 the pipeline extra or Java is missing.
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
            "--client-config",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a Kafka client setting for every client, in the Java client's name or librdkafka's (repeatable)",
        )
        c.add_argument(
            "--connector",
            choices=["kaflet", "kafka"],
            default="kaflet",
            help="the data source that reads the topics: kaflet's (default) or Spark's own Kafka connector",
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
    # Listed for --help; `main` hands `cluster ...` to pipeline.cluster before parsing.
    sub.add_parser("cluster", help="start|stop|status a Spark standalone cluster on this machine (master + workers via spark-class)")
    return p


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
        frames = run_audit(spark, opts, split(args.source), split(args.output), args.group)
        totals = frames["audit_by_partition"].groupBy().sum("lost", "duplicated", "extra_copies").collect()[0]
        print(f"audit: {totals[0] or 0} lost, {totals[1] or 0} duplicated ({totals[2] or 0} extra copies); tables audit_* in {args.out}")


def main(argv: list[str] | None = None, spark: Any = None, prog: str = "python -m pipeline") -> int:
    """Run one command; `spark` (an existing session) is used as is and left running."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cluster"]:
        from pipeline.cluster import main as cluster_main

        return cluster_main(argv[1:], prog=f"{prog} cluster")
    args = parser(prog).parse_args(argv)
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
