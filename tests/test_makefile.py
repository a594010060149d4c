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


def make_variable(name: str) -> list[str]:
    done = make("-n", "--eval", f"print-var: ; @echo $({name})", "print-var")
    return done.stdout.split()


def test_apt_deps_installs_no_package_that_ships_a_service() -> None:
    """prometheus.service must not be left enabled at boot: Debian's prometheus package is never
    installed (promtool is unpacked from it instead), and no package apt-deps installs ships a
    systemd unit or an init script (checked on the packages installed here)."""
    packages = make_variable("APT_PACKAGES")
    assert packages and "prometheus" not in packages
    recipe = make("-n", "apt-deps").stdout
    assert "prometheus" not in recipe
    for package in [*packages, "nodejs", "npm"]:
        listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True)
        if listed.returncode != 0:
            continue  # not installed on this machine (nodejs and npm are installed only where missing)
        units = [f for f in listed.stdout.splitlines() if "/systemd/system/" in f or f.startswith("/etc/init.d/")]
        assert not units, f"{package} ships services: {units}"


def test_promtool_is_unpacked_from_the_package_not_installed() -> None:
    recipe = make("-n", "promtool", "KAFLET_CACHE=/nonexistent/kaflet-cache").stdout
    assert "apt-get download prometheus" in recipe and "dpkg-deb -x" in recipe
    assert "/nonexistent/kaflet-cache/bin/promtool" in recipe
    assert "apt-get install" not in recipe and "dpkg -i" not in recipe
    [test_rule] = [line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("test:")]
    assert "promtool" in test_rule.split()  # make test gets it before the tests run
