#!/usr/bin/python3
"""Plays Oobleck's master daemon against oobleck-planner on a cluster of three GPU types:
plans the cluster, then fails nodes one by one (as their agents disconnect), lets the first
failed node join back, and prints every new plan, its copy plan and the planning latency.

Oobleck's own master broadcasts a failure and every worker replans by itself with a fixed
rule (shrink the broken pipeline to the template one node smaller, borrow, merge); here one
Replan call answers it, exactly with respect to the pipeline templates, and also handles
nodes that join. Replan is stateless: each call carries the previous answer's `request`
(the cluster, with the fault tolerance asked for) and `plan`.

Replan weighs each plan's downtime (copies, restart) against the iterations it will run:
the daemon passes horizon_iterations = the mean time between the events it has seen (here
simulated, --event-interval-s apart) over the current iteration time.

Setup (Debian 12; everything from scripts/install-deps.sh):
  1. scripts/build.sh
  2. build/bin/oobleck-planner --profile_dir examples/profiles
  3. /usr/bin/python3 examples/python/master_daemon.py [--failures 4] [--global-batch 64]

The API's stubs come from the oobleck_planner package (client/python; planner_package.py).
The last line is a summary ("summary: ...") that scripts can parse.
"""

import argparse
import sys
import time

import planner_package  # the oobleck_planner package: installed, else client/python/

GIB = 1 << 30
# GPU types on the scale of examples/clusters' files; only the RTX 4090 is measured
# (examples/profiles/gpt2-xl/rtx4090), the others are derived by relative speed.
GPU_TYPES = [("v100", 16, 1.0), ("rtx3090", 24, 1.8), ("rtx4090", 24, 2.94)]
MEASURED, MEASURED_SPEED = "rtx4090", 2.94
# Illustrative prices per GPU and hour; a node costs gpus_per_node times this.
PRICE_PER_GPU_HOUR = {"v100": 0.45, "rtx3090": 0.30, "rtx4090": 0.70}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051",
                        help="HOST:PORT, IP:PORT,IP:PORT,... of several replicas, or a gRPC "
                             "target such as dns:///NAME:PORT (oobleck_planner.channel)")
    parser.add_argument("--model", default="gpt2-xl")
    parser.add_argument("--nodes-per-type", type=int, default=3)
    parser.add_argument("--gpus-per-node", type=int, default=2)
    parser.add_argument("--global-batch", type=int, default=64, help="micro-batches per iteration")
    parser.add_argument("--microbatches", type=int, default=16,
                        help="M the pipeline templates are optimised for")
    parser.add_argument("--failures", type=int, default=4, help="nodes to fail, one by one")
    parser.add_argument("--fault-tolerance", type=int, default=0,
                        help="plans survive any F simultaneous node failures (F+1 pipelines)")
    parser.add_argument("--objective", choices=["time", "cost"], default="time",
                        help="what the first plan minimises: iteration time, or price per "
                             "iteration (nodes priced by PRICE_PER_GPU_HOUR); replans keep "
                             "the least time")
    parser.add_argument("--budget-per-hour", type=float, default=0,
                        help="the first plan uses nodes costing at most this per hour (0: any)")
    parser.add_argument("--event-interval-s", type=float, default=600,
                        help="simulated time between events, for the horizon estimate")
    parser.add_argument("--timeout-s", type=float, default=60)
    return parser.parse_args()


def build_request(pb, args):
    node_types, nodes = [], []
    for t, (gpu, memory_gib, speed) in enumerate(GPU_TYPES):
        node_type = pb.NodeType(name=gpu, gpu_type=gpu, gpus_per_node=args.gpus_per_node,
                                gpu_memory_bytes=memory_gib * GIB, intra_node_bytes_per_s=25e9,
                                price_per_hour=PRICE_PER_GPU_HOUR[gpu] * args.gpus_per_node)
        if gpu != MEASURED:
            node_type.derive.measured_gpu_type = MEASURED
            node_type.derive.relative_speed = speed / MEASURED_SPEED
        node_types.append(node_type)
        # Agents report their IP; node ids are whatever the daemon uses to name them.
        nodes += [pb.Node(id=f"10.0.{t}.{k + 1}", node_type=gpu)
                  for k in range(args.nodes_per_type)]
    return pb.PlanRequest(
        model=args.model, microbatches=args.microbatches,
        missing_allreduce_in_node=pb.MISSING_ALLREDUCE_RING,
        cluster=pb.Cluster(node_types=node_types, inter_node_bytes_per_s=12.5e9),
        nodes=nodes, global_batch=[args.global_batch], fault_tolerance=args.fault_tolerance,
        objective=args.objective, budget_per_hour=args.budget_per_hour)


def print_plan(plan):
    print(f"  iteration {plan.iteration_time_ms:.1f} ms = slowest pipeline "
          f"{plan.pipeline_time_ms:.1f} ms + all-reduce {plan.allreduce_ms:.1f} ms, "
          f"{len(plan.pipelines)} pipeline(s), tolerates {plan.fault_tolerance} failure(s), "
          f"nodes {plan.price_per_hour:.2f} per hour")
    for i, p in enumerate(plan.pipelines):
        stages = " ".join(f"[{s.layer_begin},{s.layer_end})@{p.node_ids[s.node_index]}/{s.gpus}g"
                          for s in p.template.stages)
        print(f"    pipeline {i}: {p.template.mix_label:<28} {p.microbatches:3d} micro-batches "
              f"{p.time_ms:9.1f} ms  {stages}")
    for idle in plan.idle_nodes:
        print(f"    idle {idle.node_id} ({idle.node_type}): {idle.reason}")


def print_copies(response):
    if not response.copies:
        print("  copy plan: nothing to copy")
        return
    print(f"  copy plan: {len(response.copies)} transfer(s), {response.copy_bytes / 1e9:.2f} GB")
    for c in response.copies:
        print(f"    {c.source_node_id} -> {c.dest_node_id}: layers [{c.layer_begin},{c.layer_end}) "
              f"{c.param_bytes / 1e9:.2f} GB")


def main():
    args = parse_args()
    grpc, oobleck_planner, pb, planner_pb2_grpc = planner_package.load()

    latencies = []
    replans = 0

    def call(method, request):
        started = time.monotonic()
        response = method(request, timeout=args.timeout_s)
        latencies.append((time.monotonic() - started) * 1e3)
        return response

    with oobleck_planner.open_channel(grpc, args.server) as channel:
        planner = planner_pb2_grpc.PlannerStub(channel)
        try:
            response = call(planner.Plan, build_request(pb, args))
        except grpc.RpcError as error:
            sys.exit(f"error: Plan: {error.code().name}: {error.details()}")
        print(f"plan: {len(response.request.nodes)} nodes of {len(GPU_TYPES)} types, global batch "
              f"{response.plan.global_batch}, latency {latencies[-1]:.1f} ms "
              f"(server {response.planning_time_ms:.1f} ms)")
        print_plan(response.plan)
        state = (response.request, response.plan)
        clock_s = 0.0
        event_times = []

        def horizon_iterations():
            # The mean time between events seen so far, in iterations of the current plan.
            if len(event_times) < 2:
                return None  # the server's default
            mean_gap_s = (event_times[-1] - event_times[0]) / (len(event_times) - 1)
            return mean_gap_s / (state[1].iteration_time_ms / 1e3)

        def replan(event_text, **event):
            nonlocal state, replans, clock_s
            clock_s += args.event_interval_s
            event_times.append(clock_s)
            horizon = horizon_iterations()
            if horizon is not None:
                event["horizon_iterations"] = horizon
            request = pb.ReplanRequest(request=state[0], plan=state[1], **event)
            try:
                r = call(planner.Replan, request)
            except grpc.RpcError as error:
                print(f"{event_text}: {error.code().name}: {error.details()}")
                return None
            replans += 1
            fallback = (f"{r.oobleck_fallback_iteration_time_ms:.1f} ms"
                        if r.oobleck_fallback_iteration_time_ms > 0
                        else f"none ({r.oobleck_fallback_failure})")
            print(f"{event_text}: strategy {r.strategy}, iteration {r.plan.iteration_time_ms:.1f} ms "
                  f"(was {r.old_iteration_time_ms:.1f} ms; Oobleck's rule: {fallback}), "
                  f"{r.pipelines_kept} pipeline(s) kept, latency {latencies[-1]:.1f} ms "
                  f"(server {r.planning_time_ms:.2f} ms)")
            print(f"  downtime {r.downtime_s:.2f} s (copies {r.transfer_s:.2f} s), horizon "
                  f"{'default' if horizon is None else f'{horizon:.0f}'} iterations; "
                  f"{len(r.alternatives)} alternative(s) on the front: " +
                  ", ".join(f"{a.strategy} {a.iteration_time_ms:.0f} ms/{a.downtime_s:.1f} s"
                            for a in r.alternatives))
            if r.degraded_reason:
                print(f"  degraded: {r.degraded_reason}")
            print_plan(r.plan)
            print_copies(r)
            state = (r.request, r.plan)
            return r

        failed = []
        stopped = ""
        for _ in range(args.failures):
            # The master sees an agent disconnect: here the first node of the first pipeline.
            victim = state[1].pipelines[0].node_ids[0]
            victim_type = next(n.node_type for n in state[0].nodes if n.id == victim)
            if replan(f"fail {victim}", failed_node_ids=[victim]) is None:
                stopped = victim
                break
            failed.append((victim, victim_type))
        if failed:
            node_id, node_type = failed[0]
            replan(f"join {node_id}", joined_nodes=[pb.Node(id=node_id, node_type=node_type)])
            # A duplicated join event (e.g. from a reconnecting agent) changes nothing.
            replay = replan(f"join {node_id} again",
                            joined_nodes=[pb.Node(id=node_id, node_type=node_type)])
            if replay is not None and replay.strategy != "unchanged":
                sys.exit(f"error: replaying a join changed the plan ({replay.strategy})")

    print(f"summary: plans=1 replans={replans} failed={len(failed)} "
          f"stopped_at={stopped or '-'} nodes={len(state[0].nodes)} "
          f"iteration_ms={state[1].iteration_time_ms:.1f} "
          f"fault_tolerance={state[1].fault_tolerance} max_latency_ms={max(latencies):.1f}")


if __name__ == "__main__":
    main()
