"""Wall-clock milliseconds for timestamps the broker stores (commit times, state times).

`skew_ms` lets an embedding test move the broker's notion of "now" (offset retention is
measured in days); timers use the event loop's monotonic clock and are unaffected.
"""

from __future__ import annotations

import time


class Clock:
    def __init__(self) -> None:
        self.skew_ms = 0

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.skew_ms

    def advance(self, ms: int) -> None:
        self.skew_ms += ms
