"""Every difference between kaflet and Kafka 4.4 that the suite expects, scenario by scenario.

An entry names the scenario and the exact differences its comparison finds (path, kaflet's
value, Kafka's value), and why they are allowed:

- `decision`: the heading of docs/decisions.md that says why kaflet decides differently
  (the test checks that the heading is there);
- `pending`: a kaflet bug whose fix waits for other work, described there; the scenario checks
  that today's differences are exactly the known ones and then fails, naming the fix, until
  the fix lands and the entry is removed.

A scenario without an entry must find no difference at all; one with an entry must find exactly
its differences, so a documented difference cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Difference = tuple[str, Any, Any]


@dataclass(frozen=True)
class Expected:
    diffs: tuple[Difference, ...]
    decision: str | None = None
    pending: str | None = None


EXPECTED: dict[str, Expected] = {}


def expect(name: str, *diffs: Difference, decision: str | None = None, pending: str | None = None) -> None:
    assert (decision is None) != (pending is None), f"{name}: a decision or a pending fix, one of them"
    assert name not in EXPECTED, name
    EXPECTED[name] = Expected(tuple(diffs), decision, pending)


# -- JoinGroup ----------------------------------------------------------------------------------

# A tie between protocol votes: Kafka keeps the first of the tied names in its HashMap's
# iteration order; kaflet the leader's preferred one.
expect(
    "jg_16_protocol_vote_tie",
    ("b:JoinGroupv9#2.protocol_name", "range", "sticky"),
    ("c:JoinGroupv9#2.protocol_name", "range", "sticky"),
    ("a:JoinGroupv9#3.protocol_name", "range", "sticky"),
    decision="Protocol vote ties",
)
