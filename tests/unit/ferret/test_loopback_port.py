"""A free loopback port is picked under the kernel's ephemeral range, where no outgoing connection is given
one between the check and a server's bind; the kernel's pick when none there is free."""

from __future__ import annotations

import socket

from ferret.redis_plumbing import server_process
from ferret.redis_plumbing.server_process import ephemeral_low, loopback_port, port_is_free


def test_the_port_is_under_the_ephemeral_range_and_free():
    low = ephemeral_low()
    for _ in range(20):
        port = loopback_port()
        assert low - server_process._BELOW_EPHEMERAL <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: a bind succeeds


def test_a_taken_port_is_never_given(taken_port, monkeypatch):
    monkeypatch.setattr(server_process, "_BELOW_EPHEMERAL", 1)  # the one port under `low`: the taken one
    port = loopback_port(low=taken_port + 1)
    assert port != taken_port
    assert port >= ephemeral_low()  # every pick taken: the kernel's, from its ephemeral range


def test_the_range_is_read_from_the_kernels_setting(tmp_path):
    setting = tmp_path / "ip_local_port_range"
    setting.write_text("40000\t60999\n")
    assert ephemeral_low(setting) == 40000
    setting.write_text("garbled\n")
    assert ephemeral_low(setting) == 32768
    assert ephemeral_low(tmp_path / "absent") == 32768


def test_a_port_is_free_when_a_bind_to_it_succeeds(taken_port):
    assert not port_is_free(taken_port)
    assert port_is_free(loopback_port())
