"""The Go pieces of the test suite (tests/go/NAME/main.go), built on first use into the cache.

They are built in GOPATH mode against Debian's Go packages (`make apt-deps` installs golang-go and
golang-github-shopify-sarama-dev, i.e. Sarama 1.22 in /usr/share/gocode), so nothing is fetched;
the binary and Go's build cache live under $KAFLET_CACHE/go, outside the source tree, and a
binary is rebuilt when its source changes. A test that needs one and cannot have it fails with
the reason, never skips.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.jvm import cache_dir

ROOT = Path(__file__).resolve().parents[2]
GOPATH = Path("/usr/share/gocode")
SARAMA = GOPATH / "src" / "github.com" / "Shopify" / "sarama"


class GoUnavailable(RuntimeError):
    """A Go piece of the suite cannot be built here; the message says why and what to do."""


def binary(name: str) -> Path:
    """The built tests/go/`name` program (built now if its source changed since the last build)."""
    source = ROOT / "tests" / "go" / name / "main.go"
    go = shutil.which("go")
    if go is None:
        raise GoUnavailable("no `go` on PATH: run `make apt-deps` (Debian's golang-go)")
    if not SARAMA.is_dir():
        raise GoUnavailable(f"Sarama is not in {SARAMA}: run `make apt-deps` (golang-github-shopify-sarama-dev)")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out_dir = cache_dir() / "go"
    target = out_dir / f"{name}-{digest}"
    if target.exists():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOCACHE": str(out_dir / "build-cache"), "GOFLAGS": ""}
    partial = target.with_suffix(".partial")
    done = subprocess.run(
        [go, "build", "-o", str(partial), str(source)], cwd=source.parent, env=env, capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise GoUnavailable(f"`go build` of tests/go/{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    partial.rename(target)
    return target
