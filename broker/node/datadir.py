"""The data directory: an exclusive lock, meta.properties and atomic JSON files."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import uuid
from pathlib import Path
from typing import Any


class DataDirError(RuntimeError):
    """The data directory cannot be used as configured."""


def new_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so a crash leaves either the old or the new file, whole."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:  # a short write (a disk filling up) must not pass for the whole file
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)  # the old file stays whole; no half copy takes space
        raise
    os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, indent=1, sort_keys=True).encode())


def read_json(path: Path) -> Any:
    with open(path, "rb") as f:
        return json.load(f)


class DataDir:
    """Owns `path` for the life of a broker (flock), and its meta.properties."""

    def __init__(self, path: str | os.PathLike[str], node_id: int, offsets_partitions: int) -> None:
        self.path = Path(path).resolve()
        if self.path.exists() and not self.path.is_dir():
            raise DataDirError(f"the data dir {self.path} is a file, not a directory: give --data-dir (KAFLET_DATA_DIR) a directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a parent is a file, no permission, a read-only file system
            raise DataDirError(f"cannot create the data dir {self.path}: {exc.strerror or exc}") from None
        try:
            self._lock_fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise DataDirError(f"cannot write to the data dir {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise DataDirError(f"data dir {self.path} is in use by another kaflet process") from None
        self.meta = self._load_meta(node_id, offsets_partitions)

    @property
    def cluster_id(self) -> str:
        return self.meta["cluster.id"]

    def _load_meta(self, node_id: int, offsets_partitions: int) -> dict[str, str]:
        meta_path = self.path / "meta.properties"
        if not meta_path.exists():
            meta = {
                "version": "1",
                "cluster.id": new_cluster_id(),
                "node.id": str(node_id),
                "kaflet.offsets.partitions": str(offsets_partitions),
            }
            write_atomic(meta_path, _properties(meta))
            return meta
        meta = _parse_properties(meta_path.read_text())
        if meta.get("node.id") != str(node_id):
            raise DataDirError(f"data dir {self.path} belongs to node {meta.get('node.id')}, not {node_id} (--node-id)")
        stored = meta.get("kaflet.offsets.partitions")
        if stored is not None and stored != str(offsets_partitions):
            raise DataDirError(
                f"data dir {self.path} was created with --offsets-partitions {stored}; it cannot change to "
                f"{offsets_partitions}, because every group would move to another __consumer_offsets partition"
            )
        return meta

    def close(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1


def _properties(values: dict[str, str]) -> bytes:
    return ("#kaflet\n" + "".join(f"{k}={v}\n" for k, v in values.items())).encode()


def _parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip()
    return out
