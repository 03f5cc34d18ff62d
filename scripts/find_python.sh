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

# None: say what was found, then how to get one on this system.
{
  for candidate in $candidates; do
    if command -v "$candidate" >/dev/null; then
      echo "Found $candidate ($(command -v "$candidate")): $(version_of "$candidate")."
    fi
  done
  echo "PS Lab needs Python 3.11, 3.12 or 3.13 (ipykernel 7.4 needs 3.11; TensorFlow 2.21 has no wheels after 3.13)."
  echo "No such Python was found, so nothing was installed. Get one, then run the same make command again:"
  if [ "$(uname -s)" = Darwin ]; then
    echo "  the python.org installer for macOS (https://www.python.org/downloads/macos/), or: brew install python@3.12"
    echo "  (step by step: docs/install-macos.md)"
  elif grep -qi ubuntu /etc/os-release 2>/dev/null; then
    echo "  sudo add-apt-repository ppa:deadsnakes/ppa && sudo apt install python3.12 python3.12-venv"
    echo "  or, with uv (https://docs.astral.sh/uv/): uv python install 3.12"
    echo "  (step by step: docs/install-ubuntu.md)"
  else
    echo "  https://www.python.org/downloads/ (or your system's python3.12 package, with its venv module)"
  fi
  echo "Or name one yourself: make lab PYTHON=/path/to/python3.12"
} >&2
exit 1
