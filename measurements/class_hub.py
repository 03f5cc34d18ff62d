"""A class on one server: the real hub, Unix users made for it, each learner logged in and running code.

For the measurement of a class (measurements/items/class_on_one_server.py) and the hub tier (tests/test_hub.py):
real Unix users in a group, the real hub (`python -m labkit.tools.hub`, as `make hub` runs it)
started for them, and each learner logged in through the hub's login form and running code in their own kernel
through the hub's proxy, as JupyterLab does.

Needs root (users are made with useradd and removed with userdel). The learners must be able to run the kit's
Python: `make hub` installs the kit in /opt/pslab for that, but this checkout's .venv is usually made from a Python
in root's home (pyenv, uv), which they cannot enter. ``learners_python`` makes a venv they can use instead: this
machine's own Python of the same version, with the checkout's packages (``site.addsitedir``) and Jupyter's
configuration and files (links), and the PS Lab kernel registered in it, as `make kernel` registers it.
"""
import asyncio
import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

from labkit.cluster import pick_port
from labkit.runtime import processes

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
TERMINAL_CONTROLS = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")  # colours, title, paste mode
POLL_SECONDS = 5.0  # how often a waiting learner's page asks its server for its kernels, as JupyterLab polls


def learners_python(folder):
    """A Python every user may run, in ``folder`` (made readable by all): see the module's docstring. Raises
    LookupError when this machine has no system Python of this checkout's version."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system_python = shutil.which(version, path=SYSTEM_PATH)
    if not system_python:
        raise LookupError(f"no {version} in {SYSTEM_PATH}: the learners need a Python of the kit's version they may run")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    venv = folder / "venv"
    subprocess.run([system_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
    (next(venv.glob("lib/python3*/site-packages")) / "pslab-kit.pth").write_text(
        f"import site; site.addsitedir({str(site_packages)!r})\n")
    (venv / "etc").symlink_to(Path(sys.prefix) / "etc")  # which server extensions run: JupyterLab's among them
    (venv / "share" / "jupyter").mkdir(parents=True)
    for shared in (Path(sys.prefix) / "share" / "jupyter").iterdir():  # JupyterLab's files; not the kernels
        if shared.name != "kernels":
            (venv / "share" / "jupyter" / shared.name).symlink_to(shared)
    python = venv / "bin" / "python"
    subprocess.run(["make", "-s", "kernel", f"PY={python}"], cwd=ROOT, check=True, capture_output=True)
    return python


@contextlib.contextmanager
def class_users(count, prefix="pslt"):
    """A new Unix group and ``count`` new users in it, each with a random password: yields (group, {name: password}).
    Everything is removed afterwards: their processes, homes and what they left in /tmp (kernels' socket
    folders, clusters' logs), which userdel leaves behind."""
    tag = secrets.token_hex(2)
    group = f"{prefix}{tag}"
    users = {f"{prefix}{tag}{chr(ord('a') + index)}": secrets.token_urlsafe(12) for index in range(count)}
    subprocess.run(["groupadd", group], check=True)
    try:
        for name, password in users.items():
            subprocess.run(["useradd", "--create-home", "--groups", group, "--shell", "/bin/bash", name], check=True)
            subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
        yield group, users
    finally:
        for name in users:
            with contextlib.suppress(KeyError):
                uid = pwd.getpwnam(name).pw_uid
                kill_everything_of(uid)
                remove_temporary_files_of(uid)
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)


def processes_of(uid):
    """The live processes of user ``uid``."""
    import psutil

    return [process for process in psutil.process_iter(["uids"])
            if process.info["uids"] and process.info["uids"].real == uid and processes.running(process.pid)]


def kill_everything_of(uid):
    for process in processes_of(uid):
        with contextlib.suppress(Exception):
            process.kill()


def remove_temporary_files_of(uid, folder="/tmp"):
    """Remove every file and folder at the top of ``folder`` that user ``uid`` owns."""
    for path in Path(folder).iterdir():
        with contextlib.suppress(FileNotFoundError):
            if path.lstat().st_uid != uid:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()


def ignore_ctrl_c():
    """``preexec_fn``: start with SIGINT ignored, as `make hub &` in a shell starts the hub."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def ignores(pid, sig):
    """Whether process ``pid`` ignores signal ``sig`` (its SigIgn mask in /proc)."""
    mask = next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("SigIgn:"))
    return bool(int(mask, 16) & (1 << (sig - 1)))


class Hub:
    """``python -m labkit.tools.hub`` for ``group``, run by ``python`` (a Python the learners may run), on a free
    port of 127.0.0.1, its state and log in ``folder``; ``arguments`` are more of its options, ``env`` its
    environment. It starts as in a shell's background, SIGINT ignored."""

    def __init__(self, python, group, folder, *arguments, env=None):
        self.port, self.folder, self.env = pick_port(), Path(folder), env
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [str(python), "-m", "labkit.tools.hub", "--group", group, "--port", str(self.port),
                        "--state-dir", str(self.folder / "state"), *arguments]
        self.log_path = self.folder / "hub.log"

    def __enter__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder,
                                            start_new_session=True, preexec_fn=ignore_ctrl_c, env=self.env)
        processes.wait_until(self.answers, 120, "the hub to answer", error=lambda message: AssertionError(
            f"{message}; its log:\n{self.log()[-3000:]}"))
        return self

    def answers(self):
        if self.process.poll() is not None:
            raise AssertionError(f"the hub exited with code {self.process.returncode}:\n{self.log()[-3000:]}")
        with contextlib.suppress(requests.ConnectionError):
            return requests.get(f"{self.url}/hub/api", timeout=5).ok
        return False

    def stop(self, timeout=60):
        """Stop the hub as its service manager would (SIGTERM): it stops every learner's server first."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                raise AssertionError(f"the hub did not stop within {timeout} s:\n{self.log()[-3000:]}")

    def __exit__(self, *error):
        self.stop()

    def log(self):
        return self.log_path.read_text()


def log_in(url, name, password, headers=None):
    """Log ``name`` in through the login form of the hub at ``url``, as a browser does (``headers`` on each request,
    as a reverse proxy adds them): the login's response, its cookies in ``.raw.headers.getlist("Set-Cookie")``."""
    browser = requests.Session()
    browser.get(f"{url}/hub/login", headers=headers, timeout=30)
    login = browser.post(f"{url}/hub/login", allow_redirects=False, timeout=60, headers=headers,
                         data={"username": name, "password": password, "_xsrf": browser.cookies["_xsrf"]})
    if login.status_code != 302:
        raise AssertionError(f"{name} could not log in: {login.status_code} {login.text[:300]}")
    return login


class Learner:
    """One learner at the hub: logged in through its login form, then using the API token it gives them."""

    def __init__(self, hub, name, password):
        self.hub, self.name, self.password = hub, name, password
        self.uid = pwd.getpwnam(name).pw_uid
        self.home = Path(pwd.getpwnam(name).pw_dir)
        log_in(hub.url, name, password)
        token = requests.post(f"{hub.url}/hub/api/users/{name}/tokens", timeout=60,
                              json={"auth": {"username": name, "password": password}, "note": "test"})
        token.raise_for_status()
        self.headers = {"Authorization": f"token {token.json()['token']}"}

    def api(self, method, path, **kwargs):
        """The hub's API (``/hub/api/...``) or this learner's server's (``/user/NAME/api/...``), as this learner."""
        response = requests.request(method, f"{self.hub.url}{path}", headers=self.headers, timeout=120, **kwargs)
        response.raise_for_status()
        return response.json() if response.content else None

    def server(self):
        """The hub's record of this learner's server, or None when it does not run."""
        return self.api("GET", f"/hub/api/users/{self.name}")["servers"].get("")

    def start_server(self, timeout=120):
        self.api("POST", f"/hub/api/users/{self.name}/server")
        processes.wait_until(lambda: (self.server() or {}).get("ready"), timeout, f"{self.name}'s server to start")

    def start_kernel(self):
        """A new PS Lab kernel in this learner's server: its id."""
        return self.api("POST", f"/user/{self.name}/api/kernels", json={"name": "pslab"})["id"]

    def open_notebook(self, path):
        """Open the notebook at ``path`` (in their work folder) as JupyterLab does, a session with a PS Lab kernel
        of its own: (session id, kernel id)."""
        session = self.api("POST", f"/user/{self.name}/api/sessions", json={
            "path": str(path), "name": Path(path).name, "type": "notebook", "kernel": {"name": "pslab"}})
        return session["id"], session["kernel"]["id"]

    def shut_down(self, session):
        """Close a notebook's session and shut its kernel down, as Kernel > Shut Down Kernel does."""
        self.api("DELETE", f"/user/{self.name}/api/sessions/{session}")

    def run(self, kernel, code, timeout=300):
        """Run ``code`` in ``kernel`` through the hub: (status, its output). The status is the kernel's ("ok",
        "error"), or "died" when the kernel died meanwhile."""
        return asyncio.run(self.execute(kernel, code, timeout))

    async def execute(self, kernel, code, timeout=300):
        """``run`` as a coroutine, so that several learners run code at once (asyncio.gather). While it waits,
        the learner's page asks the server for its kernels every POLL_SECONDS, as an open JupyterLab does."""
        from jupyter_client.jsonutil import json_default
        from jupyter_client.session import Session
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        url = f"ws://127.0.0.1:{self.hub.port}/user/{self.name}/api/kernels/{kernel}/channels?session_id={uuid.uuid4().hex}"
        channel = await websocket_connect(HTTPRequest(url, headers=self.headers))
        request = Session(username=self.name).msg("execute_request", {
            "code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False,
            "stop_on_error": True})
        channel.write_message(json.dumps({**request, "channel": "shell"}, default=json_default))
        output, reply, idle, deadline = [], None, False, time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                try:
                    raw = await asyncio.wait_for(channel.read_message(), POLL_SECONDS)
                except asyncio.TimeoutError:
                    await asyncio.to_thread(self.api, "GET", f"/user/{self.name}/api/kernels")
                    continue
                if raw is None:
                    return "died", "".join(output)
                message = json.loads(raw)
                kind, content = message["msg_type"], message["content"]
                if kind == "status" and content["execution_state"] in ("restarting", "dead"):
                    return "died", "".join(output)
                if message["parent_header"].get("msg_id") != request["header"]["msg_id"]:
                    continue
                if kind == "stream":
                    output.append(content["text"])
                elif kind in ("execute_result", "display_data"):
                    output.append(content["data"].get("text/plain", "") + "\n")
                elif kind == "error":
                    output.append(f"{content['ename']}: {content['evalue']}\n")
                elif kind == "execute_reply":
                    reply = content["status"]
                elif kind == "status":
                    idle = content["execution_state"] == "idle"
                if reply and idle:  # both, in either order: the shell and iopub channels are not ordered together
                    return reply, "".join(output)
            raise TimeoutError(f"{self.name}'s code did not finish in {timeout} s; its output:\n{''.join(output)}")
        finally:
            channel.close()


    def run_in_terminal(self, command, timeout=120):
        """Open a terminal in this learner's JupyterLab, as File > New > Terminal does, run the shell ``command``
        in it and return what it printed, without the terminal's control sequences; the terminal is closed
        afterwards."""
        return asyncio.run(self._terminal(command, timeout))

    async def _terminal(self, command, timeout):
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        name = self.api("POST", f"/user/{self.name}/api/terminals")["name"]
        end = f"end-of-{uuid.uuid4().hex}"
        url = f"ws://127.0.0.1:{self.hub.port}/user/{self.name}/terminals/websocket/{name}"
        channel = await websocket_connect(HTTPRequest(url, headers=self.headers))
        try:
            channel.write_message(json.dumps(["stdin", f"{command}; echo {end[:4]}''{end[4:]}\r"]))
            printed = ""
            while end not in printed:  # the echo of the command line shows the marker split by ''
                raw = await asyncio.wait_for(channel.read_message(), timeout)
                if raw is None:
                    raise AssertionError(f"{self.name}'s terminal closed; it printed:\n{printed}")
                kind, *content = json.loads(raw)
                printed += content[0] if kind == "stdout" else ""
            return TERMINAL_CONTROLS.sub("", printed[:printed.index(end)]).replace("\r", "")
        finally:
            channel.close()
            self.api("DELETE", f"/user/{self.name}/api/terminals/{name}")


def world_readable_folder(prefix):
    """A new folder in /tmp that every user may enter (the test run's own temporary folder is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    folder.chmod(0o755)
    return folder


def in_a_user_namespace_without_nested_ones(command, timeout=120):
    """Run ``command`` as root of a new user namespace that maps every user (so root there may become any of them)
    and in which no further user namespace may be made, as a system that forbids them: its CompletedProcess."""
    # sh execs itself again once the map is written: a program started before that has no capabilities there.
    script = 'read go && exec sh -c \'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"\' sh "$@"'
    process = subprocess.Popen(["unshare", "--user", "sh", "-c", script, "sh", *command], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ours = os.readlink("/proc/self/ns/user")
    processes.wait_until(lambda: os.readlink(f"/proc/{process.pid}/ns/user") != ours, 10, "the new user namespace")
    for mapping in ("uid_map", "gid_map"):
        Path(f"/proc/{process.pid}/{mapping}").write_text("0 0 4294967295\n")
    output, _ = process.communicate("go\n", timeout=timeout)
    return subprocess.CompletedProcess(command, process.returncode, output)
