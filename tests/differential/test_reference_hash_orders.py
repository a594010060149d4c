"""LI-4: the orders kaflet's ListGroups model is checked against (tests/unit/kafka_hash_orders.json)
are those Kafka 4.4's own TimelineHashMap and the JDK's ConcurrentHashMap give today: the cases of
tests/support/hash_orders.py run again through a JVM (dev.kaflet.tests.HashOrders) and must
print what the file holds."""

from __future__ import annotations

import json

import pytest

from tests.support.hash_orders import DATA, cases, run_jvm
from tests.support.jvm import JvmUnavailable


def test_li_4_the_committed_orders_are_the_jvms() -> None:
    expected = json.loads(DATA.read_text())
    current = cases()
    assert [c["name"] for c in current] == [c["name"] for c in expected]
    for case, stored in zip(current, expected, strict=True):
        assert {k: v for k, v in stored.items() if k != "orders"} == json.loads(json.dumps(case)), case["name"]
    try:
        orders = run_jvm(current)
    except JvmUnavailable as exc:
        pytest.fail(f"Kafka 4.4's classes cannot run: {exc}", pytrace=False)
    for stored, got in zip(expected, orders, strict=True):
        assert got == stored["orders"], stored["name"]
