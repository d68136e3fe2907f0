#!/usr/bin/env bash
# Set up (with llama.cpp's llama-server), then lint (ruff), type-check (mypy; the strict set for index/), and run the whole test
# suite (fast unit tests and the slow real-model tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# llama.cpp's llama-server for tests/server/test_llama_server_host.py (built once, cached: 10-25 min on 2 cores)
bash scripts/setup.sh --llama-server >/dev/null
.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
