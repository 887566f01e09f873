#!/usr/bin/python3
"""A client the project did not write for the purpose: Debian's python3-grpcio with stubs
generated from proto/ by protoc and grpc_python_plugin. It starts a real consensord, checks
gRPC health and reflection, builds a graph with the generated message classes, uploads blobs,
submits, watches, downloads the outputs, and checks them against numpy and the canonical
tensor hash (docs/DETERMINISM.md).

usage: python_client_test.py SOURCE_DIR BINARY_DIR
"""
import hashlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np
from tensor_hash import tensor_hash


def generate_stubs(source_dir, out_dir):
    os.makedirs(out_dir)
    protos = [
        (os.path.join(source_dir, "proto"), ["consensor/v1/graph.proto", "consensor/v1/node.proto"]),
        (os.path.join(source_dir, "tests/functional/protos"),
         ["health_v1/health.proto", "reflection_v1alpha/reflection.proto"]),
    ]
    for include, files in protos:
        subprocess.run(["protoc", "-I", include, "--python_out", out_dir, "--grpc_python_out", out_dir,
                        "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin"] + files, check=True)
    for root, _, _ in os.walk(out_dir):
        open(os.path.join(root, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)


def start_consensord(binary_dir, datadir, log_path):
    """Starts a standalone consensord on a free loopback port; returns (process, address) once it
    has written its address. Raises if it exits first or takes over 60 s."""
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([os.path.join(binary_dir, "node", "consensord"), "--datadir", datadir,
                                   "--listen", "127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT)
    addr_file = os.path.join(datadir, "rpc.addr")
    for _ in range(3000):
        if os.path.exists(addr_file) and open(addr_file).read().endswith("\n"):
            return daemon, open(addr_file).read().strip()
        if daemon.poll() is not None:
            raise RuntimeError("consensord exited early (log: %s)" % log_path)
        time.sleep(0.02)
    daemon.kill()
    raise RuntimeError("consensord did not write %s within 60 s" % addr_file)


def npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def main():
    source_dir, binary_dir = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="consensor-pyclient-")
    daemon = None
    try:
        generate_stubs(source_dir, os.path.join(work, "stubs"))
        from consensor.v1 import graph_pb2, node_pb2, node_pb2_grpc
        # Their proto packages are grpc.health.v1 and grpc.reflection.v1alpha; the file paths
        # differ so the Python modules do not collide with the grpc package itself.
        from health_v1 import health_pb2, health_pb2_grpc
        from reflection_v1alpha import reflection_pb2, reflection_pb2_grpc

        datadir = os.path.join(work, "datadir")
        os.makedirs(datadir)
        daemon, address = start_consensord(binary_dir, datadir, os.path.join(work, "consensord.log"))
        channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(channel).result(timeout=30)

        # Health and reflection: what a generic client uses to find its way.
        health = health_pb2_grpc.HealthStub(channel)
        for service in ["", "consensor.v1.Client"]:
            status = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.SERVING, (service, status)
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = list(reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
        services = {s.name for s in responses[0].list_services_response.service}
        assert {"consensor.v1.Client", "grpc.health.v1.Health"} <= services, services
        responses = list(reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(file_containing_symbol="consensor.v1.Client")]), timeout=10))
        assert responses[0].file_descriptor_response.file_descriptor_proto, "no descriptor for consensor.v1.Client"

        # A graph built from the generated classes: y = tanh(x @ w + b).
        rng = np.random.default_rng(3)
        x = rng.standard_normal((4, 3)).astype(np.float32)
        w = rng.standard_normal((3, 2)).astype(np.float32)
        b = rng.standard_normal((2,)).astype(np.float32)
        g = graph_pb2.Graph(format_version=1)
        g.inputs.add(name="x", dtype=graph_pb2.DTYPE_F32, shape=[4, 3])
        for name, value in [("w", w), ("b", b)]:
            c = g.constants.add(name=name)
            c.inline.dtype = graph_pb2.DTYPE_F32
            c.inline.shape.extend(value.shape)
            c.inline.data = value.astype("<f4").tobytes()
        g.nodes.add(op="matmul", inputs=["x", "w"], outputs=["xw"])
        g.nodes.add(op="add", inputs=["xw", "b"], outputs=["z"])
        g.nodes.add(op="tanh", inputs=["z"], outputs=["y"])
        g.outputs.add(name="y", value="y")

        client = node_pb2_grpc.ClientStub(channel)

        def put(data):
            digest = hashlib.sha256(data).hexdigest()
            chunks = [node_pb2.PutBlobRequest(expected_sha256=digest, data=data[:1000])]
            chunks += [node_pb2.PutBlobRequest(data=data[i:i + 1000]) for i in range(1000, len(data), 1000)]
            reply = client.PutBlob(iter(chunks), timeout=30)
            assert reply.sha256 == digest and reply.size == len(data)
            return reply.sha256

        graph_hash = put(g.SerializeToString())
        x_hash = put(npy_bytes(x))
        request = node_pb2.SubmitTaskRequest(graph_sha256=graph_hash, inputs={"x": x_hash})
        task_id = client.SubmitTask(request, timeout=30).task_id
        states = [t.state for t in client.WatchTask(node_pb2.WatchTaskRequest(task_id=task_id), timeout=60)]
        assert states[-1] == node_pb2.TASK_STATE_SUCCEEDED, states
        task = client.GetTask(node_pb2.GetTaskRequest(task_id=task_id), timeout=10)
        (output,) = task.result.outputs
        data = b"".join(c.data for c in client.GetBlob(node_pb2.GetBlobRequest(sha256=output.blob_sha256), timeout=30))
        y = np.load(io.BytesIO(data))
        assert y.dtype == np.float32 and y.shape == (4, 2), (y.dtype, y.shape)
        # numpy sums in its own order and uses its own tanh: close, not bit-equal.
        reference = np.tanh(x.astype(np.float64) @ w.astype(np.float64) + b)
        assert np.max(np.abs(y - reference)) < 1e-5, np.max(np.abs(y - reference))
        assert tensor_hash(y) == output.tensor_hash, "tensor hash differs from the node's"

        # RunTask: submit and wait in one call; the same task is already known, with its result.
        ran = client.RunTask(node_pb2.RunTaskRequest(task=request, max_wait_ms=30000), timeout=60)
        assert ran.already_known and ran.task.task_id == task_id, ran
        assert ran.task.state == node_pb2.TASK_STATE_SUCCEEDED and ran.task.result == task.result, ran
        fresh = node_pb2.SubmitTaskRequest(graph_sha256=graph_hash, inputs={"x": x_hash},
                                           options=node_pb2.TaskOptions(nonce=7))
        ran = client.RunTask(node_pb2.RunTaskRequest(task=fresh), timeout=60)
        assert not ran.already_known and ran.task.task_id != task_id, ran
        assert ran.task.state == node_pb2.TASK_STATE_SUCCEEDED, ran
        assert ran.task.result.result_root == task.result.result_root, "same graph and input, same result"
        try:
            client.RunTask(node_pb2.RunTaskRequest(task=node_pb2.SubmitTaskRequest(graph_sha256=graph_hash)),
                           timeout=10)
            raise AssertionError("RunTask accepted a task without its input")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
            assert "missing input 'x'" in e.details(), e.details()

        # A bad request gets a status code and a message.
        try:
            client.SubmitTask(node_pb2.SubmitTaskRequest(graph_sha256=graph_hash), timeout=10)
            raise AssertionError("a task without its input was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
            assert "missing input 'x'" in e.details(), e.details()

        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
        daemon = None
        print("python client: health, reflection, blobs, submit, watch, RunTask and results OK")
    except BaseException:
        log_path = os.path.join(work, "consensord.log")
        if os.path.exists(log_path):
            sys.stderr.write(open(log_path, errors="replace").read())
        raise
    finally:
        if daemon is not None:
            daemon.kill()
            daemon.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
