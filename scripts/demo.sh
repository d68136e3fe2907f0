#!/usr/bin/env bash
# Set up, index a repository (default: this one), and answer a question about it with the bundled
# SmolLM2 model, retrieving through the MCP server. Prints the answer and the report.
#
#   bash scripts/demo.sh [REPO] [QUESTION]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=${1:-.}
question=${2:-"How does the budget planner decide which retrieved snippets fit into the prompt?"}
bash scripts/setup.sh
.venv/bin/bridge index "$repo"
.venv/bin/bridge ask "$question" --repo "$repo" --show-budget
