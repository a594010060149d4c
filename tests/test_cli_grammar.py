"""One grammar for every `kaflet` command, held to its help and to the pages that show it.

`kaflet COMMAND [ACTION] [ARGUMENTS] [OPTIONS]`: options anywhere after the command, the same
spelling for the same thing, usage lines that name the real command path, `kaflet --help` listing
every command and action, and every `kaflet ...` line of README.md and docs/ accepted by the
parser it names. The parsers are the commands' own (broker/cli.py's COMMANDS); what runs a
command end to end is in tests/test_cli.py and tests/observability/test_admin_cli.py.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from broker.cli import COMMANDS, Command, actions_of, command_parser
from pipeline.analytics import cli as pipeline_cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KAFLET = Path(sys.executable).parent / "kaflet"
BY_NAME = {c.name: c for c in COMMANDS}
# The arguments an action needs besides its options, to parse.
REQUIRED = {
    ("topics", "create"): ["t"],
    ("topics", "alter-config"): ["t", "--set", "a=b"],
    ("topics", "delete"): ["t"],
    ("groups", "describe"): ["g"],
    ("groups", "delete"): ["g"],
    ("groups", "lag"): ["g"],
    ("groups", "reset-offsets"): ["g", "--topic", "t", "--to-earliest"],
    ("groups", "rebalance"): ["g"],
    ("transactions", "describe"): ["tx"],
    ("chaos", "push-errors"): ["--api", "Produce", "NONE"],
    ("chaos", "latency"): ["5"],
    ("chaos", "remove"): ["1"],
    ("chaos", "hole"): ["--client-id", "c"],
    ("chaos", "move-leader"): ["t", "0"],
    ("chaos", "move-coordinator"): ["g"],
    ("pipeline", "audit"): ["--source-topics", "a", "--output-topics", "b"],
    ("pipeline", "cluster"): ["status"],
    ("users", "add"): ["u"],
    ("users", "delete"): ["u"],
    ("acls", "add"): ["--topic", "t"],
}
# Per command: an option every action takes, with a value, and where the parsed value lands.
SHARED = {
    "topics": ("--bootstrap-server", "kafka:1", "bootstrap_server"),
    "groups": ("--bootstrap-server", "kafka:1", "bootstrap_server"),
    "transactions": ("--bootstrap-server", "kafka:1", "bootstrap_server"),
    "chaos": ("--control-address", "broker:2", "control_address"),
    "pipeline": ("--bootstrap-server", "kafka:1", "bootstrap_server"),
    "users": ("--bootstrap-server", "kafka:1", "bootstrap_server"),
    "acls": ("--bootstrap-server", "kafka:1", "bootstrap_server"),
    "configs": ("--data-dir", "data", "data_dir"),
}


def parse(command: Command, argv: list[str]) -> argparse.Namespace:
    return command_parser(command).parse_args(argv)


def all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """(path, parser) of every command and action."""
    out = []
    for command in COMMANDS:
        top = command_parser(command)
        out.append((f"kaflet {command.name}", top))
        for action in top._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += [(f"kaflet {command.name} {name}", sub) for name, sub in action.choices.items()]
    return out


def test_every_command_has_its_parser() -> None:
    """`kaflet --help`, the grammar tests and the pages' lines all go through a command's parser."""
    missing = [c.name for c in COMMANDS if c.parser is None]
    assert not missing, f"give these commands a parser in broker/cli.py's COMMANDS: {missing}"


def test_kaflet_help_lists_every_command_with_its_one_line_and_all_its_actions() -> None:
    done = subprocess.run([str(KAFLET), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for command in COMMANDS:
        [at] = [i for i, line in enumerate(lines) if line.split(None, 1) == [command.name, command.summary]]
        actions = actions_of(command_parser(command))
        if actions:
            assert lines[at + 1].split(" | ") and [a.strip() for a in lines[at + 1].split("|")] == actions, command.name
    assert "--version" in done.stdout and "Options go anywhere after the command" in done.stdout


@pytest.mark.parametrize(("path", "parser"), all_parsers(), ids=[path for path, _ in all_parsers()])
def test_every_usage_line_names_the_real_command_path(path: str, parser: argparse.ArgumentParser) -> None:
    usage = parser.format_usage()
    assert usage.startswith(f"usage: {path} "), usage
    assert "{" not in usage.split(path, 1)[1].split("\n")[0].split("[-h]")[0], "no {choice,...} where an ACTION belongs"


@pytest.mark.parametrize("command", list(SHARED))
def test_options_go_anywhere_after_the_command(command: str) -> None:
    flag, value, dest = SHARED[command]
    for action in actions_of(command_parser(BY_NAME[command])):
        rest = REQUIRED.get((command, action), [])
        before = parse(BY_NAME[command], [flag, value, action, *rest])
        after = parse(BY_NAME[command], [action, *rest, flag, value])
        assert getattr(before, dest) == getattr(after, dest) == value, (command, action)
        default = parse(BY_NAME[command], [action, *rest])
        assert getattr(default, dest) != value  # and without it, the default


def test_the_same_thing_has_the_same_spelling_in_every_command() -> None:
    kafka_commands = {"topics", "groups", "transactions", "pipeline", "users", "acls"}
    for path, parser in all_parsers():
        options = {s for a in parser._actions for s in a.option_strings if a.help != argparse.SUPPRESS}
        command = path.split()[1]
        if command in kafka_commands:
            assert "--bootstrap-server" in options, path  # the cluster, always so named
        assert not options & {"--bootstrap-servers", "--broker", "--brokers-list", "--server", "--control"} or path == "kaflet serve", path
        if command == "chaos":
            assert "--control-address" in options, path
        for a in parser._actions:
            if "--output" in a.option_strings and a.help != argparse.SUPPRESS:
                assert "json" in set(a.choices or ()), f"{path}: --output is the output format everywhere (--output json)"
        assert "--json" not in options, f"{path}: JSON output is --output json in every command"
        if command == "groups" and path != "kaflet groups" and not path.endswith(" list"):
            assert "--group" not in options and any(a.metavar == "GROUP" for a in parser._actions), path  # GROUP is an argument


def test_spellings_of_earlier_versions_still_work_with_a_note() -> None:
    for argv in (
        ["reset-offsets", "--group", "g", "--topic", "t", "--to-earliest"],
        ["rebalance", "--group", "g"],
        ["lag", "--group", "g"],
    ):
        done = subprocess.run(
            [str(KAFLET), "groups", *argv, "--bootstrap-server", "127.0.0.1:1", "--timeout", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 3, done.stderr  # it parsed, and then found no cluster there
        assert f"kaflet groups {argv[0]}: --group is deprecated; give the group as an argument: kaflet groups {argv[0]} g" in done.stderr
    done = subprocess.run(
        [str(KAFLET), "chaos", "move-coordinator", "--group", "g", "--control-address", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "--group is deprecated" in done.stderr and "cannot reach the control API" in done.stderr
    p = pipeline_cli.kaflet_parser()
    args = p.parse_args(["audit", "--out", "o", "--source", "a", "--output", "b"])
    pipeline_cli._check(p, args, "kaflet pipeline")
    assert (args.source_topics, args.output_topics) == ("a", "b")


def test_the_security_commands_take_json_of_earlier_versions_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    from broker.security.cli import acls, configs, target, users

    for parser, argv in (
        (users.parser(), ["list", "--json", "--data-dir", "d"]),
        (acls.parser(), ["--json", "list", "--topic", "t"]),
        (configs.parser(), ["list", "--data-dir", "d", "--json"]),
    ):
        assert target.parse(parser, argv).output == "json"
        assert capsys.readouterr().err == f"{parser.prog}: --json is deprecated; use --output json\n"
    with pytest.raises(SystemExit) as exc:  # where to act: one place only, wherever the options stand
        target.parse(users.parser(), ["--bootstrap-server", "h:1", "list", "--data-dir", "d"])
    assert exc.value.code == 2 and "not allowed with argument --bootstrap-server" in capsys.readouterr().err


def test_a_missing_or_doubled_group_is_a_usage_error_that_names_the_action() -> None:
    for argv, message in ((["rebalance"], "required: GROUP"), (["rebalance", "a", "b"], "one group only")):
        done = subprocess.run([str(KAFLET), "groups", *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and f"kaflet groups {argv[0]}: error: " in done.stderr and message in done.stderr, done.stderr


def kaflet_lines() -> list[tuple[str, list[str]]]:
    """(where, argv after `kaflet`) of every `kaflet ...` command in the pages' sh blocks."""
    found = []
    for page in PAGES:
        in_sh = False
        pending = ""  # a command continued with a trailing backslash
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("```"):
                in_sh = line.strip() == "```sh"
                continue
            if not in_sh:
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line, pending = pending + line, ""
            for part in re.split(r"&&|;", line.split(" #", 1)[0]):
                words = shlex.split(part.strip().rstrip("&"))
                if words[:1] == ["python"] and words[1:3] == ["-m", "pipeline"]:
                    words = ["kaflet", "pipeline", *words[3:]]
                if words[:1] == [".venv/bin/kaflet"]:
                    words[0] = "kaflet"
                if words[:1] == ["kaflet"] and len(words) > 1:
                    found.append((f"{page.relative_to(ROOT)}:{n}", words[1:]))
    return found


LINES = kaflet_lines()


def test_the_pages_show_every_command() -> None:
    shown = {argv[0] for _, argv in LINES}
    assert {c.name for c in COMMANDS} <= shown | {"serve"}


@pytest.mark.parametrize(("where", "argv"), LINES, ids=[f"{w} {' '.join(a)[:40]}" for w, a in LINES])
def test_every_kaflet_line_of_the_pages_parses(where: str, argv: list[str]) -> None:
    if argv[0].startswith("-"):
        assert argv[0] in ("--help", "--version", "-h"), where
        return
    command = BY_NAME.get(argv[0])
    assert command is not None, f"{where}: no command {argv[0]!r}"
    try:
        args = parse(command, argv[1:])
    except SystemExit as exc:
        assert exc.code == 0, f"{where}: `kaflet {' '.join(argv)}` does not parse"  # 0: a --help line
        return
    if command.name == "pipeline":
        pipeline_cli._check(command_parser(command), args, "kaflet pipeline")


def test_docs_cli_names_every_action_of_every_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    for command in COMMANDS:
        assert f"`kaflet {command.name}`" in text
        for action in actions_of(command_parser(command)):
            assert f"`{action}`" in text, f"docs/cli.md: kaflet {command.name} {action}"


def test_chaos_handle_is_importable_from_broker() -> None:
    from broker import ChaosHandle
    from broker.cluster.handle import ChaosHandle as where

    assert ChaosHandle is where
