"""What a listener that cannot bind tells the user: which port, what it is for, and what to do.

`kaflet serve` logs the message at "cannot start" and exits 1; the raw OSError ("[Errno 98]
Address already in use") names neither the port's role nor the flag that moves it.
"""

from __future__ import annotations

import errno
import socket


class BindError(OSError):
    """A listener could not bind; str() is the whole sentence for the user."""

    def __init__(self, message: str, cause: OSError) -> None:
        super().__init__(cause.errno, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def bind_error(exc: OSError, role: str, host: str, port: int, flag: str, alternative: str = "", choose: str | None = None) -> BindError:
    """The BindError for `exc` raised while binding `role` (e.g. "the metrics endpoint") to host:port;
    `flag` moves it (--metrics-port), `alternative` is one more way out (", or --no-metrics"), and
    `choose` replaces the advice where a flag of its own does not move the port (--listeners)."""
    host = host or "0.0.0.0"
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        choose = choose or f"choose another with {flag} PORT, or {flag} 0 for a free one"
        message = f"{role} cannot listen on {where}: the port is already in use (another kaflet or Kafka?); {choose}{alternative}"
    elif exc.errno == errno.EACCES:
        choose = choose or f"choose another with {flag} PORT"
        message = f"{role} cannot listen on {where}: permission denied (ports below 1024 need privileges); {choose}"
    elif exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(exc, socket.gaierror):
        message = f"{role} cannot listen on {where}: {host!r} is not an address of this machine ({exc.strerror or exc})"
    else:
        message = f"{role} cannot listen on {where}: {exc.strerror or exc}"
    return BindError(message, exc)
