#!/usr/bin/python3
"""Failover under load: a real 3-member etcd, --replicas real oobleck-planner processes
sharing it (--etcd_endpoints), and --threads client threads sending Plan and Replan calls
through one failover channel (client/python/oobleck_planner/channel.py: round_robin + retries)
for --duration-s seconds; at --kill-at-s one replica is killed with SIGKILL. Prints the
calls, failures, retries (calls the survivors logged with previous_attempts=), and client
latency p50/p99/max over the whole run and over the second after the kill.

  cmake --build build --target oobleck-planner e2e_python_stubs
  /usr/bin/python3 bench/failover_loadgen.py [--build build] [--threads 4] [--duration-s 10]

Everything listens on loopback ports picked at start and is killed at the end. Needs
Debian's etcd-server and python3-grpcio (scripts/install-deps.sh).
"""

import argparse
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

import e2e_support  # noqa: E402
from etcd_cluster import EtcdCluster  # noqa: E402


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=10)
    parser.add_argument("--kill-at-s", type=float, default=5)
    args = parser.parse_args()
    if args.replicas < 2:
        sys.exit("--replicas must be >= 2 (one is killed)")
    e2e_support.ARGS = argparse.Namespace(
        server_bin=os.path.join(args.build, "bin", "oobleck-planner"),
        stub_dir=os.path.join(args.build, "tests", "e2e", "py_stubs"), source_dir=ROOT)
    sys.path.insert(0, e2e_support.ARGS.stub_dir)
    import grpc
    from oobleck_planner import channel as planner_channel
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    from production_test import example_layers
    s = e2e_support.stubs()
    pb = s.planner_pb2

    etcd = EtcdCluster(3)
    planners = []
    try:
        for _ in range(args.replicas):
            planners.append(e2e_support.RunningServer(
                extra_args=["--etcd_endpoints", etcd.endpoints, "--log_requests=true"]))
        for p in planners:
            with grpc.insecure_channel(p.address) as channel:
                e2e_support.wait_until_serving(channel)
        with grpc.insecure_channel(planners[0].address) as channel:
            s.planner_pb2_grpc.PlannerStub(channel).LoadProfile(pb.LoadProfileRequest(
                model="gpt2-xl", gpu_type="rtx4090", microbatch_size=1,
                layers=example_layers(pb, 0), replace=True), timeout=10)
        time.sleep(0.2)  # the watch delivers it in milliseconds

        channel = planner_channel.open_channel(grpc, ",".join(p.address for p in planners))
        stub = s.planner_pb2_grpc.PlannerStub(channel)
        node_type = pb.NodeType(name="rtx4090", gpu_type="rtx4090", gpus_per_node=1,
                                gpu_memory_bytes=24 << 30, intra_node_bytes_per_s=25e9)
        request = pb.PlanRequest(
            model="gpt2-xl", microbatches=8, missing_allreduce_in_node=pb.MISSING_ALLREDUCE_RING,
            cluster=pb.Cluster(node_types=[node_type], inter_node_bytes_per_s=12.5e9),
            nodes=[pb.Node(id=f"10.0.0.{k + 1}", node_type="rtx4090") for k in range(6)],
            global_batch=[16])
        first = stub.Plan(request, timeout=10)
        replan = pb.ReplanRequest(request=first.request, plan=first.plan,
                                  failed_node_ids=[first.plan.pipelines[0].node_ids[0]])

        samples = []  # (start time, latency s, ok)
        lock = threading.Lock()
        stop = threading.Event()

        def load(worker):
            n = worker
            while not stop.is_set():
                started = time.monotonic()
                try:
                    if n % 2 == 0:
                        stub.Plan(request, timeout=10)
                    else:
                        stub.Replan(replan, timeout=10)
                    ok = True
                except grpc.RpcError:
                    ok = False
                with lock:
                    samples.append((started, time.monotonic() - started, ok))
                n += 1

        workers = [threading.Thread(target=load, args=(w,)) for w in range(args.threads)]
        start = time.monotonic()
        for w in workers:
            w.start()
        time.sleep(args.kill_at_s)
        kill_time = time.monotonic()
        planners[0].process.kill()
        planners[0].process.wait(timeout=10)
        time.sleep(max(0.0, args.duration_s - args.kill_at_s))
        stop.set()
        for w in workers:
            w.join(timeout=30)
        elapsed = time.monotonic() - start
        channel.close()

        retries = sum(p.stderr().count("previous_attempts=") for p in planners[1:])
        latencies = [lat * 1e3 for _, lat, _ in samples]
        after_kill = [lat * 1e3 for t, lat, _ in samples if kill_time <= t < kill_time + 1]
        failures = sum(1 for *_, ok in samples if not ok)
        print(f"replicas={args.replicas} threads={args.threads} duration_s={elapsed:.1f} "
              f"calls={len(samples)} rpc_per_s={len(samples) / elapsed:.0f} "
              f"failures={failures} retries={retries}")
        print(f"latency_ms p50={percentile(latencies, 50):.2f} "
              f"p99={percentile(latencies, 99):.2f} max={max(latencies):.1f}")
        print(f"second_after_kill calls={len(after_kill)} "
              f"p50={percentile(after_kill, 50):.2f} p99={percentile(after_kill, 99):.2f} "
              f"max={max(after_kill, default=float('nan')):.1f}")
    finally:
        for p in planners:
            p.stop()
        etcd.stop()


if __name__ == "__main__":
    main()
