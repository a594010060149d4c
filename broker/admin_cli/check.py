"""`kaflet check DATA_DIR [--repair]`: CRC-check every segment and index of a data dir (storage/check.py).

Exit status, as fsck's: 0 nothing wrong; 1 problems found and all repaired (--repair);
2 usage error; 4 problems found and left as they are; 8 the data dir cannot be checked (missing,
or in use by a running broker, whose lock is held).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
from pathlib import Path

OK, REPAIRED, USAGE, UNCORRECTED, OPERATIONAL = 0, 1, 2, 4, 8


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kaflet check",
        description="CRC-check every segment and index of a stopped broker's data dir; --repair cuts corrupt batches out, "
        "truncates torn tails and rebuilds indexes. Exit status: 0 clean, 1 repaired, 2 usage, 4 problems left, 8 cannot check.",
    )
    p.add_argument("data_dir", metavar="DATA_DIR", help="the broker's --data-dir (the broker must be stopped)")
    p.add_argument("--repair", action="store_true", help="fix what is found (the data after a corrupt batch is kept)")
    p.add_argument(
        "--output", choices=("text", "json"), default="text", help="text lines (default), or one JSON object per problem and a summary"
    )
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the spelling of earlier versions: --output json
    return p


def main(argv: list[str]) -> int:
    """`kaflet check ...` (argv[0] is "check")."""
    args = parser().parse_args(argv[1:])
    if args.json:
        sys.stderr.write("kaflet check: --json is deprecated; use --output json\n")
        args.output = "json"
    args.json = args.output == "json"
    from storage.check import check_data_dir

    data_dir = Path(args.data_dir)
    if not (data_dir / "meta.properties").is_file():
        sys.stderr.write(f"kaflet check: {data_dir} is not a kaflet data dir (no meta.properties)\n")
        return OPERATIONAL
    lock = os.open(data_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.stderr.write(f"kaflet check: {data_dir} is in use by a running broker; stop it first\n")
            return OPERATIONAL

        def show(problem: object) -> None:
            if args.json:
                p = problem  # type: ignore[assignment]
                print(json.dumps({"file": str(p.file), "kind": p.kind, "position": p.position, "detail": p.detail, "repaired": p.repaired}))  # type: ignore[attr-defined]
            else:
                print(problem.line())  # type: ignore[attr-defined]

        report = check_data_dir(data_dir, repair=args.repair, on_problem=show)
    finally:
        os.close(lock)
    summary = {
        "partitions": report.partitions,
        "segments": report.segments,
        "batches": report.batches,
        "bytes": report.bytes,
        "problems": len(report.problems),
        "repaired": sum(p.repaired for p in report.problems),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"checked {summary['partitions']} partitions, {summary['segments']} segments, {summary['batches']} batches, "
            f"{summary['bytes']} bytes: {summary['problems']} problems, {summary['repaired']} repaired"
        )
    if report.clean:
        return OK
    return REPAIRED if report.all_repaired else UNCORRECTED
