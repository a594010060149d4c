""" "Use it from your own project": a wheel built from the tracked files installs and serves on its
own, and what building leaves behind (build/, dist/) is ignored by git."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from broker.embed import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        path = ROOT / os.fsdecode(name)
        if path.is_file():
            (src / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / os.fsdecode(name))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [built] = (tmp / "dist").glob("kaflet-*.whl")
    return built


def _can_compile() -> bool:
    """A C compiler and Python's headers: what `pip install` needs to build protocol/_speedups.c."""
    cc = (sysconfig.get_config_var("CC") or "").split()
    return bool(cc) and shutil.which(cc[0]) is not None and (Path(sysconfig.get_paths()["include"]) / "Python.h").exists()


def test_the_compiled_path_is_built_where_a_compiler_exists() -> None:
    """make test's install builds the fast path (issue 17) wherever it can; it is only ever
    skipped for want of a compiler (the broker then runs pure Python)."""
    if os.environ.get("KAFLET_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("KAFLET_PURE_PYTHON=1 forces the pure-Python path")
    if not _can_compile():
        pytest.skip("no C compiler here: the pure-Python path is the one in use")
    from protocol import compiled

    assert compiled.PATH == "compiled", "reinstall (make .venv/.installed-test, or pip install -e .) to build protocol/_speedups.c"


def test_the_wheel_holds_the_packages_and_the_license_but_no_tests(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    if _can_compile():
        assert any(n.startswith("protocol/_speedups") and n.endswith(".so") for n in names), "the compiled fast path is in the wheel"
    for module in ("broker/cli.py", "broker/embed/thread.py", "broker/embed/process.py", "protocol/records.py", "storage/log.py"):
        assert module in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "bench/")) for n in names)


def test_an_installed_wheel_serves(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # the wheel's code first on the path (its dependencies come from this venv), run from elsewhere
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import broker; print(broker.__file__)"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert where.stdout.strip().startswith(str(site))
    kaflet = [sys.executable, str(site / "bin" / "kaflet")]
    version = subprocess.run([*kaflet, "--version"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert version.stdout.startswith("kaflet ") and "unknown" not in version.stdout
    bp = BrokerProcess(tmp_path / "data")
    cmd = [*kaflet, "serve", "--port", "0", "--metrics-port", "0", "--log-format", "json", "--data-dir", str(tmp_path / "data")]
    bp.start_command(cmd, env, cwd=tmp_path)
    try:
        assert AdminClient({"bootstrap.servers": bp.bootstrap}).list_topics(timeout=10).controller_id == 1
    finally:
        assert bp.stop() == 0


def test_build_output_is_ignored_by_git() -> None:
    for path in ("build/lib/broker/cli.py", "dist/kaflet-0.1.0-py3-none-any.whl", "kaflet.egg-info/PKG-INFO"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path
