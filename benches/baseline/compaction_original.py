"""Timing baseline for `cargo bench --bench compaction`.

The original Vibe-Trading compaction helpers as its behavioural spec describes
them (../shared/spec/vibe-trading-engine.md §3.1-§3.5): plain Python over the
message dicts, L1 microcompact, L2 context collapse, tool-pair repair and the
chars/4 token estimate. Written here from the spec for timing on the same
input; it is not the original's source and archives nothing.

Usage: python3 compaction_original.py TRANSCRIPT.jsonl
Prints one JSON object: median seconds of each step over 7 runs, and the
estimate after the pass (the bench checks it equals ours).
"""

import json
import sys
import time

KEEP_RECENT = 3
COLLAPSE_PRESERVE_RECENT = 6
COLLAPSE_THRESHOLD = 2400
STUB = "[Result from earlier context, see the summary above]"


def estimate_tokens(messages):
    return len(json.dumps(messages, ensure_ascii=False, default=str)) // 4


def microcompact(messages):
    tools = [m for m in messages if m.get("role") == "tool"]
    if len(tools) <= KEEP_RECENT:
        return
    for m in tools[:-KEEP_RECENT]:
        content = m.get("content")
        if isinstance(content, str) and len(content) > 100:
            m["content"] = "[cleared]"


def collapse(messages):
    if len(messages) <= COLLAPSE_PRESERVE_RECENT + 1:
        return
    for m in messages[1 : len(messages) - COLLAPSE_PRESERVE_RECENT]:
        content = m.get("content")
        if (
            isinstance(content, str)
            and len(content) > COLLAPSE_THRESHOLD
            and content != "[cleared]"
        ):
            n = len(content) - 1400
            m["content"] = (
                content[:900] + f"\n\n...[{n} chars collapsed]...\n\n" + content[-500:]
            )


def fix_tool_pairs(messages):
    if not messages:
        return messages
    call_ids = set()
    for m in messages:
        if m.get("role") == "assistant":
            for tc in m.get("tool_calls") or []:
                if tc.get("id"):
                    call_ids.add(tc["id"])
    messages[:] = [
        m
        for m in messages
        if m.get("role") != "tool" or m.get("tool_call_id") in call_ids
    ]
    answered = {
        m["tool_call_id"]
        for m in messages
        if m.get("role") == "tool" and m.get("tool_call_id")
    }
    stubs = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        for tc in m.get("tool_calls") or []:
            cid = tc.get("id")
            if cid and cid not in answered:
                name = (tc.get("function") or {}).get("name") or "unknown"
                stubs.append(
                    (i + 1, {"role": "tool", "tool_call_id": cid, "name": name, "content": STUB})
                )
                answered.add(cid)
    for at, stub in reversed(stubs):
        messages.insert(at, stub)
    return messages


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        original = [json.loads(line) for line in f if line.strip()]
    steps = {"l1": [], "l2": [], "pairs": [], "pass": [], "estimate": []}
    after = None
    for _ in range(7):
        msgs = [dict(m) for m in original]  # outside the clock
        t0 = time.perf_counter()
        microcompact(msgs)
        t1 = time.perf_counter()
        collapse(msgs)
        t2 = time.perf_counter()
        fix_tool_pairs(msgs)
        t3 = time.perf_counter()
        steps["l1"].append(t1 - t0)
        steps["l2"].append(t2 - t1)
        steps["pairs"].append(t3 - t2)
        steps["pass"].append(t3 - t0)
        after = estimate_tokens(msgs)
    for _ in range(7):
        t0 = time.perf_counter()
        estimate_tokens(original)
        steps["estimate"].append(time.perf_counter() - t0)
    out = {k: median(v) for k, v in steps.items()}
    out["tokens_before"] = estimate_tokens(original)
    out["tokens_after"] = after
    print(json.dumps(out))


if __name__ == "__main__":
    main()
