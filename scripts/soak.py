#!/usr/bin/python3
"""Soak test of a local network (issue 18): a devnet under a steady load of tasks while a random
node is killed with SIGKILL and restarted, again and again. Reports what an operator and a client
care about: acknowledged tasks lost (must be 0), wrong certificates (must be 0), tasks failed,
and how long a restarted node takes to serve and to reach its peers again.

usage: scripts/soak.sh [--nodes N] [--kills K] [--interval SECONDS] [--rate TASKS_PER_SECOND]
                       [--build DIR] [--settle SECONDS] [--keep]

A task is *acknowledged* when SubmitTask returned its id (the node had stored it durably). It is
*lost* when, after the run, its entry node does not know it or it never reaches a final state
(certified or failed) within --settle seconds. A certificate is *wrong* when any node holds one
whose result root is not the root a local `consensor run` of the same graph and input gives.
Exit status: 0 when nothing was lost and nothing was wrong, 1 otherwise, 2 on a setup error.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "functional"))


def log(msg):
    print("soak: " + msg, flush=True)


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100.0 * (len(ordered) - 1))))]


class Devnet:
    """The devnet that scripts/devnet.sh brings up in a private directory."""

    def __init__(self, build, directory, nodes):
        self.build, self.dir, self.nodes = build, directory, nodes
        self.env = dict(os.environ, CONSENSOR_BUILD_DIR=build, CONSENSOR_DEVNET_DIR=directory)
        self.consensor = os.path.join(build, "node", "consensor")
        self.consensord = os.path.join(build, "node", "consensord")

    def script(self, *args, check=True):
        return subprocess.run([os.path.join(ROOT, "scripts", "devnet.sh")] + list(args), env=self.env,
                              check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def node_dir(self, i):
        return os.path.join(self.dir, "node%d" % i)

    def address(self, i):
        with open(os.path.join(self.node_dir(i), "rpc.addr")) as f:
            return f.read().strip()

    def pid(self, i):
        with open(os.path.join(self.node_dir(i), "pid")) as f:
            return int(f.read().strip())

    def kill(self, i):
        pid = self.pid(i)
        os.kill(pid, signal.SIGKILL)
        # devnet.sh started it in the background of a shell that exited: it is not our child,
        # so wait for it to disappear.
        for _ in range(500):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.01)

    def start(self, i):
        nd = self.node_dir(i)
        with open(os.path.join(nd, "consensord.log"), "ab") as out:
            p = subprocess.Popen([self.consensord, "--config", os.path.join(nd, "consensord.toml")], stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        with open(os.path.join(nd, "pid"), "w") as f:
            f.write("%d\n" % p.pid)
        return p


def load_request(path, node_pb2):
    from google.protobuf import json_format
    with open(path) as f:
        return json_format.Parse(f.read(), node_pb2.SubmitTaskRequest())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--interval", type=float, default=6.0, help="mean seconds between kills")
    ap.add_argument("--rate", type=float, default=4.0, help="tasks submitted per second")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--settle", type=float, default=240.0, help="seconds to wait for tasks after the last kill")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the devnet directory")
    args = ap.parse_args()
    if args.nodes < 3:
        print("soak: --nodes must be at least 3 (tasks need 3 replicas, 2 of them alive)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)

    work = tempfile.mkdtemp(prefix="consensor-soak-")
    net = Devnet(os.path.abspath(args.build), os.path.join(work, "devnet"), args.nodes)
    try:
        import grpc
        from python_client_test import generate_stubs
        generate_stubs(ROOT, os.path.join(work, "stubs"))
        from consensor.v1 import node_pb2, node_pb2_grpc

        log("bringing up %d nodes" % args.nodes)
        up = net.script("up", str(args.nodes), check=False)
        if up.returncode != 0:
            print(up.stdout, file=sys.stderr)
            return 2
        graph = os.path.join(ROOT, "examples", "mlp.cgraph")
        x = os.path.join(ROOT, "examples", "mlp_x.npy")
        run = subprocess.run([net.consensor, "run", graph, "--input", "x=" + x], check=True, stdout=subprocess.PIPE,
                             text=True).stdout
        expected = [l.split()[1] for l in run.splitlines() if l.startswith("result")][0]
        log("expected result root %s (local run)" % expected)

        # Upload the graph and input to every node once (the CLI), keeping the request to replay.
        requests = {}
        for i in range(1, args.nodes + 1):
            path = os.path.join(work, "request%d.json" % i)
            subprocess.run([net.consensor, "submit", graph, "--input", "x=" + x, "--node", net.address(i),
                            "--nonce", str(i), "--replicas", "3", "--quorum", "2", "--request-out", path],
                           check=True, stdout=subprocess.DEVNULL)
            requests[i] = load_request(path, node_pb2)

        def stub(i):
            return node_pb2_grpc.ClientStub(grpc.insecure_channel(net.address(i)))

        stubs = {i: stub(i) for i in requests}
        acknowledged = []  # (task id, entry node)
        refused = {}  # gRPC status code name -> count
        stop = threading.Event()
        lock = threading.Lock()

        def load():
            nonce = 1000
            while not stop.is_set():
                i = rng.randint(1, args.nodes)
                req = node_pb2.SubmitTaskRequest()
                req.CopyFrom(requests[i])
                nonce += 1
                req.options.nonce = nonce
                try:
                    r = stubs[i].SubmitTask(req, timeout=10)
                    with lock:
                        acknowledged.append((r.task_id, i))
                except grpc.RpcError as e:
                    with lock:
                        refused[e.code().name] = refused.get(e.code().name, 0) + 1
                stop.wait(1.0 / args.rate)

        loader = threading.Thread(target=load, daemon=True)
        loader.start()

        serve_times, peer_times = [], []
        for k in range(args.kills):
            time.sleep(rng.uniform(0.5, 1.5) * args.interval)
            victim = rng.randint(1, args.nodes)
            net.kill(victim)
            time.sleep(rng.uniform(0.2, 2.0))
            started = time.monotonic()
            net.start(victim)
            stubs[victim] = stub(victim)
            served = peers = None
            deadline = started + 120
            while time.monotonic() < deadline and peers is None:
                try:
                    info = stubs[victim].GetNodeInfo(node_pb2.GetNodeInfoRequest(), timeout=2)
                    if served is None:
                        served = time.monotonic() - started
                    if info.consensus.peers >= args.nodes - 1:
                        peers = time.monotonic() - started
                except grpc.RpcError:
                    pass
                time.sleep(0.05)
            if served is None or peers is None:
                log("kill %d: node%d did not recover within 120 s" % (k + 1, victim))
                return 1
            serve_times.append(served)
            peer_times.append(peers)
            log("kill %d/%d: node%d serving after %.2f s, all peers after %.2f s, %d tasks acknowledged" %
                (k + 1, args.kills, victim, served, peers, len(acknowledged)))
        stop.set()
        loader.join()

        # Every acknowledged task must reach a final state on its entry node.
        log("waiting up to %.0f s for %d acknowledged tasks" % (args.settle, len(acknowledged)))
        pending = dict(acknowledged)
        certified, failed, lost = {}, {}, {}
        deadline = time.monotonic() + args.settle
        while pending and time.monotonic() < deadline:
            for task_id, i in list(pending.items()):
                try:
                    t = stubs[i].GetTask(node_pb2.GetTaskRequest(task_id=task_id), timeout=5)
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.NOT_FOUND:
                        lost[task_id] = "node%d does not know it" % i
                        del pending[task_id]
                    continue
                if t.consensus.HasField("certificate") and t.state == node_pb2.TASK_STATE_SUCCEEDED:
                    certified[task_id] = t.consensus.certificate.result_root
                    del pending[task_id]
                elif t.state == node_pb2.TASK_STATE_FAILED:
                    failed[task_id] = t.error_message
                    del pending[task_id]
            time.sleep(0.5)
        for task_id, i in pending.items():
            lost[task_id] = "not final on node%d after %.0f s" % (i, args.settle)

        # Every node's certificate of every task must carry the expected root.
        wrong = {}
        for task_id, _ in acknowledged:
            for i in stubs:
                try:
                    t = stubs[i].GetTask(node_pb2.GetTaskRequest(task_id=task_id), timeout=5)
                except grpc.RpcError:
                    continue
                if t.consensus.HasField("certificate") and t.consensus.certificate.result_root != expected:
                    wrong["%s@node%d" % (task_id, i)] = t.consensus.certificate.result_root

        report = {
            "nodes": args.nodes,
            "kills": args.kills,
            "acknowledged": len(acknowledged),
            "refused_at_submit": refused,
            "certified": len(certified),
            "failed": len(failed),
            "lost": len(lost),
            "wrong_certificates": len(wrong),
            "restart_to_serving_s": {"p50": percentile(serve_times, 50), "max": max(serve_times, default=0)},
            "restart_to_all_peers_s": {"p50": percentile(peer_times, 50), "max": max(peer_times, default=0)},
        }
        print(json.dumps(report, indent=2))
        for task_id, why in list(lost.items())[:10]:
            log("LOST %s: %s" % (task_id, why))
        for where, root in list(wrong.items())[:10]:
            log("WRONG certificate %s: %s" % (where, root))
        reasons = {}
        for why in failed.values():
            reasons[why] = reasons.get(why, 0) + 1
        for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:5]:
            log("failed x%d: %s" % (n, why))
        if not acknowledged:
            log("no task was acknowledged: the load did not run")
            return 1
        return 0 if not lost and not wrong else 1
    finally:
        net.script("down", check=False)
        if args.keep:
            log("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
