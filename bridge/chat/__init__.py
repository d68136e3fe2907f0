"""The chat loop: retrieve over MCP -> plan the prompt under the token and KV budget -> generate.

Rooms: `session` (a turn and its history; opening the runtime), `retrieval` (the MCP `search_code`
client and the in-process server), `budget` (the prompt planner), `prompt` (templates and
messages), `settings` (options and BRIDGE_* variables), `answers` (loops and citations in answers). Uses `bridge.llm` and `bridge.server`.
"""
