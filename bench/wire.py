"""Kafka frames for the benchmarks: requests encoded once and sent many times, and a blocking
client for set-up and for checking that a request really succeeds before it is sent in bulk."""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.apis import MESSAGE_CLASSES, ApiKey

CLIENT_ID = "kaflet-bench"


def encode(request: Any, correlation_id: int = 1, client_id: str = CLIENT_ID) -> bytes:
    """A whole frame (size prefix, header, body) at the version `request` was built with."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


class SyncClient:
    """One blocking connection; `request()` sends one request and decodes its response."""

    def __init__(self, bootstrap: str, timeout: float = 15.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._corr = 0

    def request(self, request: Any) -> Any:
        self._corr += 1
        self.sock.sendall(encode(request, self._corr))
        frame = self._read_frame()
        corr = struct.unpack_from(">i", frame)[0]
        if corr != self._corr:
            raise ConnectionError(f"correlation id {corr}, expected {self._corr}")
        response_cls = MESSAGE_CLASSES[request.API_KEY][1]
        return response_cls.decode(frame, version=request.API_VERSION, header=True)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version the broker serves."""
    from kafka.protocol.metadata import ApiVersionsRequest

    with SyncClient(bootstrap) as client:
        # v0: served by every broker (the mock serves 0-2 and answers newer ones differently).
        resp = client.request(ApiVersionsRequest[0]())
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def missing_apis(bootstrap: str, needs: dict[ApiKey, int | None]) -> list[str]:
    """What the broker does not serve among `needs` (api -> exact version, or None for any), readably."""
    served = api_versions(bootstrap)
    missing = []
    for key, version in needs.items():
        name = key.name.title().replace("_", "")
        if int(key) not in served:
            missing.append(name)
        elif version is not None and not served[int(key)][0] <= version <= served[int(key)][1]:
            missing.append(f"{name} v{version}")
    return missing


def metadata_request(topics: list[str] | None, auto_create: bool = False, version: int = 12) -> Any:
    from kafka.protocol.metadata import MetadataRequest

    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t, topic_id=None) for t in topics]
    return MetadataRequest[version](topics=wanted, allow_auto_topic_creation=auto_create)


def offset_commit_request(group: str, topic: str, offsets: dict[int, int], version: int = 8) -> Any:
    """A simple (group-less, generation -1) commit, as admin tools and assign-mode consumers send."""
    from kafka.protocol.consumer import OffsetCommitRequest

    partitions = [
        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=""
        )
        for p, o in offsets.items()
    ]
    return OffsetCommitRequest[version](
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=partitions)],
    )


def offset_commit_errors(response: Any) -> list[int]:
    """Every non-zero partition error code in an OffsetCommit response."""
    return [p.error_code for t in response.topics for p in t.partitions if p.error_code]


def offset_fetch_request(group: str, topic: str, partitions: list[int], version: int = 6) -> Any:
    from kafka.protocol.consumer import OffsetFetchRequest

    return OffsetFetchRequest[version](
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)],
    )


def ensure_topic(target: Any, name: str, partitions: int) -> None:
    """Make `name` exist with `partitions` partitions on either broker.

    The mock gets it through its C API. kaflet gets it through CreateTopics when it serves it,
    otherwise through Metadata auto-creation, which only works when the broker was started
    with `--default-partitions` equal to `partitions` (checked here).
    """
    if hasattr(target, "create_topic"):
        target.create_topic(name, partitions)
        return
    if not missing_apis(target.bootstrap, {ApiKey.CREATE_TOPICS: 2}):
        from kafka.protocol.admin import CreateTopicsRequest

        topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
        with SyncClient(target.bootstrap) as client:
            resp = client.request(CreateTopicsRequest[2](topics=[topic], timeout_ms=10_000, validate_only=False))
        code = resp.topics[0].error_code
        if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS (its partition count is checked below)
            raise RuntimeError(f"CreateTopics {name}: error {code}")
    else:
        with SyncClient(target.bootstrap) as client:
            resp = client.request(metadata_request([name], auto_create=True))
        if resp.topics[0].error_code not in (0, 5):  # 5: LEADER_NOT_AVAILABLE while being created
            raise RuntimeError(f"auto-creating {name}: error {resp.topics[0].error_code}")
    with SyncClient(target.bootstrap) as client:
        resp = client.request(metadata_request([name]))
    got = len(resp.topics[0].partitions)
    if got != partitions:
        raise RuntimeError(
            f"{name} has {got} partitions, wanted {partitions} (without CreateTopics: start kaflet with --default-partitions)"
        )
