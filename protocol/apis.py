"""API keys and the kafka-python message classes that encode and decode them."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


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
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    # KIP-932 share groups
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# Where each API's kafka-python classes live (`<Name>Request` / `<Name>Response`, the name
# being the ApiKey's in CamelCase). A class is built on the first lookup of its API: importing
# every message module costs ~50 ms of start-up, and the broker serves only some of them.
_MODULES: dict[int, str] = {
    **dict.fromkeys((0, 22, 24, 25, 26, 27, 28), "kafka.protocol.producer"),
    **dict.fromkeys((1, 2, 8, 9, 11, 12, 13, 14, 23, 47), "kafka.protocol.consumer"),
    **dict.fromkeys((3, 10, 18), "kafka.protocol.metadata"),
    **dict.fromkeys((68, 69), "protocol.kip848"),
    **dict.fromkeys((88, 89), "protocol.kip1071"),
    **dict.fromkeys((76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92), "protocol.kip932"),
    **dict.fromkeys((17, 36), "kafka.protocol.sasl"),
}
_NAMES: dict[int, str] = {55: "DescribeQuorum", 74: "ListConfigResources"}  # keys ApiKey does not name


def message_name(key: int) -> str:
    """Kafka's name of the API ("OffsetCommit"): its message classes are <name>Request/<name>Response."""
    if key in _NAMES:
        return _NAMES[key]
    return "".join(part.capitalize() for part in ApiKey(key).name.split("_"))


class _MessageClasses(dict[int, tuple[Any, Any]]):
    """api key -> (request class, response class), resolved (and built) on first lookup."""

    def __missing__(self, api_key: int) -> tuple[Any, Any]:
        import importlib

        try:
            name = message_name(api_key)
        except ValueError:
            raise KeyError(api_key) from None
        module = importlib.import_module(_MODULES.get(api_key, "kafka.protocol.admin"))
        req = getattr(module, name + "Request", None)
        resp = getattr(module, name + "Response", None)
        if req is None or resp is None or getattr(req, "API_KEY", None) != api_key:
            raise KeyError(api_key)
        self[api_key] = (req, resp)
        return req, resp

    def __contains__(self, api_key: object) -> bool:
        try:
            self[api_key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def get(self, api_key: int, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[api_key]
        except KeyError:
            return default


MESSAGE_CLASSES: dict[int, tuple[Any, Any]] = _MessageClasses()


def request_class(api_key: int) -> Any:
    return MESSAGE_CLASSES[api_key][0]


def response_class(api_key: int) -> Any:
    return MESSAGE_CLASSES[api_key][1]


class LazyMessageClass:
    """A kafka-python message class, or a struct nested in one, built on first use.

    API modules name their response classes at module level (`_Topic = MetadataResponse.
    MetadataResponseTopic`); naming them through `lazy_response(ApiKey.METADATA)` keeps that
    style while the class (~0.3 ms of JSON schema parsing apiece, ~25 ms for the ~90 classes
    the API modules name) is built on the first request that needs it, not at start-up.
    Calling it builds a message; a CamelCase attribute is a nested struct (lazy too); any
    other attribute is the real class's.
    """

    __slots__ = ("_api_key", "_path", "_real")

    def __init__(self, api_key: int, path: tuple[str, ...] = ()) -> None:
        self._api_key = api_key
        self._path = path
        self._real: Any = None

    def resolve(self) -> Any:
        real = self._real
        if real is None:
            real = response_class(self._api_key)
            for name in self._path:
                real = getattr(real, name)
            self._real = real
        return real

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (self._real or self.resolve())(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name[:1].isupper() and not name.isupper():  # CamelCase: a nested struct, not API_KEY
            return LazyMessageClass(self._api_key, (*self._path, name))
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        return f"<lazy {'.'.join((message_name(self._api_key) + 'Response', *self._path))}>"


def lazy_response(api_key: int) -> Any:
    """`api_key`'s response class, built on first use (see LazyMessageClass)."""
    return LazyMessageClass(api_key)


def first_flexible_version(api_key: int) -> int:
    """The lowest request version using flexible (compact + tagged) encoding, or a huge number."""
    req = request_class(api_key)
    flex = req._flexible_versions
    # kafka-python marks "never flexible" (flexibleVersions "none") as (-1, -1).
    if flex is None or flex[0] < 0:
        return 1 << 15
    return flex[0]
