"""docs/operations.md's "Installing", run as written: both wheels are built by the documented
commands from the tracked files, carry the documented names, install where they say they do, and
serve; what building leaves behind (build/, dist/) is ignored by git."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from broker.embed import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = ROOT / "docs" / "operations.md"
PURE = f"kaflet-{version('kaflet')}-py3-none-any.whl"
# Interpreters and platforms the pure wheel must install on, and the platform wheel must not.
ELSEWHERE = [("3.13", "macosx_11_0_arm64"), ("3.12", "manylinux_2_28_aarch64")]


def installing_block() -> list[str]:
    """The lines of the first sh block under docs/operations.md's "## Installing"."""
    section = OPERATIONS.read_text().split("## Installing", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def command_of(line: str, src: Path) -> tuple[dict[str, str], list[str], str]:
    """(environment assignments, argv with pip run by this Python, the comment) of a documented line."""
    code, _, comment = line.partition("#")
    words = shlex.split(code.replace("/path/to/kaflet", str(src)))
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[0] == "pip":
        words = [sys.executable, "-m", "pip", *words[1:]]
    return env, words, comment.strip()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The documented `pip wheel` lines, run from a copy of the tracked files: documented name -> wheel."""
    tmp = tmp_path_factory.mktemp("wheels")
    src = tmp / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        path = ROOT / os.fsdecode(name)
        if path.is_file():
            (src / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / os.fsdecode(name))
    # Both builds at once (they take half a minute each, mostly waiting), each from a copy of its own
    # (setuptools builds in the source tree) into a dist/ of its own.
    builds = []
    for i, line in enumerate(line for line in installing_block() if " wheel " in line):
        (tmp / str(i)).mkdir()
        shutil.copytree(src, tmp / str(i) / "src")
        env, argv, comment = command_of(line, tmp / str(i) / "src")
        documented = re.search(r"dist/(kaflet-\S+\.whl)", comment)
        assert documented, f"say which wheel `{line}` builds"
        proc = subprocess.Popen(
            argv, cwd=tmp / str(i), env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        builds.append((documented.group(1), tmp / str(i), proc))
    wheels: dict[str, Path] = {}
    for name, where, proc in builds:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        [wheels[name]] = (where / "dist").glob("*.whl")
    return wheels


def platform_tag() -> str:
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{py}-{py}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def _can_compile() -> bool:
    """A C compiler and Python's headers: what `pip install` needs to build protocol/_speedups.c."""
    cc = (sysconfig.get_config_var("CC") or "").split()
    return bool(cc) and shutil.which(cc[0]) is not None and (Path(sysconfig.get_paths()["include"]) / "Python.h").exists()


def wheel_tags(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
        return {line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines() if line.startswith("Tag:")}


def test_the_compiled_path_is_built_where_a_compiler_exists() -> None:
    """make test's install builds the fast path wherever it can; it is only ever skipped for want
    of a compiler (the broker then runs pure Python)."""
    if os.environ.get("KAFLET_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("KAFLET_PURE_PYTHON=1 forces the pure-Python path")
    if not _can_compile():
        pytest.skip("no C compiler here: the pure-Python path is the one in use")
    from protocol import compiled

    assert compiled.PATH == "compiled", "reinstall (make .venv/.installed-test, or pip install -e .) to build protocol/_speedups.c"


def test_the_documented_commands_build_the_documented_wheels(built: dict[str, Path]) -> None:
    assert PURE in built and built[PURE].name == PURE
    assert wheel_tags(built[PURE]) == {"py3-none-any"}
    [platform] = [name for name in built if name != PURE]
    assert re.fullmatch(rf"kaflet-{re.escape(version('kaflet'))}-cp\d+-cp\d+-\w+\.whl", platform), platform
    assert built[platform].name == f"kaflet-{version('kaflet')}-{platform_tag()}.whl"  # this machine's name for it
    for wheel in built.values():
        names = zipfile.ZipFile(wheel).namelist()
        for module in ("broker/cli.py", "broker/embed/thread.py", "pipeline/analytics/cli.py", "protocol/records.py", "storage/log.py"):
            assert module in names
        assert any(n.endswith("licenses/LICENSE") for n in names)
        assert not any(n.startswith(("tests/", "bench/", "docs/")) for n in names)
    assert not any(n.endswith(".so") for n in zipfile.ZipFile(built[PURE]).namelist())
    if _can_compile():
        assert any(n.startswith("protocol/_speedups") and n.endswith(".so") for n in zipfile.ZipFile(built[platform]).namelist())


@pytest.mark.parametrize(("python", "platform"), ELSEWHERE)
def test_the_pure_wheel_installs_on_other_pythons_and_platforms_and_the_platform_wheel_does_not(
    built: dict[str, Path], tmp_path: Path, python: str, platform: str
) -> None:
    def pip_accepts(wheel: Path) -> subprocess.CompletedProcess[str]:
        args = ["--dry-run", "--no-deps", "--only-binary=:all:", "--python-version", python, "--platform", platform]
        cmd = [sys.executable, "-m", "pip", "install", "-q", *args, "--target", str(tmp_path / "t"), str(wheel)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    assert pip_accepts(built[PURE]).returncode == 0
    [platform_wheel] = [w for name, w in built.items() if name != PURE]
    refused = pip_accepts(platform_wheel)
    assert refused.returncode != 0 and "is not a supported wheel" in refused.stderr


@pytest.mark.parametrize("pure", [True, False], ids=["pure", "platform"])
def test_an_installed_wheel_serves(built: dict[str, Path], tmp_path: Path, pure: bool) -> None:
    wheel = built[PURE] if pure else next(w for name, w in built.items() if name != PURE)
    [install] = [line for line in installing_block() if line.startswith("pip install dist/")]
    assert PURE in install  # the documented install is the wheel that installs anywhere
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # the wheel's code first on the path (its dependencies come from this venv), run from elsewhere
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("KAFLET_PURE_PYTHON", None)
    where = subprocess.run(
        [sys.executable, "-c", "import broker; print(broker.__file__)"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert where.stdout.strip().startswith(str(site))
    kaflet = [sys.executable, str(site / "bin" / "kaflet")]
    shown = subprocess.run([*kaflet, "--version"], cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    path = "pure-python" if pure or not _can_compile() else "compiled"
    assert shown == f"kaflet {version('kaflet')} ({path})\n"
    bp = BrokerProcess(tmp_path / "data")
    cmd = [*kaflet, "serve", "--port", "0", "--metrics-port", "0", "--log-format", "json", "--data-dir", str(tmp_path / "data")]
    bp.start_command(cmd, env, cwd=tmp_path)
    try:
        assert AdminClient({"bootstrap.servers": bp.bootstrap}).list_topics(timeout=10).controller_id == 1
    finally:
        assert bp.stop() == 0


def test_build_output_is_ignored_by_git() -> None:
    for path in ("build/lib/broker/cli.py", f"dist/{PURE}", "kaflet.egg-info/PKG-INFO"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path
