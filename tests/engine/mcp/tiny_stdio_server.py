"""The smallest stdio MCP server, standard library only, for
benches/mcp_start.rs: it starts in milliseconds, so the benchmark sees the
client's start-up (spawn, handshake, tool list) rather than the seconds the
`mcp` SDK's imports take. It waits DELAY seconds before it serves.

Usage: tiny_stdio_server.py DELAY
"""

import json
import sys
import time

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)

TOOLS = [{
    "name": "echo",
    "description": "Returns its input.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "annotations": {"readOnlyHint": True},
}]


def reply(msg_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue  # notifications
    if method == "initialize":
        reply(msg_id, {
            "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tiny", "version": "1"},
        })
    elif method == "tools/list":
        reply(msg_id, {"tools": TOOLS})
    elif method == "tools/call":
        text = msg["params"].get("arguments", {}).get("text", "")
        reply(msg_id, {"content": [{"type": "text", "text": text}]})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "not found"}}) + "\n")
        sys.stdout.flush()
