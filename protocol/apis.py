"""API keys and the kafka-python message classes that encode and decode them."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from kafka.protocol import admin as _admin
from kafka.protocol import consumer as _consumer
from kafka.protocol import metadata as _metadata
from kafka.protocol import producer as _producer

from protocol import kip848 as _kip848


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75


def _classes() -> dict[int, tuple[Any, Any]]:
    """api key -> (request class, response class) for every message kafka-python knows."""
    found: dict[int, tuple[Any, Any]] = {}
    for module in (_admin, _consumer, _metadata, _producer, _kip848):
        for name in dir(module):
            if not name.endswith("Request"):
                continue
            req = getattr(module, name)
            resp = getattr(module, name[: -len("Request")] + "Response", None)
            key = getattr(req, "API_KEY", None)
            if resp is not None and isinstance(key, int):
                found[key] = (req, resp)
    return found


MESSAGE_CLASSES: dict[int, tuple[Any, Any]] = _classes()


def request_class(api_key: int) -> Any:
    return MESSAGE_CLASSES[api_key][0]


def response_class(api_key: int) -> Any:
    return MESSAGE_CLASSES[api_key][1]


def first_flexible_version(api_key: int) -> int:
    """The lowest request version using flexible (compact + tagged) encoding, or a huge number."""
    req = request_class(api_key)
    flex = req._flexible_versions
    # kafka-python marks "never flexible" (flexibleVersions "none") as (-1, -1).
    if flex is None or flex[0] < 0:
        return 1 << 15
    return flex[0]
