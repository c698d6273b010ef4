"""Ports for local brokers and test servers: free, and never in the kernel's ephemeral range."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from streams.errors import BrokerUnavailable

# Listening ports come from below the kernel's ephemeral range. A port from inside it (what
# bind(0) returns) can be taken while its broker is down: a client reconnecting to 127.0.0.1:P
# from the ephemeral port P connects to itself (TCP simultaneous open) and holds P, so the
# restarted node cannot bind it. Three-node tests saw "port P is taken" on a restart.
_LISTEN_PORTS = range(20000, 32768)
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _listen_ports() -> range:
    try:
        low, high = (int(v) for v in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return _LISTEN_PORTS
    if low > 12000:
        return range(max(1024, low - 12000), low)
    return range(high + 1, min(65536, high + 12001))


def free_port() -> int:
    """A free TCP port on 127.0.0.1 outside the ephemeral range (see _LISTEN_PORTS)."""
    ports = _listen_ports()
    for _ in range(200):
        port = random.choice(ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            if not port_taken(port):
                return port
    raise BrokerUnavailable(f"no free port in {ports.start}..{ports.stop - 1} on 127.0.0.1")


def port_taken(port: int) -> bool:
    """Whether something listens on the port of 127.0.0.1 now."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
