#!/bin/sh
# Print the path of a Python the kit supports (3.11-3.13), or say why there is none and how to get one.
#   sh scripts/find_python.sh           python3.13, python3.12, python3.11 or python3 on PATH, else one uv manages
#   sh scripts/find_python.sh PYTHON    that Python alone (`make lab PYTHON=/path/to/python3.12`)
# It only looks: the Makefile makes .venv with what it prints, and nothing when it fails.

# "Python 3.12.3" if $1 runs, nothing otherwise.
version_of() {
  "$1" --version 2>&1 | head -n 1
}

supported() {
  case "$(version_of "$1")" in
    "Python 3.11."* | "Python 3.12."* | "Python 3.13."*) return 0 ;;
    *) return 1 ;;
  esac
}

if [ -n "$1" ]; then
  candidates="$1"
else
  candidates="python3.13 python3.12 python3.11 python3"
fi
for candidate in $candidates; do
  if supported "$candidate"; then
    command -v "$candidate"
    exit 0
  fi
done
if [ -z "$1" ] && command -v uv >/dev/null && found=$(uv python find '>=3.11,<3.14' 2>/dev/null); then
  echo "$found"
  exit 0
fi

# None: say what was found, then how to get one on this system (uname; /etc/os-release, or OS_RELEASE).
os_release=${OS_RELEASE:-/etc/os-release}
os_field() {
  sed -n "s/^$1=//p" "$os_release" 2>/dev/null | tr -d '"'
}
UV_STEPS="uv (https://docs.astral.sh/uv/), no sudo: curl -LsSf https://astral.sh/uv/install.sh | sh   then, in a new terminal: uv python install 3.12"

advice() {
  system=$(uname -s)
  if [ "$system" = Darwin ]; then
    if [ "$(uname -m)" = x86_64 ]; then
      echo "  This is an Intel Mac: TensorFlow 2.21 has no wheel for it, so the kit cannot run here with any Python."
      echo "  Use a Linux machine or an Apple silicon Mac, or pair with a neighbour (docs/install-macos.md)."
      return
    fi
    echo "  Homebrew: brew install python@3.12   (it puts python3.12 in /opt/homebrew/bin)"
    echo "  or $UV_STEPS"
    echo "  (step by step: docs/install-macos.md)"
    return
  fi
  id=$(os_field ID)
  version=$(os_field VERSION_ID)
  if uname -r | grep -qi microsoft; then
    echo "  This is WSL2 ($id $version). The simplest: an Ubuntu 24.04, which ships Python 3.12: in PowerShell,"
    echo "  wsl --install -d Ubuntu-24.04 (docs/install-windows.md). Or, in this Linux:"
  fi
  case "$id $version" in
    "ubuntu 22.04")
      echo "  Ubuntu 22.04 ships Python 3.10. Either: sudo add-apt-repository ppa:deadsnakes/ppa && sudo apt install python3.12 python3.12-venv"
      echo "  or $UV_STEPS"
      echo "  (step by step: docs/install-ubuntu.md)" ;;
    "ubuntu 24.04")
      echo "  Ubuntu 24.04 ships Python 3.12: sudo apt install python3.12 python3.12-venv"
      echo "  (step by step: docs/install-ubuntu.md)" ;;
    ubuntu*)
      echo "  Ubuntu $version ships a Python TensorFlow 2.21 cannot use (26.04: Python 3.14). Either $UV_STEPS"
      echo "  or deadsnakes, where it builds python3.12 for this release: sudo add-apt-repository ppa:deadsnakes/ppa && sudo apt install python3.12 python3.12-venv"
      echo "  (step by step: docs/install-ubuntu.md)" ;;
    "debian 12" | "debian 13")
      echo "  Debian $version ships a Python the kit supports: sudo apt install python3 python3-venv" ;;
    fedora*)
      echo "  Fedora: sudo dnf install python3.12   or $UV_STEPS" ;;
    *)
      echo "  $UV_STEPS"
      echo "  or https://www.python.org/downloads/ (or your system's python3.12 package, with its venv module)" ;;
  esac
}

{
  for candidate in $candidates; do
    if command -v "$candidate" >/dev/null; then
      echo "Found $candidate ($(command -v "$candidate")): $(version_of "$candidate")."
    fi
  done
  echo "PS Lab needs Python 3.11, 3.12 or 3.13 (ipykernel 7.4 needs 3.11; TensorFlow 2.21 has no wheels after 3.13)."
  echo "No such Python was found, so nothing was installed. Get one, then run the same make command again:"
  advice
  echo "Or name one yourself: make lab PYTHON=/path/to/python3.12"
} >&2
exit 1
