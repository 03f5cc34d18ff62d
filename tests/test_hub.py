"""The class hub (`make hub`, labkit.tools.hub) for real: three Unix users made for the test log in through its
login form, start their servers, and run code in their PS Lab kernels through its proxy (measurements/class_hub.py, which drives the class measurement too).

Learners A and B train on a LocalCluster each, at once; A's kernel and tasks run as A, in a namespace of their own;
B cannot connect to A's task ports and binds the very same port numbers; B cannot read A's work; A's second
cluster is over the per-learner task cap; B over the memory limit loses their kernel to the guard; C, idle with a
cluster running, is stopped by the idle culler, cluster included; stopping the hub leaves no learner's process;
`labkit status --all-users` shows each learner's clusters; `labkit collect` gathers everyone's exercises for grading
and changes nothing in their homes; in Chromium, A logs in and opens notebook 00. The hub refuses to start without
user namespaces and with a kit the learners cannot run. Skipped without root or without user namespaces.
"""
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest
import requests

from labkit.runtime import isolation, processes
from measurements import class_hub
from support.browser import SECONDS, browser_page, failure_screenshot, first_heading, needs_chromium  # noqa: F401 (a fixture)

CULL_IDLE_SECONDS = 30
MEM_LIMIT = "3G"  # more than a learner's kernel and small cluster take here, less than B's block below
MAX_USER_TASKS = 3

WHY_NOT_ISOLATED = isolation.why_not_isolated()
pytestmark = [pytest.mark.hub, pytest.mark.timeout(600),
              pytest.mark.skipif(os.geteuid() != 0, reason="the hub test makes Unix users and runs JupyterHub as "
                                 "root (CI does): run it as root"),
              pytest.mark.skipif(bool(WHY_NOT_ISOLATED), reason=f"the hub needs private network namespaces for its "
                                 f"learners: {WHY_NOT_ISOLATED}")]

# A small training run on a LocalCluster; prints what the test checks, as JSON.
TRAIN = """
import json, os
import labkit
from labkit import fit, models
from labkit.data import load_mnist
data = load_mnist()  # the source the hub passes on, as `LABKIT_MNIST_SOURCE=offline-subset make hub` does
cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="hub-test")
strategy = cluster.strategy()
with strategy.scope():
    model = models.mnist_mlp()
fit.fit(model, data.x_train, data.y_train, epochs=2, steps_per_epoch=25, batch_size=64)
chief_port = int(cluster.tf_config("worker:0")["cluster"]["chief"][0].rpartition(":")[2])
print(json.dumps({"accuracy": models.accuracy(model, data.x_test, data.y_test), "kernel": os.getpid(),
                  "mnist_source": os.environ.get("LABKIT_MNIST_SOURCE"),
                  "network": os.environ["LABKIT_NETWORK"], "ports": [task.port for task in cluster.tasks] + [chief_port],
                  "pids": [task.pid for task in cluster.tasks]}))
"""
IDLE_CLUSTER = """
import json, labkit
cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="left-running")
print(json.dumps([task.pid for task in cluster.tasks]))
"""


def reach(ports):
    """Code that prints how connections from its kernel to ``ports`` on 127.0.0.1 and this machine's addresses end."""
    addresses = ["127.0.0.1", *isolation.host_addresses()]
    return ("import json\nfrom labkit.runtime import isolation\n"
            f"print(json.dumps(isolation.connections_from_here({ports}, {addresses}, timeout=2)))")


def last_json(output):
    return json.loads(output.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def folder():
    """A folder of this module's that every user may enter."""
    folder = class_hub.world_readable_folder("pslab-hub-test-")
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def python(folder):
    """A Python with the kit that every user may run (class_hub.learners_python)."""
    try:
        return class_hub.learners_python(folder / "learners-python")
    except LookupError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def hub_class(folder, python):
    """The hub for three new learners A, B, C, each logged in with a running server; C has started a cluster and
    left it (for the culler). Yields (hub, A, B, C); at the end the hub stops and the users go."""
    with class_hub.class_users(3) as (group, users), \
            class_hub.Hub(python, group, folder, "--cull-idle", str(CULL_IDLE_SECONDS), "--mem-limit", MEM_LIMIT,
                            "--max-user-tasks", str(MAX_USER_TASKS),
                            env=dict(os.environ, LABKIT_MNIST_SOURCE="offline-subset")) as hub:
        a, b, c = (class_hub.Learner(hub, name, password) for name, password in users.items())
        for learner in (a, b, c):
            learner.api("POST", f"/hub/api/users/{learner.name}/server")
        for learner in (c, a, b):
            processes.wait_until(lambda: (learner.server() or {}).get("ready"), 120, f"{learner.name}'s server")
        c.cluster = last_json(c.run(c.start_kernel(), IDLE_CLUSTER)[1])
        yield hub, a, b, c


@pytest.fixture(scope="module")
def trained(hub_class):
    """A and B each train on a LocalCluster in their own kernel, at once: {learner: (kernel id, what TRAIN printed)}."""
    import asyncio

    _, a, b, _ = hub_class
    kernels = {learner: learner.start_kernel() for learner in (a, b)}

    async def both():
        return await asyncio.gather(*(learner.execute(kernel, TRAIN) for learner, kernel in kernels.items()))

    results = {}
    for (learner, kernel), (status, output) in zip(kernels.items(), asyncio.run(both())):
        assert status == "ok", f"{learner.name}'s training failed:\n{output}"
        results[learner] = kernel, last_json(output)
    return results


def test_each_learner_trains_in_a_kernel_and_cluster_that_run_as_them_in_their_own_namespace(hub_class, trained):
    for learner, (_, result) in trained.items():
        assert result["accuracy"] > 0.6, f"{learner.name} trained to {result['accuracy']}"
        assert result["network"] == "isolated"
        assert result["mnist_source"] == "offline-subset", "the hub passes LABKIT_MNIST_SOURCE on to the learners"
        for pid in [result["kernel"], *result["pids"]]:
            assert psutil.Process(pid).uids().real == learner.uid, f"{learner.name}'s process {pid} runs as another user"
        netns = {os.readlink(f"/proc/{pid}/ns/net") for pid in [result["kernel"], *result["pids"]]}
        assert len(netns) == 1 and netns != {os.readlink("/proc/self/ns/net")}, "the kernel and its tasks share a namespace of their own"


def test_one_learner_cannot_reach_anothers_task_ports_and_uses_the_same_numbers(hub_class, trained):
    _, a, b, _ = hub_class
    (a_kernel, a_result), (b_kernel, _) = trained[a], trained[b]
    status, output = a.run(a_kernel, reach(a_result["ports"][:1]))
    assert status == "ok" and last_json(output)[f"127.0.0.1:{a_result['ports'][0]}"] == "accepted", \
        f"A's own kernel reaches its task (so the check below can fail):\n{output}"
    status, output = b.run(b_kernel, reach(a_result["ports"]))
    assert status == "ok" and "accepted" not in last_json(output).values(), f"B reached A's tasks: {output}"
    binds = ("import socket\nfor port in %s:\n    socket.socket().bind(('0.0.0.0', port))\nprint('bound them all')"
             % a_result["ports"])
    assert b.run(b_kernel, binds) == ("ok", "bound them all\n"), "B's namespace has A's port numbers free"


def test_a_learners_terminal_runs_as_them_in_a_namespace_of_its_own(hub_class, trained):
    """A terminal in JupyterLab runs its shell as the learner, in a private network namespace: what they start from it
    (a server, a script) is out of other learners' reach too."""
    _, a, _, _ = hub_class
    printed = a.run_in_terminal("id -u; readlink /proc/self/ns/net")
    uid, netns = re.findall(r"^(\d+)$", printed, re.MULTILINE), re.findall(r"net:\[\d+\]", printed)
    assert uid == [str(a.uid)], f"A's terminal runs as {uid}, not as A ({a.uid}):\n{printed}"
    assert len(netns) == 1 and netns[0] != os.readlink("/proc/self/ns/net"), f"A's terminal shares the host's network:\n{printed}"
    kernel_netns = os.readlink(f"/proc/{trained[a][1]['kernel']}/ns/net")
    assert netns[0] != kernel_netns, "a terminal has a namespace of its own, not the kernel's"


def test_a_learners_work_is_theirs_alone(hub_class, trained):
    _, a, b, _ = hub_class
    notebook = a.home / "work" / "notebooks" / "00_welcome.ipynb"
    assert notebook.is_file() and (a.home / "work").stat().st_mode & 0o777 == 0o700
    read = f"print(len(open({str(notebook)!r}).read()))"
    status, output = a.run(trained[a][0], read)
    assert status == "ok" and int(output) > 1000, f"A reads their own notebook:\n{output}"
    status, output = b.run(trained[b][0], read)
    assert status == "error" and "PermissionError" in output, f"B read A's notebook:\n{output}"


def test_a_learners_jupyterlab_refuses_another_learner(hub_class, trained):
    """Each learner's JupyterLab asks the hub who is logged in (its token on): B's login does not open A's."""
    _, a, b, _ = hub_class
    assert a.api("GET", f"/user/{a.name}/api/kernels"), "A lists their own kernels (so the refusal below can fail)"
    with pytest.raises(requests.HTTPError) as refused:
        b.api("GET", f"/user/{a.name}/api/kernels")
    assert refused.value.response.status_code == 403
    anonymous = requests.get(f"{hub_class[0].url}/user/{a.name}/api/kernels", allow_redirects=False, timeout=30)
    assert anonymous.status_code in (302, 403), "without a login: sent to log in, or refused"


def test_behind_a_tls_proxy_the_hubs_login_cookie_is_marked_secure(hub_class):
    """nginx passes `X-Scheme: https` on (docs/hub.md): the hub then marks its login cookie Secure, so a browser never
    sends it over plain http; reached over plain http (an ssh tunnel) it cannot, or no login would work there."""
    hub, a, _, _ = hub_class
    for scheme, secure in (("http", False), ("https", True)):
        cookies = class_hub.log_in(hub.url, a.name, a.password, headers={"X-Scheme": scheme}).raw.headers.getlist(
            "Set-Cookie")
        login = [cookie for cookie in cookies if "jupyterhub-hub-login=" in cookie]
        assert login and all(("; Secure" in cookie) == secure for cookie in login), f"over {scheme}: {cookies}"


def test_a_second_cluster_over_the_learners_task_cap_is_refused(hub_class, trained):
    _, a, _, _ = hub_class
    status, output = a.run(trained[a][0], 'labkit.LocalCluster(num_workers=1, num_ps=1, name="one-too-many")')
    assert status == "error" and "TaskLimitError" in output
    assert f"with the 2 task processes you run already, you would run 4, but at most {MAX_USER_TASKS}" in output


def test_the_instructor_sees_who_runs_what_and_its_memory(hub_class, trained):
    from labkit.tools import class_status

    _, a, b, _ = hub_class
    report = "\n".join(class_status.report())
    for learner in (a, b):
        mine = report.split(f"{learner.name} (uid {learner.uid}): ")[1].split("\n")
        assert re.match(r"[\d.]+ GB in \d+ processes \(.*kernel [\d.]+.*ps:0 [\d.]+.*; GB, PSS\)", mine[0]), mine[0]
        assert "cluster 'hub-test'" in mine[1] and "private network namespace" in mine[2]
        assert {f"pid {pid}" for pid in trained[learner][1]["pids"]} <= set(re.findall(r"pid \d+", "\n".join(mine[3:5])))


def test_a_learner_over_the_memory_limit_loses_their_kernel_not_their_server(hub_class, trained):
    hub, _, b, _ = hub_class
    kernel, result = trained[b]
    status, _ = b.run(kernel, "import numpy\nblock = numpy.ones(300_000_000)  # 2.4 GB, touched\nimport time; time.sleep(60)")
    assert status == "died"
    assert processes.wait_until_gone([result["kernel"], *result["pids"]], 30) == []
    assert re.search(rf"pslab memory guard: {b.name} used [\d.]+ GiB, over their limit of 3.0 GiB: stopped their "
                     r"largest kernel", hub.log())
    assert b.server()["ready"], "B's server stays"


def test_collect_gathers_each_learners_exercises_for_grading_and_changes_nothing_in_their_homes(hub_class, folder):
    from labkit.tools import collect, submissions

    _, a, b, c = hub_class
    exercises = sorted(path.name for path in collect.EXERCISES.glob("*.ipynb"))
    a_notebook = a.home / "work" / "exercises" / exercises[0]
    planted = b.home / "work" / "exercises" / exercises[0]  # B's own copy gives way to a link to A's notebook
    planted.unlink()
    planted.symlink_to(a_notebook)
    os.lchown(planted, b.uid, b.uid)
    homes = {learner: snapshot(learner.home) for learner in (a, b, c)}
    out = folder / "class"
    collected = collect.collect(out, [a.name, b.name, c.name])
    assert collected == {a.name: exercises, b.name: exercises[1:], c.name: exercises}, "B's link is not B's work"
    assert (out / a.name / exercises[0]).read_bytes() == a_notebook.read_bytes()
    assert (out / a.name / exercises[0]).stat().st_mtime == a_notebook.stat().st_mtime
    assert out.stat().st_mode & 0o777 == 0o700
    assert {learner: snapshot(learner.home) for learner in (a, b, c)} == homes, "nothing changed in their homes"
    found = submissions.find_learners(out)
    assert {name: len(learner.submissions) for name, learner in found.items()} == \
        {a.name: len(exercises), b.name: len(exercises) - 1, c.name: len(exercises)}


def snapshot(home):
    """Every file in ``home``'s work folder: its size, time and mode (what collecting must not change)."""
    return {path: (status.st_size, status.st_mtime_ns, status.st_mode) for path in (home / "work").rglob("*")
            if (status := path.lstat())}


@needs_chromium
def test_a_learner_logs_in_in_the_browser_and_opens_notebook_00(hub_class, browser_page):
    from playwright.sync_api import expect

    hub, a, _, _ = hub_class
    page, screenshot = browser_page
    notebook = a.home / "work" / "notebooks" / "00_welcome.ipynb"
    if a.server() is None:  # culled: idle for CULL_IDLE_SECONDS while the tests before ran (a loaded make test)
        a.start_server()
    a.api("GET", f"/user/{a.name}/api/kernels")  # activity: the culler counts its idle seconds from here
    with failure_screenshot(screenshot):
        page.goto(f"{hub.url}/hub/login")
        page.fill("#username_input", a.name)
        page.fill("#password_input", a.password)
        page.click("#login_submit")
        expect(page).to_have_url(re.compile(rf"/user/{a.name}/lab"), timeout=120 * SECONDS)
        page.goto(f"{hub.url}/user/{a.name}/lab/tree/notebooks/{notebook.name}")
        try:
            expect(page.get_by_text("PS Lab (TensorFlow 2.21) | Idle")).to_be_visible(timeout=120 * SECONDS)
        except AssertionError as error:  # the hub's log holds the learner's server's: the kernel's start, or why not
            raise AssertionError(f"{error}\nThe hub's log, its end:\n{hub.log()[-6000:]}") from None
        expect(page.locator(".jp-RenderedMarkdown h1").first).to_contain_text(first_heading(notebook))
        screenshot("hub-00_welcome")


def test_the_culler_stops_an_idle_server_and_its_cluster(hub_class):
    hub, _, _, c = hub_class
    processes.wait_until(lambda: c.server() is None, 3 * CULL_IDLE_SECONDS, "the culler to stop C's idle server")
    assert f"Culling server {c.name}" in hub.log()
    assert processes.wait_until_gone(c.cluster, 15) == [], "C's tasks stop with the server"
    assert processes.wait_until(lambda: not class_hub.processes_of(c.uid), 15, "C's processes to end")


def test_stopping_the_hub_leaves_no_process_of_any_learner(hub_class, trained):
    hub, a, b, c = hub_class
    if a.server() is None:  # culled meanwhile: A starts their server and a cluster again
        a.start_server()
        assert a.run(a.start_kernel(), IDLE_CLUSTER)[0] == "ok"
    assert any(processes.SERVER_MODULE in process.cmdline() for process in class_hub.processes_of(a.uid)), \
        "A runs a cluster when the hub stops"
    services = [process for process in psutil.Process(hub.process.pid).children() if process.uids().real == 0]
    assert {"jupyterhub_idle_culler", "labkit.tools.memory_guard"} <= {part for process in services
                                                                        for part in process.cmdline()}
    assert not any(class_hub.ignores(process.pid, signal.SIGINT) for process in services), \
        "the hub started with Ctrl-C ignored: its services must not inherit that, or they hold its stop"
    hub.stop()
    for learner in (a, b, c):
        left = class_hub.processes_of(learner.uid)
        assert processes.wait_until_gone(left, 15) == [], f"{learner.name}'s processes outlived the hub: {left}"


def test_a_learner_removed_leaves_nothing_in_tmp():
    """What a learner's killed kernel or cluster left in /tmp (userdel leaves it) goes with the learner; others'
    files stay."""
    others = Path(tempfile.mkdtemp(prefix="labkit-kernel-", dir="/tmp"))
    with class_hub.class_users(1) as (_, users):
        uid = pwd.getpwnam(next(iter(users))).pw_uid
        handle, log = tempfile.mkstemp(prefix="labkit-", dir="/tmp")
        os.close(handle)
        learners = [Path(tempfile.mkdtemp(prefix="labkit-kernel-", dir="/tmp")), Path(log)]
        for path in learners:
            os.chown(path, uid, -1)
    assert not any(path.exists() for path in learners) and others.is_dir()
    others.rmdir()


def test_the_hub_refuses_to_start_where_learners_cannot_make_network_namespaces(python):
    """Inside a user namespace where no further user namespace may be made (user.max_user_namespaces = 0 there),
    a learner's kernel could not be isolated: `make hub` refuses, naming the sysctl and its fix."""
    group = f"pslt{os.getpid()}"
    subprocess.run(["groupadd", group], check=True)
    try:
        done = class_hub.in_a_user_namespace_without_nested_ones(
            [str(python), "-m", "labkit.tools.hub", "--group", group, "--check"])
    finally:
        subprocess.run(["groupdel", group], check=True)
    assert done.returncode == 1, done.stdout
    assert "not started" in done.stdout and "cannot make a private network namespace" in done.stdout
    assert "user.max_user_namespaces is 0" in done.stdout and "sysctl -w user.max_user_namespaces=15000" in done.stdout


def test_the_hub_refuses_a_kit_the_learners_cannot_read(python, folder):
    from labkit.tools import hub

    nobody = pwd.getpwnam("nobody").pw_uid
    assert hub.learner_probe(nobody, str(python)) == (None, None), "the learners' Python works (the control)"
    hidden = folder / "root-only"
    hidden.mkdir(mode=0o700)
    (hidden / "python").symlink_to(python)
    failed, fix = hub.learner_probe(nobody, str(hidden / "python"))
    assert "cannot run the kit's Python" in failed and "make hub` installs it in /opt/pslab" in fix


def as_nobody(function):
    """``function()``'s error message, called in a child process whose effective user is nobody: what a user
    without root gets ("" if it raised nothing)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            os.seteuid(pwd.getpwnam("nobody").pw_uid)
            result = function()
            message = "; ".join(result[0]) if isinstance(result, tuple) else ""
        except Exception as error:  # noqa: BLE001 (its message is what the test reads)
            message = str(error)
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    os.waitpid(child, 0)
    return message


def test_the_instructors_commands_refuse_to_run_without_root(folder):
    """They read every learner's processes, homes and accounts: without root each says so, and how to run it."""
    from argparse import Namespace

    from labkit.tools import class_status, collect, hub

    assert "run it as root (sudo .venv/bin/labkit status --all-users)" in as_nobody(class_status.report)
    assert "run it as root (sudo .venv/bin/labkit collect" in as_nobody(
        lambda: collect.run(Namespace(out=str(folder / "never"), group="nogroup", learners=[])))
    assert "run it as root (sudo)" in as_nobody(lambda: hub.preflight(hub.Settings(group="nogroup")))
    assert not (folder / "never").exists()
