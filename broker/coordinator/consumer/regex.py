"""Regular-expression subscriptions (KIP-848 v1's SubscribedTopicRegex): RE2 syntax, as Kafka's RE2/J.

Kafka 4.x resolves a group's regular expressions off its request path, in a background thread, and
keeps the results in ConsumerGroupRegularExpression records; this module is what runs there: it
compiles expressions and matches them against a snapshot of the topic names. The coordinator decides
when a group's expressions are (re)resolved (broker/coordinator/consumer/manager.py).

Matching is done with RE2 sets: every expression of a group is added to an anchored `RE2::Set`, so one
pass over a topic name finds every expression it matches in full (RE2/J's `matcher(topic).matches()`),
instead of one call per expression per topic. A set's total program size is kept under SET_BUDGET: its
DFA then needs at most (a topic name's 249 bytes + 1) states of bounded size, well inside its memory
budget, so a set match never runs out of memory (it would return no match, silently). An expression too
large for a set is matched alone. RE2 compiles and matches with the GIL released, so the worker thread
runs beside the event loop.

Where kaflet decides (Kafka's RE2/J has no such limits; kaflet's RE2 is a C++ library whose cost it
must bound for every client's sake):
* an expression's compiled program may not exceed MAX_PROGRAM_SIZE instructions (a pattern whose
  program is larger is refused with INVALID_REGULAR_EXPRESSION); compiling is bounded by RE2's memory
  budget (COMPILE_MAX_MEM), so a hostile expression fails fast. The length itself is Kafka's: a
  protocol string is at most 32,767 bytes.
* RE2 never writes to stderr: every expression is compiled with `log_errors` off.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from enum import IntEnum
from typing import Any

import re2

# A program this large (instructions) is refused. The largest real subscription patterns (alternations of
# a thousand names, case-insensitive with wildcards) compile to under 30,000; what is beyond is a
# pathological repetition (e.g. `(?:[\p{L}\p{N}]{100}){2}` is 268,420) whose every match costs that much.
MAX_PROGRAM_SIZE = 50_000
# RE2's memory budget while compiling one expression (it fails with "pattern too large" beyond): a program
# of MAX_PROGRAM_SIZE fits, and no compile runs long.
COMPILE_MAX_MEM = 4 << 20
# The total program size of one RE2::Set, and the memory a set may use (program and DFA).
SET_BUDGET = 20_000
SET_MAX_MEM = 64 << 20
# Compiled expressions (and refusals) kept, least recently used dropped first.
CACHE_SIZE = 4096

# RE2 (C++) error texts and the descriptions RE2/J gives for the same errors, which Kafka's
# INVALID_REGULAR_EXPRESSION message quotes (`PatternSyntaxException.getDescription()`).
_RE2J_DESCRIPTIONS = (
    ("missing ]", "missing closing ]"),
    ("missing )", "missing closing )"),
    ("unexpected )", "unexpected )"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("invalid repetition size", "invalid repeat count"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid named capture group", "invalid named capture"),
    ("duplicate capture group name", "duplicate capture group name"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("invalid UTF-8", "invalid UTF-8"),
)


class RegexStatus(IntEnum):
    """What a heartbeat did to its member's expression (Kafka's UpdateRegularExpressionStatus)."""

    NO_CHANGE = 0
    UPDATED = 1  # changed; the group has no resolution of the new one yet
    UPDATED_AND_RESOLVED = 2  # changed, and the group's subscription is known at once


class InvalidRegex(ValueError):
    """The expression cannot be used; `description` is what the answer's message quotes."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


def _options(max_mem: int) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2's diagnostics would go to stderr as raw lines
    options.max_mem = max_mem
    return options


_COMPILE_OPTIONS = _options(COMPILE_MAX_MEM)
_SET_OPTIONS = _options(SET_MAX_MEM)
_cache: OrderedDict[str, Any] = OrderedDict()  # regex -> compiled RE2 or InvalidRegex
_lock = threading.Lock()  # the cache is shared by the event loop and the worker thread


def describe_error(error: str) -> str:
    """RE2/J's description of an RE2 error text such as "missing ): (" ."""
    for prefix, description in _RE2J_DESCRIPTIONS:
        if error.startswith(prefix):
            return description
    return error.split(":", 1)[0]


def _compile(regex: str) -> Any:
    try:
        compiled = re2.compile(regex, _COMPILE_OPTIONS)
    except re2.error as exc:
        text = exc.args[0] if exc.args else ""
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        if text.startswith("pattern too large"):
            return InvalidRegex(f"its compiled program exceeds {MAX_PROGRAM_SIZE} instructions")
        return InvalidRegex(describe_error(text))
    except (TypeError, ValueError) as exc:  # e.g. an unpaired surrogate that UTF-8 cannot encode
        return InvalidRegex(f"invalid UTF-8: {exc}")
    if compiled.programsize > MAX_PROGRAM_SIZE:
        return InvalidRegex(f"its compiled program has {compiled.programsize} instructions, more than {MAX_PROGRAM_SIZE}")
    return compiled


def cached(regex: str) -> Any | None:
    """The compiled expression, an InvalidRegex, or None when it was not compiled yet (or dropped)."""
    with _lock:
        hit = _cache.get(regex)
        if hit is not None:
            _cache.move_to_end(regex)
        return hit


def compile_regex(regex: str) -> Any:
    """The compiled expression; raises InvalidRegex. May take milliseconds: the coordinator calls it off the loop."""
    hit = cached(regex)
    if hit is None:
        hit = _compile(regex)
        with _lock:
            _cache[regex] = hit
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    if isinstance(hit, InvalidRegex):
        raise hit
    return hit


def resolve(regexes: Iterable[str], topics: list[str]) -> dict[str, frozenset[str]]:
    """Each expression -> the topics it matches in full; an invalid expression matches nothing (Kafka logs
    and ignores it). Runs in the worker thread."""
    resolved: dict[str, set[str]] = {}
    batch: list[str] = []
    batch_size = 0
    alone: list[tuple[str, Any]] = []
    sets: list[list[str]] = []
    for regex in regexes:
        resolved[regex] = set()
        try:
            compiled = compile_regex(regex)
        except InvalidRegex:
            continue
        size = compiled.programsize
        if size > SET_BUDGET:
            alone.append((regex, compiled))
            continue
        if batch and batch_size + size > SET_BUDGET:
            sets.append(batch)
            batch, batch_size = [], 0
        batch.append(regex)
        batch_size += size
    if batch:
        sets.append(batch)
    for members in sets:
        matcher = re2.Set.FullMatchSet(_SET_OPTIONS)
        try:
            for regex in members:
                matcher.Add(regex)
            matcher.Compile()
        except re2.error:
            alone.extend((regex, compile_regex(regex)) for regex in members)
            continue
        match = matcher.Match
        for topic in topics:
            hits = match(topic)
            if hits:
                for i in hits:
                    resolved[members[i]].add(topic)
    for regex, compiled in alone:
        full = compiled.fullmatch
        resolved[regex].update(t for t in topics if full(t) is not None)
    return {regex: frozenset(names) for regex, names in resolved.items()}
