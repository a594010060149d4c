"""A `kaflet serve` child process (`Broker.in_subprocess()`): started until its ready line,
stopped by signal, killable, restartable on the same data dir."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from broker.embed.log_tail import JsonLineTail


class BrokerProcess(JsonLineTail):
    """`with BrokerProcess() as b:` runs `python -m broker serve` until the block ends.

    Defaults: listen port 0 and metrics port 0 (free ones; `bootstrap` and `metrics` say which),
    JSON logs on stderr (kept in `lines` and `records`), and without `data_dir` a temporary data
    dir removed when the object is closed. `args` are more `kaflet serve` flags; `env` adds
    environment variables (KAFLET_* twins).
    """

    name = "broker"

    def __init__(self, data_dir: str | Path | None = None, *args: str, env: dict[str, str] | None = None) -> None:
        self._temp_dir: str | None = None
        if data_dir is None:
            self._temp_dir = tempfile.mkdtemp(prefix="kaflet-")
            data_dir = self._temp_dir
        self.data_dir = str(data_dir)
        self.args = list(args)
        self.env = env
        super().__init__()
        self.bootstrap = ""
        self.port = 0
        self.metrics: str | None = None  # host:port of the metrics endpoint, from the ready line

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "broker", "serve", "--data-dir", self.data_dir, "--log-format", "json"]
        if "--port" not in self.args:
            cmd += ["--port", "0"]
        if not any(a.startswith(("--metrics", "--no-metrics")) for a in self.args):
            cmd += ["--metrics-port", "0"]
        return cmd + self.args

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        env = dict(os.environ)
        env.update(self.env or {})
        return self.start_command(self.command(), env, timeout=timeout)

    def start_command(self, cmd: list[str], env: dict[str, str], cwd: str | Path | None = None, timeout: float = 20.0) -> BrokerProcess:
        """Run a broker command line of one's own (e.g. an installed `kaflet serve`) until its ready line."""
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
        assert self.proc.stderr is not None
        self._start_pump(self.proc.stderr)
        try:
            ready = self.wait_for(lambda r: r.get("event") == "broker ready", timeout)
        except TimeoutError:
            self.kill()
            raise
        self.bootstrap = ready["bootstrap"]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        self.metrics = ready.get("metrics")
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal the broker (SIGTERM: a graceful stop) and return its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        """SIGKILL: no shutdown at all (what a crash test wants)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def restart(self, timeout: float = 20.0) -> BrokerProcess:
        self.stop()
        return self.start(timeout)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """Stop the broker if it runs and remove a temporary data dir."""
        if self.alive:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                pass
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
