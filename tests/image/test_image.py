"""The container image, built and run by a local Docker daemon: `make test-image` (never part of
`make test`, which must not need a daemon). KAFLET_TEST_IMAGE names the image to check; the
make target builds it from docker/Dockerfile first.

The container runs on the host's network (a daemon without a bridge has no port mapping), on free
ports, with a named volume for its data: it must get healthy, run as its non-root user on the
compiled path, serve produce, consume, a classic and a KIP-848 group, and keep records and
committed offsets across `docker restart`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_until

IMAGE = os.environ.get("KAFLET_TEST_IMAGE", "kaflet:test")
# A container is a copy of the image on daemons without copy-on-write (vfs): slow on a busy machine.
pytestmark = pytest.mark.timeout(900)
ROOT = Path(__file__).resolve().parents[2]


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, f"docker {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


LABEL = "kaflet-test-image=1"  # on every container these tests start, so that none is left behind


@pytest.fixture(scope="module", autouse=True)
def image() -> Iterator[str]:
    assert shutil.which("docker"), "make test-image needs the docker command and a running daemon"
    assert docker("info", check=False).returncode == 0, "make test-image needs a running Docker daemon (docker info failed)"
    assert docker("image", "inspect", IMAGE, check=False).returncode == 0, f"no image {IMAGE}: make test-image builds it"
    yield IMAGE
    left = docker("ps", "-aq", "--filter", f"label={LABEL}", check=False).stdout.split()
    if left:  # a `docker run --rm` cut short by a timeout leaves its container (and anonymous volume)
        docker("rm", "-f", "-v", *left, check=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_image_runs_the_compiled_path_as_its_own_user() -> None:
    assert docker("run", "--rm", "--label", LABEL, IMAGE, "--version").stdout == f"kaflet {version('kaflet')} (compiled)\n"
    assert (
        docker("run", "--rm", "--label", LABEL, "--entrypoint", "id", IMAGE).stdout.strip()
        == "uid=10001(kaflet) gid=10001(kaflet) groups=10001(kaflet)"
    )


# Run in one container (a container costs a copy of the image on daemons without copy-on-write):
# each command's --help, and a pipeline job, which without the pipeline extra must say what to install.
IN_THE_IMAGE = """
import json, subprocess, sys
out = {}
for argv in json.loads(sys.argv[1]):
    done = subprocess.run(["kaflet", *argv], capture_output=True, text=True)
    out[" ".join(argv)] = [done.returncode, done.stdout, done.stderr]
print(json.dumps(out))
"""


def test_every_command_of_kaflet_answers_its_help_in_the_image() -> None:
    from broker.cli import COMMANDS

    runs = [[c.name, "--help"] for c in COMMANDS] + [["pipeline", "report", "--out", "/tmp/x"]]
    done = docker("run", "--rm", "--label", LABEL, "--entrypoint", "python", IMAGE, "-c", IN_THE_IMAGE, json.dumps(runs), timeout=300)
    results = json.loads(done.stdout)
    for command in COMMANDS:
        code, stdout, stderr = results[f"{command.name} --help"]
        assert code == 0 and f"kaflet {command.name}" in stdout, (command.name, stdout, stderr)
    code, _, stderr = results["pipeline report --out /tmp/x"]
    assert code == 2 and "needs the pipeline extra" in stderr and "pip install 'kaflet[pipeline]'" in stderr, stderr
    assert "Traceback" not in stderr


def test_the_compose_file_loads_in_docker_compose() -> None:
    compose = ["docker-compose"] if shutil.which("docker-compose") else ["docker", "compose"]
    done = subprocess.run([*compose, "-f", str(ROOT / "docker" / "compose.yaml"), "config", "-q"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


class Container:
    def __init__(self) -> None:
        self.name = f"kaflet-check-{uuid.uuid4().hex[:8]}"
        self.volume = f"{self.name}-data"
        self.port, self.metrics_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"

    def run(self) -> None:
        env = {"KAFLET_PORT": self.port, "KAFLET_METRICS_PORT": self.metrics_port, "KAFLET_ADVERTISED_HOST": "127.0.0.1"}
        flags = [f"--env={k}={v}" for k, v in env.items()]
        docker(
            "run",
            "-d",
            "--name",
            self.name,
            "--label",
            LABEL,
            "--network",
            "host",
            "-v",
            f"{self.volume}:/var/lib/kaflet/data",
            *flags,
            IMAGE,
        )

    def health(self) -> str:
        state = json.loads(docker("inspect", "--format", "{{json .State}}", self.name).stdout)
        return str(state.get("Health", {}).get("Status"))

    def wait_healthy(self) -> None:
        wait_until(lambda: self.health() == "healthy", timeout=120, message=f"{self.name} to be healthy: {self.logs()}")

    def logs(self) -> str:
        done = docker("logs", "--tail", "30", self.name, check=False)
        return done.stdout[-3000:] + done.stderr[-3000:]

    def remove(self) -> None:
        docker("rm", "-f", self.name, check=False)
        docker("volume", "rm", "-f", self.volume, check=False)


@pytest.fixture
def container() -> Iterator[Container]:
    c = Container()
    c.run()
    try:
        c.wait_healthy()
        yield c
    finally:
        c.remove()


def consume(bootstrap: str, group: str, protocol: str, count: int) -> list[bytes]:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    consumer = Consumer(config)
    consumer.subscribe(["orders"])
    values: list[bytes] = []

    def read() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
        return len(values) >= count

    try:
        wait_until(read, timeout=60, message=f"{count} records in group {group}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def committed(bootstrap: str, group: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition("orders", p) for p in range(2)], timeout=30)]
    finally:
        consumer.close()


def test_produce_consume_groups_and_a_restart(container: Container) -> None:
    admin = AdminClient({"bootstrap.servers": container.bootstrap})
    admin.create_topics([NewTopic("orders", num_partitions=2)])["orders"].result(30)
    producer = Producer({"bootstrap.servers": container.bootstrap, "enable.idempotence": True})
    for i in range(10):
        producer.produce("orders", b"order-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    assert sorted(consume(container.bootstrap, "classic-readers", "classic", 10)) == sorted(b"order-%d" % i for i in range(10))
    assert len(consume(container.bootstrap, "modern-readers", "consumer", 10)) == 10
    assert committed(container.bootstrap, "classic-readers") == [5, 5]

    docker("restart", container.name, timeout=180)
    container.wait_healthy()
    assert committed(container.bootstrap, "classic-readers") == [5, 5]
    assert committed(container.bootstrap, "modern-readers") == [5, 5]
    producer.produce("orders", b"after-restart", partition=0)
    assert producer.flush(30) == 0
    assert consume(container.bootstrap, "classic-readers", "classic", 1) == [b"after-restart"]  # resumes at its offset
    producer.flush(1)
