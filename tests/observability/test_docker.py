"""docker/ without a Docker engine: everything that can be checked on this machine is.

- the compose file parses and every file it points at exists, wired consistently (service
  names, ports, mount targets of the Grafana provisioning);
- the Prometheus configuration passes `promtool check config` (tests/support/tools.py finds it);
- every metric the Grafana dashboard queries is in a live scrape of a real broker, and that
  scrape passes `promtool check metrics`;
- the Dockerfile's shape: a builder stage compiles the fast path, the image runs as a non-root
  user whose group has its id, and the root .dockerignore sends only what the image copies.

`make test-image` builds the image and runs it with a local daemon (tests/image).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from broker.embed import BrokerThread
from tests.support.metrics import get, scrape
from tests.support.tools import promtool
from tests.support.waiting import wait_until


def assigned(consumer: Consumer) -> bool:
    """Poll once (that serves the rebalance) and say whether the consumer has partitions."""
    consumer.poll(0.1)
    return bool(consumer.assignment())


ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


# -- compose and Prometheus -------------------------------------------------------------------


def test_compose_file_parses_and_points_at_files_that_exist() -> None:
    compose = load_yaml(DOCKER / "compose.yaml")
    services = compose["services"]
    assert set(services) == {"kaflet", "prometheus", "grafana"}
    build = services["kaflet"]["build"]
    context = (DOCKER / build["context"]).resolve()
    assert context == ROOT and (context / build["dockerfile"]).is_file()
    assert {"9092:9092", "9644:9644"} <= set(services["kaflet"]["ports"])
    named = set(compose.get("volumes") or {})
    mounts: dict[str, str] = {}
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("."):
                assert (DOCKER / source).exists(), f"{name}: {source} does not exist"
                mounts[target] = source
            else:
                assert source in named, f"{name}: undeclared volume {source}"
    # Prometheus reads its config where it is mounted and scrapes the kaflet service's metrics port.
    command = services["prometheus"]["command"]
    config_path = next(c.split("=", 1)[1] for c in command if c.startswith("--config.file="))
    prometheus = load_yaml(DOCKER / mounts[config_path])
    [job] = prometheus["scrape_configs"]
    assert job["static_configs"][0]["targets"] == ["kaflet:9644"] and job["metrics_path"] == "/metrics"
    # Grafana: its provisioning is mounted where Grafana reads it; the dashboard provider's path is mounted too.
    provisioning = DOCKER / mounts["/etc/grafana/provisioning"]
    [datasource] = load_yaml(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert datasource["url"] == "http://prometheus:9090" and datasource["uid"] == "prometheus"
    [provider] = load_yaml(provisioning / "dashboards" / "kaflet.yml")["providers"]
    dashboards = DOCKER / mounts[provider["options"]["path"]]
    assert (dashboards / "kaflet.json").is_file()
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/kaflet.json"


def test_prometheus_config_passes_promtool() -> None:
    done = subprocess.run([promtool(), "check", "config", str(DOCKER / "prometheus" / "prometheus.yml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# -- the dashboard against a live scrape --------------------------------------------------------

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(?:by|without)\s*\([^)]*\)")
_RANGES = re.compile(r"\[[^\]]*\]")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (functions, labels, keywords and numbers left out)."""
    text = _RANGES.sub("", _GROUPING.sub("", _MATCHERS.sub("", _STRINGS.sub("", expr))))
    names = set()
    for m in _IDENT.finditer(text):
        rest = text[m.end() :].lstrip()
        if rest.startswith("(") or m.group() in _KEYWORDS:
            continue
        names.add(m.group())
    return names


def dashboard_queries() -> list[str]:
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "kaflet.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"]]
    return exprs


def test_metric_names_are_read_from_promql() -> None:
    expr = 'histogram_quantile(0.99, sum by (api, le) (rate(kaflet_request_duration_seconds_bucket{api=~"$x"}[1m]))) >= 0'
    assert metric_names(expr) == {"kaflet_request_duration_seconds_bucket"}
    assert metric_names("label_values(kafka_consumergroup_members, consumergroup)") == {"kafka_consumergroup_members", "consumergroup"}


def test_every_dashboard_metric_is_in_a_live_scrape(broker_thread: Callable[..., BrokerThread]) -> None:
    bt = broker_thread(metrics=True, metrics_port=0, default_partitions=2, auto_create_topics=True)
    producer = Producer({"bootstrap.servers": bt.bootstrap})
    for i in range(4):
        producer.produce("dash", value=b"%d" % i, partition=i % 2)
    assert producer.flush(20) == 0
    member = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "dash-group", "enable.auto.commit": False})
    member.subscribe(["dash"])
    wait_until(lambda: assigned(member), timeout=30, message="assignment")
    member.commit(offsets=[TopicPartition("dash", 0, 1)], asynchronous=False)
    # A consumer-protocol (KIP-848) member too, for the per-member assigned-lag panel (issue 13).
    modern = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "dash-modern", "group.protocol": "consumer"})
    modern.subscribe(["dash"])
    wait_until(lambda: assigned(modern), timeout=30, message="consumer-protocol assignment")
    # A share-group member (KIP-932) holding a record, for the share panels.
    admin = AdminClient({"bootstrap.servers": bt.bootstrap})
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, "dash-share", incremental_configs=[earliest])]).values():
        f.result()
    sharer = ShareConsumer({"bootstrap.servers": bt.bootstrap, "group.id": "dash-share", "share.acknowledgement.mode": "explicit"})
    sharer.subscribe(["dash"])
    wait_until(lambda: len(sharer.poll(0.5)) > 0, timeout=30, message="a share-group delivery")
    with pytest.raises(KafkaException):  # a response with an error, so that the errors family has samples
        member.commit(offsets=[TopicPartition("dash", 7, 1)], asynchronous=False)
    address = bt.broker.metrics.address
    status, text = get(address, "/metrics")
    member.close()
    assert status == 200
    s = scrape(address)
    modern.close()
    sharer.close()
    present = {sample.name for family in s.families.values() for sample in family.samples}
    queries = dashboard_queries()
    used = set().union(*(metric_names(q) for q in queries)) - {"consumergroup", "group"}  # label_values() arguments
    assert used and all(n.startswith(("kafka_", "kaflet_")) for n in used), used
    missing = used - present
    assert not missing, f"dashboard metrics not exported: {sorted(missing)}"
    # kafka_exporter's *_sum families are there, under its names, for its dashboards and alerts...
    sums = {line.split("{")[0] for line in text.splitlines() if line.startswith("kafka_consumergroup_") and "_sum{" in line}
    assert sums == {"kafka_consumergroup_current_offset_sum", "kafka_consumergroup_lag_sum"}
    # ...and promtool parses the whole exposition (exit 1 on errors) and lints it (exit 3 on a
    # finding): nothing to say.
    lint = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert (lint.returncode, lint.stdout, lint.stderr) == (0, "", ""), lint


# -- the Dockerfile ----------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in (DOCKER / "Dockerfile").read_text().splitlines():
        if raw.strip().startswith("#") and not pending:
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    out = []
    for line in lines:
        if line.strip():
            word, _, args = line.strip().partition(" ")
            out.append((word.upper(), args.strip()))
    return out


def env_of(args: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in shlex.split(args))


def dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) of each line of the root .dockerignore, in Docker's syntax (`**` any
    number of directories, `*` within one, `!` to let through again; the last match wins)."""
    out = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        glob = line.lstrip("!").strip("/")
        rx = re.escape(glob).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        out.append((negated, re.compile(rx)))
    return out


def in_build_context(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = relative.split("/")
    paths = ["/".join(parts[: i + 1]) for i in range(len(parts))]  # the file and each directory above it
    excluded = False
    for negated, rx in patterns:
        if any(rx.fullmatch(p) for p in paths):
            excluded = not negated
    return not excluded


def test_the_build_context_is_only_what_the_image_copies() -> None:
    """The legacy builder reads only the root .dockerignore (not docker/Dockerfile.dockerignore):
    a checkout with its .git, .venv and caches must send only the package's files."""
    patterns = dockerignore_patterns()
    assert not in_build_context(".git/HEAD", patterns) and not in_build_context(".venv/bin/python", patterns)
    assert not in_build_context("broker/__pycache__/cli.cpython-311.pyc", patterns)
    copied = set()
    for word, args in dockerfile_instructions():
        if word == "COPY" and not args.startswith("--from"):
            *sources, _dest = args.split()
            copied |= set(sources)
    sent: dict[str, int] = {}
    for directory, dirs, files in os.walk(ROOT):
        rel_dir = os.path.relpath(directory, ROOT)
        dirs[:] = [d for d in dirs if in_build_context(os.path.normpath(os.path.join(rel_dir, d)), patterns) or d in copied]
        for name in files:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if in_build_context(rel, patterns):
                sent[rel] = (ROOT / rel).stat().st_size
    assert {rel.split("/")[0] for rel in sent} == copied, "the context holds exactly what COPY copies"
    assert sum(sent.values()) < 3_000_000, f"a build context of {sum(sent.values())} bytes"


def test_the_dockerfile_builds_the_compiled_path_in_a_builder_stage_and_runs_as_its_own_user() -> None:
    instructions = dockerfile_instructions()
    stages = [args for word, args in instructions if word == "FROM"]
    assert len(stages) == 2 and stages[0].endswith(" AS build")
    build, final = (instructions[: instructions.index(("FROM", stages[1]))], instructions[instructions.index(("FROM", stages[1])) :])
    assert any(word == "RUN" and "pip wheel" in args and ".so" in args for word, args in build)  # the wheel must hold the module
    copied = {s for word, args in build if word == "COPY" for s in args.split()[:-1]}
    assert {
        "setup.py",
        "pyproject.toml",
        "broker",
        "protocol",
        "storage",
        "pipeline",
    } <= copied  # setup.py builds it; pipeline is a command
    assert any(word == "COPY" and args.startswith("--from=build ") for word, args in final)
    assert not any(word == "RUN" and ("gcc" in args or "apt-get" in args) for word, args in final)  # no compiler in the image
    [user_setup] = [args for word, args in final if word == "RUN" and "useradd" in args]
    assert "groupadd --system --gid 10001 kaflet" in user_setup and "--uid 10001 --gid kaflet" in user_setup
    assert ("USER", "kaflet") in final
    assert [json.loads(args) for word, args in final if word == "ENTRYPOINT"] == [["kaflet"]]
    env = {k: v for word, args in final if word == "ENV" for k, v in env_of(args).items()}
    assert {"KAFLET_HOST", "KAFLET_DATA_DIR", "KAFLET_METRICS_HOST", "KAFLET_METRICS_PORT", "KAFLET_ADVERTISED_HOST"} <= env.keys()


def test_the_compose_file_uses_only_what_docker_compose_v1_accepts() -> None:
    """Debian's docker-compose (1.29) refuses a top-level `name:`; `make test-image` also loads the
    file with docker-compose itself."""
    assert set(load_yaml(DOCKER / "compose.yaml")) <= {"version", "services", "volumes", "networks", "configs", "secrets"}
