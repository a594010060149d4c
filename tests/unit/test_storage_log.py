"""storage.PartitionLog: layout, appends, reads, indexes, roll, retention, recovery, producer state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from structlog.testing import capture_logs

from protocol import records as r
from storage.config import LogConfig
from storage.errors import InvalidProducerEpoch, OffsetOutOfRange, OutOfOrderSequence
from storage.log import PartitionLog
from storage.segment import Segment

T0 = 1_700_000_000_000


def batch(n: int = 2, ts: int = T0, key: bytes = b"k", size: int = 50, **kw: int) -> bytearray:
    return r.build_batch([(key + b"%d" % i, b"v" * size) for i in range(n)], timestamp_ms=ts, **kw)


def open_log(path: Path, clean: bool = True, rp: int | None = None, **cfg: object) -> PartitionLog:
    return PartitionLog.open(path / "t-0", "t", 0, LogConfig(**cfg), recovery_point=rp, clean=clean)  # type: ignore[arg-type]


def offsets_in(data: memoryview | None) -> list[int]:
    return [h.base_offset for _p, h in r.iter_batches(data)] if data is not None else []


def test_layout_matches_kafka(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000)
    for _ in range(20):
        log.append(batch())
    names = sorted(os.listdir(tmp_path / "t-0"))
    logs = [n for n in names if n.endswith(".log")]
    assert logs[0] == "00000000000000000000.log" and len(logs) > 1
    assert all(len(n.split(".")[0]) == 20 for n in logs)
    for n in logs:
        assert n.replace(".log", ".index") in names and n.replace(".log", ".timeindex") in names
    # Each segment is batches back to back, readable by kafka-python's codec.
    data = (tmp_path / "t-0" / logs[0]).read_bytes()
    pos, expected = 0, 0
    while pos < len(data):
        h = r.read_header(data, pos)
        theirs = DefaultRecordBatch(data[pos : pos + h.size])
        assert theirs.validate_crc() and theirs.base_offset == expected
        expected += 2
        pos += h.size
    log.close()


def test_offsets_are_consecutive_and_batches_stay_as_sent(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sent = batch(3)
    original = bytes(sent)
    a = log.append(sent)
    b = log.append(batch(2))
    assert (a.base_offset, a.last_offset, b.base_offset, b.last_offset) == (0, 2, 3, 4)
    assert log.log_end_offset == log.high_watermark == 5
    stored = bytes(log.read(0, 1 << 20) or b"")
    first = r.read_header(stored)
    assert stored[12:16] == b"\x00\x00\x00\x00"  # partitionLeaderEpoch set to the leader's
    assert stored[16 : first.size] == original[16:]  # the rest byte for byte as sent
    log.close()


def test_read_returns_whole_batches_within_max_bytes_and_first_batch_always(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(10):
        log.append(batch(1, size=200))
    size = r.read_header(bytes(log.read(0, 1 << 20) or b"")).size
    assert offsets_in(log.read(3, 3 * size)) == [3, 4, 5]
    assert offsets_in(log.read(3, 3 * size - 1)) == [3, 4]
    assert offsets_in(log.read(3, 10)) == [3]  # larger than max_bytes, but first
    assert log.read(3, 10, min_one=False) is None
    assert log.read(10, 1000) is None  # at the log end
    with pytest.raises(OffsetOutOfRange):
        log.read(11, 1000)
    log.close()


def test_read_finds_the_batch_containing_an_offset_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=3000, index_interval_bytes=300)
    for _ in range(100):
        log.append(batch(4, size=30))
    assert len(log.segments) > 5
    for off in (0, 1, 2, 3, 4, 157, 202, 399):
        got = offsets_in(log.read(off, 500))
        assert got[0] == off - off % 4, off
    log.close()


def test_iter_batches_yields_every_batch_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=5000)
    for i in range(300):
        log.append(batch(1 + i % 3))
    seen = [h.base_offset for _b, _p, h in log.iter_batches()]
    assert len(seen) == 300 and seen == sorted(seen) and seen[0] == 0
    kv = [off for buf, p, h in log.iter_batches() for off, _k, _v in r.iter_key_values(buf, p, h)]
    assert kv == list(range(log.log_end_offset))
    assert next(h.base_offset for *_x, h in log.iter_batches(start_offset=500)) <= 500
    log.close()


def test_roll_by_segment_bytes_and_segment_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=10_000, segment_ms=1000)
    log.append(batch(ts=T0))
    log.append(batch(ts=T0 + 999))
    assert len(log.segments) == 1
    log.append(batch(ts=T0 + 1001))  # the first batch's timestamp is 1001 ms older
    assert len(log.segments) == 2 and log.active.base_offset == 4
    for _ in range(100):
        log.append(batch(ts=T0 + 1001))
    assert all(s.size <= 10_000 for s in log.segments)
    log.close()


def test_indexes_are_sparse_and_rebuildable(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100_000, index_interval_bytes=500)
    for i in range(200):
        log.append(batch(1, ts=T0 + i, size=100))
    seg = log.segments[0]
    entries = list(zip(seg.index.keys, seg.index.values, strict=True))
    assert 10 < len(entries) < 200
    log.close()
    index_file = tmp_path / "t-0" / "00000000000000000000.index"
    assert index_file.stat().st_size == 8 * len(entries)
    index_file.write_bytes(b"\x00\x00\x00\x07garbage")  # corrupt: rebuilt on load
    log = open_log(tmp_path, rp=200, segment_bytes=100_000, index_interval_bytes=500)
    assert list(zip(log.segments[0].index.keys, log.segments[0].index.values, strict=True)) == entries
    assert offsets_in(log.read(123, 150)) == [123]
    assert log.offset_for_timestamp(T0 + 150) == (T0 + 150, 150)
    assert log.offset_for_timestamp(T0 + 10_000) is None
    log.close()


def test_time_lookup_inside_a_batch_and_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    body = bytearray()
    for i, delta in enumerate([0, 30, 10, 50, 20]):
        r.encode_record(body, i, delta, b"k", b"v")
    builder = r._assemble(body, 5, 4, T0, T0 + 50, 0, -1, -1, -1, 0, 0)
    log.append(batch(2, ts=T0 - 100))
    log.append(builder)
    assert log.offset_for_timestamp(T0 + 25) == (T0 + 30, 3)
    assert log.offset_for_timestamp(T0 - 200) == (T0 - 100, 0)
    assert log.max_timestamp_offset() == (T0 + 50, 5)
    log.close()


def test_retention_bytes_and_ms_delete_whole_old_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000, retention_bytes=4000)
    for i in range(60):
        log.append(batch(ts=T0 + i * 1000))
    before = len(log.segments)
    assert log.delete_old_segments(now=T0) > 0
    # Whole segments go while what remains stays at or above retention.bytes (Kafka's rule).
    assert log.size_bytes >= 4000 > log.size_bytes - log.segments[0].size and len(log.segments) < before
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    log.config = LogConfig(segment_bytes=2000, retention_ms=10_000)
    log.delete_old_segments(now=T0 + 200_000)  # everything is older than 10 s: all go
    assert log.log_start_offset == log.log_end_offset == 120
    assert log.read(120, 100) is None
    assert log.append(batch()).base_offset == 120
    log.close()


def test_delete_records_advances_log_start_and_survives_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000)
    for _ in range(40):
        log.append(batch())
    assert log.delete_records(33) == 33
    assert offsets_in(log.read(33, 1))[0] == 32  # the batch holding offset 33
    with pytest.raises(OffsetOutOfRange):
        log.read(31, 100)
    with pytest.raises(OffsetOutOfRange):
        log.delete_records(81)
    assert log.segments[0].base_offset <= 33
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=2000), log_start_offset=33, recovery_point=80)
    assert log.log_start_offset == 33
    log.close()


def torn(path: Path, cut: int, garbage: bytes) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut] + garbage)


def test_recovery_truncates_a_torn_tail_and_warns(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(10):
        log.append(batch(1, size=100))
    size = log.active.size
    os.close(log.active.fd)  # a crash: no clean close
    seg_file = tmp_path / "t-0" / "00000000000000000000.log"
    torn(seg_file, 50, b"\xde\xad" * 40)
    with capture_logs() as logs:
        log = open_log(tmp_path, clean=False, rp=0)
    assert log.log_end_offset == 9
    one = size // 10
    assert seg_file.stat().st_size == 9 * one
    warning = next(e for e in logs if e["event"] == "truncated corrupt log tail")
    assert warning["log_level"] == "warning" and warning["partition"] == "t-0" and warning["bytes_dropped"] == one - 50 + 80
    assert log.append(batch(1)).base_offset == 9
    log.close()


def test_recovery_cuts_a_corrupt_batch_and_keeps_everything_after(tmp_path: Path) -> None:
    """Issue 11: a bad batch followed by valid ones is cut out (ERROR with file and position);
    only a bad region that reaches the end of the file is a torn tail to truncate."""
    log = open_log(tmp_path, segment_bytes=1500)
    for _ in range(30):
        log.append(batch(1, size=100))
    n_segments = len(log.segments)
    for seg in log.segments:
        os.close(seg.fd)
    first = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    size = r.read_header(data).size
    data[size + 70] ^= 0xFF  # a flipped bit in the second batch's records: CRC mismatch
    first.write_bytes(bytes(data))
    with capture_logs() as logs:
        log = open_log(tmp_path, clean=False, rp=0)
    cut = next(e for e in logs if e["event"] == "cutting a corrupt region out of a segment")
    assert cut["log_level"] == "error" and cut["file"] == str(first) and cut["position"] == size and cut["bytes_cut"] == size
    assert log.log_end_offset == 30 and len(log.segments) == n_segments
    assert [h.base_offset for _b, _p, h in log.iter_batches()] == [0, *range(2, 30)]
    assert offsets_in(log.read(1, 10_000))[:2] == [2, 3]  # a fetch of the lost offset gets the next batch
    log.close()


def test_iter_batches_skips_a_corrupt_batch_of_a_closed_segment(tmp_path: Path) -> None:
    """After a clean shutdown nothing re-validates closed segments: the readers skip a bad batch
    (ERROR with file and position) and go on with the next valid one, with or without CRCs."""
    log = open_log(tmp_path, segment_bytes=1500)
    for _ in range(30):
        log.append(batch(1, size=100))
    rp = log.log_end_offset
    log.close()
    first = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    size = r.read_header(data).size
    data[3 * size + 70] ^= 0xFF  # batch 3: CRC mismatch
    data[5 * size + 8 : 5 * size + 24] = b"\xff" * 16  # batch 5: an implausible header
    first.write_bytes(bytes(data))
    log = open_log(tmp_path, rp=rp)
    with capture_logs() as logs:
        verified = [h.base_offset for _b, _p, h in log.iter_batches(verify=True)]
        plain = [h.base_offset for _b, _p, h in log.iter_batches()]
    assert verified == [0, 1, 2, 4, *range(6, 30)]
    assert plain == [0, 1, 2, 3, 4, *range(6, 30)]
    errors = [(e["file"], e["position"], e["reason"]) for e in logs if e["event"] == "skipping corrupt log data"]
    assert errors[:2] == [(str(first), 3 * size, "CRC-32C mismatch"), (str(first), 5 * size, errors[1][2])]
    assert len(errors) == 3 and log.corrupt_regions == 3
    log.close()


def test_clean_reopen_trusts_the_tail_unclean_reopen_revalidates(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=3000)
    for _ in range(50):
        log.append(batch())
    rp = log.log_end_offset
    log.close()
    assert log.recovery_point == rp
    again = open_log(tmp_path, rp=rp)
    assert again.log_end_offset == rp and again.read(rp - 2, 10) is not None
    again.close()
    third = open_log(tmp_path, clean=False, rp=0)
    assert third.log_end_offset == rp
    third.close()


def test_idempotent_producer_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    pid = 42
    for seq in (0, 2, 4, 6, 8, 10):
        assert not log.append(batch(2, producer_id=pid, producer_epoch=0, base_sequence=seq)).duplicate
    # The last five batches are recognised and answered with their original offsets.
    dup = log.append(batch(2, producer_id=pid, producer_epoch=0, base_sequence=4))
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (4, 5)
    assert log.log_end_offset == 12
    with pytest.raises(OutOfOrderSequence):  # older than the last five: a gap, not a duplicate
        log.append(batch(2, producer_id=pid, producer_epoch=0, base_sequence=0))
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(2, producer_id=pid, producer_epoch=0, base_sequence=13))
    with pytest.raises(OutOfOrderSequence):  # a new epoch starts at 0
        log.append(batch(2, producer_id=pid, producer_epoch=1, base_sequence=12))
    assert log.append(batch(2, producer_id=pid, producer_epoch=1, base_sequence=0)).base_offset == 12
    with pytest.raises(InvalidProducerEpoch):
        log.append(batch(2, producer_id=pid, producer_epoch=0, base_sequence=12))
    assert log.append(batch(1, producer_id=7, producer_epoch=3, base_sequence=99)).base_offset == 14  # unknown: any start
    assert log.log_end_offset == 15
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_restart(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path, segment_bytes=600)
    for seq in range(0, 20, 2):
        log.append(batch(2, producer_id=5, producer_epoch=0, base_sequence=seq))
    if clean:
        log.close()
    else:
        for seg in log.segments:
            os.close(seg.fd)
    log = open_log(tmp_path, clean=clean, rp=log.recovery_point if clean else 0)
    for seq in (10, 12, 14, 16, 18):  # all five retried batches are still duplicates
        dup = log.append(batch(2, producer_id=5, producer_epoch=0, base_sequence=seq))
        assert dup.duplicate and dup.base_offset == seq
    assert log.append(batch(2, producer_id=5, producer_epoch=0, base_sequence=20)).base_offset == 20
    log.close()


def test_log_append_time_is_stamped(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    res = log.append(batch(2, ts=T0), now=T0 + 5000)
    assert res.log_append_time_ms == T0 + 5000
    stored = bytes(log.read(0, 1000) or b"")
    header = r.validate_batch(stored)  # CRC recomputed
    assert header.max_timestamp == T0 + 5000 and header.attributes & r.TIMESTAMP_TYPE_BIT
    log.close()


def test_fetch_waiters_are_woken_by_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    woken: list[int] = []
    log.add_waiter(woken.append)
    n = log.append(batch()).size
    log.remove_waiter(woken.append)
    log.append(batch())
    assert woken == [n]
    log.close()


def test_segment_read_of_a_batch_larger_than_the_scan_window(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(1, size=10))
    log.append(batch(1, size=200_000))
    log.append(batch(1, size=10))
    assert offsets_in(log.read(1, 100)) == [1]
    assert offsets_in(log.read(0, 1 << 20)) == [0, 1, 2]
    seg: Segment = log.active
    assert [h.base_offset for *_x, h in seg.iter_batches(chunk=4096)] == [0, 1, 2]
    log.close()


def test_a_tail_cut_after_a_clean_shutdown_is_recovered_too(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(5):
        log.append(batch(1))
    log.close()
    torn(tmp_path / "t-0" / "00000000000000000000.log", 10, b"")
    log = open_log(tmp_path, rp=5)
    assert log.log_end_offset == 4
    assert log.append(batch(1)).base_offset == 4
    log.close()


def test_deferred_log_is_made_on_disk_by_its_first_write(tmp_path: Path) -> None:
    """defer_create (the internal topics): nothing on disk until the first append; then the
    same layout as a log created at once, and a restart reads back what was written."""
    import uuid

    topic_id = uuid.uuid4()
    path = tmp_path / "t-0"
    log = PartitionLog.open(path, "t", 0, LogConfig(), topic_id=topic_id, defer_create=True)
    assert log.deferred and not path.exists()
    assert log.read(0, 1 << 20) is None and list(log.iter_batches()) == [] and log.log_end_offset == 0
    assert log.delete_old_segments() == 0 and log.segments[0].largest_timestamp > 0
    log.close()  # a clean shutdown of a log never written leaves nothing behind
    assert not path.exists()

    log = PartitionLog.open(path, "t", 0, LogConfig(), topic_id=topic_id, defer_create=True)
    assert log.append(batch(3)).base_offset == 0
    assert not log.deferred
    assert sorted(os.listdir(path)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "partition.metadata",
    ]
    assert str(topic_id) not in (path / "partition.metadata").read_text()  # Kafka's base64 form, as for any log
    log.close()
    again = PartitionLog.open(path, "t", 0, LogConfig(), topic_id=topic_id, recovery_point=3, defer_create=True)
    assert not again.deferred and again.log_end_offset == 3 and offsets_in(again.read(0, 1 << 20)) == [0]
    again.close()


def test_deferred_log_on_a_full_disk_leaves_nothing_and_can_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t-0"
    log = PartitionLog.open(path, "t", 0, LogConfig(), defer_create=True)
    real = Segment.create_files

    def full(self: Segment) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Segment, "create_files", full)
    with pytest.raises(OSError):
        log.append(batch())
    assert log.deferred and not path.exists()
    monkeypatch.setattr(Segment, "create_files", real)
    assert log.append(batch()).base_offset == 0 and log.log_end_offset == 2
    log.close()
