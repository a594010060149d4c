"""The chaos control API over HTTP, on the metrics listener, only with `--control`.

Every operation of broker/cluster/chaos.py is `POST /control/<op>` with a JSON object of its
parameters (an empty body is `{}`); `push-errors` and `push_errors` are the same operation.
`GET /control` lists the state (every rule, stack, hole, the latency, whether the broker is
down, the operation counters), `GET /control/connections` the open connections,
`DELETE /control` clears everything. Answers are JSON: the operation's result with 200, or
`{"error": "..."}` with 400 (bad parameters), 404 (no such operation) or 405.

`ControlClient` is the client side: `kaflet chaos` uses it, and so can any program or test.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, Protocol

from broker.cluster.chaos import OPERATIONS, ChaosError
from broker.metrics.http import CONTROL_PREFIX, ControlHandler, Response

if TYPE_CHECKING:
    from broker.cluster.chaos import Chaos


class ControlTarget(Protocol):
    """What the control API drives: a node's (or a cluster's) chaos operations."""

    chaos: Chaos


JSON = "application/json"


def _json(status: int, value: Any) -> Response:
    return status, JSON, (json.dumps(value) + "\n").encode()


def handler(broker: ControlTarget) -> ControlHandler:
    async def handle(method: str, path: str, body: bytes) -> Response:
        op = path[len(CONTROL_PREFIX) :].strip("/").replace("-", "_")
        if method == "DELETE" and op == "":
            op = "clear"
        elif method == "GET" and op in ("", "connections"):
            op = op or "state"
        elif method != "POST":
            return _json(
                405, {"error": f"{method} {path}: use GET /control, GET /control/connections, POST /control/<op>, DELETE /control"}
            )
        if op not in OPERATIONS:
            return _json(404, {"error": f"unknown operation {op!r}", "operations": list(OPERATIONS)})
        try:
            params = json.loads(body) if body.strip() else {}
        except ValueError as exc:
            return _json(400, {"error": f"body is not JSON: {exc}"})
        try:
            return _json(200, await broker.chaos.apply(op, params))
        except ChaosError as exc:
            return _json(400, {"error": str(exc)})

    return handle


class ControlError(Exception):
    """The control API refused an operation, or could not be reached."""


class ControlClient:
    """Calls a running broker's control API: `ControlClient("127.0.0.1:9644").apply("latency", {"ms": 50})`."""

    def __init__(self, address: str, timeout: float = 10.0, token: str | None = None) -> None:
        import os

        self.base = address if address.startswith("http") else f"http://{address}"
        self.timeout = timeout
        self.token = token if token is not None else os.environ.get("KAFLET_CONTROL_TOKEN")  # --control-token

    def request(self, method: str, path: str, params: dict[str, Any] | None = None) -> Any:
        data = None if params is None else json.dumps(params).encode()
        headers = {"Content-Type": JSON}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                answer = json.loads(text)
            except ValueError:
                answer = None
            if isinstance(answer, dict) and "error" in answer:
                raise ControlError(str(answer["error"])) from None
            # Not kaflet's JSON: another server, or a kaflet that does not say why.
            raise ControlError(
                f"no control API at {self.base} (HTTP {exc.code} {exc.reason}): is that the broker's metrics address "
                "(--metrics-host/--metrics-port), and does the broker run with --control?"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ControlError(
                f"cannot reach the control API at {self.base}: {getattr(exc, 'reason', exc)} "
                "(is the broker running, and is that its metrics address? --control-address sets it)"
            ) from None

    def apply(self, op: str, params: dict[str, Any] | None = None) -> Any:
        if op == "state":
            return self.request("GET", CONTROL_PREFIX)
        if op == "connections":
            return self.request("GET", CONTROL_PREFIX + "/connections")
        return self.request("POST", f"{CONTROL_PREFIX}/{op}", params or {})
