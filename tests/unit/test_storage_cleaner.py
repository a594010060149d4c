"""Log compaction: latest record per key, offsets preserved, tombstones dropped after their horizon."""

from __future__ import annotations

import os
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import records as r
from storage import cleaner
from storage.config import LogConfig
from storage.log import PartitionLog

T0 = 1_700_000_000_000
DAY = 86_400_000


def compacted_log(path: Path, **cfg: object) -> PartitionLog:
    config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=1200, **cfg)  # type: ignore[arg-type]
    return PartitionLog.open(path / "c-0", "c", 0, config)


def records_of(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(rec.offset, rec.key, rec.value) for buf, p, h in log.iter_batches() for rec in r.iter_all_records(buf, p, h)]


def replay(items: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for _off, key, value in items:
        assert key is not None
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def test_keeps_latest_per_key_and_preserves_offsets(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    rng = random.Random(7)
    for i in range(300):
        key = b"key-%d" % rng.randrange(20)
        log.append(r.build_batch([(key, b"value-%d" % i)], timestamp_ms=T0 + i))
    before = records_of(log)
    end = log.log_end_offset
    first_dirty = cleaner.compact_now(log, 0, T0 + 1000)
    assert first_dirty == log.active.base_offset
    after = records_of(log)
    assert replay(after) == replay(before)
    cleaned = [x for x in after if x[0] < first_dirty]
    assert len({k for _o, k, _v in cleaned}) == len(cleaned)  # one record per key below the dirty point
    assert [o for o, _k, _v in after] == sorted(o for o, _k, _v in after)
    assert {o: (k, v) for o, k, v in after}.items() <= {o: (k, v) for o, k, v in before}.items()
    assert log.log_end_offset == end
    assert log.size_bytes < sum(1 for _ in before) * 80
    # Reads by offset still land on the right batch; a removed offset reads the next one kept.
    for off, _k, _v in after[:10]:
        got = log.read(off, 1)
        assert got is not None and r.read_header(got).base_offset == off
    log.close()


def test_tombstones_survive_until_their_delete_horizon(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, delete_retention_ms=DAY)
    for i in range(40):
        log.append(r.build_batch([(b"a", b"%d" % i), (b"b", b"%d" % i)], timestamp_ms=T0))
    log.append(r.build_batch([(b"a", None)], timestamp_ms=T0))
    for i in range(30):
        log.append(r.build_batch([(b"c", b"%d" % i)], timestamp_ms=T0))
    log.roll()
    now = T0 + 1000
    cleaner.compact_now(log, 0, now)
    after = records_of(log)
    assert (80, b"a", None) in after and replay(after) == {b"b": b"39", b"c": b"29"}
    tomb_batch = next(h for _b, _p, h in log.iter_batches() if h.base_offset == 80)
    assert r.delete_horizon(tomb_batch) == now + DAY
    cleaner.compact_now(log, 0, now + DAY - 1)
    assert (80, b"a", None) in records_of(log)
    cleaner.compact_now(log, 0, now + DAY)
    final = records_of(log)
    assert all(k != b"a" for _o, k, _v in final)
    assert replay(final) == {b"b": b"39", b"c": b"29"}
    log.close()


def test_last_batch_of_a_producer_is_kept_empty(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    log.append(r.build_batch([(b"x", b"1")], timestamp_ms=T0, producer_id=9, producer_epoch=0, base_sequence=0))
    for i in range(40):
        log.append(r.build_batch([(b"x", b"%d" % i)], timestamp_ms=T0))
    log.roll()
    log.append(r.build_batch([(b"x", b"last")], timestamp_ms=T0))
    cleaner.compact_now(log, 0, T0)
    headers = [h for _b, _p, h in log.iter_batches()]
    assert headers[0].producer_id == 9 and headers[0].record_count == 0 and headers[0].base_offset == 0
    assert log.append(r.build_batch([(b"y", b"1")], producer_id=9, producer_epoch=0, base_sequence=1)).base_offset == 42
    log.close()


def test_compressed_batches_are_compacted(tmp_path: Path) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    log = compacted_log(tmp_path)
    for i in range(30):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=1, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20
        )
        for j in range(5):
            builder.append(j, timestamp=T0, key=b"k%d" % j, value=b"v%d-%d" % (i, j) * 10, headers=[])
        log.append(bytearray(builder.build()))
    log.roll()
    before = records_of(log)
    cleaner.compact_now(log, 0, T0)
    after = records_of(log)
    assert replay(after) == replay(before) and len(after) == 5
    log.close()


def test_interrupted_swap_is_completed_at_open(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    for i in range(100):
        log.append(r.build_batch([(b"k%d" % (i % 3), b"%d" % i)], timestamp_ms=T0))
    log.roll()
    expected = replay(records_of(log))
    plan = cleaner.plan(log, 0, T0, force=True)
    assert plan is not None
    result = cleaner.clean(plan)
    group = result.groups[0]
    d = log.dir
    name = f"{group.base_offset:020d}"
    # Crash right after the commit point: range written, .cleaned renamed to .swap.
    (d / f"{name}.swaprange").write_text(f"{group.range_end}\n")
    os.replace(d / f"{name}.log.cleaned", d / f"{name}.log.swap")
    for seg in log.segments:
        os.close(seg.fd)
    reopened = PartitionLog.open(d, "c", 0, log.config, recovery_point=0, clean=False)
    assert replay(records_of(reopened)) == expected
    assert not list(d.glob("*.swap*")) and not list(d.glob("*.cleaned"))
    assert len(records_of(reopened)) < 100
    reopened.close()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.booleans()), min_size=1, max_size=120))
def test_replay_of_compacted_log_equals_replay_of_full_log(tmp_path_factory: object, ops: list[tuple[int, bool]]) -> None:
    path = tmp_path_factory.mktemp("c")  # type: ignore[attr-defined]
    log = compacted_log(path, delete_retention_ms=10)
    for i, (k, tomb) in enumerate(ops):
        log.append(r.build_batch([(b"%d" % k, None if tomb else b"%d" % i)], timestamp_ms=T0))
    log.roll()
    full = replay(records_of(log))
    for now in (T0, T0 + 5, T0 + 100, T0 + 200):
        cleaner.compact_now(log, 0, now)
        assert replay(records_of(log)) == full
    log.close()
