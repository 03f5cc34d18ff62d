"""The instructor guide's Linux firewall rules, run as written in a network namespace of their own:
a connection from another "laptop" (namespace) is refused, loopback still works, and the
"after the workshop" lines open the port again. Needs root, `ip` and nft or iptables; skipped otherwise."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.deploy import netns
from support.network import created_network

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[1]
LAPTOP, NEIGHBOUR = "10.232.0.1", "10.232.0.2"  # exist only inside the namespaces
PORT = 2222
LISTEN = ("import socket\n"
          "server = socket.create_server(('0.0.0.0', %d))\n"
          "print('listening', flush=True)\n"
          "while True:\n"
          "    server.accept()[0].close()\n" % PORT)
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], %d), timeout=3).close(); print('connected')\n"
           "except ConnectionRefusedError:\n"
           "    print('refused')\n"
           "except OSError as error:\n"
           "    print(type(error).__name__)\n" % PORT)


def guide_block(marker):
    """(turn-on lines, turn-off lines) of the guide's shell block containing ``marker``, without ``sudo``."""
    guide = (ROOT / "docs" / "instructor-guide.md").read_text()
    block = next(block for block in re.findall(r"```bash\n(.*?)```", guide, re.S) if marker in block)
    on, off = block.split("# after the workshop:")
    return ([line.removeprefix("sudo ") for line in part.splitlines() if line.strip()] for part in (on, off))


@pytest.fixture
def laptops():
    network = created_network([LAPTOP, NEIGHBOUR], name=f"{netns.PREFIX}fw{os.getpid()}")
    server = subprocess.Popen(["ip", "netns", "exec", network.namespace(LAPTOP), sys.executable, "-c", LISTEN],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        yield network
    finally:
        server.kill()
        server.wait()
        network.destroy()
    assert not network.exists(), "namespaces were left behind"


def connect(network, source, target):
    """'connected', 'refused' or the error of a TCP connection from host ``source`` to ``target``:PORT."""
    done = subprocess.run(["ip", "netns", "exec", network.namespace(source), sys.executable, "-c", CONNECT, target],
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or done.stderr


def run_in(network, host, lines):
    for line in lines:
        done = subprocess.run(["ip", "netns", "exec", network.namespace(host), "sh", "-c", line],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"`{line}` failed: {done.stderr}"


@pytest.mark.parametrize("tool, marker", [("nft", "nft add table inet pslab"),
                                          ("iptables", "iptables -I INPUT")])
def test_the_guides_rule_refuses_the_room_and_keeps_loopback(laptops, tool, marker):
    if shutil.which(tool) is None:
        pytest.skip(f"`{tool}` is not installed")
    turn_on, turn_off = guide_block(marker)
    assert connect(laptops, NEIGHBOUR, LAPTOP) == "connected", "the port must be reachable before the rule"
    run_in(laptops, LAPTOP, turn_on)
    try:
        assert connect(laptops, NEIGHBOUR, LAPTOP) == "refused"
        assert connect(laptops, LAPTOP, "127.0.0.1") == "connected"
        assert connect(laptops, LAPTOP, LAPTOP) == "connected", "the laptop's own address goes over loopback"
    finally:
        run_in(laptops, LAPTOP, turn_off)
    assert connect(laptops, NEIGHBOUR, LAPTOP) == "connected", "the after-the-workshop lines must open it again"
