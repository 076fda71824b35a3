"""A control plane asked for any port listens below the kernel's ephemeral range, so a restart
binds its port again even while other worlds start and connections come and go: a port-0 bind
or an outgoing connection never takes a port from that range (the FLT-002 lanes once lost a
restarting control plane's ephemeral port: EADDRINUSE)."""
from __future__ import annotations

import asyncio
import errno
import socket

import pytest

from fake_server import ControlPlane, ports


def test_stable_ports_lie_below_the_ephemeral_range() -> None:
    low = int(ports.EPHEMERAL_RANGE.read_text().split()[0])
    picked = ports.stable_ports()
    assert picked.stop <= low and picked.start >= 1024 and len(picked) > 1000


def test_the_range_is_read_from_the_kernel(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "range"
    fake.write_text("40000\t50000\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", fake)
    assert ports.stable_ports() == range(20000, 40000)
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert ports.stable_ports() == range(16384, 32768)


def test_a_taken_port_is_skipped(monkeypatch) -> None:
    held = ports.bind("127.0.0.1", 0)
    port = held.getsockname()[1]
    picks = iter([port, port + 1 if port + 1 in ports.stable_ports() else port - 1])
    monkeypatch.setattr(ports._PORTS_RNG, "choice", lambda _r: next(picks))
    try:
        sock = ports.bind("127.0.0.1", 0)
        assert sock.getsockname()[1] != port
        sock.close()
    finally:
        held.close()


async def test_a_restart_binds_the_same_stable_port_while_port_0_binds_go_on() -> None:
    async with ControlPlane() as cp:
        port = cp.port
        assert port in ports.stable_ports()
        others = []
        try:
            for _ in range(50):   # what lanes starting worlds do while a plane restarts
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                others.append(s)
            await cp.restart()
        finally:
            for s in others:
                s.close()
        assert cp.port == port


async def test_a_restart_binds_again_once_a_held_copy_of_the_old_listener_goes() -> None:
    """A child forked while the old listener was open holds a copy of it until it execs: the
    restart's bind fails with EADDRINUSE until then, and is tried again (bounded)."""
    held = ports.bind("127.0.0.1", 0)  # the child's copy of the old listener
    port = held.getsockname()[1]
    asyncio.get_running_loop().call_later(0.1, held.close)  # the child execs
    sock = await ports.bind_again("127.0.0.1", port)
    assert sock.getsockname()[1] == port
    sock.close()


async def test_a_port_held_for_good_fails_the_restart_within_its_bound(monkeypatch) -> None:
    held = ports.bind("127.0.0.1", 0)
    monkeypatch.setattr(ports, "REBIND_BOUND", 0.1)
    try:
        with pytest.raises(OSError) as raised:
            await ports.bind_again("127.0.0.1", held.getsockname()[1])
        assert raised.value.errno == errno.EADDRINUSE
    finally:
        held.close()
