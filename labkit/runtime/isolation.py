"""A kernel in a private network namespace, so that no other machine reaches its task ports.

TensorFlow's servers listen on every interface, unauthenticated. On Linux (WSL2 included) an
unprivileged user may make a user and network namespace in which only its own loopback exists:
a server bound to 0.0.0.0 there is reachable from that namespace alone. The kit's kernelspec
starts each kernel through ``python -m labkit.runtime.isolation -f {connection_file}``:

1. where the system allows it (and ``LABKIT_ISOLATION`` is not ``off``), the kernel starts in a new
   namespace with loopback up, and talks to Jupyter over Unix sockets (ZeroMQ's ``ipc`` transport,
   the same bytes as over TCP); this launcher stays outside and forwards the connection file's
   127.0.0.1 ports to those sockets, so any Jupyter client (JupyterLab, nbclient, papermill) works
   unchanged, and stops the kernel if that client is gone (killed, it could not). Every task, coordinator
   and program the kernel starts inherits the namespace;
2. elsewhere (macOS, a system that forbids user namespaces) the kernel starts as usual, exposed.

Either way the kernel's ``LABKIT_NETWORK`` says which, and why (``network_status``).

Clusters started from a terminal get the same: ``labkit demo`` and ``labkit up`` run themselves again in a
private namespace before they start anything (``run_again_isolated``), and
``python -m labkit.runtime.isolation --inside -- python SCRIPT`` runs a script of yours there. Their
tasks' pids and state files are the host's, so ``labkit status`` and ``labkit stop`` reach them as usual.
"""
import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

SWITCH_VARIABLE = "LABKIT_ISOLATION"  # "off": start kernels exposed, as without this launcher
STATUS_VARIABLE = "LABKIT_NETWORK"  # set for the kernel: "isolated", or "exposed: <why>"
OUTSIDE_VARIABLE = "LABKIT_OUTSIDE"  # an isolated kernel's way out: its launcher's Unix socket (see from_outside)
ISOLATED = "isolated"
KERNEL = [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher"]
SOCKET_PATH_LIMIT = 100  # bytes: a Unix socket's path must fit in sun_path (108 on Linux, 104 on macOS)
CONNECT_PATIENCE_SECONDS = 30.0  # how long a forwarded connection waits for the kernel's socket
WATCH_SECONDS = 0.5  # how often the launcher checks that its kernel and its Jupyter client still run

_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


NOT_STARTED_ISOLATED = "not started in a private network namespace"


def network_status():
    """("isolated", "") or ("exposed", why) for this process, from what its launcher recorded."""
    status = os.environ.get(STATUS_VARIABLE, f"exposed: {NOT_STARTED_ISOLATED}")
    state, _, why = status.partition(": ")
    return state, why


def host_addresses():
    """This namespace's IPv4 addresses other than loopback: where another machine would connect."""
    return sorted({address.address for addresses in psutil.net_if_addrs().values() for address in addresses
                   if address.family == socket.AF_INET and not address.address.startswith("127.")})


def connections_from_here(ports, addresses, timeout=2.0):
    """Try a TCP connection to each address at each port: "address:port" -> accepted, refused or no answer."""
    results = {}
    for address in addresses:
        for port in ports:
            try:
                socket.create_connection((address, port), timeout=timeout).close()
                results[f"{address}:{port}"] = "accepted"
            except ConnectionRefusedError:
                results[f"{address}:{port}"] = "refused"
            except OSError:
                results[f"{address}:{port}"] = "no answer"
    return results


def from_outside(ports):
    """What a connection to each of ``ports`` on this machine's non-loopback addresses gets, tried from
    outside this kernel's namespace (by its launcher) when isolated, else from here: see connections_from_here."""
    way_out = os.environ.get(OUTSIDE_VARIABLE)
    if network_status()[0] != ISOLATED or not way_out:
        return connections_from_here(ports, host_addresses())
    with socket.socket(socket.AF_UNIX) as launcher:
        launcher.connect(way_out)
        launcher.sendall(json.dumps(list(ports)).encode() + b"\n")
        return json.loads(launcher.makefile().readline())


FIREWALL_STEPS = "docs/instructor-guide.md, \"Keep the TensorFlow ports unreachable from the room's Wi-Fi\""


def exposure(tried, why=""):
    """One sentence on what ``tried`` (connections_from_here's or from_outside's results) shows; ``why``:
    why this kernel is not isolated, if it is not."""
    accepted = [where for where, result in tried.items() if result == "accepted"]
    if not tried:
        return ("This machine has no network address besides loopback right now, so nothing else can reach the "
                "task ports; on a network (the room's Wi-Fi) it would: check again there.")
    if accepted:
        return (f"Exposed ({why or 'not isolated'}): {len(accepted)} of {len(tried)} connections to this "
                "machine's network address were accepted, as they would be from another computer on your network. "
                f"Use a network you trust, or the firewall steps in {FIREWALL_STEPS}.")
    return (f"Unreachable: none of the {len(tried)} connections to this machine's network address was accepted"
            + (", because the kernel and its tasks run in a private network namespace (only loopback inside)."
               if not why else f". The kernel is not isolated ({why}): something else (a firewall?) refuses them."))


def enter_private_network():
    """Move this (single-threaded) process into a new user and network namespace, loopback up.

    The user keeps its uid and gid inside. Raises OSError where the system does not allow it.
    """
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare(CLONE_NEWUSER | CLONE_NEWNET): {os.strerror(error)}")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as any_socket:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(any_socket, _SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(any_socket, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))


def _why_not_on_this_system():
    """The reason no namespace is tried at all (switched off, not Linux), or None."""
    if os.environ.get(SWITCH_VARIABLE, "").lower() == "off":
        return f"{SWITCH_VARIABLE}=off"
    if not sys.platform.startswith("linux"):
        return f"private network namespaces are Linux's ({sys.platform} has none)"
    return None


def why_not_isolated():
    """None if a kernel can start in a private network namespace here; else the reason, in words."""
    why = _why_not_on_this_system()
    if why:
        return why
    child = os.fork()
    if child == 0:  # try it in a throwaway child: a process cannot leave the namespace again
        try:
            enter_private_network()
        except OSError:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return "this system does not let users make network namespaces (unshare failed)"
    return None


def isolate_this_program():
    """Move this program into a private network namespace, as the kernel's launcher does for a kernel, and
    record the outcome in ``LABKIT_NETWORK`` for it and every process it starts. Call it first, before any
    thread starts (numpy's and TensorFlow's do): the system refuses a process with threads. Return None
    when isolated (or already), else why not."""
    if network_status()[0] == ISOLATED:
        return None
    why = _why_not_on_this_system()
    if not why:
        try:
            enter_private_network()
        except OSError as error:
            why = f"this system does not let users make network namespaces ({error.strerror})"
    os.environ[STATUS_VARIABLE] = f"exposed: {why}" if why else ISOLATED
    return why


def run_again_isolated(arguments):
    """Replace this program (``os.execv``: the same process, so the same pid and signals) by
    ``python arguments...`` in a private network namespace, unless it already runs in one; return why not
    (also recorded in ``LABKIT_NETWORK``) where the system does not allow it."""
    if network_status()[0] == ISOLATED:
        return None
    why = why_not_isolated()
    if why:
        os.environ[STATUS_VARIABLE] = f"exposed: {why}"
        return why
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "labkit.runtime.isolation", "--inside", "--", sys.executable,
                              *arguments])


async def _forward(port, socket_path):
    """Accept on 127.0.0.1:``port`` and pass each connection's bytes to and from ``socket_path``."""
    async def pump(reader, writer):
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def connection(tcp_reader, tcp_writer):
        with contextlib.suppress(asyncio.CancelledError):  # cancelled when the kernel has exited
            await connect_and_pump(tcp_reader, tcp_writer)

    async def connect_and_pump(tcp_reader, tcp_writer):
        for _ in range(int(CONNECT_PATIENCE_SECONDS / 0.05)):  # the kernel may not have bound it yet
            with contextlib.suppress(OSError):
                unix_reader, unix_writer = await asyncio.open_unix_connection(socket_path)
                break
            await asyncio.sleep(0.05)
        else:
            tcp_writer.close()
            return
        await asyncio.gather(pump(tcp_reader, unix_writer), pump(unix_reader, tcp_writer))

    return await asyncio.start_server(connection, "127.0.0.1", port)


async def _answer_from_outside(socket_path):
    """Serve ``from_outside`` on ``socket_path``: read a JSON list of ports, answer connections_from_here."""
    async def answer(reader, writer):
        ports = json.loads(await reader.readline())
        results = await asyncio.get_running_loop().run_in_executor(None, connections_from_here, ports,
                                                                   host_addresses())
        writer.write(json.dumps(results).encode() + b"\n")
        await writer.drain()
        writer.close()

    return await asyncio.start_unix_server(answer, socket_path)


async def _serve(connection, kernel, way_out):
    """Forward every port of ``connection`` and answer on ``way_out`` until the ``kernel`` exits, or until this
    launcher's parent (the Jupyter client) is gone: killed, it cannot stop the kernel itself. Return the kernel's
    exit code, None if it still runs (the caller stops it)."""
    client = os.getppid()
    servers = [await _forward(connection[name], f"{connection['ip']}-{connection[name]}")
               for name in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    servers.append(await _answer_from_outside(way_out))
    while kernel.poll() is None and os.getppid() == client:
        await asyncio.sleep(WATCH_SECONDS)  # polled: a thread blocked in kernel.wait() would hold up an exit
    for server in servers:
        server.close()
    return kernel.returncode


def _socket_dir():
    """A new folder that only this user may enter, for the kernel's sockets: in the temporary folder, or in
    /tmp where that one's path is too long for a Unix socket's (108 bytes on Linux, with the file name)."""
    parent = tempfile.gettempdir()
    if len(os.path.join(parent, "labkit-kernel-12345678", "kernel-65535")) > SOCKET_PATH_LIMIT:
        parent = "/tmp"
    return tempfile.mkdtemp(prefix="labkit-kernel-", dir=parent)


def launch_kernel(connection_file, kernel_arguments=()):
    """Start the kernel for ``connection_file``: isolated where possible (then return its exit code, None
    when its Jupyter client went first)."""
    why = why_not_isolated()
    if why:
        os.environ[STATUS_VARIABLE] = f"exposed: {why}"
        os.execv(KERNEL[0], [*KERNEL, "-f", connection_file, *kernel_arguments])
    outside = json.loads(Path(connection_file).read_text())
    socket_dir = _socket_dir()
    inside = dict(outside, transport="ipc", ip=os.path.join(socket_dir, "kernel"))
    way_out = os.path.join(socket_dir, "outside")
    inside_file = Path(socket_dir, "connection.json")
    inside_file.write_text(json.dumps(inside))
    kernel = subprocess.Popen([sys.executable, "-m", "labkit.runtime.isolation", "--inside", "--", *KERNEL, "-f", str(inside_file),
                               *kernel_arguments], env=dict(os.environ, **{OUTSIDE_VARIABLE: way_out}))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Jupyter interrupts the process group: the kernel gets it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # clean up below, then go
    try:
        return asyncio.run(_serve(inside, kernel, way_out))
    finally:
        kernel.kill()
        kernel.wait()
        for path in Path(socket_dir).iterdir():
            path.unlink()
        os.rmdir(socket_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.runtime.isolation", description=__doc__.split("\n")[0])
    parser.add_argument("-f", dest="connection_file", help="the kernel's connection file (Jupyter fills it in)")
    parser.add_argument("--inside", action="store_true",
                        help="enter a private network namespace, then run the command after --")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    arguments = parser.parse_args(argv)
    command = arguments.command[1:] if arguments.command[:1] == ["--"] else arguments.command
    if arguments.inside:
        if not command:
            parser.error("give the command to run after --, e.g. -- python my_script.py")
        os.environ.pop(STATUS_VARIABLE, None)  # a new namespace, even inside one: --inside promises it
        why = isolate_this_program()
        if why:
            sys.exit(f"cannot run {command[0]} in a private network namespace: {why}. Run it as it is, on a "
                     f"network you trust, or behind the firewall steps in {FIREWALL_STEPS}.")
        os.execvp(command[0], command)
    if not arguments.connection_file:
        parser.error("give the kernel's connection file: -f FILE")
    sys.exit(launch_kernel(arguments.connection_file, command))


if __name__ == "__main__":
    main()
