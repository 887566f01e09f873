#!/usr/bin/python3
"""Load test (issue 18): N tasks in flight at once against one consensord, which must keep its
memory bounded by its queue, not by the backlog, and answer what it cannot take with
RESOURCE_EXHAUSTED. Starts its own node (own datadir, free loopback port), uploads one small
graph and input, then fires N SubmitTask calls at once (distinct nonces) over many channels,
while it samples the daemon's resident memory. Then waits for every acknowledged task to finish.

usage: bench/in_flight_load.py BUILD_DIR [--tasks N] [--channels C] [--max-rss-mib M]

Prints a JSON report: acknowledged, refused by status code (the share answered
RESOURCE_EXHAUSTED), the daemon's resident memory before and at its peak (MiB), and tasks lost
(acknowledged but not SUCCEEDED at the end). Exit status 1 when a task was lost, a call failed
with anything but RESOURCE_EXHAUSTED or UNAVAILABLE, or the peak exceeded --max-rss-mib.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "functional"))


def rss_kib(pid, field="VmRSS"):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--max-rss-mib", type=float, default=1024)
    args = ap.parse_args()
    consensor = os.path.join(args.build, "node", "consensor")

    work = tempfile.mkdtemp(prefix="consensor-inflight-")
    daemon = None
    try:
        import grpc
        from python_client_test import generate_stubs, start_consensord
        generate_stubs(ROOT, os.path.join(work, "stubs"))
        from consensor.v1 import node_pb2, node_pb2_grpc
        from google.protobuf import json_format

        datadir = os.path.join(work, "datadir")
        os.makedirs(datadir)
        try:
            daemon, address = start_consensord(args.build, datadir, os.path.join(work, "consensord.log"))
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 2

        # One upload through the CLI; its request is replayed with other nonces.
        request_file = os.path.join(work, "request.json")
        subprocess.run([consensor, "submit", os.path.join(ROOT, "examples", "mlp.cgraph"), "--input",
                        "x=" + os.path.join(ROOT, "examples", "mlp_x.npy"), "--node", address, "--nonce", "0",
                        "--request-out", request_file, "--wait", "--timeout", "60"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(request_file) as f:
            base = json_format.Parse(f.read(), node_pb2.SubmitTaskRequest())

        time.sleep(0.5)
        rss_before = rss_kib(daemon.pid)
        peak = [rss_before]
        sampling = threading.Event()

        def sample():
            while not sampling.is_set():
                peak[0] = max(peak[0], rss_kib(daemon.pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        # Separate channels (no shared subchannel), so the node sees many connections at once.
        stubs = [node_pb2_grpc.ClientStub(grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]))
                 for _ in range(args.channels)]
        started = time.monotonic()
        futures = []
        for k in range(args.tasks):
            req = node_pb2.SubmitTaskRequest()
            req.CopyFrom(base)
            req.options.nonce = k + 1
            futures.append(stubs[k % len(stubs)].SubmitTask.future(req, timeout=300))
        acknowledged, codes = [], {}
        for f in futures:
            try:
                acknowledged.append(f.result().task_id)
            except grpc.RpcError as e:
                codes[e.code().name] = codes.get(e.code().name, 0) + 1
        answered = time.monotonic() - started

        # Every acknowledged task must finish.
        lost = []
        client = stubs[0]
        deadline = time.monotonic() + 600
        pending = list(acknowledged)
        while pending and time.monotonic() < deadline:
            still = []
            for task_id in pending:
                try:
                    t = client.GetTask(node_pb2.GetTaskRequest(task_id=task_id), timeout=10)
                except grpc.RpcError:
                    still.append(task_id)
                    continue
                if t.state == node_pb2.TASK_STATE_FAILED:
                    lost.append((task_id, t.error_message))
                elif t.state != node_pb2.TASK_STATE_SUCCEEDED:
                    still.append(task_id)
            pending = still
            if pending:
                time.sleep(0.2)
        lost += [(t, "not finished after 600 s") for t in pending]
        sampling.set()
        sampler.join()
        hwm = rss_kib(daemon.pid, "VmHWM")

        other = {c: n for c, n in codes.items() if c not in ("RESOURCE_EXHAUSTED", "UNAVAILABLE")}
        report = {
            "tasks_in_flight": args.tasks,
            "channels": args.channels,
            "acknowledged": len(acknowledged),
            "refused": codes,
            "resource_exhausted_share": round(codes.get("RESOURCE_EXHAUSTED", 0) / float(args.tasks), 4),
            "seconds_to_answer_all": round(answered, 2),
            "rss_before_mib": round(rss_before / 1024.0, 1),
            "rss_peak_mib": round(max(peak[0], hwm) / 1024.0, 1),
            "lost": len(lost),
        }
        print(json.dumps(report, indent=2))
        for task_id, why in lost[:10]:
            print("LOST %s: %s" % (task_id, why), file=sys.stderr)
        ok = not lost and not other and report["rss_peak_mib"] <= args.max_rss_mib and acknowledged
        return 0 if ok else 1
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
