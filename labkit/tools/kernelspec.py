"""``python -m labkit.tools.kernelspec NAME``: make the installed kernel NAME start through the isolation launcher.

``make kernel`` installs the kernel with ipykernel, then runs this: the kernel's command becomes
``python -m labkit.runtime.isolation -f {connection_file}`` (see ``labkit.runtime.isolation``).
"""
import json
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager

LAUNCHER = ["-m", "labkit.runtime.isolation", "-f", "{connection_file}"]


def start_through_launcher(name):
    """Rewrite kernel ``name``'s kernel.json so its command is the launcher; return the file's path."""
    spec_file = Path(KernelSpecManager().get_kernel_spec(name).resource_dir, "kernel.json")
    spec = json.loads(spec_file.read_text())
    spec["argv"] = [spec["argv"][0], *LAUNCHER]
    spec_file.write_text(json.dumps(spec, indent=1))
    return spec_file


if __name__ == "__main__":
    print(f"{start_through_launcher(sys.argv[1])}: each kernel starts in a private network namespace where "
          "the system allows it (labkit.runtime.isolation)")
