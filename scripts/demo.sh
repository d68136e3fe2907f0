#!/usr/bin/env bash
# Set up, index a repository (default: this one), and answer a question about it with the bundled
# SmolLM2 model, retrieving through the MCP server. Prints the answer and the report.
#
#   bash scripts/demo.sh [REPO] [QUESTION]
#
# The answer does not wait for the dense vectors: the BM25 index takes seconds, so the question is
# answered from it at once (hybrid file ranking over BM25) while MiniLM vectors are computed in the background (at low priority);
# the script then waits for them, so the next `bridge ask` searches hybrid. Ctrl-C stops the
# filling; a later `bridge index REPO` resumes it (embeddings are cached by content).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=${1:-.}
question=${2:-"How does the budget planner decide which retrieved snippets fit into the prompt?"}
bash scripts/setup.sh
start=$SECONDS

echo "demo: building the BM25 index of $repo (seconds)" >&2
.venv/bin/bridge index "$repo" --no-vectors

log=$(mktemp "${TMPDIR:-/tmp}/bridge-demo-vectors.XXXXXX")
echo "demo: computing MiniLM vectors in the background (log: $log); answering from BM25 meanwhile" >&2
nice -n 19 .venv/bin/bridge index "$repo" >"$log" 2>&1 &
filler=$!
trap 'kill "$filler" 2>/dev/null || true' INT TERM

echo "demo: asking the bundled SmolLM2-135M: $question" >&2
.venv/bin/bridge ask "$question" --repo "$repo" --show-budget
echo "demo: answered $((SECONDS - start)) s after set-up" >&2

echo "demo: waiting for the MiniLM vectors to finish (Ctrl-C to stop; \`bridge index $repo\` resumes)" >&2
if wait "$filler"; then
  echo "demo: vectors ready; \`.venv/bin/bridge ask QUESTION --repo $repo\` now searches hybrid (BM25 + MiniLM)" >&2
  rm -f "$log"
else
  echo "demo: the vector fill stopped early (see $log); BM25 search still works" >&2
fi
