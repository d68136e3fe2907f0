#!/usr/bin/env bash
# Set up, then run the whole test suite (fast unit tests and the slow real-model tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
