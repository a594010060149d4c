"""A raw Kafka protocol client for tests: exact requests in, exact responses out.

Requests are kafka-python message objects; several may be outstanding on one connection
(responses arrive in order), and raw bytes can be sent to exercise bad input.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from protocol.apis import MESSAGE_CLASSES


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str | None) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._corr = 0
        self._pending: list[tuple[int, Any, int, asyncio.Future[Any]]] = []
        self._reader_task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, bootstrap: str, client_id: str | None = "raw-client") -> RawClient:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, client_id)

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def send(self, request: Any, version: int | None = None) -> asyncio.Future[Any]:
        """Send `request` (at `version`, or the one it was built with); the future gets the response."""
        if version is not None:
            request.API_VERSION = version
        version = request.API_VERSION
        corr = self._next_corr()
        request.with_header(correlation_id=corr, client_id=self.client_id)
        data = bytes(request.encode(header=True, framed=True))
        response_cls = MESSAGE_CLASSES[request.API_KEY][1]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((corr, response_cls, version, fut))
        self.writer.write(data)
        if self._reader_task is None:
            self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())
        return fut

    async def request(self, request: Any, version: int | None = None, timeout: float = 10.0) -> Any:
        return await asyncio.wait_for(self.send(request, version), timeout)

    async def _read_loop(self) -> None:
        try:
            while True:
                frame = await self.read_frame()
                corr = struct.unpack_from(">i", frame, 0)[0]
                if not self._pending:
                    raise AssertionError(f"unexpected response, correlation id {corr}")
                want, response_cls, version, fut = self._pending.pop(0)
                if corr != want:
                    fut.set_exception(AssertionError(f"correlation id {corr}, expected {want}"))
                    continue
                try:
                    response = response_cls.decode(frame, version=version, header=True)
                except Exception as exc:  # surface decode failures to the waiting test
                    fut.set_exception(exc)
                    continue
                if not fut.done():
                    fut.set_result(response)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            for *_, fut in self._pending:
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection closed: {exc}"))
            self._pending.clear()

    async def read_frame(self) -> bytes:
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        return await self.reader.readexactly(size)

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def wait_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection within `timeout`."""
        if self._reader_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._reader_task), timeout)
            except TimeoutError:
                return False
            return True
        try:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        while data:
            try:
                data = await asyncio.wait_for(self.reader.read(65536), timeout)
            except TimeoutError:
                return False
            except ConnectionError:
                return True
        return True

    async def close(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass
