"""mcpd: the MCP server (tools for AI agents), each tool a call to the gateway's API."""
