"""The appends of batched commits, made once per shard per event-loop turn.

Offset commits (outside `--fsync always`) are applied at once and their records enqueued on
their partition (CoordinatorContext.enqueue); their answers wait in their connection. At the end of
the loop turn, after every connection with data in it has been read, `CommitTurn` appends each
dirty partition's records as one batch (as few as max.message.bytes allows) and only then lets the
waiting answers leave. With 8 pipelined connections over 50 shards a shard used to append once
per connection read burst (nearly once per commit); now it appends once per turn.

A connection joins the turn (KafkaConnection.before_flush with this object as the work); the
turn calls `conn.turn_ended(exc)` when its appends are done: `exc` is None, or AppendsFailed
naming the shards whose append failed, whose commits are then answered with GE-3's mapped
error while the shard reloads from its log (so nothing answered with success is ever lost).
Calling the turn (`runtime.flush_appends()`: a connection that closes, a coordinator that
moves) ends it early for everyone, so no caller can append records whose answers others wait for
without telling them how it went.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog

from broker.runtime.errors import AppendsFailed, CoordinatorError
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.runtime.runtime import CoordinatorRuntime

log = structlog.get_logger("kaflet.coordinator")


class CommitTurn:
    def __init__(self, runtime: CoordinatorRuntime[Any]) -> None:
        self.runtime = runtime
        self._joined: list[Any] = []  # connections whose answers wait for this turn's appends
        self._scheduled = False
        self.appends = 0  # batches appended by turns (a figure for the bench and the tests)
        self.turns = 0

    def join(self, conn: Any) -> None:
        """`conn`'s answers wait until this turn's appends are made (conn.turn_ended)."""
        self._joined.append(conn)
        if not self._scheduled:
            self._scheduled = True
            # call_soon runs after every I/O callback of this loop iteration: the reads of all
            # the connections that had data are in the batch.
            asyncio.get_running_loop().call_soon(self._end)

    def _end(self) -> None:
        self._scheduled = False
        try:
            self()
        except Exception:
            pass  # told to every joined connection, which answers with its error

    def __call__(self) -> None:
        """Append every partition's enqueued records now, then release the joined connections'
        answers. Raises AppendsFailed (or what the appends raised) for a caller that had not joined."""
        joined, self._joined = self._joined, []
        error: Exception | None = None
        try:
            self._append()
        except Exception as exc:
            error = exc
        for conn in joined:
            try:
                conn.turn_ended(error)
            except Exception:
                log.error("releasing answers after the commit appends failed", exc_info=True)
        if error is not None:
            raise error

    def _append(self) -> None:
        runtime = self.runtime
        dirty = runtime.take_dirty()
        if dirty:
            self.turns += 1
        for context in dirty:
            try:
                self.appends += context.flush_pending()
            except CoordinatorError:
                pass  # the context noted it (runtime.note_failed), as it does when a write of its own forces the flush
            except Exception as exc:  # a bug, not the disk: the commits it held are not in the log
                log.error("appending enqueued commits failed", partition=context.partition, exc_info=True)
                runtime.note_failed(context.shard, CoordinatorError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)))
                context.reload()  # reverts what was applied ahead of the log
        # Failures since the last turn: this one's, and those of flushes forced by transactional
        # writes (CoordinatorContext.flush_pending) in between, keyed by shard.
        failed: dict[Any, CoordinatorError] = runtime.take_failed()
        if failed:
            raise AppendsFailed(failed)
