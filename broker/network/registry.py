"""The API registry: each API module registers its key, versions and handler here.

ApiVersions is generated from this table, and the connection dispatches through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.apis import ApiKey, first_flexible_version, request_class, response_class
from protocol.errors import ErrorCode
from protocol.nullability import checker

Handler = Callable[..., Any]
ErrorResponder = Callable[[Any, ErrorCode], Any]
# fast_path(broker, version, frame, body_offset) -> an encoded body, or None to take the normal path.
FastPath = Callable[[Any, int, bytes, int], Any]
# decoder(body, version) -> the request as the handler wants it (default: the schema codec's object).
Decoder = Callable[[memoryview, int], Any]
# unsupported_version(broker) -> the encoded answer to a version outside min..max (default: the connection closes).
Unsupported = Callable[[Any], bytes]


@dataclass(slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponder | None
    fast_path: FastPath | None = None
    decoder: Decoder | None = None
    unsupported_version: Unsupported | None = None
    # (request class, response class, first flexible version), built on the API's first request:
    # parsing the ~90 JSON schemas of the served APIs at registration cost ~25 ms of start-up.
    _codec: tuple[Any, Any, int] | None = None

    def _build(self) -> tuple[Any, Any, int]:
        req = request_class(self.key)
        if self.max_version > req.max_version:
            raise RuntimeError(f"{self.name} v{self.max_version} is beyond the codec's v{req.max_version}")
        self._codec = codec = (req, response_class(self.key), first_flexible_version(self.key))
        return codec

    @property
    def request_cls(self) -> Any:
        return (self._codec or self._build())[0]

    @property
    def response_cls(self) -> Any:
        return (self._codec or self._build())[1]

    def decode(self, body: memoryview, version: int) -> Any:
        """The request at `version`; raises on malformed input, including a null where the
        schema does not allow one at that version (protocol/nullability.py)."""
        if self.decoder is not None:
            return self.decoder(body, version)
        request = self.request_cls.decode(body, version=version)
        check = checker(self.request_cls, version)
        if check is not None:
            check(request, "")
        return request

    def flexible(self, version: int) -> bool:
        return version >= (self._codec or self._build())[2]


REGISTRY: dict[int, ApiSpec] = {}


def api(
    key: ApiKey,
    min_version: int,
    max_version: int,
    *,
    error_response: ErrorResponder | None = None,
    fast_path: FastPath | None = None,
    decoder: Decoder | None = None,
    unsupported_version: Unsupported | None = None,
) -> Callable[[Handler], Handler]:
    """Register `handler(ctx, request)` for `key` at versions min..max.

    The handler returns a kafka-python response object, an encoded body (bytes or a list
    of buffers), None for no response (acks=0), or a coroutine producing one of those.
    `error_response(request, code)` builds the whole-request error answer Kafka's
    `getErrorResponse` would send; it serves injected faults and unexpected exceptions.
    `fast_path` may answer from the raw request bytes before anything is decoded; `decoder`
    replaces the schema codec for a hot API (it must read exactly what the schema reads).
    `unsupported_version(broker)` answers a version outside min..max (ApiVersions, KIP-511),
    where any other API's connection closes.
    """

    def register(handler: Handler) -> Handler:
        if key in REGISTRY:
            raise RuntimeError(f"API {key.name} registered twice")
        REGISTRY[key] = ApiSpec(
            key=int(key),
            name=key.name,
            min_version=min_version,
            max_version=max_version,
            handler=handler,
            error_response=error_response,
            fast_path=fast_path,
            decoder=decoder,
            unsupported_version=unsupported_version,
        )
        return handler

    return register


def served() -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of every registered API, sorted by key."""
    return sorted((s.key, s.min_version, s.max_version) for s in REGISTRY.values())
