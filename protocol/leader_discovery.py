"""KIP-951's tagged fields, hand-encoded for the Produce and Fetch responses.

A partition answered NOT_LEADER_OR_FOLLOWER (Produce v10+, Fetch v16+) or FENCED_LEADER_EPOCH
(Fetch v16+) carries CurrentLeader, the leader's id and epoch; the response carries
NodeEndpoints, the address of every leader named, so a client can send its retry there without
asking for Metadata first. Both are tagged fields: absent unless set.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.encode import I32, NO_TAGS, string, uvarint

Endpoint = tuple[int, str, int, "str | None"]  # node id, host, port, rack


def tagged(fields: Iterable[tuple[int, bytes]]) -> bytes:
    """A tagged-fields section: the count, then each field's tag, size and bytes (tags ascending)."""
    items = sorted(fields)
    if not items:
        return NO_TAGS
    return uvarint(len(items)) + b"".join(uvarint(tag) + uvarint(len(body)) + body for tag, body in items)


def leader_id_and_epoch(leader_id: int, leader_epoch: int) -> bytes:
    """The LeaderIdAndEpoch struct (its own empty tagged fields included)."""
    return I32.pack(leader_id) + I32.pack(leader_epoch) + NO_TAGS


def node_endpoints(endpoints: Iterable[Endpoint]) -> bytes:
    """The NodeEndpoints array: id, host, port and rack of each node, compact encoding."""
    items = list(endpoints)
    out = [uvarint(len(items) + 1)]
    for node_id, host, port, rack in items:
        out.append(I32.pack(node_id) + string(host, True) + I32.pack(port) + string(rack, True) + NO_TAGS)
    return b"".join(out)
