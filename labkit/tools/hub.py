"""``make hub``: JupyterHub for a class on one server, every learner's clusters private by construction (docs/hub.md).

``python -m labkit.tools.hub --group pslab`` (run as root, from the kit installed where every user can read it:
``make hub`` installs it in /opt/pslab) checks the server, writes its settings into the state folder, then runs
JupyterHub with ``labkit/tools/jupyterhub_config.py``, which calls ``configure``:

- logins through PAM, the server's own accounts, for the members of the Unix group (another authenticator:
  ``--config FILE``, a JupyterHub configuration file loaded last);
- each learner's server runs as their Unix user (JupyterHub's LocalProcessSpawner, through
  ``labkit.tools.learner_server``): their own ``work/`` on first login, the PS Lab kernel only, each kernel and each
  terminal in a private user and network namespace of its own (``labkit.runtime.isolation``), so no learner reaches
  another's task ports and two learners' clusters never clash on a port;
- limits: ``LABKIT_MAX_USER_TASKS`` task processes per learner, ``mem_limit`` per learner (``labkit.tools.memory_guard``),
  ``jupyterhub-idle-culler`` stops servers idle for ``--cull-idle`` seconds, and a stopped server's leftover processes
  are stopped with it.

The hub listens on 127.0.0.1 alone (its Python proxy does no TLS): the class reaches it through a reverse proxy that
does. The checks refuse to start where a learner could not be isolated (the fix is in the message) or where the kit
is not readable by the learners. JupyterHub's cookie
secret (0600) and database live in the state folder (0700), as JupyterHub's security settings advise; the proxy's
token is made afresh at each start by JupyterHub itself (its proxy is its child).
"""
import argparse
import dataclasses
import grp
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from labkit.runtime import children, processes

KIT = Path(__file__).resolve().parents[2]
CONFIG_FILE = Path(__file__).with_name("jupyterhub_config.py")
SETTINGS_VARIABLE = "PSLAB_HUB_SETTINGS"  # the settings file jupyterhub_config.py reads
CLASS_MNIST = KIT / "class-mnist.npz"  # full MNIST, cached once for every learner (labkit.tools.learner_server)
PEAKS_TABLE = Path(__file__).with_name("notebook_peaks.json")
CULLER, GUARD = "pslab-idle-culler", "pslab-memory-guard"
# Ways a Linux system forbids unprivileged user namespaces: (sysctl, the value that forbids, the value that allows, where).
NAMESPACE_SWITCHES = [("kernel.apparmor_restrict_unprivileged_userns", "1", "0", "Ubuntu 23.10 and later (AppArmor)"),
                      ("kernel.unprivileged_userns_clone", "0", "1", "Debian 10 and older kernels"),
                      ("user.max_user_namespaces", "0", "15000", "a limit of zero user namespaces")]
PROBE = "from labkit.runtime import isolation; print(isolation.why_not_isolated() or 'isolated')"
# configurable-http-proxy's Python version (no Node.js), run by this Python: it has no `python -m` entry.
PROXY = "import sys; from configurable_http_proxy.cli import main; sys.exit(main())"


@dataclasses.dataclass
class Settings:
    """What ``make hub`` was asked for, written to ``STATE_DIR/settings.json`` for jupyterhub_config.py."""

    group: str
    state_dir: str = "/srv/pslab-hub"
    port: int = 8000  # on 127.0.0.1: learners come through a reverse proxy that does TLS (docs/hub.md)
    mem_limit: str = ""  # JupyterHub's spelling ("5G"); empty: the measured workshop day's peak and half again
    max_user_tasks: int = 6
    cull_idle_seconds: int = 3600
    guard_interval_seconds: float = 2.0
    extra_config: str = ""
    hub_port: int = 0  # the hub's own API, on 127.0.0.1: a free port picked at start
    proxy_api_port: int = 0  # the proxy's API, on 127.0.0.1: a free port picked at start

    @property
    def path(self):
        return Path(self.state_dir) / "settings.json"

    def write(self):
        self.path.write_text(json.dumps(dataclasses.asdict(self), indent=1))

    @classmethod
    def read(cls, path=None):
        return cls(**json.loads(Path(path or os.environ[SETTINGS_VARIABLE]).read_text()))


def byte_size(text):
    """Bytes from a size as JupyterHub's ``mem_limit`` spells it: 512M, 5G (powers of 1024), or a number of bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)\s*", str(text), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: write it as JupyterHub does, e.g. 512M or 5G")
    return int(float(match[1]) * 1024 ** " KMGT".index(match[2].upper() or " "))


def default_mem_limit(peaks_table=PEAKS_TABLE):
    """The workshop day's measured peak (full-size MNIST) and half again, rounded up to half a GiB: "5.5G"."""
    day_mb = json.loads(Path(peaks_table).read_text())["workshop_day"]["full_size"]["peak_pss_mb"]
    halves = -(-day_mb * 1e6 * 1.5 // 2**29)
    return f"{halves / 2:g}G"


def members(group):
    """{uid: user name} of the members of Unix ``group`` (listed in it, or with it as their primary group)."""
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        raise ValueError(f"there is no Unix group {group!r}: make it (groupadd {group}) and add the learners "
                         f"(usermod -aG {group} NAME), or name another with --group.") from None
    names = set(entry.gr_mem) | {user.pw_name for user in pwd.getpwall() if user.pw_gid == entry.gr_gid}
    found = {}
    for name in sorted(names):
        try:
            found[pwd.getpwnam(name).pw_uid] = name
        except KeyError:
            continue  # listed in /etc/group, but no such account
    return found


# ----- the checks -------------------------------------------------------------------------
def namespace_fix():
    """How to let users make network namespaces here: the sysctl that forbids it, set to allow it."""
    for name, forbids, allows, where in NAMESPACE_SWITCHES:
        path = Path("/proc/sys", *name.split("."))
        if path.exists() and path.read_text().strip() == forbids:
            return (f"{name} is {forbids} ({where}). Allow it with `sysctl -w {name}={allows}`, and keep it after a "
                    f"reboot with the line `{name} = {allows}` in /etc/sysctl.d/60-pslab.conf")
    return ("no sysctl here forbids it, so something else does (a container's seccomp profile, SELinux): run the hub "
            "on the host itself, or allow its users unshare(CLONE_NEWUSER | CLONE_NEWNET)")


def learner_probe(uid, python=sys.executable):
    """As the user ``uid`` (as a learner's server runs): can they run the kit's ``python``, and make a private network
    namespace? (None, None) if both; else (what failed, how to fix it)."""
    user = pwd.getpwuid(uid)
    try:
        done = subprocess.run([python, "-c", PROBE], user=uid, group=user.pw_gid, extra_groups=[], cwd="/",
                              env={"PATH": "/usr/bin:/bin", "HOME": user.pw_dir}, capture_output=True, text=True,
                              timeout=60)
    except PermissionError as error:
        done = subprocess.CompletedProcess([], 1, "", str(error))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no error printed"])[-1]
        return (f"the learner {user.pw_name} cannot run the kit's Python {python} ({last})",
                "install the kit where every user can read it: `make hub` installs it in /opt/pslab")
    if done.stdout.strip() != "isolated":
        return (f"the learner {user.pw_name} cannot make a private network namespace ({done.stdout.strip()}), so "
                "every learner's TensorFlow ports would be open to every other learner and to the network",
                namespace_fix())
    return None, None


def preflight(settings):
    """(errors, warnings) about starting the hub with ``settings`` on this server, each a sentence with its fix."""
    errors, warnings = [], []
    if os.geteuid() != 0:
        return ["run it as root (sudo): JupyterHub starts each learner's server as that learner"], []
    try:
        learners = members(settings.group)
    except ValueError as error:
        return [str(error)], []
    if not learners:
        warnings.append(f"group {settings.group} has no members yet, so nobody can log in: "
                        f"usermod -aG {settings.group} NAME for each learner")
    probe_uid = min((uid for uid in learners if uid != 0), default=pwd.getpwnam("nobody").pw_uid)
    failed, fix = learner_probe(probe_uid)
    if failed:
        errors.append(f"{failed}. Fix: {fix}.")
    open_homes = sorted(name for uid, name in learners.items()
                        if Path(pwd.getpwuid(uid).pw_dir).is_dir() and Path(pwd.getpwuid(uid).pw_dir).stat().st_mode & 0o007)
    if open_homes:
        warnings.append(f"the homes of {', '.join(open_homes)} can be read by every user (their work/ cannot: it is "
                        "made 0700). To keep their other files private: chmod 0700 each home, and HOME_MODE 0700 "
                        "in /etc/login.defs for accounts made later")
    return errors, warnings


# ----- JupyterHub's configuration ---------------------------------------------------------
def configure(c, settings):
    """Fill JupyterHub's config ``c`` for the class (jupyterhub_config.py calls this): see the module's docstring."""
    state = Path(settings.state_dir)
    activity_seconds = min(300, max(5, settings.cull_idle_seconds // 6))  # JupyterHub's default, shorter for short culls
    # Loopback alone: the Python proxy does no TLS, and learners' passwords must not cross a network in clear.
    c.JupyterHub.bind_url = f"http://127.0.0.1:{settings.port}/"
    c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", settings.hub_port
    c.ConfigurableHTTPProxy.command = [sys.executable, "-c", PROXY]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.proxy_api_port}"
    c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.authenticator_class = "pam"
    c.LocalAuthenticator.allowed_groups = {settings.group}
    c.JupyterHub.spawner_class = "localprocess"
    c.Spawner.cmd = [sys.executable, "-m", "labkit.tools.learner_server"]
    c.Spawner.default_url = "/lab/tree/notebooks"
    c.Spawner.disable_user_config = True
    c.Spawner.mem_limit = settings.mem_limit
    c.Spawner.environment = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
                             children.MAX_USER_TASKS_VARIABLE: str(settings.max_user_tasks),
                             "JUPYTERHUB_ACTIVITY_INTERVAL": str(activity_seconds)}
    # Of the hub's environment: its language, and `LABKIT_MNIST_SOURCE=offline-subset make hub` for a small server.
    c.Spawner.env_keep = ["LANG", "LC_ALL", "JUPYTERHUB_SINGLEUSER_APP", "LABKIT_MNIST_SOURCE"]
    c.Spawner.post_stop_hook = stop_leftovers
    c.JupyterHub.last_activity_interval = activity_seconds
    c.JupyterHub.load_roles = [{"name": CULLER, "services": [CULLER],
                                "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
    c.JupyterHub.services = [
        {"name": CULLER, "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                                     f"--timeout={settings.cull_idle_seconds}",
                                     f"--cull-every={max(5, settings.cull_idle_seconds // 4)}"]},
        {"name": GUARD, "command": [sys.executable, "-m", "labkit.tools.memory_guard", "--group", settings.group,
                                    "--limit", settings.mem_limit,
                                    "--interval", str(settings.guard_interval_seconds)]},
    ]


def stop_leftovers(spawner):
    """JupyterHub's post-stop hook: kill what the learner's stopped server left running (a process started from a
    terminal with nohup, say): every process of their user that carries their server's JUPYTERHUB_USER."""
    name, uid = spawner.user.name, pwd.getpwnam(spawner.user.name).pw_uid
    for process in processes.carrying("JUPYTERHUB_USER", lambda user: user == name):
        try:
            if process.uids().real == uid:
                spawner.log.info("pslab: stopping %s's leftover process %d (%s)", name, process.pid,
                                 " ".join(process.cmdline())[:120])
                process.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue


# ----- starting it ------------------------------------------------------------------------
def start(settings):
    """Make the state folder, share a cached full MNIST with the learners, write the settings, then become JupyterHub."""
    from labkit.cluster import pick_port
    from labkit.data import KERAS_CACHE

    state = Path(settings.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)
    if KERAS_CACHE.exists() and not CLASS_MNIST.exists():
        shutil.copy(KERAS_CACHE, CLASS_MNIST)
        CLASS_MNIST.chmod(0o644)
    settings.hub_port, settings.proxy_api_port = settings.hub_port or pick_port(), settings.proxy_api_port or pick_port()
    settings.write()
    os.chdir(state)
    os.environ[SETTINGS_VARIABLE] = str(settings.path)
    # Started in a shell's background, the hub would get SIGINT ignored and pass that on to its services (the idle
    # culler): they would then ignore the SIGINT JupyterHub stops them with, and hold its stop for half a minute.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execv(sys.executable, [sys.executable, "-m", "jupyterhub", "-f", str(CONFIG_FILE)])


def parse_settings(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.tools.hub", description=__doc__.splitlines()[0])
    parser.add_argument("--group", required=True, help="the Unix group whose members are the class's learners")
    defaults = Settings(group="")
    parser.add_argument("--port", type=int, default=defaults.port,
                        help="the hub's port on 127.0.0.1, where a reverse proxy doing TLS passes the class's requests "
                             "(default: %(default)s)")
    parser.add_argument("--state-dir", default=defaults.state_dir, metavar="DIR",
                        help="the hub's database, cookie secret and settings, root's alone (default: %(default)s)")
    parser.add_argument("--mem-limit", metavar="SIZE", type=lambda text: byte_size(text) and text,
                        help="memory each learner may use, e.g. 6G (default: the measured workshop day's peak, "
                             f"half again: {default_mem_limit()})")
    parser.add_argument("--max-user-tasks", type=int, default=defaults.max_user_tasks, metavar="N",
                        help="task processes each learner may run at once (default: %(default)s)")
    parser.add_argument("--cull-idle", type=int, default=defaults.cull_idle_seconds, metavar="SECONDS",
                        help="stop a learner's server idle this long, and everything it runs (default: %(default)s)")
    parser.add_argument("--config", default="", metavar="FILE",
                        help="a JupyterHub configuration file loaded after the kit's: another authenticator, admins")
    parser.add_argument("--check", action="store_true", help="only check the server, start nothing")
    args = parser.parse_args(argv)
    settings = Settings(group=args.group, state_dir=args.state_dir, port=args.port,
                        mem_limit=args.mem_limit or default_mem_limit(),
                        max_user_tasks=args.max_user_tasks, cull_idle_seconds=args.cull_idle,
                        extra_config=str(Path(args.config).resolve()) if args.config else "")
    return settings, args.check


def main(argv=None):
    settings, check_only = parse_settings(argv)
    errors, warnings = preflight(settings)
    for warning in warnings:
        print(f"make hub: WARNING: {warning}")
    if errors:
        sys.exit("make hub: not started:\n" + "\n".join(f"- {error}" for error in errors))
    print(f"make hub: the server is ready for the members of {settings.group}; each may use {settings.mem_limit} of "
          f"memory and {settings.max_user_tasks} task processes; servers idle {settings.cull_idle_seconds} s are stopped.")
    if check_only:
        return
    print(f"make hub: listening on http://127.0.0.1:{settings.port} only: the class reaches it through a reverse "
          "proxy with TLS on this server (docs/hub.md).")
    start(settings)


if __name__ == "__main__":
    main()
