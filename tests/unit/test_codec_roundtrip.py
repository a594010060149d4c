"""Generated request and response bodies survive encode -> decode unchanged and re-encode to the
same bytes, for every (API, version) kaflet serves.

The message classes of kaflet's own schemas (protocol/schemas/: KIP-848's APIs, protocol/kip848.py, and
KIP-1071's, protocol/kip1071.py)
are tested one (class, version) at a time. Every other class is kafka-python's, which kaflet uses
as its codec: one test checks them all, as a check on the dependency at the versions kaflet
serves (kaflet's hand-written codecs have their own tests: test_produce_codec, test_commit_codec,
test_kip848_codec, and test_nullability for the null checks kaflet adds to decoding).

Requests are decoded with their class's decode, as the connection does. Responses are decoded
with the plain schema decoder: the broker only encodes them, and some classes' client-side decode
deliberately differs (ApiVersionsResponse reads any error body as v0).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

import broker.apis  # noqa: F401  (registers every API)
from broker.network.registry import REGISTRY
from protocol import kip848, kip1071
from tests.support.schema_strategies import message
from tests.unit.test_wire import API_VERSIONS

KAFLET_SCHEMAS = {getattr(module, name) for module in (kip848, kip1071) for name in module.__all__}

ALL_CASES = [
    (spec.name, version, kind, cls)
    for spec in sorted(REGISTRY.values(), key=lambda s: s.key)
    for version in range(spec.min_version, spec.max_version + 1)
    for kind, cls in (("request", spec.request_cls), ("response", spec.response_cls))
]
OWN = [pytest.param(cls, version, id=f"{name}-v{version}-{kind}") for name, version, kind, cls in ALL_CASES if cls in KAFLET_SCHEMAS]
KAFKA_PYTHON = [(cls, version) for _name, version, _kind, cls in ALL_CASES if cls not in KAFLET_SCHEMAS]


def decode(cls: Any, data: bytes, version: int) -> Any:
    if cls.is_request():
        decoded = cls.decode(data, version=version)
    else:
        decoded = ApiMessage.decode.__func__(cls, data, version=version)
    decoded._header = None  # decode leaves this slot unset, and encode() reads it
    return decoded


def round_trip(original: Any, cls: Any, version: int) -> None:
    encoded = bytes(original.encode(version=version))
    decoded = decode(cls, encoded, version)
    assert decoded == original
    assert bytes(decoded.encode(version=version)) == encoded


@pytest.mark.parametrize(("cls", "version"), OWN)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_kaflet_schema_messages_round_trip(cls: Any, version: int, data: st.DataObject) -> None:
    round_trip(data.draw(message(cls, version)), cls, version)


def _check(cls: Any, version: int) -> Any:
    @settings(max_examples=3, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(original=message(cls, version))
    def check(original: Any) -> None:
        round_trip(original, cls, version)

    return check


def test_kafka_python_messages_round_trip_at_every_served_version() -> None:
    for cls, version in KAFKA_PYTHON:
        _check(cls, version)()


def test_every_served_version_is_round_tripped() -> None:
    """Both tests together cover each (API, version, request and response) of the pinned
    ApiVersions table (tests/unit/test_wire.py), and kaflet's own schemas are all among them."""
    covered = {(name, version, kind) for name, version, kind, _cls in ALL_CASES}
    pinned = {
        (key.name, v, kind)
        for key, (low, high, _flex) in API_VERSIONS.items()
        for v in range(low, high + 1)
        for kind in ("request", "response")
    }
    assert covered == pinned
    assert len(OWN) + len(KAFKA_PYTHON) == len(pinned)
    assert {cls for _name, _v, _kind, cls in ALL_CASES if cls in KAFLET_SCHEMAS} == KAFLET_SCHEMAS
