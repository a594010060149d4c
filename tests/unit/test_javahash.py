"""CO-1..CO-3: the coordinator partition of a group id, with the spec's vectors."""

import pytest

from protocol.javahash import java_string_hashcode, kafka_abs, partition_for

VECTORS = [
    ("", 0, 0, 0),
    ("a", 97, 47, 1),
    ("my-group", -1906497762, 12, 0),
    ("test-group", 627841412, 12, 2),
    ("group1", -1237460590, 40, 1),
    ("kafka-streams-app", -2143363552, 2, 1),
    ("Aa", 2112, 12, 0),
    ("BB", 2112, 12, 0),
    ("été", 227742, 42, 0),
    ("😀grp", 1276929186, 36, 0),
    ("polygenelubricants", -2147483648, 0, 0),
]


@pytest.mark.parametrize(("group", "jhash", "p50", "p3"), VECTORS)
def test_CO_1_partition_for_group(group: str, jhash: int, p50: int, p3: int) -> None:
    assert partition_for(group, 50) == p50
    assert partition_for(group, 3) == p3


@pytest.mark.parametrize(("group", "jhash", "p50", "p3"), VECTORS)
def test_CO_2_java_string_hashcode_over_utf16_units(group: str, jhash: int, p50: int, p3: int) -> None:
    assert java_string_hashcode(group) == jhash


def test_CO_3_kafka_abs_of_min_value_is_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7
