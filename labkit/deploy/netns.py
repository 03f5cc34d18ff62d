"""Several "machines" on one Linux computer: network namespaces joined by a bridge (needs root).

Each host is a network namespace with one interface, ``eth0``, and its own IP address.
Its cable (a veth pair) plugs into a Linux bridge, the switch, which sits in a namespace
of its own, so this computer's own network is not touched. A program started with
``ip netns exec NAMESPACE ...`` sees only its host's interfaces: whatever it sends to
another host crosses the bridge, whose ports count the bytes (``traffic()``).
"""
import json
import os
import re
import shutil
import subprocess
import sys

from labkit.runtime import processes

BRIDGE = "br0"
PREFIX = "pslab-"


class NetnsError(RuntimeError):
    """The namespaces could not be created; the message says why."""


def unavailable_reason():
    """Why this process cannot create network namespaces, or None if it can try."""
    if not sys.platform.startswith("linux"):
        return "network namespaces exist only on Linux"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (run as root or use the localhost version)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    return None


def namespaces():
    """The names of this machine's named network namespaces."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def remove_stale():
    """Delete the namespaces of networks whose process died without cleaning up (SIGKILL, say)."""
    for name in namespaces():
        owner = re.fullmatch(rf"{PREFIX}([0-9]+)-.+", name)
        if owner and not processes.running(int(owner.group(1))):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


class VirtualNetwork:
    """Hosts at ``addresses`` (IPv4, one subnet) on one bridge; a context manager that deletes it all."""

    def __init__(self, addresses, prefix_length=24, name=None):
        self.addresses = list(addresses)
        self.prefix_length = prefix_length
        self.name = name or f"{PREFIX}{os.getpid()}"  # unique per process: parallel runs do not clash
        self.switch = f"{self.name}-switch"

    def namespace(self, address):
        """The namespace that plays the host ``address``."""
        if address not in self.addresses:
            raise KeyError(f"{address} is not a host of this network; its hosts are {', '.join(self.addresses)}")
        return f"{self.name}-{address}"

    def commands(self):
        """The ``ip`` commands that build the network, in order."""
        switch = ["ip", "-n", self.switch]
        commands = [["ip", "netns", "add", self.switch],
                    [*switch, "link", "add", BRIDGE, "type", "bridge"],
                    [*switch, "link", "set", BRIDGE, "up"]]
        for port, address in enumerate(self.addresses):
            host = self.namespace(address)
            commands += [["ip", "netns", "add", host],
                         [*switch, "link", "add", f"port{port}", "type", "veth", "peer", "name", "eth0", "netns", host],
                         [*switch, "link", "set", f"port{port}", "master", BRIDGE, "up"],
                         ["ip", "-n", host, "addr", "add", f"{address}/{self.prefix_length}", "dev", "eth0"],
                         ["ip", "-n", host, "link", "set", "eth0", "up"],
                         ["ip", "-n", host, "link", "set", "lo", "up"]]
        return commands

    def create(self):
        """Build the network; if a step fails, delete what was built and raise NetnsError."""
        reason = unavailable_reason()
        if reason:
            raise NetnsError(reason)
        for command in self.commands():
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                self.destroy()
                raise NetnsError(f"`{' '.join(command)}` failed: {done.stderr.strip()}")
        return self

    def rate_limit_commands(self, rate_mbit):
        """The ``tc`` commands that limit every cable to ``rate_mbit`` in each direction: a token bucket
        filter on the host's end (what it sends) and on the switch's end (what it receives)."""
        tbf = ["root", "tbf", "rate", f"{rate_mbit}mbit", "burst", "64kb", "latency", "100ms"]
        commands = []
        for port, address in enumerate(self.addresses):
            commands += [["tc", "-n", self.namespace(address), "qdisc", "add", "dev", "eth0", *tbf],
                         ["tc", "-n", self.switch, "qdisc", "add", "dev", f"port{port}", *tbf]]
        return commands

    def limit_rate(self, rate_mbit):
        """Limit every cable to ``rate_mbit`` Mbit/s each way (full duplex, as real links); raise NetnsError if tc fails."""
        if not rate_mbit > 0:
            raise ValueError(f"rate_mbit must be > 0, got {rate_mbit!r}; e.g. 100 for a 100 Mbit/s network.")
        for command in self.rate_limit_commands(rate_mbit):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise NetnsError(f"`{' '.join(command)}` failed: {done.stderr.strip()}")

    def destroy(self):
        """Delete the namespaces (their cables and the bridge go with them). Stop their processes first."""
        for namespace in [self.namespace(address) for address in self.addresses] + [self.switch]:
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)

    def exists(self):
        """True while any of this network's namespaces exists."""
        return any(name.startswith(f"{self.name}-") for name in namespaces())

    def traffic(self):
        """Bytes each host has sent and received through the bridge so far: address -> (sent, received)."""
        shown = subprocess.run(["ip", "-n", self.switch, "-j", "-s", "link", "show", "master", BRIDGE],
                               capture_output=True, text=True, check=True).stdout
        ports = {link["ifname"]: link["stats64"] for link in json.loads(shown)}
        # A bridge port receives what its host sends, and transmits what its host receives.
        return {address: (ports[f"port{port}"]["rx"]["bytes"], ports[f"port{port}"]["tx"]["bytes"])
                for port, address in enumerate(self.addresses)}

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.destroy()
