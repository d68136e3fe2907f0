#!/usr/bin/env bash
# Refresh constraints.txt: resolve the full install (.[all,test] with the CPU torch and the cached
# llama wheel, as scripts/setup.sh installs it) afresh in a throwaway virtualenv, then write what
# pip resolved, every package pinned with ==, minus the project itself. scripts/setup.sh and CI install
# with `-c constraints.txt`, so they get these versions until the next refresh.
#
#   bash scripts/lock.sh       (a few minutes with a warm pip cache; then review and commit the diff)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The llama wheel scripts/setup.sh builds and caches (one per back end): build it first if it is missing.
wheels=${BRIDGE_WHEELS:-$HOME/.cache/mcp-retrieval-bridge/wheels}/llama-$(bash scripts/setup.sh --print-backend | cut -d' ' -f1)
ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1 || bash scripts/setup.sh chat

# Installed from a copy of the tracked files (as they are now): a build writes build/ and *.egg-info into its source.
mkdir "$scratch/src"
git ls-files -z | xargs -0 cp --parents -t "$scratch/src"
"$python" -m venv "$scratch/venv"
pip() { "$scratch/venv/bin/python" -m pip -q --disable-pip-version-check "$@"; }
pip install --no-compile --no-deps "$wheels"/llama_cpp_python-*.whl
pip install --no-compile torch==2.13.0 "$scratch/src[all,test]"
{
  echo "# Pins for scripts/setup.sh and CI (pip install -c constraints.txt ...). Refresh: bash scripts/lock.sh"
  echo "# Resolved $(date -u +%Y-%m-%d) for Python $("$scratch/venv/bin/python" -c 'import sys; print(*sys.version_info[:2], sep=".")')."
  # Local version labels (torch 2.13.0+cpu) are dropped: ==2.13.0 matches the CPU build and any index's.
  # `pip list --format=freeze` prints name==version even for the llama wheel installed from a file (not -q: that hides it).
  "$scratch/venv/bin/python" -m pip list --format=freeze --exclude mcp-retrieval-bridge --exclude pip \
    --exclude setuptools --exclude wheel | sed -E 's/^([^=]+==[^+]+)\+.*$/\1/' | LC_ALL=C sort -f
} >constraints.txt.new
mv constraints.txt.new constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)" >&2
