"""A control plane asked for any port listens below the kernel's ephemeral range, so a restart
binds its port again even while other worlds start and connections come and go: a port-0 bind
or an outgoing connection never takes a port from that range (the FLT-002 lanes once lost a
restarting control plane's ephemeral port: EADDRINUSE)."""
from __future__ import annotations

import socket

from fake_server import ControlPlane, plane


def test_stable_ports_lie_below_the_ephemeral_range() -> None:
    low = int(plane.EPHEMERAL_RANGE.read_text().split()[0])
    ports = plane.stable_ports()
    assert ports.stop <= low and ports.start >= 1024 and len(ports) > 1000


def test_the_range_is_read_from_the_kernel(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "range"
    fake.write_text("40000\t50000\n")
    monkeypatch.setattr(plane, "EPHEMERAL_RANGE", fake)
    assert plane.stable_ports() == range(20000, 40000)
    monkeypatch.setattr(plane, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert plane.stable_ports() == range(16384, 32768)


def test_a_taken_port_is_skipped(monkeypatch) -> None:
    held = plane._bind("127.0.0.1", 0)
    port = held.getsockname()[1]
    picks = iter([port, port + 1 if port + 1 in plane.stable_ports() else port - 1])
    monkeypatch.setattr(plane._PORTS_RNG, "choice", lambda _r: next(picks))
    try:
        sock = plane._bind("127.0.0.1", 0)
        assert sock.getsockname()[1] != port
        sock.close()
    finally:
        held.close()


async def test_a_restart_binds_the_same_stable_port_while_port_0_binds_go_on() -> None:
    async with ControlPlane() as cp:
        port = cp.port
        assert port in plane.stable_ports()
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
