#!/usr/bin/env bash
# Set up, then lint (ruff), type-check (mypy; the strict set for index/), and run the whole test
# suite (fast unit tests and the slow real-model tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
