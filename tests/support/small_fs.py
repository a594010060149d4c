"""A disk that can be filled to the last byte: a tmpfs mounted with `size=` where the machine
allows (root, mount permitted), else ENOSPC injected through the storage layer (broker/network/faults.py).

`Disk.fill()` writes a filler file until the file system refuses even one more byte;
`Disk.free()` deletes it. With injection, `fill()` arms an append rule failing every partition
log with ENOSPC and `free()` removes it (other writes, such as topics.json, are not affected).
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _try_mount(path: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


@contextmanager
def small_fs(base: Path, size: str = "16m") -> Iterator[tuple[Path, bool]]:
    """(directory, mounted): a small tmpfs at `base`/fs, or a plain directory when mounting is not possible."""
    path = base / "fs"
    mounted = _try_mount(path, size)
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path, mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


class Disk:
    def __init__(self, path: Path, mounted: bool) -> None:
        self.path = path
        self.mounted = mounted
        self.filler = path / "filler"
        self._rule: Any = None

    def fill(self, broker: Any) -> None:
        """Leave not one free byte (or inject ENOSPC into every append)."""
        if not self.mounted:
            self._rule = broker.faults.fail_appends(None, error=errno.ENOSPC)
            return
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            chunk = 1 << 20
            while chunk:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    chunk //= 2
        finally:
            os.close(fd)
        assert os.statvfs(self.path).f_bavail == 0

    def free(self, broker: Any) -> None:
        if self._rule is not None:
            broker.faults.remove_append_rule(self._rule)
            self._rule = None
        self.filler.unlink(missing_ok=True)
