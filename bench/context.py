"""What a benchmark gets (options, brokers to run against) and gives back (rows of figures)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench import wire
from bench.procs import Kaflet, Mock
from protocol.apis import ApiKey


@dataclass
class Target:
    """An issue's target: on the ratio (`ratio>=`), or on kaflet's absolute figure (`<=`, `>=`)."""

    kind: str
    value: float

    def met(self, row: Row) -> bool | None:
        if self.kind == "ratio>=":
            return None if row.ratio is None else row.ratio >= self.value
        if row.kaflet is None:
            return None
        return row.kaflet <= self.value if self.kind == "<=" else row.kaflet >= self.value

    def text(self, unit: str) -> str:
        if self.kind == "ratio>=":
            return f">= {self.value:g}x"
        return f"{self.kind} {fmt(self.value)} {unit}".strip()


@dataclass
class Row:
    """One figure: kaflet's value, the baseline's (the mock's unless said), ratio and target.

    The ratio is always "kaflet relative to the baseline, > 1 is better for kaflet":
    kaflet/baseline when higher is better, baseline/kaflet when lower is better.
    """

    name: str
    unit: str
    kaflet: float | None
    baseline: float | None = None
    higher_is_better: bool = True
    target: Target | None = None
    baseline_name: str = "mock"
    note: str = ""
    compare: bool = True  # False: side-by-side context (e.g. CPU used), no ratio

    @property
    def ratio(self) -> float | None:
        if not self.compare or not self.kaflet or not self.baseline:
            return None
        return self.kaflet / self.baseline if self.higher_is_better else self.baseline / self.kaflet

    @property
    def ratio_kind(self) -> str:
        return "k/b" if self.higher_is_better else "b/k"

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "kaflet": self.kaflet,
            "baseline": self.baseline,
            "baseline_name": self.baseline_name,
            "higher_is_better": self.higher_is_better,
            "ratio": self.ratio,
            "ratio_kind": f"kaflet/{self.baseline_name}" if self.higher_is_better else f"{self.baseline_name}/kaflet",
            "target": None if self.target is None else self.target.text(self.unit),
            "met": self.met,
            "note": self.note,
        }


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


@dataclass
class Context:
    quick: bool = False
    reps: int = 3
    duration: float = 3.0  # measured seconds of a timed load
    warmup: float = 1.0
    connections: int = 8
    depth: int = 16  # requests in flight per connection
    pace: float = 0.0005  # seconds the load generator sleeps between polls
    load_processes: int = 1
    rebalance_delay_ms: int = 0
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)  # extra figures for the JSON file
    say: Callable[[str], None] = print

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.say(f"  note: {text}")

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    @contextmanager
    def kaflet(self, *flags: str, data_dir: str | None = None) -> Iterator[Kaflet]:
        with Kaflet(*flags, data_dir=data_dir).start() as k:
            yield k

    @contextmanager
    def mock(self, rebalance_delay_ms: int | None = None, consumer_heartbeat_interval_ms: int | None = None) -> Iterator[Mock]:
        with Mock(rebalance_delay_ms, consumer_heartbeat_interval_ms).start() as m:
            if m.ready.get("note"):
                self.note(m.ready["note"])
            yield m

    def missing(self, target: Kaflet, needs: dict[ApiKey, int | None]) -> list[str]:
        """What kaflet does not serve yet among `needs`; noted when something is missing."""
        missing = wire.missing_apis(target.bootstrap, needs)
        if missing:
            self.note("kaflet: not served yet: " + ", ".join(missing))
        return missing

    def load(self, target: Any, rings: list[list[bytes]], **kw: Any) -> Any:
        """A timed pipelined load against `target` with this run's settings."""
        from bench.loadgen import run_load

        kw.setdefault("depth", self.depth)
        kw.setdefault("warmup", 0.3 if self.quick else self.warmup)
        kw.setdefault("duration", 0.5 if self.quick else self.duration)
        kw.setdefault("processes", self.load_processes)
        kw.setdefault("pace", self.pace)
        return run_load(target.bootstrap, rings, server_pid=target.pid, **kw)


def load_rows(label: str, kaflet: Sequence[Any], baseline: Sequence[Any], target: Target | None, baseline_name: str = "mock") -> list[Row]:
    """Rows for a request-rate load: rate (median of the repetitions), latency, and both sides' CPU."""

    def mid(runs: Sequence[Any], attr: str) -> float | None:
        values = [getattr(r, attr) for r in runs if getattr(r, attr) is not None]
        return median(values) if values else None

    b = baseline_name
    return [
        Row(f"{label} requests/s", "req/s", mid(kaflet, "rate"), mid(baseline, "rate"), target=target, baseline_name=b),
        Row(f"{label} latency p50", "ms", mid(kaflet, "p50_ms"), mid(baseline, "p50_ms"), higher_is_better=False, baseline_name=b),
        Row(f"{label} latency p99", "ms", mid(kaflet, "p99_ms"), mid(baseline, "p99_ms"), higher_is_better=False, baseline_name=b),
        Row(f"{label} broker CPU", "cores", mid(kaflet, "server_cpu"), mid(baseline, "server_cpu"), baseline_name=b, compare=False),
        Row(f"{label} load-generator CPU", "cores", mid(kaflet, "client_cpu"), mid(baseline, "client_cpu"), baseline_name=b, compare=False),
    ]
