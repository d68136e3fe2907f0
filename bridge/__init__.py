"""mcp-retrieval-bridge: serve a hybrid code index over MCP and answer with a small local model."""

__version__ = "0.1.0"
