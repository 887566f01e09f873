#!/usr/bin/python3
"""Where one consensord's warm tasks spend their time: the debug log's phases, and optionally
the worker thread's CPU by leaf function from `perf record`.

One standalone node (one worker, one thread, --log-level debug) holds an imported model; TASKS
tasks run one after the other, task i on input i modulo the inputs given (one input: its outputs
are stored by the first task and only referenced afterwards; as many inputs as tasks: every task
stores new outputs). Prints the medians and quartiles of the warm tasks' `task phases` fields.
With --perf FILE, `perf record -F 4999 -g` follows the daemon from the third task on, and the
worker thread's samples are summed by leaf function (kernels, SHA-256, memmove, memset, RocksDB's
CRC32C, Linux, ...) and given per task (ms of CPU = samples / 4999 / tasks recorded).

  consensor import MODEL.onnx --out DIR --shape NAME=D0,D1,...
  bench/node_phases.py CONSENSORD DIR INPUT_NAME TASKS INPUT.npy [INPUT2.npy ...] [--perf FILE]
"""
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import node_ab  # noqa: E402

PERF_HZ = 4999
PERF_FROM_TASK = 2


def leaf_kind(line):
    if "kernels::" in line:
        return "kernels"
    for needle, kind in [("crc32c", "RocksDB CRC32C"), ("libcrypto", "SHA-256 (libcrypto)"), ("kallsyms", "Linux"),
                         ("memmove", "memmove"), ("memcpy", "memmove"), ("memset", "memset"), ("rocksdb", "RocksDB other")]:
        if needle in line:
            return kind
    return "other"


def worker_profile(perf_file, tasks):
    out = subprocess.run(["perf", "script", "-i", perf_file, "-F", "tid,ip,sym,dso"], capture_output=True,
                         text=True).stdout.splitlines()
    headers = collections.Counter(l.strip() for l in out if l.strip() and not l.startswith("\t"))
    worker = headers.most_common(1)[0][0]  # the thread with the most samples runs the tasks
    kinds = collections.Counter()
    current, leaf_seen = None, False
    for line in out:
        if line.strip() and not line.startswith("\t"):
            current, leaf_seen = line.strip(), False
        elif line.startswith("\t") and not leaf_seen and current == worker:
            leaf_seen = True
            kinds[leaf_kind(line)] += 1
    total = sum(kinds.values())
    print("worker thread %s: %d samples over %d tasks" % (worker, total, tasks))
    for kind, n in kinds.most_common():
        print("  %-22s %6.2f ms a task  %5.1f%%" % (kind, n / PERF_HZ / tasks * 1e3, 100.0 * n / total))
    print("  %-22s %6.2f ms a task" % ("outside the kernels", (total - kinds["kernels"]) / PERF_HZ / tasks * 1e3))


def main():
    args = sys.argv[1:]
    perf_file = None
    if "--perf" in args:
        i = args.index("--perf")
        perf_file = args[i + 1]
        del args[i:i + 2]
    if len(args) < 5:
        sys.exit(__doc__)
    binary, model_dir, input_name, tasks = args[:4]
    inputs, tasks = args[4:], int(tasks)
    work = tempfile.mkdtemp(prefix="consensor-node-phases-")
    process, perf = None, None
    try:
        node_ab.generate_stubs(os.path.join(work, "stubs"))
        from consensor.v1 import node_pb2, node_pb2_grpc

        def put(client, data):
            return node_ab.put_blob(node_pb2, client, data)

        datadir = os.path.join(work, "node")
        process, address = node_ab.start_node(binary, datadir, ["--log-level", "debug", "--log-format", "json"])
        channel = node_ab.grpc.insecure_channel(address)
        node_ab.grpc.channel_ready_future(channel).result(timeout=30)
        client = node_pb2_grpc.ClientStub(channel)
        graph = put(client, open(os.path.join(model_dir, "graph.pb"), "rb").read())
        for w in [f for f in os.listdir(model_dir) if len(f) == 64]:
            put(client, open(os.path.join(model_dir, w), "rb").read())
        blobs = [put(client, open(p, "rb").read()) for p in inputs]
        roots = set()
        for i in range(tasks):
            if perf_file and i == PERF_FROM_TASK:
                perf = subprocess.Popen(["perf", "record", "-F", str(PERF_HZ), "-g", "-p", str(process.pid), "-o",
                                         perf_file], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.5)  # perf needs a moment to attach
            request = node_pb2.SubmitTaskRequest(graph_sha256=graph, inputs={input_name: blobs[i % len(blobs)]})
            request.options.nonce = i + 1
            task_id = client.SubmitTask(request, timeout=60).task_id
            last = None
            for update in client.WatchTask(node_pb2.WatchTaskRequest(task_id=task_id), timeout=600):
                last = update
            if last.state != node_pb2.TASK_STATE_SUCCEEDED:
                sys.exit("task %s ended %s: %s" % (task_id, last.state, last.error_message))
            roots.add(last.result.result_root)
        if perf:
            perf.send_signal(2)
            perf.wait()
        process.terminate()
        process.wait()
        rows = []
        for line in open(os.path.join(datadir, "consensord.log")):
            if '"task phases"' in line:
                rows.append(json.loads(line))
        rows = [r for r in rows if r.get("warm") in (True, "true")][1:]  # the first warm task still faults
        print("%d warm tasks, %d inputs, %d result roots" % (len(rows), len(inputs), len(roots)))
        for key in ["seconds", "cpu_seconds", "minor_faults", "prepare_seconds", "run_seconds", "run_cpu_seconds",
                    "run_minor_faults", "store_seconds"]:
            v = [float(r[key]) for r in rows if key in r]
            if v:
                scale, unit = (1e3, "ms") if key.endswith("seconds") else (1, "")
                print("%-18s median %9.3f %-2s p25 %9.3f  p75 %9.3f" %
                      (key, statistics.median(v) * scale, unit, node_ab.quantile(v, .25) * scale,
                       node_ab.quantile(v, .75) * scale))
        if perf_file:
            worker_profile(perf_file, tasks - PERF_FROM_TASK)
    finally:
        if process and process.poll() is None:
            process.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
