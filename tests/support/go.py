"""The Go pieces of the test suite (tests/go/NAME: main.go with its go.mod and go.sum), built on
first use into the cache.

Each is a Go module whose dependencies come from the Go module proxy, pinned by its go.sum
(tests/go/sarama_produce: Sarama v1.22.1). The binary and Go's build cache live under
$KAFLET_CACHE/go and the module cache is Go's own (~/go/pkg/mod, GOMODCACHE), all outside the
source tree; a binary is rebuilt when its sources change. A test that needs one and cannot have
it fails with the reason (no `go`: `make go` installs Debian's golang-go), never skips.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.jvm import cache_dir

ROOT = Path(__file__).resolve().parents[2]


class GoUnavailable(RuntimeError):
    """A Go piece of the suite cannot be built here; the message says why and what to do."""


def binary(name: str) -> Path:
    """The built tests/go/`name` program (built now if its sources changed since the last build)."""
    source = ROOT / "tests" / "go" / name
    go = shutil.which("go")
    if go is None:
        raise GoUnavailable("no `go` on PATH: `make go` installs Debian's golang-go")
    digest = hashlib.sha256(b"".join((source / f).read_bytes() for f in ("main.go", "go.mod", "go.sum"))).hexdigest()[:16]
    out_dir = cache_dir() / "go"
    target = out_dir / f"{name}-{digest}"
    if target.exists():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GO111MODULE": "on", "GOFLAGS": "-mod=readonly", "GOCACHE": str(out_dir / "build-cache")}
    partial = target.with_suffix(".partial")
    done = subprocess.run([go, "build", "-o", str(partial), "."], cwd=source, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        version = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
        raise GoUnavailable(f"`go build` of tests/go/{name} failed ({done.returncode}, {version}):\n{done.stderr[-3000:]}")
    partial.rename(target)
    return target
