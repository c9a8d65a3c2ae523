"""Meets vibedesk's test-only panicking tool with the official Python MCP SDK client.

Usage: panic_client.py stdio VIBEDESK_BIN   (spawns `VIBEDESK_BIN mcp serve`)
       panic_client.py http URL             (an already running --no-token --http server)

Calls `test_panic` twice (a panic on the call's task, one on a blocking
thread), then `option_price`, on one session, timing each answer; prints
one JSON object with what it saw for the Rust test to assert on.
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

CALLS = [
    ("test_panic", {}),
    ("test_panic", {"on": "blocking"}),
    ("option_price", {"kind": "call", "spot": 100, "strike": 100, "expiry_years": 1, "volatility": 0.2}),
]


async def calls(session):
    await session.initialize()
    seen = []
    for name, args in CALLS:
        started = time.monotonic()
        result = await asyncio.wait_for(session.call_tool(name, args), 60)
        seen.append({
            "tool": name,
            "seconds": time.monotonic() - started,
            "is_error": bool(result.is_error),
            "text": "".join(getattr(c, "text", "") for c in result.content),
        })
    return seen


async def main(argv):
    if argv[1] == "stdio":
        env = dict(os.environ)
        env["HOME"] = env["VIBEDESK_HOME"]
        params = StdioServerParameters(command=argv[2], args=["mcp", "serve"], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                return await calls(session)
    async with streamable_http_client(argv[2]) as (read, write):
        async with ClientSession(read, write) as session:
            return await calls(session)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv))))
