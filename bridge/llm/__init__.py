"""The model side: one runtime protocol and its backends, and the facts a GGUF file declares.

Rooms: `runtime` (the protocol, messages, generation results), `llama` (llama.cpp in process: the
only importer of llama_cpp), `openai` (an OpenAI-compatible server over HTTP), `gguf` (model facts,
presets, KV bytes, context limits), `tokens` (token counters), `prefill` (prefill-time fits).
Depends on nothing above it in `bridge`.
"""
