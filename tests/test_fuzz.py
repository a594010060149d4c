"""The protocol fuzzer in the suite (issue 11): 20,000 mutated frames of every served (api, version)
against a broker process. No "handler failed", no ERROR, no traceback or other non-JSON line on
stderr; a fresh connection is answered after every batch of 2,000; the RSS stays bounded.

`make fuzz` runs the same with millions of frames, a seed (FUZZ_SEED) and a time limit
(FUZZ_SECONDS); tests/support/fuzz.py says what the mutations are and why hypothesis.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from broker.embed import BrokerProcess
from tests.support.fuzz import bad_lines, fuzz, seed_corpus

FRAMES = 20_000
SEED = int(os.environ.get("FUZZ_SEED", "11"))


def test_mutated_requests_of_every_served_api_are_refused_cleanly(tmp_path: Path) -> None:
    corpus = seed_corpus(SEED)
    assert {(s.api_key, s.version) for s in corpus} and all(s.body is not None for s in corpus)
    bp = BrokerProcess(tmp_path / "data", "--offsets-partitions", "3", "--no-auto-create-topics").start()
    try:
        assert bp.proc is not None
        stats = asyncio.run(fuzz("127.0.0.1", bp.port, bp.proc.pid, rng_seed=SEED, frames=FRAMES, seconds=90, corpus=corpus))
        assert bp.proc.poll() is None  # still running
    finally:
        assert bp.stop() == 0
    assert stats.sent == FRAMES, stats
    assert stats.closed > FRAMES // 4 and stats.answered > FRAMES // 20, stats  # both paths were exercised
    assert bad_lines(bp.lines) == []
    grown_mib = (max(stats.rss_kb) - stats.rss_kb[0]) / 1024
    assert grown_mib < 64, stats.rss_kb
