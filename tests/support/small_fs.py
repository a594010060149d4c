"""A disk that can be filled to the last byte: a tmpfs mounted with `size=` where the machine
allows (root, mount permitted), else ENOSPC injected through the storage layer (broker/network/faults.py).

Which of the two a run uses is decided once (`mechanism()`, by mounting a 1 MB tmpfs;
KAFLET_TEST_DISK=injected-enospc chooses injection) and is never silent: the full-disk tests are parametrized with it, so their ids end in `[tmpfs]` or
`[injected-enospc]`, and each records it as the JUnit property `disk`.

`Disk.fill()` writes a filler file until the file system refuses even one more byte;
`Disk.free()` deletes it. With injection, `fill()` arms an append rule failing every partition
log with ENOSPC and `free()` removes it (other writes, such as topics.json, are not affected).
"""

from __future__ import annotations

import errno
import functools
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TMPFS = "tmpfs"
INJECTED = "injected-enospc"


def _try_mount(path: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


@functools.cache
def mechanism() -> str:
    """TMPFS where this process can mount one, else INJECTED; KAFLET_TEST_DISK=injected-enospc
    asks for injection on a machine that could mount (to run that path too)."""
    if os.environ.get("KAFLET_TEST_DISK") == INJECTED:
        return INJECTED
    with tempfile.TemporaryDirectory(prefix="kaflet-tmpfs-probe-") as probe:
        if not _try_mount(Path(probe), "1m"):
            return INJECTED
        subprocess.run(["umount", "-l", probe], capture_output=True)
    return TMPFS


@contextmanager
def small_fs(base: Path, how: str, size: str = "16m") -> Iterator[Path]:
    """A small tmpfs at `base`/fs (TMPFS: failing if it cannot be mounted), or a plain directory (INJECTED)."""
    path = base / "fs"
    mounted = how == TMPFS and _try_mount(path, size)
    if how == TMPFS and not mounted:
        raise RuntimeError(f"cannot mount a {size} tmpfs at {path}, though the probe could")
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


class Disk:
    def __init__(self, path: Path, how: str) -> None:
        self.path = path
        self.how = how
        self.mounted = how == TMPFS
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
