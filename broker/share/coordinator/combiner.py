"""Merging share-partition state batches (Kafka's PersisterStateBatchCombiner): the batches so far
and the new ones, pruned below the start offset, then swept so that where batches overlap the one
with the higher delivery count (then the higher delivery state) wins; neighbours that end up
equal are coalesced."""

from __future__ import annotations

from storage.share_state_records import StateBatch


def combine_state_batches(so_far: list[StateBatch], new: list[StateBatch], start_offset: int) -> list[StateBatch]:
    pruned = _prune(so_far, start_offset) + _prune(new, start_offset)
    if len(pruned) <= 1:
        return pruned
    return _sweep(pruned)


def _prune(batches: list[StateBatch], start_offset: int) -> list[StateBatch]:
    if start_offset == -1:
        return list(batches)
    out = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        out.append(b if b.first_offset >= start_offset else StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count))
    return out


def _sweep(batches: list[StateBatch]) -> list[StateBatch]:
    # Events (offset, is_begin, priority); at one offset the ends (False) sort before the begins.
    events = []
    for b in batches:
        priority = (b.delivery_count, b.delivery_state)
        events.append((b.first_offset, True, priority))
        events.append((b.last_offset + 1, False, priority))
    events.sort(key=lambda e: (e[0], e[1]))
    active: dict[tuple[int, int], int] = {}
    out: list[StateBatch] = []
    open_from = -1
    winner: tuple[int, int] | None = None
    i = 0
    n = len(events)
    while i < n:
        offset = events[i][0]
        if winner is not None and offset > open_from:
            _append(out, open_from, offset - 1, winner)
        while i < n and events[i][0] == offset:
            _, begin, priority = events[i]
            i += 1
            if begin:
                active[priority] = active.get(priority, 0) + 1
            elif active[priority] == 1:
                del active[priority]
            else:
                active[priority] -= 1
        winner = max(active) if active else None  # highest delivery count, then highest state
        open_from = offset
    return out


def _append(out: list[StateBatch], first: int, last: int, winner: tuple[int, int]) -> None:
    count, state = winner
    if out:
        tail = out[-1]
        if tail.last_offset + 1 == first and tail.delivery_state == state and tail.delivery_count == count:
            out[-1] = StateBatch(tail.first_offset, last, state, count)
            return
    out.append(StateBatch(first, last, state, count))
