"""The JSON log lines of a child process, kept and waited on: what `Broker.in_subprocess()` and the
benchmarks' child processes both need."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Any


class JsonLineTail:
    """Keeps a child's lines (`lines`) and their JSON objects (`records`; a line that is not a JSON
    object becomes `{"event": line}`) from a reader thread, and waits for a record matching a predicate."""

    name = "child"

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: list[str] = []
        self.records: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def _start_pump(self, stream: IO[bytes]) -> None:
        self.lines, self.records = [], []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                record = {"event": line}
            with self._cond:
                self.lines.append(line)
                self.records.append(record)
                self._cond.notify_all()
        stream.close()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0, after: int = 0) -> dict[str, Any]:
        """The first record (from index `after`) matching `predicate`, waiting up to `timeout` seconds;
        RuntimeError if the process exits first, TimeoutError at the deadline (both with the last lines)."""
        deadline = time.monotonic() + timeout
        seen = after
        with self._cond:
            while True:
                for record in self.records[seen:]:
                    if predicate(record):
                        return record
                seen = len(self.records)
                if self.proc is not None and self.proc.poll() is not None and seen == len(self.records):
                    raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n" + "\n".join(self.lines[-30:]))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.name}: no matching log line; last lines:\n" + "\n".join(self.lines[-30:]))
                self._cond.wait(min(remaining, 0.2))
