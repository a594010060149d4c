"""Issue 11, corruption at rest: `kaflet check DATA_DIR [--repair]` and `--verify-on-start`.

A byte flipped inside a closed segment is served as data after a clean shutdown (Kafka trusts what
is below its recovery point). `kaflet check` finds it (exit 4, the file and position printed),
`--repair` cuts the bad batch out and keeps every later one (exit 1), and a check after that is
clean (exit 0). `--verify-on-start` does the repair at start-up, logging each problem at ERROR.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from broker import Broker, Config
from protocol import records as rec
from protocol.errors import ErrorCode
from tests.support import data
from tests.support.raw_client import RawClient

BATCHES = 30


async def _fill(config: Config) -> None:
    async with Broker(config) as broker:
        broker.topics.create("t", 1, {"segment.bytes": "1024"})
        client = await RawClient.connect(broker.bootstrap, "filler")
        try:
            for _ in range(BATCHES):
                resp = await client.request(data.produce("t", 0, data.batch(1, value=b"v" * 100)))
                assert data.produce_result(resp).error_code == ErrorCode.NONE
        finally:
            await client.close()


async def _offsets(config: Config) -> list[int]:
    async with Broker(config) as broker:
        client = await RawClient.connect(broker.bootstrap, "reader")
        try:
            resp = await client.request(data.fetch([("t", 0, 0)], max_bytes=1 << 20, partition_max_bytes=1 << 20))
            records = resp.responses[0].partitions[0].records
            return [h.base_offset for _p, h in rec.iter_batches(bytes(records))]
        finally:
            await client.close()


def _check(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", "check", str(data_dir), *args], capture_output=True, text=True, timeout=60)


def _flip_in_first_segment(data_dir: Path, batch_index: int) -> tuple[Path, int]:
    segment = data_dir / "t-0" / "00000000000000000000.log"
    raw = bytearray(segment.read_bytes())
    positions = [p for p, _h in rec.iter_batches(bytes(raw))]
    assert len(positions) > batch_index + 1  # the flipped batch has whole batches after it
    pos = positions[batch_index]
    raw[pos + 70] ^= 0x40  # inside the record: only the CRC can tell
    segment.write_bytes(bytes(raw))
    return segment, pos


async def test_check_finds_and_repairs_a_flipped_byte_in_a_closed_segment(make_config: Any) -> None:
    config: Config = make_config()
    await _fill(config)
    data_dir = Path(config.data_dir)
    segments = sorted((data_dir / "t-0").glob("*.log"))
    assert len(segments) > 2
    assert _check(data_dir).returncode == 0
    segment, pos = _flip_in_first_segment(data_dir, 2)
    before = await _offsets(config)
    assert 2 in before  # served as data, as Kafka would

    found = _check(data_dir)
    assert found.returncode == 4, found.stdout + found.stderr
    assert f"{segment}: corrupt batch at position {pos}" in found.stdout and "(found)" in found.stdout
    repaired = _check(data_dir, "--repair")
    assert repaired.returncode == 1, repaired.stdout + repaired.stderr
    assert "(repaired)" in repaired.stdout
    again = _check(data_dir, "--output", "json")
    assert again.returncode == 0 and '"problems": 0' in again.stdout
    earlier = _check(data_dir, "--json")  # the spelling of earlier versions, with a note
    assert earlier.returncode == 0 and '"problems": 0' in earlier.stdout and "use --output json" in earlier.stderr
    assert await _offsets(config) == [o for o in before if o != 2]


async def test_check_rebuilds_a_damaged_index_and_refuses_a_data_dir_in_use(make_config: Any, tmp_path: Path) -> None:
    config: Config = make_config()
    await _fill(config)
    data_dir = Path(config.data_dir)
    index = data_dir / "t-0" / "00000000000000000000.index"
    index.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x07")  # offset 5 at position 7: no batch starts there
    found = _check(data_dir)
    assert found.returncode == 4 and f"{index}: bad index at position 0" in found.stdout
    assert _check(data_dir, "--repair").returncode == 1
    assert _check(data_dir).returncode == 0
    async with Broker(config):
        in_use = _check(data_dir)
    assert in_use.returncode == 8 and "in use" in in_use.stderr
    assert _check(tmp_path / "nowhere").returncode == 8


async def test_verify_on_start_repairs_before_serving(make_config: Any) -> None:
    from structlog.testing import capture_logs

    config: Config = make_config()
    await _fill(config)
    data_dir = Path(config.data_dir)
    segment, pos = _flip_in_first_segment(data_dir, 1)
    verifying = make_config(verify_on_start=True)
    with capture_logs() as logs:
        offsets = await _offsets(verifying)
    problems = [e for e in logs if e["event"] == "data dir problem repaired"]
    assert [(e["log_level"], e["file"], e["position"], e["kind"]) for e in problems] == [("error", str(segment), pos, "corrupt batch")]
    assert offsets[:2] == [0, 2] and offsets[-1] >= 2
    assert os.path.exists(segment)
