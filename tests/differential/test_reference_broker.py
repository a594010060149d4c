"""The reference broker itself (tests/support/kafka_reference.py): Apache Kafka 4.4 starts within
30 s, serves every group protocol kaflet serves and runs its own tools; a session that needs it
and cannot have it fails with the reason; and a session ends it and removes its data even when
its tests fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from protocol.apis import ApiKey
from tests.support import jvm
from tests.support.jvm import JvmUnavailable
from tests.support.kafka_reference import KafkaReference
from tests.support.raw_client import RawClient
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
START_LIMIT_S = 30.0  # issue 22: on 2 cores


async def test_kafka_reference_serves_the_group_apis(kafka_reference: Any) -> None:
    assert kafka_reference.start_seconds < START_LIMIT_S, f"Kafka took {kafka_reference.start_seconds:.1f} s to start"
    client = await RawClient.connect(kafka_reference.bootstrap)
    try:
        resp = await client.request(ApiVersionsRequest[3](client_software_name="kaflet-tests", client_software_version="1"))
    finally:
        await client.close()
    assert resp.error_code == 0
    served = {k.api_key for k in resp.api_keys}
    for key in (ApiKey.JOIN_GROUP, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.INIT_PRODUCER_ID, ApiKey.END_TXN):
        assert key in served, f"Kafka does not advertise {key.name}"
    assert 76 in served and 88 in served, "share groups (ShareGroupHeartbeat 76) and streams groups (StreamsGroupHeartbeat 88) are enabled"


def test_kafka_tools_run_against_the_reference(kafka_reference: Any) -> None:
    out = subprocess.run(
        kafka_reference.java_command(
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", kafka_reference.bootstrap, "--list"
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]


# -- when Kafka cannot run ------------------------------------------------------------------------


@pytest.fixture
def no_jvm_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A KAFLET_CACHE where `make jvm` never ran (or Maven failed)."""
    cache = tmp_path / "cache"
    (cache / "jvm").mkdir(parents=True)
    monkeypatch.setenv("KAFLET_CACHE", str(cache))
    return cache


def test_without_make_jvm_the_reason_says_what_to_run(no_jvm_cache: Path, tmp_path: Path) -> None:
    with pytest.raises(JvmUnavailable, match=r"no classpath for kafka-broker: run `make jvm`"):
        KafkaReference(tmp_path / "k").start()


def test_a_maven_failure_is_the_reason(no_jvm_cache: Path, tmp_path: Path) -> None:
    (no_jvm_cache / "jvm" / "maven.error").write_text("[ERROR] Could not transfer artifact org.apache.kafka:kafka_2.13:pom:4.4.0\n")
    with pytest.raises(JvmUnavailable, match=r"(?s)Maven could not build.*Could not transfer artifact org.apache.kafka:kafka_2.13"):
        KafkaReference(tmp_path / "k").start()


def test_a_java_older_than_17_is_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jdk8"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'openjdk version \"1.8.0_392\"' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    jvm.java_binary.cache_clear()
    try:
        with pytest.raises(JvmUnavailable, match=r"is Java 8; Kafka 4.4 and the suite's JVM pieces need Java 17 or newer"):
            KafkaReference(tmp_path / "k").start()
    finally:
        jvm.java_binary.cache_clear()


def _inner_session(tmp_path: Path, test_source: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A pytest session of its own with tests/conftest.py's fixtures, running `test_source`."""
    test_file = tmp_path / "inner" / "test_inner.py"
    test_file.parent.mkdir(parents=True)
    test_file.write_text(test_source)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    cmd += ["--rootdir", str(test_file.parent), "--basetemp", str(tmp_path / "inner-tmp"), str(test_file)]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, timeout=300)


def test_a_session_that_cannot_have_kafka_fails_with_the_reason(no_jvm_cache: Path, tmp_path: Path) -> None:
    out = _inner_session(tmp_path, "def test_needs_kafka(kafka_reference):\n    pass\n", {"KAFLET_CACHE": str(no_jvm_cache)})
    assert out.returncode == 1, out.stdout[-3000:]
    assert "1 error" in out.stdout and "skipped" not in out.stdout, out.stdout[-3000:]
    assert "the reference broker (Apache Kafka 4.4) cannot run: no classpath for kafka-broker: run `make jvm`" in out.stdout


def test_kafka_is_stopped_and_its_data_removed_when_the_session_fails(tmp_path: Path) -> None:
    probe = tmp_path / "probe.json"
    source = (
        "import json, os\n"
        "def test_fails(kafka_reference):\n"
        "    data = kafka_reference.dir / 'data'\n"
        "    assert data.is_dir()\n"
        "    json.dump({'pid': kafka_reference.process.pid, 'data': str(data)}, open(os.environ['KAFLET_PROBE'], 'w'))\n"
        "    assert False, 'this test fails on purpose'\n"
    )
    out = _inner_session(tmp_path, source, {"KAFLET_PROBE": str(probe)})
    assert out.returncode == 1 and "1 failed" in out.stdout, out.stdout[-3000:]
    seen = json.loads(probe.read_text())
    assert not Path(seen["data"]).exists(), "Kafka's data dir outlived the session"

    def gone() -> bool:
        try:
            os.kill(seen["pid"], 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, timeout=10, message=f"Kafka (pid {seen['pid']}) to be gone after the session")
