"""`share.auto.offset.reset` (Kafka's ShareGroupAutoOffsetResetStrategy): where a share partition
starts when its group has no state for it yet: `latest` (the default), `earliest`, or
`by_duration:<ISO-8601 duration>` (the first offset whose timestamp is at most that long ago)."""

from __future__ import annotations

import re
from typing import NamedTuple

# java.time.Duration.parse: [+-]P[nD][T[nH][nM][n[.n]S]], each number optionally signed.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


class OffsetReset(NamedTuple):
    kind: str  # "earliest", "latest" or "by_duration"
    duration_ms: int = 0


def parse_duration_ms(text: str) -> int:
    """java.time.Duration.parse, in milliseconds; ValueError where Java throws."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(3) is not None and m.group(3).upper() == "T") or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = m.group(7) or ""
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    if m.group(6) is not None and m.group(6).startswith("-"):
        nanos = -nanos
    total_ns = ((days * 24 + hours) * 60 + minutes) * 60 * 1_000_000_000 + seconds * 1_000_000_000 + nanos
    return sign * total_ns // 1_000_000


def parse_offset_reset(value: str | None) -> OffsetReset:
    """AutoOffsetResetStrategy.fromString, restricted to what share groups take; ValueError otherwise."""
    if value is None:
        raise ValueError("Auto offset reset strategy is null")
    if value in ("earliest", "latest"):
        return OffsetReset(value)
    if value == "by_duration":
        raise ValueError("<:duration> part is missing in by_duration auto offset reset strategy.")
    if value.startswith("by_duration:"):
        # As in Java, the negative-duration refusal is caught and reported as a parse failure.
        ms = -1
        try:
            ms = parse_duration_ms(value[len("by_duration:") :])
        except ValueError:
            pass
        if ms < 0:
            raise ValueError("Unable to parse duration string in by_duration offset reset strategy.")
        return OffsetReset("by_duration", ms)
    raise ValueError(f"Unknown auto offset reset strategy: {value}")
