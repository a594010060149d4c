"""report: one HTML page with PNG plots and the tables behind them, from the Parquet outputs.

Reads `lag_history`, `rebalance_timeline` and the `audit_*` tables under `--out` with pyarrow
(no Spark needed), draws with matplotlib's Agg backend (no display), and writes
`--out/report/index.html` beside `lag.png`, `rebalances.png` and `duplicates.png`. A table
that is not there (its command was not run) gets a line saying so instead of its section.
"""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MAX_ROWS = 500


def _read(out: Path, name: str) -> list[dict[str, Any]] | None:
    import pyarrow.dataset as ds

    path = out / name
    if not path.exists():
        return None
    try:
        table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table()
    except (OSError, ValueError):
        return None
    return table.to_pylist()


def _ts(value: Any) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return _ts(value).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, dict):
        if set(value) == {"topic", "partition"}:
            return f"{value['topic']}-{value['partition']}"
        return "{" + ", ".join(f"{k}: {_cell(v)}" for k, v in value.items()) + "}"
    return str(value)


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    shown = rows[:MAX_ROWS]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in columns) + "</tr>" for r in shown)
    more = f"<p>{len(rows) - MAX_ROWS} more rows in the Parquet table.</p>" if len(rows) > MAX_ROWS else ""
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>{more}"


def _time_axis(ax: Any) -> None:
    import matplotlib.dates as mdates

    # Ticks at whatever resolution the span needs (sub-second for a short run), never repeated labels.
    locator = mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=7)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC, show_offset=True))
    ax.set_xlabel("UTC")


def _wide(values: list[float]) -> bool:
    """A range wide enough for a log scale: the largest positive value over 100x the smallest."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) > 100 * min(positive)


def _plot_lag(rows: list[dict[str, Any]], path: Path) -> None:
    """One row of panels per group (small multiples, each with its own scale, so a small group is
    not a flat line under a big one): lag in records and in seconds, log-scaled where wide."""
    import matplotlib.pyplot as plt

    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_group[r["group"]].append(r)
    groups = sorted(by_group)
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 1.2 + 2.2 * len(groups)), squeeze=False)
    for (ax_records, ax_seconds), group in zip(axes, groups, strict=True):
        items = sorted(by_group[group], key=lambda r: (_ts(r["commit_time"]), r["offsets_offset"]))
        latest: dict[tuple[str, int], tuple[int, float]] = {}
        times, totals, worst = [], [], []
        for r in items:
            latest[(r["topic"], r["partition"])] = (r["lag_records"] or 0, r["lag_seconds"] or 0.0)
            times.append(_ts(r["commit_time"]))
            totals.append(sum(n for n, _ in latest.values()))
            worst.append(max(s for _, s in latest.values()))
        for ax, values, color, unit in ((ax_records, totals, "tab:blue", "records"), (ax_seconds, worst, "tab:orange", "s")):
            ax.step(times, values, where="post", color=color, marker="." if len(values) < 50 else None)
            if _wide(values):
                ax.set_yscale("symlog", linthresh=1)
                ax.set_ylabel(f"{unit} (log)")
            else:
                ax.set_ylabel(unit)
                ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            _time_axis(ax)
        ax_records.set_title(f"{group}: lag in records (all partitions)", fontsize="medium", loc="left")
        ax_seconds.set_title(f"{group}: lag in seconds (oldest unconsumed)", fontsize="medium", loc="left")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)


def _plot_timeline(rows: list[dict[str, Any]], path: Path) -> None:
    """One lane per group: generations as bars (red until stable, green once stable, gray empty),
    each labelled with its number inside the bar when it fits, else above or below it in turns,
    so neighbouring labels never overlap."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    lanes = sorted({(r["group"], r["incarnation"]) for r in rows})
    fig, ax = plt.subplots(figsize=(12, 1.5 + 0.9 * len(lanes)))
    last = max((_ts(r[c]) for r in rows for c in ("start_time", "stable_time", "end_time") if r.get(c)), default=None)
    first = min((_ts(r["start_time"]) for r in rows if r.get("start_time")), default=None)
    span = (mdates.date2num(last) - mdates.date2num(first)) if first and last else 0.0
    for y, lane in enumerate(lanes):
        gens = sorted((r for r in rows if (r["group"], r["incarnation"]) == lane), key=lambda r: r["generation"])
        turn = 0
        last_label = [float("-inf"), float("-inf")]  # x of the last label above / below the bar
        for r in gens:
            start = _ts(r["start_time"])
            stable = _ts(r["stable_time"])
            end = _ts(r["end_time"]) or last
            if start is None or end is None:
                continue
            x0, x1 = mdates.date2num(start), mdates.date2num(end)
            if stable is not None:
                xs = mdates.date2num(stable)
                ax.barh(y, xs - x0, left=x0, color="tab:red", height=0.5, edgecolor="white", linewidth=0.5)
                ax.barh(y, x1 - xs, left=xs, color="tab:green", height=0.5, edgecolor="white", linewidth=0.5)
            else:
                ax.barh(y, x1 - x0, left=x0, color="lightgray", height=0.5, edgecolor="white", linewidth=0.5)
            label = str(r["generation"])
            width = span * 0.012 * (len(label) + 1)  # a label's width in days, at this figure's size
            if span and (x1 - x0) > width:
                color = "black" if stable is None else "white"
                ax.text((x0 + x1) / 2, y, label, fontsize="small", ha="center", va="center", color=color, fontweight="bold")
            else:  # too narrow: above and below the bar in turns, with a tick to its start
                side = turn % 2
                if span and x0 - last_label[side] < width:
                    continue  # would overlap its neighbour on that side: the table below has every generation
                last_label[side] = x0
                dy = 0.42 if side == 0 else -0.42
                turn += 1
                ax.annotate(
                    label,
                    (x0, y + dy / 1.7),
                    xytext=(x0, y + dy),
                    fontsize="x-small",
                    ha="center",
                    va="center",
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4"},
                )
    ax.set_yticks(range(len(lanes)), [g if inc == 0 else f"{g} ({inc})" for g, inc in lanes])
    ax.set_ylim(-0.8, len(lanes) - 0.2)
    ax.xaxis_date()
    _time_axis(ax)
    ax.set_title("Generations: red = not stable yet (sync or reconciliation), green = stable, gray = empty", fontsize="medium")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)


def _plot_duplicates(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    labels = ["?" if r["generation"] is None else str(r["generation"]) for r in rows]
    x = list(range(len(rows)))
    ax.bar([i - 0.2 for i in x], [r["duplicated"] for r in rows], width=0.4, color="tab:blue", label="source records duplicated")
    ax.bar([i + 0.2 for i in x], [r["extra_copies"] for r in rows], width=0.4, color="tab:orange", label="extra copies")
    ax.set_xticks(x, labels)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("generation in force when the copy was written")
    ax.set_ylabel("records")
    ax.set_title("Duplicates per rebalance")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)


_STYLE = """body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:small}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}img{max-width:100%}"""


def write_report(out: str | Path) -> Path:
    """Render the report from the Parquet tables in `out`; returns the HTML file's path."""
    import matplotlib

    matplotlib.use("Agg")
    out = Path(out)
    target = out / "report"
    target.mkdir(parents=True, exist_ok=True)
    parts = [
        "<!doctype html>",
        "<html><head><meta charset='utf-8'><title>kaflet group analytics</title>",
        f"<style>{_STYLE}</style></head><body>",
    ]
    parts.append(f"<h1>Consumer group analytics</h1><p>From {html.escape(str(out))}, {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC.</p>")

    lag = _read(out, "lag_history")
    parts.append("<h2>Lag history</h2>")
    if lag:
        _plot_lag(lag, target / "lag.png")
        parts.append("<img src='lag.png' alt='lag per group over time'>")
        latest: dict[tuple[str, str, int], dict[str, Any]] = {}
        peak: dict[tuple[str, str, int], tuple[int, float]] = {}
        for r in sorted(lag, key=lambda r: (_ts(r["commit_time"]), r["offsets_offset"])):
            k = (r["group"], r["topic"], r["partition"])
            latest[k] = r
            n, s = peak.get(k, (0, 0.0))
            peak[k] = (max(n, r["lag_records"] or 0), max(s, r["lag_seconds"] or 0.0))
        summary = [
            {
                **latest[k],
                "commits": sum(1 for r in lag if (r["group"], r["topic"], r["partition"]) == k),
                "max_lag_records": peak[k][0],
                "max_lag_seconds": peak[k][1],
            }
            for k in sorted(latest)
        ]
        parts.append("<h3>Per partition (the last commit)</h3>")
        parts.append(
            _table(
                summary,
                [
                    "group",
                    "topic",
                    "partition",
                    "commits",
                    "commit_time",
                    "committed_offset",
                    "log_end_offset",
                    "lag_records",
                    "lag_seconds",
                    "max_lag_records",
                    "max_lag_seconds",
                ],
            )
        )
        parts.append("<h3>Every commit</h3>")
        rows = sorted(lag, key=lambda r: (r["group"], _ts(r["commit_time"]), r["topic"], r["partition"]))
        parts.append(
            _table(
                rows,
                [
                    "group",
                    "topic",
                    "partition",
                    "commit_time",
                    "committed_offset",
                    "log_end_offset",
                    "lag_records",
                    "oldest_unconsumed_time",
                    "lag_seconds",
                ],
            )
        )
    else:
        parts.append("<p>No lag_history table: run <code>lag-history</code> first.</p>")

    timeline = _read(out, "rebalance_timeline")
    parts.append("<h2>Rebalance timeline</h2>")
    if timeline:
        _plot_timeline(timeline, target / "rebalances.png")
        parts.append("<img src='rebalances.png' alt='rebalances on a timeline'>")
        for r in timeline:
            r["member_clients"] = [f"{m['client_id']} ({m['member_id']})" for m in r["members"] or []]
            r["assignment"] = [f"{m['client_id']}: " + " ".join(_cell(tp) for tp in m["assignment"] or []) for m in r["members"] or []]
        rows = sorted(timeline, key=lambda r: (r["group"], r["incarnation"], r["generation"]))
        parts.append(
            _table(
                rows,
                [
                    "group",
                    "incarnation",
                    "generation",
                    "state",
                    "start_time",
                    "stable_time",
                    "end_time",
                    "sync_ms",
                    "not_stable_ms",
                    "since_previous_stable_ms",
                    "protocol",
                    "leader",
                    "member_clients",
                    "joined",
                    "left",
                    "assignment",
                ],
            )
        )
    else:
        parts.append("<p>No rebalance_timeline table: run <code>rebalance-timeline</code> first.</p>")

    by_gen = _read(out, "audit_by_generation")
    parts.append("<h2>Delivery audit</h2>")
    if by_gen is not None:
        by_gen.sort(key=lambda r: (r["generation"] is None, r["generation"] or 0))
        _plot_duplicates(by_gen, target / "duplicates.png")
        parts.append("<img src='duplicates.png' alt='duplicates per rebalance'>")
        parts.append("<h3>Duplicates per generation</h3>")
        parts.append(_table(by_gen, ["group", "generation", "generation_start", "duplicated", "extra_copies"]))
        for name, title, columns in (
            (
                "audit_by_partition",
                "Per source partition",
                [
                    "source_topic",
                    "source_partition",
                    "source_records",
                    "processed_records",
                    "output_records",
                    "lost",
                    "duplicated",
                    "extra_copies",
                    "unattributed",
                ],
            ),
            ("audit_lost", "Lost records", ["source_topic", "source_partition", "source_offset", "source_time"]),
            (
                "audit_duplicates",
                "Extra copies",
                [
                    "source_topic",
                    "source_partition",
                    "source_offset",
                    "source_index",
                    "copies",
                    "copy",
                    "first_output_time",
                    "duplicate_output_time",
                    "generation",
                ],
            ),
        ):
            rows = _read(out, name) or []
            rows.sort(key=lambda r: tuple((r.get(c) is None, r.get(c) if r.get(c) is not None else 0) for c in columns[:3]))
            parts.append(f"<h3>{title}</h3>")
            parts.append(_table(rows, columns))
    else:
        parts.append("<p>No audit tables: run <code>audit</code> first.</p>")
    parts.append("</body></html>")
    page = target / "index.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
