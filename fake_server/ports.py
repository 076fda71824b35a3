"""Where a control plane listens: a port below the kernel's ephemeral range, and the same port
again after a restart.

Rules of this module:
- Asked for "any port", a control plane picks one of :func:`stable_ports` (below the ephemeral
  range: no port-0 bind or outgoing connection of any process can take it while a restart has
  let it go); the kernel's own choice only when none of a few tries is free.
- A restart binds its port again (:func:`bind_again`), trying again for a bounded time while a
  forked child still holds a copy of the old listener.
"""

from __future__ import annotations

import asyncio
import errno
import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_ATTEMPTS = 64
_PORTS_RNG = random.Random()   # its own: a port pick never moves a seeded global sequence


def stable_ports() -> range:
    """The ports a control plane asked for "any port" picks from: below the kernel's ephemeral
    range, so neither a port-0 bind nor an outgoing connection of any process can take one while
    a restart has let it go (a restart binds the same port again; a lane starting a world
    meanwhile took it once: EADDRINUSE)."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(max(1024, low // 2), max(1025, low))


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; port 0 picks a free one of :func:`stable_ports`
    (the kernel's own choice only when none of a few tries is free)."""
    if port:
        return _bind_exactly(host, port)
    ports = stable_ports()
    for _ in range(PORT_ATTEMPTS):
        try:
            return _bind_exactly(host, _PORTS_RNG.choice(ports))
        except OSError:
            continue
    return _bind_exactly(host, 0)


#: how long a restart may wait for its own port to be free again
REBIND_BOUND = 5.0
REBIND_STEP = 0.02


async def bind_again(host: str, port: int) -> socket.socket:
    """``host:port`` again after a restart let it go. A child forked (by this process, another
    thread's runner start) while the old listener was open holds a copy of it until the child
    execs; until then the bind fails with EADDRINUSE, so it is tried again, within
    :data:`REBIND_BOUND` seconds."""
    deadline = asyncio.get_running_loop().time() + REBIND_BOUND
    while True:
        try:
            return _bind_exactly(host, port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or asyncio.get_running_loop().time() >= deadline:
                raise
        await asyncio.sleep(REBIND_STEP)


def _bind_exactly(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock
