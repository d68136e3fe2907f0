"""The MCP server: seven code-search tools over Streamable HTTP or stdio, with auth and an audit log.

Rooms: `app` (build, bind and run the server), `tools` (MCP registration) -> `ops` (what each tool
does) -> `render` (text blocks) and `models` (structured results: the wire shapes), `spec` (what to
serve, known before an index opens), `opening` (the indexes while they open), `repos` (the served
indexes, watching and re-indexing), `auth`, `cors` (browser origins), `stdio` (the stdio transport:
its early handshake and clean stops), `audit`, `clients` (client config snippets), `client` (an MCP
client session). This file imports nothing, so `bridge search` can use the wire models without
loading the server.
"""
