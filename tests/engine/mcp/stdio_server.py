"""A stdio MCP server (official Python SDK, `mcp` 2.x) that waits DELAY
seconds before it serves: the slow starter of benches/mcp_start.rs, and the
stdio server of tests/engine/mcp_client.rs and mcp_hardening.rs.

Usage: stdio_server.py DELAY [--calls FILE] [--grandchild MARKER]

Tools: `echo` (read-only) returns its input; `crash` kills the server
mid-call; `flood` (read-only) reports progress as fast as it can for
`seconds`, the last report "final report <n>", and answers "flooded <n>";
`big` (read-only) answers with 17 MiB of text, over the 16 MiB one message
may be; `slow` sleeps for five minutes; `pick` takes `mode` ("fast" or
"slow") and `depth`, and appends each call that reaches it to FILE.

With --grandchild MARKER it first starts `sleep MARKER` twice: as its
child, and in a session of its own (`setsid`) whose parent has exited, as
a daemon does.
"""

import argparse
import asyncio
import os
import subprocess
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.types import ToolAnnotations

parser = argparse.ArgumentParser()
parser.add_argument("delay", type=float, nargs="?", default=0.0)
parser.add_argument("--calls")
parser.add_argument("--grandchild")
ARGS = parser.parse_args()

if ARGS.grandchild:
    subprocess.Popen(["sleep", ARGS.grandchild], stdin=subprocess.DEVNULL)
    # The shell exits at once: the setsid sleep is reparented away from
    # this server, out of its process group and session.
    subprocess.Popen(
        ["sh", "-c", f"setsid sleep {ARGS.grandchild} </dev/null >/dev/null 2>&1 &"]
    ).wait()

asyncio.run(asyncio.sleep(ARGS.delay))

server = MCPServer("vibedesk-stdio-fixture")
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Returns its input."""
    return text


@server.tool()
def crash() -> str:
    """Kills the server mid-call."""
    os._exit(4)


@server.tool(annotations=READ_ONLY)
async def flood(ctx: Context, seconds: float = 3.0) -> str:
    """Reports progress in a loop for `seconds`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    n = 0
    while loop.time() < end:
        n += 1
        await ctx.report_progress(n, None, f"report {n}")
    n += 1
    await ctx.report_progress(n, None, f"final report {n}")
    return f"flooded {n}"


@server.tool(annotations=READ_ONLY)
def big() -> str:
    """Answers with 17 MiB of text."""
    return "x" * (17 * 1024 * 1024)


@server.tool()
async def slow() -> str:
    """Sleeps for five minutes."""
    await asyncio.sleep(300)
    return "woke up"


@server.tool()
def pick(mode: Literal["fast", "slow"], depth: int = 1) -> str:
    """Picks a mode."""
    if ARGS.calls:
        with open(ARGS.calls, "a") as f:
            f.write(f"{mode} {depth}\n")
    return f"picked {mode}"


server.run("stdio")
