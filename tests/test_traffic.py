"""labkit.traffic reads real TCP byte counters of chosen processes, and without `ss` the loopback interface's."""
import os
import socket
import subprocess
import sys
import time

import pytest

from labkit import traffic

needs_ss = pytest.mark.skipif(not traffic.available(), reason="`ss` (iproute2, Linux) is not installed")

ECHO_SERVER = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
connection, _ = server.accept()
received = 0
while received < 100_000:
    received += len(connection.recv(65536))
connection.sendall(b"x" * 30_000)
sys.stdin.read()
"""


def exchange_with_echo_server(read_bytes):
    """``read_bytes(server_pid)`` before the server receives 100,000 bytes and sends 30,000, and after
    (until the last acknowledgement arrived, or a second passed): their difference."""
    server = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        before = read_bytes(server.pid)
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"y" * 100_000)
            answer = b""
            while len(answer) < 30_000:
                answer += client.recv(65536)
            for _ in range(50):  # the last acknowledgement may still be on its way
                moved = read_bytes(server.pid) - before
                if moved.sent >= 30_000:
                    break
                time.sleep(0.02)
        return moved
    finally:
        server.kill()
        server.wait()


@needs_ss
def test_counts_what_a_process_received_and_sent_on_its_connections():
    moved = exchange_with_echo_server(lambda pid: traffic.process_traffic([pid]))
    assert moved.received == 100_000
    assert moved.sent == 30_000


def test_the_loopback_counters_see_at_least_the_exchange_both_ways():
    moved = exchange_with_echo_server(lambda pid: traffic.loopback_traffic())
    # every process on the machine adds to them, and TCP headers too: at least, never exactly
    assert moved.sent >= 130_000 and moved.received >= 130_000, moved


def test_without_ss_sent_to_tasks_gives_one_loopback_total(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    sent = traffic.sent_to_tasks(os.getpid(), cluster=None)
    assert list(sent) == [traffic.LOOPBACK] and sent[traffic.LOOPBACK] > 0


def test_without_ss_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match="install iproute2"):
        traffic.process_traffic([os.getpid()])


def test_connections_between_tasks_say_who_connected_to_whose_port():
    """This process plays "worker:0", connecting to the echo server's port, which plays "ps:0"; without `ss`."""
    server = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)) as client:
            pids, ports = {"worker:0": os.getpid(), "ps:0": server.pid}, {"ps:0": port, "worker:0": 1}
            for _ in range(50):  # the server may not have accepted yet: then it has no connection to list
                if traffic.connections_between(pids, ports):
                    break
                time.sleep(0.02)
            assert traffic.connections_between(pids, ports) == [("worker:0", "ps:0")]  # the server's end: not to a task
    finally:
        server.kill()
        server.wait()
    assert traffic.connections_between(pids, ports) == []  # the connection closed, the server exited
