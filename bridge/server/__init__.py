"""The MCP server: seven code-search tools, the `ask_repo` prompt and the files as resources, over
Streamable HTTP or stdio, with auth and an audit log.

Rooms: `app` (build, bind and run the server), `tools` (MCP registration) -> `ops` (what each tool
does) -> `render` (text blocks) and `models` (structured results: the wire shapes), `prompt` (the
`ask_repo` prompt, the file resources and the prompt templates), `catalog` (the tool names; `serve
--tools`), `spec` (what to serve, known before an index opens), `opening` (the indexes while they
open), `repos` (the served indexes, watching and re-indexing), `auth`, `cors` (browser origins),
`stdio` (the stdio transport: its early handshake and clean stops), `audit`, `clients` (client config
snippets), `connect` (an MCP client session). This file imports nothing, so `bridge search` can use
the wire models without loading the server.
"""
