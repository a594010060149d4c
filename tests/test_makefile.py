"""The Makefile as a newcomer meets it: a too-old Python is named before anything is created, a
failed venv is never left behind, Debian packages come without recommended ones or services, and
`make clean` keeps the broker's data."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", *args], capture_output=True, text=True, timeout=60)


def fake_python(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_python_older_than_3_11_is_named_and_no_venv_is_created(tmp_path: Path) -> None:
    old = fake_python(tmp_path / "python3.10", 'if [ "$1" = "--version" ]; then echo "Python 3.10.12"; exit 0; fi\nexit 1\n')
    venv = tmp_path / "venv"
    done = make(f"VENV={venv}", f"PYTHON={old}", f"{venv}/.installed")
    assert done.returncode != 0
    assert f"kaflet needs Python 3.11 or newer, and '{old}' is Python 3.10.12." in done.stderr
    assert not venv.exists()


def test_a_missing_python_is_named(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = make(f"VENV={venv}", f"PYTHON={tmp_path / 'python-nowhere'}", f"{venv}/.installed")
    assert done.returncode != 0 and "is not found." in done.stderr and not venv.exists()


def test_a_venv_that_fails_half_way_is_removed(tmp_path: Path) -> None:
    # passes the version and ensurepip checks, then leaves a half-made venv and fails
    broken = fake_python(
        tmp_path / "python3",
        'if [ "$1" = "-c" ]; then exit 0; fi\n'
        'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; touch "$3/bin/python"; exit 1; fi\nexit 1\n',
    )
    venv = tmp_path / "venv"
    assert make(f"VENV={venv}", f"PYTHON={broken}", f"{venv}/.installed").returncode != 0
    assert not venv.exists()
    # a venv already broken (here: made by an old Python) is made again, not used
    (venv / "bin").mkdir(parents=True)
    fake_python(venv / "bin" / "python", "exit 1\n")
    done = make(f"VENV={venv}", f"PYTHON={broken}", f"{venv}/.installed")
    assert "is broken or was made by a Python older than 3.11: making it again" in done.stdout
    assert done.returncode != 0 and not venv.exists()


def test_debian_packages_come_without_recommends_and_start_no_service() -> None:
    recipe = make("-n", "apt-deps").stdout
    assert "install -y -qq --no-install-recommends" in recipe
    assert "policy-rc.d" in recipe and "exit 101" in recipe


def test_make_clean_keeps_the_data_dir() -> None:
    [line] = [ln for ln in make("-n", "clean").stdout.splitlines() if ln.startswith("rm ")]
    assert ".venv" in line.split() and "data" not in line.split()
