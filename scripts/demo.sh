#!/usr/bin/env bash
# Set up, index a repository (default: this one), and answer a question about it with the bundled
# SmolLM2 model, retrieving through the MCP server. Prints the answer and the report.
#
#   bash scripts/demo.sh [REPO] [QUESTION]
#
# The answer waits neither for the dense vectors nor for what they need: the set-up first installs
# only what BM25 indexing and `bridge ask` use (`setup.sh --core`, about half a minute; torch and
# the embedders are most of a full set-up), the BM25 index takes seconds, and the question is answered
# from it (hybrid file ranking over BM25). Then the rest is installed and the MiniLM vectors are
# computed, so the next `bridge ask` searches hybrid. Ctrl-C stops that part; `bash scripts/setup.sh`
# then `bridge index REPO` resume it (embeddings are cached by content).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=${1:-.}
question=${2:-"How does the budget planner decide which retrieved snippets fit into the prompt?"}
begin=$SECONDS
echo "demo: setting up what answering needs (scripts/setup.sh --core)" >&2
bash scripts/setup.sh --core
setup_s=$((SECONDS - begin))

start=$SECONDS
echo "demo: building the BM25 index of $repo (seconds)" >&2
.venv/bin/bridge index "$repo" --no-vectors
index_s=$((SECONDS - start))

echo "demo: asking the bundled SmolLM2-135M: $question" >&2
.venv/bin/bridge ask "$question" --repo "$repo" --show-budget
echo "demo: answered $((SECONDS - begin)) s after starting (set-up ${setup_s} s, BM25 index ${index_s} s, answer $((SECONDS - start - index_s)) s)" >&2

echo "demo: installing the rest (torch and the MiniLM embedder; Ctrl-C to stop, \`bash scripts/setup.sh\` resumes)" >&2
bash scripts/setup.sh
echo "demo: computing MiniLM vectors (Ctrl-C to stop; \`.venv/bin/bridge index $repo\` resumes)" >&2
if .venv/bin/bridge index "$repo"; then
  echo "demo: vectors ready; \`.venv/bin/bridge ask QUESTION --repo $repo\` now searches hybrid (BM25 + MiniLM)" >&2
else
  echo "demo: the vector fill stopped early; BM25 search still works" >&2
fi
