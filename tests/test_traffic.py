"""labkit.traffic reads real TCP byte counters of chosen processes."""
import os
import socket
import subprocess
import sys
import time

import pytest

from labkit import traffic

pytestmark = pytest.mark.skipif(not traffic.available(), reason="`ss` (iproute2, Linux) is not installed")

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


def test_counts_what_a_process_received_and_sent_on_its_connections():
    server = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        before = traffic.process_traffic([server.pid])
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"y" * 100_000)
            answer = b""
            while len(answer) < 30_000:
                answer += client.recv(65536)
            for _ in range(50):  # the last acknowledgement may still be on its way
                moved = traffic.process_traffic([server.pid]) - before
                if moved.sent == 30_000:
                    break
                time.sleep(0.02)
        assert moved.received == 100_000
        assert moved.sent == 30_000
    finally:
        server.kill()
        server.wait()


def test_without_ss_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match="install iproute2"):
        traffic.process_traffic([os.getpid()])
