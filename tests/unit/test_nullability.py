"""Nullability per (api, version) is enforced in one place (protocol/nullability.py):

- every valid request of every served (api, version) passes the check (no false refusal);
- each top-level field the schema does not let be null at that version, sent as null, is a
  decode error of the API's decoder, the hand-written OffsetCommit codec included;
- the hand-written OffsetCommit codec refuses exactly what the schema codec plus the check refuse.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import broker.apis  # noqa: F401  (registers every API)
from broker.network.registry import REGISTRY
from protocol import commit_codec
from protocol.nullability import NullFieldError, check
from tests.support.schema_strategies import message

SERVED = [
    pytest.param(spec, version, id=f"{spec.name}-v{version}")
    for spec in sorted(REGISTRY.values(), key=lambda s: s.key)
    for version in range(spec.min_version, spec.max_version + 1)
]


def _nullable_capable(field: Any) -> bool:
    return field.is_array() or field.is_struct() or field.type_str in ("string", "bytes", "records")


@pytest.mark.parametrize(("spec", "version"), SERVED)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_valid_requests_pass_and_forbidden_nulls_are_decode_errors(spec: Any, version: int, data: st.DataObject) -> None:
    request = data.draw(message(spec.request_cls, version))
    body = memoryview(bytes(request.encode(version=version)))
    spec.decode(body, version)  # a valid request is never refused
    for field in spec.request_cls._struct._fields:
        if not field.for_version_q(version) or field.nullable_for_version_q(version) or not _nullable_capable(field):
            continue
        if field.tagged_field_q(version):
            continue  # an absent tagged field takes its default, never null on the wire
        broken = spec.request_cls[version](
            **{f.name: getattr(request, f.name) for f in spec.request_cls._struct._fields if f.for_version_q(version)}
        )
        setattr(broken, field.name, None)
        try:
            raw = bytes(broken.encode(version=version))
        except Exception:
            continue  # the encoder itself cannot write this null
        if getattr(spec.request_cls.decode(raw, version=version), field.name) is not None:
            continue  # the encoder wrote an empty value for the null (it does for some old versions)
        with pytest.raises((NullFieldError, commit_codec.CodecError), match="null"):
            spec.decode(memoryview(raw), version)


HAND_WRITTEN = [
    pytest.param(spec, version, id=f"{spec.name}-v{version}")
    for spec in sorted(REGISTRY.values(), key=lambda s: s.key)
    if spec.decoder is not None
    for version in range(spec.min_version, spec.max_version + 1)
]


@pytest.mark.parametrize(("spec", "version"), HAND_WRITTEN)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_hand_written_decoders_refuse_what_the_schema_refuses(spec: Any, version: int, data: st.DataObject) -> None:
    """The hand-written codecs (OffsetCommit, ConsumerGroupHeartbeat, Produce) against the schema codec plus
    the nullability check: the same requests are refused, whichever fields are null."""
    cls = spec.request_cls
    request = data.draw(message(cls, version))
    fields = [f for f in cls._struct._fields if f.for_version_q(version) and not f.tagged_field_q(version) and _nullable_capable(f)]
    for f in data.draw(st.lists(st.sampled_from(fields), max_size=3, unique_by=lambda f: f.name)) if fields else []:
        setattr(request, f.name, None)
    first = next((f for f in fields if f.is_struct_array() and getattr(request, f.name)), None)
    if first is not None and data.draw(st.booleans()):
        element = getattr(request, first.name)[0]
        inner = [g for g in first.array_of._fields if g.for_version_q(version) and _nullable_capable(g)]
        if inner:
            setattr(element, data.draw(st.sampled_from(inner)).name, None)
    raw = bytes(request.encode(version=version))
    try:
        check(cls, version, cls.decode(raw, version=version))
        schema_refuses = False
    except NullFieldError:
        schema_refuses = True
    try:
        spec.decode(memoryview(raw), version)
        hand_refuses = False
    except (commit_codec.CodecError, NullFieldError):  # Produce's codec leaves nulls to the schema codec's check
        hand_refuses = True
    assert hand_refuses == schema_refuses
