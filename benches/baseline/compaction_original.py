"""Timing baseline for `cargo bench --bench compaction`.

Times the original Vibe-Trading compaction layers as its behavioural spec
gives them (§3.1-§3.5) on the bench's transcript: L1 microcompact, L2
context collapse and tool-pair repair from the fixtures' reference
(tests/fixtures/compaction/reference.py, plain Python over the message
dicts, the same code that wrote the expected outputs), and the chars/4
token estimate. Not the original's source; it archives nothing.

Usage: python3 compaction_original.py TRANSCRIPT.jsonl
Prints one JSON object: median seconds of each step over 7 runs, and the
estimate before and after the pass (the bench checks both equal ours).

Usage: python3 compaction_original.py --whole TRANSCRIPT.jsonl OUT.jsonl
The whole process as the original runs it, once: read the transcript with
json.loads per line, the three layers in place, write each message back
with json.dumps(m, ensure_ascii=False) per line. The bench times this as a
subprocess, interpreter start included, against `vibedesk compact`; the
seconds from the first read to the last write (without the interpreter's
start) go to stdout.
"""

import json
import os
import sys
import time

sys.path.insert(
    0,
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "compaction"),
)
from reference import collapse, micro as microcompact, pairs as fix_tool_pairs  # noqa: E402


def estimate_tokens(messages):
    return len(json.dumps(messages, ensure_ascii=False, default=str)) // 4


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def whole(transcript, out):
    t0 = time.perf_counter()
    with open(transcript, encoding="utf-8") as f:
        msgs = [json.loads(line) for line in f if line.strip()]
    microcompact(msgs)
    collapse(msgs)
    fix_tool_pairs(msgs)
    with open(out, "w", encoding="utf-8") as f:
        for m in msgs:
            f.write(json.dumps(m, ensure_ascii=False) + "\n")
    print(json.dumps({"in_script": time.perf_counter() - t0}))


def main():
    if sys.argv[1] == "--whole":
        whole(sys.argv[2], sys.argv[3])
        return
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
