"""Reading a broker's metrics endpoint the way Prometheus does: HTTP GET, text format parsed by
prometheus_client's own parser (a malformed exposition fails the test that scraped it)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Scrape:
    """One parsed scrape: every sample by name, with its labels."""

    text: str
    families: dict[str, Any]

    def samples(self, name: str) -> list[Any]:
        return [s for f in self.families.values() for s in f.samples if s.name == name]

    def value(self, name: str, default: float | None = None, **labels: str) -> float | None:
        """The value of the one sample of `name` with exactly these labels (or `default`)."""
        found = [s.value for s in self.samples(name) if s.labels == labels]
        if not found:
            return default
        assert len(found) == 1, (name, labels, found)
        return found[0]

    def series(self, name: str, **match: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Samples of `name` whose labels include `match`, keyed by their sorted labels."""
        return {tuple(sorted(s.labels.items())): s.value for s in self.samples(name) if all(s.labels.get(k) == v for k, v in match.items())}


def parse(text: str) -> Scrape:
    return Scrape(text, {f.name: f for f in text_string_to_metric_families(text)})


def get(address: str, path: str, timeout: float = 10.0) -> tuple[int, str]:
    """(status, body) of a blocking GET (for brokers on another thread or process)."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(address: str) -> Scrape:
    status, body = get(address, "/metrics")
    assert status == 200, (status, body)
    return parse(body)


def ready(address: str) -> tuple[int, dict[str, Any]]:
    status, body = get(address, "/readyz")
    return status, json.loads(body)


async def aget(address: str, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request, for a broker on the test's own event loop."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: {address}\r\nAccept: */*\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), 30)  # the server closes after one response
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return status, headers, body


async def ascrape(address: str) -> Scrape:
    status, _headers, body = await aget(address, "/metrics")
    assert status == 200, (status, body)
    return parse(body.decode())
