"""The agent's tools: the registry every tool joins (``registry``; a retriever is the ``search``
tool), the calculator, the web tools (``web``: search, visit, find) and MCP servers' tools with
our own MCP server (``mcp``)."""
