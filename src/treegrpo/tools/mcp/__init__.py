"""MCP: servers' tools in the registry (``client``), the session with one server
(``connection``), an input schema as the model meets it (``schema``), and an MCP server over a
Search-R1 corpus (``server``, ``treegrpo serve-mcp``)."""
