"""``python -m labkit.tools.grade_worker PLAN``: the process in which ``labkit grade`` runs one notebook.

See ``labkit.tools.grade``."""
import argparse
import ctypes
import json
import sys
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError

from labkit.runtime import children


def run_one(plan_path):
    """Execute the plan's notebook cell by cell, every cell even after errors; write the result JSON after
    each check cell, so that a run killed at its timeout keeps the checks it had reached."""
    plan = json.loads(Path(plan_path).read_text())
    notebook = nbformat.read(plan["notebook"], as_version=4)
    result = {"status": "running", "checks": {}, "cell_errors": []}

    def save():
        Path(plan["result"]).write_text(json.dumps(result, indent=1))

    client = NotebookClient(notebook, kernel_name=plan["kernel"], timeout=plan["cell_timeout"],
                            interrupt_on_timeout=True, resources={"metadata": {"path": plan["cwd"]}})
    client.reset_execution_trackers()
    try:
        with client.setup_kernel():
            for index, cell in enumerate(notebook.cells):
                names = plan["checks"].get(cell.get("id"), [])
                if cell.cell_type != "code" or (names and all(name in plan["skip"] for name in names)):
                    continue
                try:
                    client.execute_cell(cell, index)
                    outcome = ["passed", ""]
                except CellExecutionError as error:
                    stopped = error.ename == "KeyboardInterrupt"  # interrupt_on_timeout's doing
                    if stopped:
                        error.evalue = f"the cell ran longer than {plan['cell_timeout']:g} s (--cell-timeout): stopped"
                    outcome = ["failed", f"{error.ename}: {error.evalue}"]
                    result["cell_errors"].append({"cell": index, "check": bool(names), "ename": error.ename,
                                                  "evalue": error.evalue, "stopped": stopped})
                for name in names:
                    result["checks"][name] = outcome
                if names or outcome[0] == "failed":
                    save()
        result["status"] = "ok"
    except DeadKernelError as error:
        result.update(status="kernel died", detail=str(error).splitlines()[0][:300])
    finally:
        nbformat.write(notebook, plan["executed"])
        result["descendants"] = [[child.pid, child.create_time()] for child in psutil.Process().children(recursive=True)]
        save()


def adopt_orphans():
    """On Linux, become the parent of any process whose own parent exits (a subreaper), so that a process a
    notebook detached (double fork, ``env -i``: no marker) is still found and killed at the end."""
    if sys.platform.startswith("linux"):
        PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.tools.grade_worker")
    parser.add_argument("plan", help="the plan.json that labkit grade wrote for one notebook")
    children.exit_with_parent_if_started_by_one()
    adopt_orphans()
    run_one(parser.parse_args(argv).plan)


if __name__ == "__main__":
    sys.exit(main())
