"""The web ports Tidemark's processes listen on: an error that says which port, what serves
on it, and which flag or variable chooses another, instead of a traceback."""

from __future__ import annotations

import socket

from streams.errors import TidemarkError


class PortUnavailable(TidemarkError):
    """A process cannot listen on its web port (in use, or not an address of this host)."""


def cannot_listen(
    host: str, port: int, serving: str, how_to_change: str, exc: OSError
) -> PortUnavailable:
    """The error for `exc` raised binding `host:port`: `serving` says what the port is for,
    `how_to_change` names the flag or variable that sets it (`--web-port or TIDEMARK_WEB_PORT`)."""
    reason = exc.strerror or str(exc)
    return PortUnavailable(
        f"cannot listen on {host}:{port} for {serving}: {reason.lower()}; choose another port "
        f"with {how_to_change}, or stop the process that holds it"
    )


def check_can_listen(host: str, port: int, serving: str, how_to_change: str) -> None:
    """Raise PortUnavailable unless a server could listen on `host:port` now (as http.server
    binds: with SO_REUSEADDR, so a port in TIME_WAIT is free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise cannot_listen(host, port, serving, how_to_change, exc) from None
