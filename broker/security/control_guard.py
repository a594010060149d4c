"""The control API's request checks: only its owner drives it (finding 2 of the security review:
any web page open in a local browser could POST text/plain or form bodies to it).

A /control request is refused unless
- its `Host` header is the listener's own address (a DNS-rebinding page sends its own name): 421;
- it carries no foreign `Origin` (nor `Sec-Fetch-Site: cross-site`): 403;
- with `--control-token`, it carries `Authorization: Bearer <token>` (compared in constant time;
  required when the metrics listener is not on loopback): 401;
- a POST says `Content-Type: application/json` (what no HTML form or no-preflight fetch can send
  cross-origin): 415.
"""

from __future__ import annotations

import hmac
import ipaddress

Response = tuple[int, str, bytes]
_TEXT = "text/plain; charset=utf-8"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ControlGuard:
    def __init__(self, host: str, token: str | None) -> None:
        self.host = host
        self.token = token
        self.port = 0  # set once the listener is bound

    def hosts(self) -> set[str]:
        names = {self.host}
        if is_loopback(self.host) or self.host in ("", "0.0.0.0", "::"):
            names |= {"127.0.0.1", "localhost", "::1"}
        out = set()
        for name in names:
            shown = f"[{name}]" if ":" in name and not name.startswith("[") else name
            out.add(f"{shown}:{self.port}".lower())
        return out

    def __call__(self, method: str, path: str, headers: dict[str, list[str]]) -> Response | None:
        hosts = self.hosts()
        host = headers.get("host", [])
        if len(host) != 1 or host[0].lower() not in hosts:
            return 421, _TEXT, b"the Host header is not this listener's address\n"
        origins = headers.get("origin", [])
        if any(o.lower().rstrip("/") not in {f"http://{h}" for h in hosts} for o in origins):
            return 403, _TEXT, b"requests from another origin are refused\n"
        if any(v.lower() == "cross-site" for v in headers.get("sec-fetch-site", [])):
            return 403, _TEXT, b"cross-site requests are refused\n"
        if self.token is not None:
            auth = headers.get("authorization", [])
            given = auth[0][7:] if len(auth) == 1 and auth[0][:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return 401, _TEXT, b"a valid Authorization: Bearer token is needed\n"
        if method == "POST":
            types = headers.get("content-type", [])
            if len(types) != 1 or types[0].split(";", 1)[0].strip().lower() != "application/json":
                return 415, _TEXT, b"control requests are JSON: Content-Type: application/json\n"
        return None
