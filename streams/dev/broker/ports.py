"""Ports for local brokers and test servers: free, and never in the kernel's ephemeral range."""

from __future__ import annotations

import os
import random
import socket
import tempfile
import time
from pathlib import Path

from streams.errors import BrokerUnavailable

# Listening ports come from below the kernel's ephemeral range. A port from inside it (what
# bind(0) returns) can be taken while its broker is down: a client reconnecting to 127.0.0.1:P
# from the ephemeral port P connects to itself (TCP simultaneous open) and holds P, so the
# restarted node cannot bind it. Three-node tests saw "port P is taken" on a restart.
_LISTEN_PORTS = range(20000, 32768)
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# A port handed out is not handed out again, to any process of this user, for this long: a
# broker stopped for a test's outage leaves its port free for minutes, and a process of another
# test (pytest-xdist runs several) picked it and held it, so the broker could not restart on it.
RESERVED_S = 30 * 60
_RESERVED = Path(tempfile.gettempdir()) / f"tidemark-ports-{os.getuid()}"


def _listen_ports() -> range:
    try:
        low, high = (int(v) for v in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return _LISTEN_PORTS
    if low > 12000:
        return range(max(1024, low - 12000), low)
    return range(high + 1, min(65536, high + 12001))


def free_port() -> int:
    """A free TCP port on 127.0.0.1 outside the ephemeral range (see _LISTEN_PORTS), that no
    process of this user was given in the last RESERVED_S (see `_reserve`)."""
    ports = _listen_ports()
    for _ in range(200):
        port = random.choice(ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            if not port_taken(port) and _reserve(port):
                return port
    raise BrokerUnavailable(f"no free port in {ports.start}..{ports.stop - 1} on 127.0.0.1")


def _reserve(port: int) -> bool:
    """Claim `port` for RESERVED_S across processes: a file made exclusively in a shared folder
    (an older claim is taken over). False if another process holds a claim on it."""
    _RESERVED.mkdir(exist_ok=True)
    claim = _RESERVED / str(port)
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        pass
    try:
        if time.time() - claim.stat().st_mtime < RESERVED_S:
            return False
        # An old claim: taken over. Two processes taking over one at once both get the port:
        # as rare as two picking it at once was before claims.
        claim.touch()
    except OSError:
        return False
    return True


def port_taken(port: int) -> bool:
    """Whether something listens on the port of 127.0.0.1 now."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
