"""vibedesk's Ray job driver (docs §19.2).

vibedesk uploads this file in a package beside its own binary and a job file
(`job.json`), and submits `python driver.py` through Ray's Jobs REST API.
The driver runs one Ray task per shard; each task runs the binary with the
job's argument list, `{shard}` replaced by `i/N`. A task that fails (a
non-zero exit, or its node lost) is retried by Ray up to `max_retries` times;
a shard's output is written atomically by the binary, so a rerun gives the
same bytes. Lines starting with `@@vibedesk ` are the events vibedesk reads
back from the job's log. Nothing here knows what a shard computes.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import ray

MARK = "@@vibedesk "


def emit(event, **fields):
    fields["event"] = event
    print(MARK + json.dumps(fields, sort_keys=True), flush=True)


def die_with_parent():
    # The shard must not outlive its Ray worker: a stopped job or a lost
    # node ends it (Linux only; elsewhere the shard runs to its end, and its
    # atomic write keeps that harmless).
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass


@ray.remote(num_cpus=1)
def run_shard(binary, argv, shard, count):
    exe = os.path.join(os.getcwd(), binary)
    # The zip keeps the mode bits; a store that drops them must not stop us.
    os.chmod(exe, 0o755)
    spec = "%d/%d" % (shard, count)
    args = [exe] + [a.replace("{shard}", spec) for a in argv]
    started = time.time()
    node_id = ray.get_runtime_context().get_node_id()
    emit("shard_started", shard=shard, of=count, node=socket.gethostname(), node_id=node_id, pid=os.getpid())
    proc = subprocess.run(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=die_with_parent,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            "shard %s exited %d: %s" % (spec, proc.returncode, proc.stderr.strip()[-2000:])
        )
    return {"shard": shard, "seconds": round(time.time() - started, 3), "node_id": node_id}


def main():
    with open("job.json", encoding="utf-8") as f:
        job = json.load(f)
    ray.init()
    count = job["n"]
    pending = list(job["shards"])
    limit = job.get("max_in_flight") or len(pending) or 1
    task = run_shard.options(max_retries=job["max_retries"], retry_exceptions=True)
    emit("job_started", shards=len(pending), of=count, cluster_cpus=ray.cluster_resources().get("CPU", 0))
    running = {}
    failed = []
    while pending or running:
        while pending and len(running) < limit:
            shard = pending.pop(0)
            ref = task.remote(job["binary"], job["argv"], shard, count)
            running[ref] = shard
        done, _ = ray.wait(list(running), num_returns=1)
        for ref in done:
            shard = running.pop(ref)
            try:
                result = ray.get(ref)
                emit("shard_done", shard=shard, of=count, seconds=result["seconds"], node_id=result["node_id"])
            except Exception as e:  # retries exhausted
                failed.append(shard)
                emit("shard_failed", shard=shard, of=count, error=str(e)[-2000:])
    emit("job_finished", failed=failed)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
