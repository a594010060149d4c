"""The Java client driver (tests/jvm/client-driver): one JVM running many client scenarios.

Commands go to its stdin as JSON lines and answers come back tagged with the command's id, so
several commands run at once: a scenario's step goes to kaflet and to Kafka together, and waits
for both. An answer is `{"ok": true, "result": ...}` or `{"ok": false, "error": {"type": ...}}`,
where the type is the Java exception's simple name (what an application would catch).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tests.support.jvm import JvmUnavailable, classpath, java_binary

ARTIFACT = "client-driver"
MAIN = "dev.kaflet.tests.ClientDriver"

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
"""


class DriverError(RuntimeError):
    """The driver could not run a command at all (not a client error it reports as an outcome)."""


class JavaDriver:
    artifact, main = ARTIFACT, MAIN  # another JSON-lines driver module (share-clients) sets its own

    def __init__(self, work_dir: Path) -> None:
        self.dir = work_dir
        self.proc: subprocess.Popen[str] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._ready: Future[None] = Future()

    @property
    def log_file(self) -> Path:
        return self.dir / "client-driver.log"

    def start(self, timeout: float = 60.0) -> JavaDriver:
        cp = classpath(self.artifact)  # JvmUnavailable with the reason when make jvm could not build it
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "log4j2.properties"
        config.write_text(_LOG4J2.format(log=self.log_file))
        cmd = [
            java_binary(),
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={config}",
            "-cp",
            cp,
            self.main,
        ]
        stderr = open(self.dir / "client-driver.stderr", "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1)
        stderr.close()
        threading.Thread(target=self._pump, name="java-driver-answers", daemon=True).start()
        try:
            self._ready.result(timeout)
        except Exception as exc:
            self.stop()
            raise JvmUnavailable(f"the Java client driver did not start: {exc}: {self.log_tail()}") from None
        return self

    def _pump(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if answer.get("event") == "ready":
                self._ready.set_result(None)
                continue
            with self._lock:
                future = self._pending.pop(answer.get("id"), None)
            if future is not None:
                future.set_result(answer)
        exc = DriverError(f"the Java client driver exited ({proc.poll()}): {self.log_tail()}")
        if not self._ready.done():
            self._ready.set_exception(exc)
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(exc)

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for path in (self.dir / "client-driver.stderr", self.log_file):
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        return text

    def submit(self, op: str, **args: Any) -> Future[dict[str, Any]]:
        assert self.proc is not None and self.proc.stdin is not None
        future: Future[dict[str, Any]] = Future()
        cid = next(self._ids)
        with self._lock:
            self._pending[cid] = future
            self.proc.stdin.write(json.dumps({"id": cid, "op": op, **args}) + "\n")
            self.proc.stdin.flush()
        return future

    def call(self, op: str, timeout: float = 120.0, **args: Any) -> dict[str, Any]:
        """The whole answer: {"ok": True, "result": ...} or {"ok": False, "error": {...}}."""
        return self.submit(op, **args).result(timeout)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(timeout=10)
