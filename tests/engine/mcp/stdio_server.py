"""A stdio MCP server (official Python SDK, `mcp` 2.x) that waits DELAY
seconds before it serves: the slow starter of benches/mcp_start.rs, and the
stdio server that crashes mid-call in tests/engine/mcp_client.rs.

Usage: stdio_server.py DELAY
"""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)

server = MCPServer("vibedesk-stdio-fixture")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Returns its input."""
    return text


@server.tool()
def crash() -> str:
    """Kills the server mid-call."""
    os._exit(4)


server.run("stdio")
