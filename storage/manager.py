"""The LogManager: every partition log of the data dir, opened at start-up and closed cleanly.

It follows topic events (logs created with their topic, data of deleted topics removed),
runs retention and compaction periodically, keeps Kafka's checkpoint files, and applies the
durability policy:
- `never`: appends reach the file (page cache) before the response; segments are fsynced
  when rolled and at shutdown;
- `always`: `wait_durable(log)` returns an awaitable completed by a group commit: waiters
  of the same loop turn share one fsync pass on a worker thread, and those arriving while
  it runs share the next;
- `<ms>`: everything written is fsynced every that many milliseconds.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import structlog

from storage import cleaner
from storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    fsync_dir,
    read_checkpoint,
    write_atomic,
    write_checkpoint,
)
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import PartitionLog, kafka_uuid, now_ms, parse_partition_dir, partition_dir_name, read_topic_id, renamed_dir_name
from storage.segment import Segment

log = structlog.get_logger("kaflet.storage")

CHECKPOINT_INTERVAL_S = 60.0  # Kafka's log.flush.offset.checkpoint.interval.ms
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"


class TopicLike(Protocol):
    name: str
    partitions: int
    topic_id: uuid.UUID
    configs: dict[str, str]


TopicPartition = tuple[str, int]


def _fsync_fds(fds: list[int]) -> float:
    """fsync and close `fds` (on the fsync thread); returns the seconds the fsyncs took."""
    started = time.perf_counter()
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)
    return time.perf_counter() - started


class LogManager:
    def __init__(
        self,
        data_dir: Path,
        config_for: Callable[[Any], LogConfig],
        *,
        fsync: str = "never",
        retention_check_interval_ms: int = 300_000,
        compaction_interval_ms: int = 60_000,
        page_cache_bytes: int = 0,
    ) -> None:
        self.dir = Path(data_dir)
        self.page_cache_bytes = page_cache_bytes  # each log's PartitionLog.page_cache_bytes
        self.config_for = config_for
        self.fsync = fsync
        self.fsync_interval_ms = int(fsync) if fsync.isdigit() else 0
        self.retention_check_interval_ms = retention_check_interval_ms
        self.compaction_interval_ms = compaction_interval_ms
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.first_dirty: dict[TopicPartition, int] = {}
        self._fsync_pool = ThreadPoolExecutor(1, thread_name_prefix="kaflet-fsync")
        self._clean_pool = ThreadPoolExecutor(1, thread_name_prefix="kaflet-cleaner")
        # The fadvise calls that hand written pages back (--log-page-cache-bytes): a call starts
        # the writeback of what is still dirty, a millisecond or more the event loop need not wait.
        self._cache_pool = ThreadPoolExecutor(1, thread_name_prefix="kaflet-cache")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._pending: list[tuple[PartitionLog, asyncio.Future[None]]] = []
        self._flush_scheduled = False
        self._flushing = False
        self._start_checkpoint_due = False
        self._cleaning: cleaner.CleanPlan | None = None
        self._cleaning_future: asyncio.Future[Any] | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self.closed = False
        self.was_clean = True
        # Metrics hooks (None when off): a histogram every log updates per append (see
        # PartitionLog.append_histogram) and a callback given each fsync pass's duration (s).
        self.append_histogram: Any = None
        self.observe_fsync: Callable[[float], None] | None = None
        self.check_write: Callable[[str, int], None] | None = None
        # Ids (Kafka's base64 form) of deleted topics whose directories may still be in place.
        self.doomed_ids: set[str] = set()
        # Called with a partition directory before it is renamed aside: the broker's fault
        # injector (broker/network/faults.py) may raise there as a failing file system would.
        self.before_rename: Callable[[Path], None] | None = None

    # -- start-up -------------------------------------------------------------------------

    def load(self, topics: Iterable[TopicLike], deleting: Iterable[uuid.UUID] = ()) -> None:
        """Open the log of every partition of `topics` (creating missing ones). Directories of
        unknown partitions, or of another topic id than the topic now of that name, are renamed
        `<name>.<id>-stray` and left alone, as Kafka does; those of topics whose deletion was
        under way (`deleting`) and `-delete` directories are removed."""
        t0 = time.monotonic()
        marker = self.dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.was_clean = clean
        recovery = self._read_checkpoint(RECOVERY_POINT_FILE)
        starts = self._read_checkpoint(LOG_START_OFFSET_FILE)
        self.first_dirty = self._read_checkpoint(CLEANER_OFFSET_FILE)
        self.doomed_ids |= {kafka_uuid(i) for i in deleting}
        wanted = {(t.name, p): t for t in topics for p in range(t.partitions)}
        set_aside = False
        for entry in os.scandir(self.dir):
            if not entry.is_dir():
                continue
            name = entry.name
            if name.endswith(DELETE_SUFFIX):
                self._remove_dir_later(Path(entry.path))
                continue
            if name.endswith(STRAY_SUFFIX):
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            topic = wanted.get(tp)
            dir_id = read_topic_id(Path(entry.path))
            if topic is None or (dir_id is not None and dir_id != kafka_uuid(topic.topic_id)):
                self._set_aside(Path(entry.path), tp[0], tp[1], dir_id)
                set_aside = True
                continue
            self.logs[tp] = self._open(topic, tp[1], recovery.get(tp), starts.get(tp, 0), clean)
        if set_aside:
            fsync_dir(self.dir)
        existing = len(self.logs)
        for tp, topic in wanted.items():
            if tp not in self.logs:
                # An internal partition never written has no directory (open's defer_create) but
                # is in the checkpoints of the shutdown before: it existed as much as any other.
                existing += tp in recovery
                self.logs[tp] = self._open(topic, tp[1], None, 0, True)
        if not existing:
            self.was_clean = True  # a new data dir (or one without logs): nothing to recover
        if clean:
            marker.unlink()
        # clean_shutdown only where logs existed to recover: a new data dir had no shutdown at all.
        log.info(
            "logs loaded",
            partitions=len(self.logs),
            existing_partitions=existing,
            **({"clean_shutdown": clean} if existing else {"new_data": True}),
            load_ms=round((time.monotonic() - t0) * 1000, 1),
        )

    def _set_aside(self, path: Path, topic: str, partition: int, dir_id: str | None) -> None:
        """Rename a partition directory no topic owns: removed when its topic was being deleted,
        kept as `-stray` otherwise (Kafka keeps stray logs for an operator to look at)."""
        if dir_id is not None and dir_id in self.doomed_ids:
            doomed = self.dir / renamed_dir_name(topic, partition, DELETE_SUFFIX)
            os.replace(path, doomed)
            self._remove_dir_later(doomed)
            log.info("partition directory of a deleted topic removed", directory=path.name, renamed_to=doomed.name)
            return
        stray = self.dir / renamed_dir_name(topic, partition, STRAY_SUFFIX)
        os.replace(path, stray)
        log.warning("partition directory of an unknown topic set aside", directory=path.name, renamed_to=stray.name)

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return read_checkpoint(self.dir / name)
        except (ValueError, OSError) as exc:
            log.warning("ignoring unreadable checkpoint", file=name, reason=str(exc))
            return {}

    def _open(self, topic: TopicLike, partition: int, recovery_point: int | None, log_start: int, clean: bool) -> PartitionLog:
        directory = self.dir / partition_dir_name(topic.name, partition)
        created = not directory.exists()
        if not created:
            dir_id = read_topic_id(directory)
            if dir_id is not None and dir_id != kafka_uuid(topic.topic_id):
                # An earlier topic of the same name whose directory was never moved (a deletion
                # that failed half way): its records must not come back under the new topic.
                self._set_aside(directory, topic.name, partition, dir_id)
                fsync_dir(self.dir)
                created = True
        plog = PartitionLog.open(
            directory,
            topic.name,
            partition,
            self.config_for(topic),
            topic_id=topic.topic_id,
            log_start_offset=log_start,
            recovery_point=recovery_point,
            clean=clean,
            defer_create=bool(getattr(topic, "internal", False)),
        )
        plog.sync_new_dirs = self.fsync == "always"
        if created and not plog.deferred and self.fsync == "always":
            fsync_dir(directory)  # its first segment's entry
            fsync_dir(self.dir)  # the partition directory's entry
        plog.on_roll = self._on_roll
        plog.on_log_start_changed = self._on_log_start_changed
        plog.append_histogram = self.append_histogram
        plog.check_write = self.check_write
        plog.page_cache_bytes = self.page_cache_bytes
        plog.run_advice = self._cache_pool.submit
        return plog

    def set_write_check(self, check: Callable[[str, int], None] | None) -> None:
        """Install (or remove, with None) a check every log calls before writing an appended
        batch; it raises OSError to fail the append as a broken or full disk would."""
        self.check_write = check
        for plog in self.logs.values():
            plog.check_write = check

    def set_observers(self, append_histogram: Any, fsync: Callable[[float], None] | None) -> None:
        """Install the metrics hooks on every log, present and future."""
        self.append_histogram = append_histogram
        self.observe_fsync = fsync
        for plog in self.logs.values():
            plog.append_histogram = append_histogram

    async def start(self) -> None:
        """Start the periodic work: retention, compaction, checkpoints, interval fsync."""
        self._loop = asyncio.get_running_loop()
        self._tasks.append(self._loop.create_task(self._every(self.retention_check_interval_ms / 1000, self.run_retention)))
        self._tasks.append(self._loop.create_task(self._every(self.compaction_interval_ms / 1000, self.run_compaction)))
        self._tasks.append(self._loop.create_task(self._every(CHECKPOINT_INTERVAL_S, self._checkpoint_in_background)))
        if self.fsync_interval_ms:
            self._tasks.append(self._loop.create_task(self._every(self.fsync_interval_ms / 1000, self._flush_all_dirty)))

    async def _every(self, seconds: float, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(max(seconds, 0.001))
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.error("periodic log task failed", task=getattr(fn, "__name__", "?"), exc_info=True)

    # -- topics -----------------------------------------------------------------------------

    def subscribe(self, topics: Any) -> None:
        """Follow a TopicManager's events (on_created, on_deleted, on_partitions_added, on_configs_changed)."""
        topics.on_created.append(self.topic_created)
        topics.on_deleted.append(self.topic_deleted)
        topics.on_partitions_added.append(self.partitions_added)
        if hasattr(topics, "on_configs_changed"):
            topics.on_configs_changed.append(self.configs_changed)
        if hasattr(topics, "on_create_undone"):
            topics.on_create_undone.append(self.undo_partitions)

    def undo_partitions(self, topic: TopicLike, first_partition: int) -> None:
        """A topic change failed (a full disk): close and remove the logs of partitions
        `first_partition`.. of `topic` that were made for it, and their directories."""
        for p in range(first_partition, topic.partitions):
            plog = self.logs.pop((topic.name, p), None)
            if plog is not None:
                plog.close_for_delete()
            shutil.rmtree(self.dir / partition_dir_name(topic.name, p), ignore_errors=True)

    def topic_created(self, topic: TopicLike) -> None:
        self.partitions_added(topic, 0)

    def partitions_added(self, topic: TopicLike, old_count: int) -> None:
        for p in range(old_count, topic.partitions):
            if (topic.name, p) not in self.logs:
                self.logs[(topic.name, p)] = self._open(topic, p, None, 0, True)

    def topic_deleted(self, topic: TopicLike) -> None:
        """Close the topic's logs and remove their data: each directory is renamed `-delete`
        at once (the renames made durable with one directory fsync) and deleted on a worker.
        A rename that fails leaves the directory in place under its topic id, which stays
        doomed: re-creating the topic or the next start-up sets it aside and removes it.
        Raises StorageError after trying every partition if any rename failed."""
        self.doomed_ids.add(kafka_uuid(topic.topic_id))
        failed: list[str] = []
        renamed: list[Path] = []
        for p in range(topic.partitions):
            plog = self.logs.pop((topic.name, p), None)
            self.first_dirty.pop((topic.name, p), None)
            if plog is None:
                continue
            plog.close_for_delete()
            doomed = self.dir / renamed_dir_name(topic.name, p, DELETE_SUFFIX)
            try:
                if self.before_rename is not None:
                    self.before_rename(plog.dir)
                os.replace(plog.dir, doomed)
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.error("cannot remove a deleted topic's partition directory", directory=plog.dir.name, error=str(exc))
                failed.append(f"{plog.dir.name}: {exc}")
                continue
            renamed.append(doomed)
        if renamed:
            try:
                fsync_dir(self.dir)
            except OSError as exc:
                failed.append(f"fsync of {self.dir}: {exc}")
        for doomed in renamed:
            self._remove_dir_later(doomed)
        if failed:
            raise StorageError("deleting topic " + topic.name + " left directories in place: " + "; ".join(failed))

    def configs_changed(self, topic: TopicLike) -> None:
        config = self.config_for(topic)
        for p in range(topic.partitions):
            plog = self.logs.get((topic.name, p))
            if plog is not None:
                plog.config = config

    def _remove_dir_later(self, path: Path) -> None:
        # On the cleaner's thread: after any compaction pass that may still hold the files.
        try:
            self._clean_pool.submit(shutil.rmtree, path, True)
        except RuntimeError:  # closed: the next start-up removes it
            pass

    # -- access -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    # -- durability -------------------------------------------------------------------------

    def wait_durable(self, plog: PartitionLog) -> Awaitable[None] | None:
        """None unless `--fsync always`; then an awaitable done once a group-commit fsync has
        covered every append made so far on `plog`."""
        if self.fsync != "always" or plog.recovery_point >= plog.next_offset or plog.closed:
            return None
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.append((plog, fut))
        if not self._flushing and not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._start_group_commit)  # after the rest of this loop turn
        return fut

    def _start_group_commit(self) -> None:
        self._flush_scheduled = False
        if self._flushing or not self._pending:
            return
        waiters, self._pending = self._pending, []
        self._flush({plog for plog, _ in waiters}, waiters)

    def _flush(self, logs: Iterable[PartitionLog], waiters: list[tuple[PartitionLog, asyncio.Future[None]]]) -> None:
        """fsync the unflushed segments of `logs` on the fsync thread, then complete `waiters`."""
        loop = self._loop
        assert loop is not None
        work: list[tuple[PartitionLog, int, list[tuple[Segment, int]]]] = []
        fds: list[int] = []
        for plog in logs:
            if plog.closed:
                continue
            segs = plog.unflushed()
            work.append((plog, plog.next_offset, segs))
            # Duplicates: the thread never races a close (retention, topic deletion).
            fds.extend(os.dup(seg.fd) for seg, _size in segs)
        self._flushing = True
        fut = loop.run_in_executor(self._fsync_pool, _fsync_fds, fds)

        def done(f: asyncio.Future[float]) -> None:
            self._flushing = False
            exc = f.exception()
            if exc is None and self.observe_fsync is not None and fds:
                self.observe_fsync(f.result())
            if exc is None:
                for plog, end, segs in work:
                    for seg, size in segs:
                        seg.flushed_size = max(seg.flushed_size, size)
                    plog.recovery_point = max(plog.recovery_point, end)
            else:
                log.error("fsync failed", error=str(exc))
            for _plog, waiter in waiters:
                if not waiter.done():
                    if exc is None:
                        waiter.set_result(None)
                    else:
                        waiter.set_exception(StorageError(f"fsync failed: {exc}"))
            if self._pending and not self._flush_scheduled:
                self._start_group_commit()

        fut.add_done_callback(done)

    def _flush_all_dirty(self) -> None:
        """The interval policy: fsync whatever was written since the last pass."""
        if self._flushing:
            return
        dirty = [plog for plog in self.logs.values() if plog.recovery_point < plog.next_offset]
        if dirty:
            self._flush(dirty, [])

    def _on_roll(self, plog: PartitionLog, old: Segment) -> None:
        """A rolled segment is fsynced off the loop (with the directory, for the new file);
        then the recovery point moves to its end."""
        end = plog.next_offset
        if self._loop is None or old.fd < 0:
            return
        fd = os.dup(old.fd)
        size = old.size
        directory = plog.dir

        def work() -> float:
            elapsed = _fsync_fds([fd])
            fsync_dir(directory)
            return elapsed

        fut = self._loop.run_in_executor(self._fsync_pool, work)

        def done(f: asyncio.Future[float]) -> None:
            self._background.discard(f)
            if f.exception() is None and self.observe_fsync is not None:
                self.observe_fsync(f.result())
            if f.exception() is None and not plog.closed:
                old.flushed_size = max(old.flushed_size, size)
                if all(s.flushed_size >= s.size for s in plog.segments[:-1]):
                    plog.recovery_point = max(plog.recovery_point, end)

        self._background.add(fut)
        fut.add_done_callback(done)

    # -- checkpoints ------------------------------------------------------------------------

    def _checkpoint_data(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int], dict[TopicPartition, int]]:
        recovery = {tp: plog.recovery_point for tp, plog in self.logs.items()}
        starts = {tp: plog.log_start_offset for tp, plog in self.logs.items()}
        dirty = {tp: off for tp, off in self.first_dirty.items() if tp in self.logs}
        return recovery, starts, dirty

    def _write_checkpoints(
        self, recovery: dict[TopicPartition, int], starts: dict[TopicPartition, int], dirty: dict[TopicPartition, int]
    ) -> None:
        write_checkpoint(self.dir / RECOVERY_POINT_FILE, recovery)
        write_checkpoint(self.dir / LOG_START_OFFSET_FILE, starts)
        write_checkpoint(self.dir / CLEANER_OFFSET_FILE, dirty)

    def _checkpoint_in_background(self) -> None:
        if self.closed or self._loop is None:
            return
        fut = self._loop.run_in_executor(self._fsync_pool, self._write_checkpoints, *self._checkpoint_data())
        self._background.add(fut)
        fut.add_done_callback(self._background.discard)

    def _on_log_start_changed(self, plog: PartitionLog) -> None:
        # Coalesced: one checkpoint write after the current loop turn.
        if self._start_checkpoint_due or self._loop is None:
            return
        self._start_checkpoint_due = True

        def write() -> None:
            self._start_checkpoint_due = False
            self._checkpoint_in_background()

        self._loop.call_soon(write)

    # -- retention and compaction -----------------------------------------------------------

    def run_retention(self, now: int | None = None) -> int:
        """One retention pass over every log; returns the number of segments deleted."""
        now = now_ms() if now is None else now
        deleted = 0
        for plog in list(self.logs.values()):
            try:
                deleted += plog.delete_old_segments(now)
                plog.producers.expire(now, plog.config.producer_id_expiration_ms)
            except OSError as exc:
                log.error("retention failed", partition=plog.name, error=str(exc))
        return deleted

    async def run_compaction(self, *, force: bool = False) -> int:
        """One compaction pass over every compacted log, each cleaned on the cleaner thread.
        `force` ignores min.cleanable.dirty.ratio. Returns the number of logs cleaned."""
        loop = asyncio.get_running_loop()
        cleaned = 0
        for tp, plog in list(self.logs.items()):
            if self.closed:
                break
            if not plog.config.compact or plog.closed:
                continue
            plan = cleaner.plan(plog, self.first_dirty.get(tp, 0), now_ms(), force=force)
            if plan is None:
                continue
            self._cleaning = plan
            try:
                self._cleaning_future = loop.run_in_executor(self._clean_pool, cleaner.clean, plan)
                result = await self._cleaning_future
            except cleaner.Aborted:
                plog.cleaning = False
                continue
            except Exception as exc:
                plog.cleaning = False
                log.error("compaction failed", partition=plog.name, error=f"{type(exc).__name__}: {exc}")
                continue
            finally:
                self._cleaning = None
                self._cleaning_future = None
            cleaner.swap(plan, result)
            if plog.closed:
                continue
            self.first_dirty[tp] = plan.end_offset
            cleaned += 1
            log.info(
                "log compacted",
                partition=plog.name,
                segments=sum(len(g.old) for g in result.groups),
                bytes_before=sum(g.bytes_in for g in result.groups),
                bytes_after=sum(g.bytes_out for g in result.groups),
                records_read=result.records_read,
                records_kept=result.records_kept,
            )
        if cleaned:
            self._checkpoint_in_background()
        return cleaned

    # -- shutdown ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop periodic work, finish fsyncs, close every log (fsync, snapshots), write the
        checkpoints and the clean-shutdown marker."""
        if self.closed:
            return
        self.closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self._cleaning is not None:
            self._cleaning.abort.set()
        if self._cleaning_future is not None:
            try:
                await self._cleaning_future
            except Exception:
                pass
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._fsync_pool, lambda: None)  # in-flight fsyncs are done
        await loop.run_in_executor(self._clean_pool, lambda: None)
        await loop.run_in_executor(self._cache_pool, lambda: None)
        self._close_logs()
        pending, self._pending = self._pending, []
        for _plog, waiter in pending:
            if not waiter.done():
                waiter.set_result(None)  # close() fsynced everything
        self._fsync_pool.shutdown(wait=True)
        self._clean_pool.shutdown(wait=True)
        self._cache_pool.shutdown(wait=True)

    def _close_logs(self) -> None:
        clean = True
        for plog in self.logs.values():
            try:
                plog.close()
            except OSError as exc:
                clean = False
                log.error("closing log failed", partition=plog.name, error=str(exc))
        try:
            self._write_checkpoints(*self._checkpoint_data())
            if clean:
                write_atomic(self.dir / CLEAN_SHUTDOWN_FILE, b'{"version":0}\n')
        except OSError as exc:
            # Without the marker the next start treats this as an unclean shutdown and recovers.
            log.error("cannot write the checkpoints at shutdown", error=str(exc))
