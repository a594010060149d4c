"""README's quick starts for clients that are not Python, run as written against a broker process:
KafkaJS (installed from npm into a temporary directory) and Sarama (Debian's Go packages).

Each quick start produces to `greetings`, reads the record in the group `readers` and commits;
the test checks the printed value and then the group's committed offset with `kaflet groups lag`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from broker.embed import BrokerProcess
from tests.support.jvm import cache_dir
from tests.test_readme import README, SERVE_ADDRESS

SARAMA_SRC = Path("/usr/share/gocode/src/github.com/Shopify/sarama")


def block(language: str) -> str:
    text = README.read_text()
    start = text.index(f"```{language}\n") + len(f"```{language}\n")
    return text[start : text.index("```", start)]


def committed(bootstrap: str, group: str = "readers") -> int | None:
    cmd = [sys.executable, "-m", "broker", "groups", "lag", group, "--bootstrap-server", bootstrap, "--output", "json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    [partition] = json.loads(done.stdout)["groups"][0]["partitions"]
    return partition["committed"]  # type: ignore[no-any-return]


def run_quick_start(tmp_path: Path, cmd: list[str], env: dict[str, str] | None = None) -> None:
    with BrokerProcess(tmp_path / "data", "--offsets-partitions", "5") as broker:
        source = tmp_path / cmd[-1]
        source.write_text(source.read_text().replace(SERVE_ADDRESS, broker.bootstrap))
        if cmd[0] == "go":
            subprocess.run(
                ["go", "build", "-o", "quickstart", cmd[-1]], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300
            )
            cmd = ["./quickstart"]
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "ERROR" not in done.stdout, done.stdout
        assert "hello" in done.stdout.splitlines(), done.stdout  # KafkaJS logs its own lines to stdout too
        assert committed(broker.bootstrap) == 1


def test_kafkajs_quick_start(tmp_path: Path) -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm or node is not installed: the KafkaJS quick start is not checked on this machine")
    install = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "kafkajs@2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    (tmp_path / "quickstart.js").write_text(block("js"))
    run_quick_start(tmp_path, ["node", "quickstart.js"], env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"})


def test_sarama_quick_start(tmp_path: Path) -> None:
    if shutil.which("go") is None or not SARAMA_SRC.is_dir():
        pytest.skip("go or Debian's golang-github-shopify-sarama-dev is not installed: the Sarama quick start is not checked here")
    (tmp_path / "main.go").write_text(block("go"))
    # Go's build cache outside the tree, kept between runs: building Sarama from source is most of this test.
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "GOCACHE": str(cache_dir() / "go-build"), "GOFLAGS": ""}
    run_quick_start(tmp_path, ["go", "main.go"], env=env)
