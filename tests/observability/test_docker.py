"""docker/ without a Docker engine: everything that can be checked on this machine is.

- the compose file parses and every file it points at exists, wired consistently (service
  names, ports, mount targets of the Grafana provisioning);
- the Prometheus configuration passes `promtool check config` (Debian's prometheus package);
- every metric the Grafana dashboard queries is in a live scrape of a real broker, and that
  scrape passes `promtool check metrics`;
- the Dockerfile's `RUN pip install` steps run as written in a clean virtual environment laid
  out as its COPY lines lay out the image, and the installed `kaflet` starts with the
  Dockerfile's ENV and becomes healthy by its own HEALTHCHECK command.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from broker.embed import BrokerProcess, BrokerThread
from tests.support.metrics import get, scrape
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
    done = subprocess.run(["promtool", "check", "config", str(DOCKER / "prometheus" / "prometheus.yml")], capture_output=True, text=True)
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
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
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


def test_dockerfile_copies_what_the_dockerignore_lets_through() -> None:
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    included = {line[1:].removesuffix("/**") for line in ignore if line.startswith("!")}
    for word, args in dockerfile_instructions():
        if word == "COPY":
            *sources, _dest = args.split()
            for source in sources:
                assert (ROOT / source).exists() and source in included, source


@pytest.mark.slow
def test_dockerfile_install_steps_run_in_a_clean_venv_and_the_image_command_gets_healthy(tmp_path: Path) -> None:
    workdir = tmp_path / "image"
    runtime_env: dict[str, str] = {}
    installed = False
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    path = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    entrypoint: list[str] = []
    command: list[str] = []
    healthcheck: list[str] = []
    for word, args in dockerfile_instructions():
        if word == "WORKDIR":
            workdir = tmp_path / "image" / args.lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif word == "COPY":
            *sources, dest = args.split()
            for source in sources:
                target = workdir / dest if dest not in ("./", ".") else workdir
                src = ROOT / source
                if src.is_dir():
                    shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target / src.name)
        elif word == "RUN" and "pip install" in args:
            # As written, with the venv's pip first on PATH (pip's cache left on: the image sets
            # PIP_NO_CACHE_DIR itself, which only keeps the image small).
            done = subprocess.run(
                args, shell=True, cwd=workdir, env={**os.environ, "PATH": path}, capture_output=True, text=True, timeout=600
            )
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            installed = True
        elif word == "ENV" and installed:
            runtime_env.update(env_of(args))
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(args)
        elif word == "CMD":
            command = json.loads(args)
        elif word == "HEALTHCHECK":
            healthcheck = json.loads(args[args.index("CMD") + 3 :].strip())
    assert installed and entrypoint == ["kaflet"] and command == ["serve"] and healthcheck
    assert {"KAFLET_HOST", "KAFLET_DATA_DIR", "KAFLET_METRICS_HOST", "KAFLET_METRICS_PORT", "KAFLET_ADVERTISED_HOST"} <= runtime_env.keys()
    # The image's command, run from the venv outside the source tree, with the image's environment
    # (ports and data dir moved so that the test can run anywhere).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics_port = s.getsockname()[1]
    env = {**os.environ, **runtime_env, "PATH": path, "KAFLET_PORT": "0", "KAFLET_METRICS_PORT": str(metrics_port)}
    env["KAFLET_DATA_DIR"] = str(tmp_path / "data")
    env.pop("PYTHONPATH", None)
    proc = BrokerProcess(tmp_path / "data")
    try:
        proc.start_command([*entrypoint, *command], env, cwd=tmp_path, timeout=60)
        assert proc.bootstrap.startswith("localhost:")  # KAFLET_ADVERTISED_HOST
        assert proc.metrics == f"0.0.0.0:{metrics_port}"
        wait_until(
            lambda: subprocess.run(healthcheck, env={**env, "PATH": path}, cwd=tmp_path, timeout=10).returncode == 0,
            timeout=30,
            message="the HEALTHCHECK command to pass",
        )
    finally:
        if proc.proc is not None:
            proc.kill()
