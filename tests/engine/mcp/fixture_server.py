"""A streamable-HTTP MCP server for vibedesk's client tests (docs §13.3),
written with the official Python SDK (`mcp` 2.x).

Usage: fixture_server.py PORT MARKER_DIR

Tools: `slow_read` (read-only) and `slow_write` sleep far past any test
deadline and write MARKER_DIR/cancelled-<tool> when the client cancels them;
`progress` reports progress three times; `fails` answers with an isError
result; `crash` kills the whole server mid-call; `echo` returns its input;
`big` answers with 17 MiB, over the 16 MiB one message may be.
"""

import asyncio
import os
import pathlib
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

PORT = int(sys.argv[1])
MARKERS = pathlib.Path(sys.argv[2])

server = MCPServer("vibedesk-fixture")
READ_ONLY = ToolAnnotations(read_only_hint=True)


async def sleep_until_cancelled(name: str) -> str:
    try:
        await asyncio.sleep(300)
    except BaseException:
        (MARKERS / f"cancelled-{name}").write_text("cancelled")
        raise
    return "woke up"


@server.tool(annotations=READ_ONLY)
async def slow_read() -> str:
    """Sleeps for five minutes (read-only)."""
    return await sleep_until_cancelled("slow_read")


@server.tool()
async def slow_write() -> str:
    """Sleeps for five minutes (not read-only)."""
    return await sleep_until_cancelled("slow_write")


@server.tool(annotations=READ_ONLY)
async def progress(ctx: Context) -> str:
    """Reports progress three times, then answers."""
    for step in range(1, 4):
        await ctx.report_progress(step, 3, f"step {step} of 3")
        await asyncio.sleep(0.2)
    return "all 3 steps done"


@server.tool()
async def fails(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(f"refused: {reason}")


@server.tool()
async def crash() -> str:
    """Kills the server mid-call."""
    os._exit(3)


@server.tool(annotations=READ_ONLY)
async def echo(text: str) -> str:
    """Returns its input."""
    return text


@server.tool(annotations=READ_ONLY)
async def big() -> str:
    """Answers with 17 MiB of text, over the 16 MiB one message may be."""
    return "x" * (17 * 1024 * 1024)


server.run("streamable-http", host="127.0.0.1", port=PORT)
