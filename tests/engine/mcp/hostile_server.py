"""A stdio MCP server that sends what the official SDKs refuse to send,
for tests/engine/mcp_hardening.rs: input schemas that are not JSON Schema,
and thousands of tools. The standard library only, speaking JSON-RPC on
stdin/stdout as tiny_stdio_server.py does.

Usage: hostile_server.py N [endless]

Tools: `echo` (read-only) returns its `text`; `bad_type` has the schema
{"type": 42, "properties": "nope"}; `bad_nested` a property whose type is
"strnig"; and `t0000` … `t<N-1>`, each taking `x` (an integer).
"""

import json
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 0
# `endless`: tools/list answers page after page, each naming a next one.
ENDLESS = len(sys.argv) > 2 and sys.argv[2] == "endless"

TOOLS = [
    {
        "name": "echo",
        "description": "Returns its input.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "annotations": {"readOnlyHint": True},
    },
    {"name": "bad_type", "description": "Invalid schema.", "inputSchema": {"type": 42, "properties": "nope"}},
    {
        "name": "bad_nested",
        "description": "Invalid nested schema.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "strnig"}}},
    },
] + [
    {
        "name": f"t{i:04d}",
        "description": f"Filler tool number {i}, which does nothing useful at all.",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "annotations": {"readOnlyHint": True},
    }
    for i in range(N)
]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue  # notifications
    params = msg.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list" and ENDLESS:
        page = int((params.get("cursor") or "p0")[1:])
        result = {"tools": [dict(t, name=f"{t['name']}_{page}") for t in TOOLS], "nextCursor": f"p{page + 1}"}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        args = params.get("arguments") or {}
        result = {"content": [{"type": "text", "text": f"{params.get('name')}: {json.dumps(args)}"}]}
    else:
        send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "not found"}})
        continue
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})
