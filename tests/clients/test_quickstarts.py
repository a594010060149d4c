"""The quick starts for clients that are not Python, run as written against a broker process:
README's KafkaJS one (installed from npm into a temporary directory), and docs/clients.md's Java
client (docs/examples/java, compiled by `make jvm`), franz-go and Sarama (docs/examples/go/*,
built by `make go` with the modules their go.sum pins).

Each quick start produces to `greetings`, reads the record in the group `readers` and commits;
the test checks the printed value and then the group's committed offset with `kaflet groups lag`.
The Java and Go quick starts are files, and docs/clients.md shows each file whole (checked here),
so the code a reader copies is the code that ran.
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
from tests.support.jvm import JvmUnavailable, cache_dir, classpath, java_binary
from tests.test_readme import README, ROOT, SERVE_ADDRESS

EXAMPLES = ROOT / "docs" / "examples"
CLIENTS = ROOT / "docs" / "clients.md"
# Each quick start file, and the language of the docs/clients.md block that shows it whole.
SHOWN = {
    "java/src/main/java/QuickStart.java": "java",
    "go/franz/main.go": "go",
    "go/sarama/main.go": "go",
}


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


@pytest.mark.parametrize("path", sorted(SHOWN))
def test_the_clients_page_shows_the_quick_start_file_whole(path: str) -> None:
    code = (EXAMPLES / path).read_text()
    shown = CLIENTS.read_text()
    assert f"```{SHOWN[path]}\n{code}```\n" in shown, f"docs/clients.md's {SHOWN[path]} block differs from docs/examples/{path}"


def run_built(tmp_path: Path, cmd: list[str]) -> None:
    """A quick start built by make, given the broker's address as its argument (its default is 127.0.0.1:9092)."""
    with BrokerProcess(tmp_path / "data", "--offsets-partitions", "5") as broker:
        done = subprocess.run([*cmd, broker.bootstrap], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert done.stdout.splitlines() == ["hello"], done.stdout
        assert committed(broker.bootstrap) == 1


def go_binary(example: str) -> str:
    built = cache_dir() / "go" / f"{example}-quickstart"
    error = cache_dir() / "go" / f"{example}.error"
    if error.exists():
        pytest.fail(f"`make go` could not build docs/examples/go/{example}:\n{error.read_text()[-3000:]}", pytrace=False)
    if not built.exists():
        pytest.fail(f"no {built}: run `make go` (part of `make test`), which builds the Go quick starts", pytrace=False)
    return str(built)


def test_franz_go_quick_start(tmp_path: Path) -> None:
    run_built(tmp_path, [go_binary("franz")])


def test_sarama_quick_start(tmp_path: Path) -> None:
    run_built(tmp_path, [go_binary("sarama")])


def test_java_quick_start(tmp_path: Path) -> None:
    try:
        cmd = [java_binary(), "-cp", classpath("quickstart"), "QuickStart"]
    except JvmUnavailable as exc:
        pytest.fail(f"the Java quick start cannot run: {exc}", pytrace=False)
    run_built(tmp_path, cmd)
