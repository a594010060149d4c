"""Producer ids for InitProducerId, unique across restarts of a data dir.

Like Kafka's controller, ids are handed out from blocks of 1000; the end of the current block
is persisted before any id from it is used, so a crash can skip ids but never reuse one.
"""

from __future__ import annotations

from pathlib import Path

from broker.node.datadir import read_json, write_json

BLOCK_SIZE = 1000
FILE = "producer-ids.json"


class ProducerIdManager:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE
        start = 0
        if self.path.exists():
            start = int(read_json(self.path)["next_block_start"])
        self._next = start
        self._block_end = start  # nothing reserved yet

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_json(self.path, {"version": 1, "next_block_start": self._block_end})
        pid = self._next
        self._next += 1
        return pid
