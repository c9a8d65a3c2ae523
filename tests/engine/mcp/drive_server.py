"""Drives `vibedesk mcp serve` with the official Python MCP SDK client.

Usage: drive_server.py stdio VIBEDESK_BIN [ARGS...]  (spawns `VIBEDESK_BIN mcp serve ARGS...`)
       drive_server.py http URL [TOKEN]              (an already running --http server)

Lists the tools, runs an SMA crossover backtest on the embedded AAPL data
with a progress callback, calls a tool with bad arguments, saves and
recalls a memory, asks for a tool it does not serve, and prints one
JSON object with what it saw, for the Rust test to assert on.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters

BACKTEST = {
    "config": {
        "codes": ["AAPL"],
        "start_date": "2004-01-01",
        "end_date": "2012-12-31",
        "source": "embedded",
        "initial_cash": 100000,
        "commission_rate": 0.001,
        "strategy": {"name": "sma_crossover", "params": {"fast": 20, "slow": 50}},
    }
}


def target(argv):
    if argv[1] == "stdio":
        # The server gets this environment with its home in VIBEDESK_HOME.
        env = dict(os.environ)
        env["HOME"] = env["VIBEDESK_HOME"]
        return StdioServerParameters(command=argv[2], args=["mcp", "serve", *argv[3:]], env=env)
    if argv[1] == "http":
        if len(argv) > 3:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {argv[3]}"})
            return streamable_http_client(argv[2], http_client=http)
        return argv[2]
    raise SystemExit(f"unknown mode {argv[1]}")


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def main(argv):
    seen = {}
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})

    async with Client(target(argv)) as client:
        listed = await client.list_tools()
        seen["tools"] = {
            t.name: {
                "read_only": t.annotations.read_only_hint if t.annotations else None,
                "destructive": t.annotations.destructive_hint if t.annotations else None,
                "required": t.input_schema.get("required"),
                "output_properties": sorted((t.output_schema or {}).get("properties", {})),
            }
            for t in listed.tools
        }
        result = await client.call_tool("backtest", BACKTEST, progress_callback=on_progress)
        seen["backtest"] = {
            "is_error": result.is_error,
            "structured": result.structured_content,
            "text": text_of(result),
        }
        seen["progress"] = progress
        bad = await client.call_tool("market_data", {"limit": "five"})
        seen["bad_args"] = {"is_error": bad.is_error, "text": text_of(bad)}
        indicator = await client.call_tool(
            "indicators", {"symbol": "AAPL", "indicator": "sma", "params": {"window": 20}, "tail": 3, "source": "embedded"}
        )
        seen["indicators"] = {"is_error": indicator.is_error, "structured": indicator.structured_content}
        saved = await client.call_tool(
            "remember",
            {"title": "MCP fee note", "content": "Commission 0.1% per side on US equities", "keywords": ["fees"]},
        )
        recalled = await client.call_tool("recall", {"query": "commission fees"})
        seen["memory"] = {
            "saved_is_error": saved.is_error,
            "recall_is_error": recalled.is_error,
            "recall_text": text_of(recalled),
        }
        try:
            await client.call_tool("bash", {"command": "true"})
            seen["unknown_tool"] = "answered"
        except Exception as e:  # an unknown tool is a protocol error
            seen["unknown_tool"] = str(e)
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
