#!/usr/bin/python3
"""A/B of a warm node task's execution_seconds between two consensord binaries, paired.

Both binaries run at once, each a standalone node on a loopback port with one worker and one
thread, holding the same imported model and input. Tasks alternate between the two nodes (one
task on A, one on B, then B first, ...; each submitted when the one before finished, with a new
nonce), so both see the same machine load minute by minute, and each idles between its tasks
as a node does between clients' requests. The first 3 tasks of each node are left out. Prints
each node's median and quartiles and the median of the paired differences, of the task's
execution_seconds and of what the client waits (SubmitTask sent -> the last WatchTask update,
"client"), and checks that both give the same result root every time. On a shared machine whose load moves by 2x within a
minute, this resolves differences of some 20 us that alternating whole onnx_bench runs cannot.

Run it with the same binary on both sides first: that is the noise of the method.

  consensor import MODEL.onnx --out DIR --shape NAME=D0,D1,...
  bench/node_ab.py DIR INPUT.npy INPUT_NAME TASKS CONSENSORD_A CONSENSORD_B [--arg-b FLAG ...]

Uses Debian's python3-grpcio with stubs generated from proto/ (as tests/functional/
python_client_test.py does). --arg-b passes one more flag (repeatable) to node B only, e.g.
--arg-b=--input-cache-bytes --arg-b=0.
"""
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import grpc

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARM_UP = 3


def generate_stubs(out_dir):
    os.makedirs(out_dir)
    subprocess.run(["protoc", "-I", os.path.join(SOURCE_DIR, "proto"), "--python_out", out_dir, "--grpc_python_out",
                    out_dir, "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                    "consensor/v1/graph.proto", "consensor/v1/node.proto"], check=True)
    for root, _, _ in os.walk(out_dir):
        open(os.path.join(root, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)


def start_node(binary, datadir, extra):
    os.makedirs(datadir)
    log = open(os.path.join(datadir, "consensord.log"), "wb")
    process = subprocess.Popen([binary, "--datadir", datadir, "--listen", "127.0.0.1:0", "--workers", "1",
                                "--threads", "1", "--log-level", "warn"] + extra, stdout=log, stderr=subprocess.STDOUT)
    addr_file = os.path.join(datadir, "rpc.addr")
    for _ in range(3000):
        if os.path.exists(addr_file) and open(addr_file).read().endswith("\n"):
            return process, open(addr_file).read().strip()
        if process.poll() is not None:
            break
        time.sleep(0.02)
    process.kill()
    raise RuntimeError("%s did not start (log in %s)" % (binary, datadir))


def put_blob(node_pb2, client, data):
    """Uploads `data` in 1 MiB messages (the first names its hash and size); returns its sha256."""
    digest = hashlib.sha256(data).hexdigest()
    step = 1 << 20
    chunks = [node_pb2.PutBlobRequest(expected_sha256=digest, size=len(data), data=data[:step])]
    chunks += [node_pb2.PutBlobRequest(data=data[i:i + step]) for i in range(step, len(data), step)]
    return client.PutBlob(iter(chunks), timeout=120).sha256


def quantile(values, q):
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--arg-b=")]
    extra_b = [a[len("--arg-b="):] for a in sys.argv[1:] if a.startswith("--arg-b=")]
    if len(args) != 6:
        sys.exit(__doc__)
    model_dir, input_npy, input_name, tasks, binary_a, binary_b = args
    tasks = int(tasks)
    work = tempfile.mkdtemp(prefix="consensor-node-ab-")
    nodes = {}
    try:
        generate_stubs(os.path.join(work, "stubs"))
        from consensor.v1 import node_pb2, node_pb2_grpc

        def put(client, data):
            return put_blob(node_pb2, client, data)

        # `consensor import` names the weights file by its SHA-256.
        weights = [f for f in os.listdir(model_dir) if len(f) == 64]
        for name, binary, extra in [("A", binary_a, []), ("B", binary_b, extra_b)]:
            process, address = start_node(binary, os.path.join(work, name), extra)
            channel = grpc.insecure_channel(address)
            grpc.channel_ready_future(channel).result(timeout=30)
            client = node_pb2_grpc.ClientStub(channel)
            graph = put(client, open(os.path.join(model_dir, "graph.pb"), "rb").read())
            for w in weights:
                put(client, open(os.path.join(model_dir, w), "rb").read())
            x = put(client, open(input_npy, "rb").read())
            nodes[name] = (process, client, node_pb2.SubmitTaskRequest(graph_sha256=graph, inputs={input_name: x}))

        times = {name: [] for name in nodes}
        client_times = {name: [] for name in nodes}
        roots = set()
        for i in range(tasks + WARM_UP):
            for name in (["A", "B"] if i % 2 == 0 else ["B", "A"]):
                _, client, request = nodes[name]
                request.options.nonce = i + 1
                t0 = time.perf_counter()
                task_id = client.SubmitTask(request, timeout=60).task_id
                last = None
                for update in client.WatchTask(node_pb2.WatchTaskRequest(task_id=task_id), timeout=600):
                    last = update
                client_ms = (time.perf_counter() - t0) * 1e3
                if last.state != node_pb2.TASK_STATE_SUCCEEDED:
                    sys.exit("node %s: task %s ended %s: %s" % (name, task_id, last.state, last.error_message))
                roots.add(last.result.result_root)
                if i >= WARM_UP:
                    times[name].append(last.result.execution_seconds * 1e3)
                    client_times[name].append(client_ms)
        if len(roots) != 1:
            sys.exit("RESULT ROOTS DIFFER: %s" % sorted(roots))
        for label, series in [("execution_seconds", times), ("client", client_times)]:
            for name in nodes:
                v = series[name]
                print("%s %-17s n=%d  median %.3f ms  p25 %.3f  p75 %.3f  min %.3f" %
                      (name, label, len(v), statistics.median(v), quantile(v, .25), quantile(v, .75), min(v)))
            diff = [b - a for a, b in zip(series["A"], series["B"])]
            print("B - A %-17s paired: median %+.3f ms  p25 %+.3f  p75 %+.3f;  B/A of the medians %.2fx" %
                  (label, statistics.median(diff), quantile(diff, .25), quantile(diff, .75),
                   statistics.median(series["B"]) / statistics.median(series["A"])))
        print("result root %s" % next(iter(roots)))
    finally:
        for process, _, _ in nodes.values():
            process.terminate()
            process.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
