"""The full-disk tests' disk (tests/support/small_fs.py): a real tmpfs filled to the last byte, or
injected ENOSPC where no tmpfs can be mounted; the test ids and the JUnit property `disk` say which."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.small_fs import Disk, mechanism, small_fs


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "disk_mechanism" in metafunc.fixturenames:
        metafunc.parametrize("disk_mechanism", [mechanism()])


@pytest.fixture
def disk(tmp_path: Path, disk_mechanism: str, record_property: pytest.RecordProperty, request: pytest.FixtureRequest) -> Iterator[Disk]:
    record_property("disk", disk_mechanism)
    size = getattr(request.module, "DISK_SIZE", "16m")
    with small_fs(tmp_path, disk_mechanism, size) as path:
        yield Disk(path, disk_mechanism)
