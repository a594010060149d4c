"""The `kaflet` command as a newcomer meets it: help, version, flags, errors, start-up refusals.

Each command runs as its own process, as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from broker.cli import COMMANDS
from broker.config import KAFKA_DEFAULTS, Config, ConfigError
from broker.embed import BrokerProcess
from protocol import compiled

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CLI_PAGE = ROOT / "docs" / "cli.md"
KAFLET = Path(sys.executable).parent / "kaflet"  # the console script of the install under test

# Flags the pages name that belong to other tools (make, pip, docker, pytest, apt-get; --write: tests.support.rules_doc).
OTHER_TOOLS_FLAGS = {"--no-install-recommends", "--build", "--no-deps", "--user", "--system-site-packages", "--write", "--build-arg"}
OTHER_TOOLS_FLAGS |= {"--network", "--now"}  # docker build --network host; systemctl disable --now
# Kafka's own tools (kafka-storage format --add-scram, kafka-consumer-groups.sh --describe,
# kafka-streams-application-reset); pytest --durations and pytest-xdist's --dist
OTHER_TOOLS_FLAGS |= {"--add-scram", "--describe", "--application-id", "--input-topics", "--force", "--durations", "--dist"}
OTHER_TOOLS_FLAGS |= {"--share-state-partitions"}
OTHER_TOOLS_FLAGS |= {"--offsets-decoder", "--share-group-state-decoder"}  # kafka-dump-log.sh
# kafka-configs.sh --alter --entity-type groups --entity-name g --add-config k=v; kafka-streams-groups --members --topology
OTHER_TOOLS_FLAGS |= {
    "--add-config",
    "--alter",
    "--entity-name",
    "--entity-type",
    "--members",
    "--topology",
}  # docs/architecture.md's sketch of a coordinator yet to come


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [str(KAFLET), *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("argv", [[], ["-h"], ["--help"]])
def test_help_lists_every_command_with_one_line(argv: list[str]) -> None:
    done = run(*argv)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for command in COMMANDS:
        assert any(line.split(None, 1) == [command.name, command.summary] for line in lines), (command.name, done.stdout)
    assert "--version" in done.stdout


def test_the_command_table_of_docs_cli_names_every_command() -> None:
    missing = [c.name for c in COMMANDS if f"| `kaflet {c.name}" not in CLI_PAGE.read_text()]
    assert not missing, f"add a row for each to the command table of docs/cli.md: {missing}"


def test_version_comes_from_the_package_metadata() -> None:
    done = run("--version")
    assert done.returncode == 0 and done.stdout == f"kaflet {version('kaflet')} ({compiled.PATH})\n"  # which path runs


def test_the_ready_line_names_the_code_path_and_pure_python_can_be_forced(tmp_path: Path) -> None:
    """Issue 17: which path serves (protocol/_speedups.c or pure Python) is in the ready line;
    KAFLET_PURE_PYTHON=1 forces the pure one even where the extension is built."""
    for env, expected in (({}, compiled.PATH), ({"KAFLET_PURE_PYTHON": "1"}, "pure-python")):
        bp = BrokerProcess(tmp_path / expected, env=env).start()
        try:
            assert bp.wait_for(lambda r: r.get("event") == "broker ready")["code_path"] == expected
        finally:
            bp.stop()


def test_an_unknown_command_names_the_commands_and_exits_2() -> None:
    done = run("frobnicate")
    assert done.returncode == 2
    assert "unknown command 'frobnicate'" in done.stderr and all(c.name in done.stderr for c in COMMANDS)


def test_python_dash_m_broker_keeps_serving_without_arguments(tmp_path: Path) -> None:
    # `python -m broker` alone serves; flags without a command are serve's.
    bp = BrokerProcess(tmp_path / "d")
    bp.start_command([sys.executable, "-m", "broker", "--port", "0", "--metrics-port", "0", "--log-format", "json"], {}, cwd=tmp_path)
    try:
        assert (tmp_path / "data" / "meta.properties").exists()  # the default ./data of the cwd
    finally:
        assert bp.stop() == 0


def _help_texts() -> str:
    """The help of every command and of each of its actions (from their parsers, in process), and
    of the benchmarks (`python -m bench`, docs/benchmarks.md)."""
    from tests.test_cli_grammar import all_parsers

    bench = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    helps = [parser.format_help() for _, parser in all_parsers()]
    # the spellings of earlier versions, hidden from the help but still taken (docs/cli.md lists them)
    hidden = [s for _, parser in all_parsers() for a in parser._actions if a.help == argparse.SUPPRESS for s in a.option_strings]
    return "\n".join([run("--help").stdout, bench.stdout, *helps, " ".join(hidden)])


def test_every_flag_the_pages_name_is_in_some_help_as_named() -> None:
    named = {f for page in PAGES for f in re.findall(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)", page.read_text())}
    helps = _help_texts()
    shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)", helps))
    missing = sorted(named - shown - OTHER_TOOLS_FLAGS)
    assert not missing, (
        f"flags the README or docs/ name but no `kaflet ... --help` shows (another tool's? add to OTHER_TOOLS_FLAGS): {missing}"
    )


def test_boolean_flags_show_their_no_forms() -> None:
    text = run("serve", "--help").stdout
    for flag in ("--no-metrics", "--no-group-metrics", "--no-auto-create-topics", "--auto-create-topics", "--kafka-defaults"):
        assert re.search(rf"^\s+{flag}\b", text, re.M), flag


# -- bad values: the same message from a flag and from its variable ----------------------


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("port", "abc", "expected an integer"),
        ("auto_create_topics", "maybe", "expected true or false"),
        ("log_level", "loud", "expected one of debug, info, warning, error"),
        ("fsync", "sometimes", "expected never, always or an interval"),
    ],
)
def test_a_bad_value_gets_one_message_as_flag_or_variable_and_exit_2(tmp_path: Path, name: str, value: str, reason: str) -> None:
    flag, env = "--" + name.replace("_", "-"), "KAFLET_" + name.upper()
    data = tmp_path / "d"
    as_flag = run("serve", "--data-dir", str(data), flag, value)
    as_env = run("serve", "--data-dir", str(data), env={env: value})
    for done, source in ((as_flag, flag), (as_env, env)):
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and "invalid literal" not in done.stderr
        error = done.stderr.strip().splitlines()[-1]
        assert error.startswith(f"kaflet serve: error: invalid value {value!r} for {flag} ({env}), given as {source}: {reason}")
        assert done.stderr.startswith("usage: kaflet serve")
    assert not data.exists()


@pytest.mark.parametrize("via", ["flag", "env"])
def test_an_out_of_range_value_names_flag_and_variable(tmp_path: Path, via: str) -> None:
    done = run("serve", "--data-dir", str(tmp_path / "d"), *(["--offsets-partitions", "0"] if via == "flag" else []),
               env={"KAFLET_OFFSETS_PARTITIONS": "0"} if via == "env" else None)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().endswith("--offsets-partitions (KAFLET_OFFSETS_PARTITIONS) must be at least 1")


def _cannot_start(tmp_path: Path, *args: str) -> dict[str, Any]:
    done = run("serve", "--port", "0", "--metrics-port", "0", "--log-format", "json", *args, timeout=30)
    assert done.returncode == 1, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    [error] = [r for r in records if r.get("level") == "error"]
    assert error["event"] == "cannot start"
    return error


def test_a_data_dir_that_is_a_file_gets_a_sentence(tmp_path: Path) -> None:
    target = tmp_path / "not-a-dir"
    target.write_text("x")
    error = _cannot_start(tmp_path, "--data-dir", str(target))
    assert error["reason"] == f"the data dir {target} is a file, not a directory: give --data-dir (KAFLET_DATA_DIR) a directory"


def test_a_data_dir_under_a_file_gets_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    error = _cannot_start(tmp_path, "--data-dir", str(tmp_path / "file" / "data"))
    assert error["reason"].startswith(f"cannot create the data dir {tmp_path / 'file' / 'data'}: ") and "Errno" not in error["reason"]


def test_a_taken_listen_port_is_refused_before_the_data_dir_is_touched(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--port", str(port), "--metrics-port", "0", "--data-dir", str(tmp_path / "d"), "--log-format", "json")
    assert done.returncode == 1
    [error] = [json.loads(line) for line in done.stderr.splitlines() if '"cannot start"' in line]
    assert error["reason"] == (
        f"the Kafka listener cannot listen on 127.0.0.1:{port}: the port is already in use (another kaflet or Kafka?); "
        "choose another with --port PORT, or --port 0 for a free one"
    )
    assert not (tmp_path / "d").exists()


# -- the logs of a first start -------------------------------------------------------------


def test_a_new_data_dir_logs_no_unclean_shutdown_and_a_restart_a_clean_one(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "d", "--offsets-partitions", "3").start()
    try:
        first = bp.wait_for(lambda r: r.get("event") == "logs loaded")
        assert first["new_data"] is True and "clean_shutdown" not in first and first["existing_partitions"] == 0
        bp.restart()
        again = bp.wait_for(lambda r: r.get("event") == "logs loaded")
        assert again["clean_shutdown"] is True and again["existing_partitions"] == again["partitions"] > 0
    finally:
        bp.stop()


def test_an_ipv6_listen_address_is_written_in_brackets(tmp_path: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("::1 cannot be bound here")
    bp = BrokerProcess(tmp_path / "d", "--host", "::1").start()
    try:
        ready = bp.wait_for(lambda r: r.get("event") == "broker ready")
        assert ready["listen"] == [f"[::1]:{bp.port}"] and ready["bootstrap"] == f"[::1]:{bp.port}"
        assert AdminClient({"bootstrap.servers": bp.bootstrap}).list_topics(timeout=10).controller_id == 1
    finally:
        bp.stop()


# -- --kafka-defaults --------------------------------------------------------------------------


def _rebalance_delay(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    return str(configs["group.initial.rebalance.delay.ms"].value)


def test_kafka_defaults_restores_kafkas_values_and_the_ready_line_says_so(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "d", "--kafka-defaults").start()
    try:
        ready = bp.wait_for(lambda r: r.get("event") == "broker ready")
        assert ready["kafka_defaults"] == KAFKA_DEFAULTS
        assert _rebalance_delay(bp.bootstrap) == "3000"  # what a client sees, as from Kafka
    finally:
        bp.stop()
    plain = BrokerProcess(tmp_path / "e").start()
    try:
        assert "kafka_defaults" not in plain.wait_for(lambda r: r.get("event") == "broker ready")
        assert _rebalance_delay(plain.bootstrap) == "0"
    finally:
        plain.stop()


def test_kafka_defaults_leaves_what_was_set_explicitly(tmp_path: Path) -> None:
    explicit = ["--group-initial-rebalance-delay-ms", "0", "--group-consumer-heartbeat-interval-ms", "250"]
    explicit += ["--group-consumer-min-heartbeat-interval-ms", "250", "--log-page-cache-bytes", str(64 * 1024 * 1024)]
    explicit += ["--group-streams-heartbeat-interval-ms", "250", "--group-streams-min-heartbeat-interval-ms", "250"]
    explicit += ["--group-streams-initial-rebalance-delay-ms", "0", "--group-streams-assignment-interval-ms", "0"]
    explicit += ["--group-share-heartbeat-interval-ms", "250", "--group-share-min-heartbeat-interval-ms", "250"]
    explicit += ["--group-share-assignment-interval-ms", "0", "--group-consumer-assignment-interval-ms", "0"]
    bp = BrokerProcess(tmp_path / "d", *explicit, env={"KAFLET_KAFKA_DEFAULTS": "true"}).start()
    try:
        assert bp.wait_for(lambda r: r.get("event") == "broker ready")["kafka_defaults"] == {}
        assert _rebalance_delay(bp.bootstrap) == "0"
    finally:
        bp.stop()


def test_kafka_defaults_config_rules() -> None:
    import argparse

    fields = set(Config.option_names())
    assert set(KAFKA_DEFAULTS) <= fields, "KAFKA_DEFAULTS names a field Config does not have"
    for name, value in KAFKA_DEFAULTS.items():
        assert getattr(Config(), name) != value, f"{name}: kaflet's default is Kafka's; drop it from KAFKA_DEFAULTS"
        assert getattr(Config(kafka_defaults=True), name) == value
        # an embedder names what it set on purpose
        assert getattr(Config(kafka_defaults=True, explicit=frozenset({name})), name) == getattr(Config(), name)
    ns = argparse.Namespace(kafka_defaults="true", group_initial_rebalance_delay_ms=None)
    env = {"KAFLET_GROUP_INITIAL_REBALANCE_DELAY_MS": "250"}
    assert Config.from_namespace(ns, env).group_initial_rebalance_delay_ms == 250
    assert Config.from_namespace(ns, {}).group_initial_rebalance_delay_ms == 3000
    with pytest.raises(ConfigError, match=r"--kafka-defaults \(KAFLET_KAFKA_DEFAULTS\), given as KAFLET_KAFKA_DEFAULTS"):
        Config.from_namespace(argparse.Namespace(), {"KAFLET_KAFKA_DEFAULTS": "perhaps"})
